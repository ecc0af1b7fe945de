use crate::ProviderError;
use std::ffi::{c_char, CStr};
use vsdk_catalog::{AttrValue, Attrs, DType, TensorSpec};
use vsdk_ffi::{vsdk_attr_t, vsdk_kernel_call_t, vsdk_tensor_t};

/// A tensor descriptor from the host, checked and copied out of C memory.
#[derive(Debug, Clone)]
pub struct TensorArg {
    /// `data + byte_offset`: the address of element (0, ..., 0).
    pub ptr: *mut u8,
    pub dtype: DType,
    pub shape: Vec<usize>,
    /// In elements.
    pub strides: Vec<usize>,
    pub device: vsdk_ffi::vsdk_device_t,
}

impl TensorArg {
    /// # Safety
    /// `t.shape` and `t.strides` are NULL or valid for `t.ndim` reads.
    pub unsafe fn from_raw(t: &vsdk_tensor_t, what: &str) -> Result<Self, ProviderError> {
        let bad = |why: String| ProviderError::invalid(format!("{what}: {why}"));
        let dtype =
            DType::from_dlpack(t.dtype.code, t.dtype.bits, t.dtype.lanes).ok_or_else(|| {
                bad(format!(
                    "dtype (code {}, bits {}, lanes {}) is not in catalog v1",
                    t.dtype.code, t.dtype.bits, t.dtype.lanes
                ))
            })?;
        let ndim =
            usize::try_from(t.ndim).map_err(|_| bad(format!("ndim {} is negative", t.ndim)))?;
        if ndim > 0 && (t.shape.is_null() || t.strides.is_null()) {
            return Err(bad("shape and strides are required when ndim > 0".into()));
        }
        if t.data.is_null() {
            return Err(bad("data is NULL".into()));
        }
        let read = |p: *const i64, name: &str| -> Result<Vec<usize>, ProviderError> {
            if ndim == 0 {
                return Ok(Vec::new());
            }
            // SAFETY: non-NULL (checked above) and valid for ndim reads per the contract.
            let raw = unsafe { std::slice::from_raw_parts(p, ndim) };
            raw.iter()
                .map(|&v| {
                    usize::try_from(v)
                        .map_err(|_| bad(format!("{name} {raw:?} has a negative entry")))
                })
                .collect()
        };
        let shape = read(t.shape, "shape")?;
        let strides = read(t.strides, "strides")?;
        let offset =
            usize::try_from(t.byte_offset).map_err(|_| bad("byte_offset overflows".into()))?;
        Ok(TensorArg {
            ptr: t.data.cast::<u8>().wrapping_add(offset),
            dtype,
            shape,
            strides,
            device: t.device,
        })
    }

    pub fn spec(&self) -> TensorSpec {
        TensorSpec {
            dtype: self.dtype,
            shape: self.shape.clone(),
        }
    }

    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }

    /// Bytes from the first element to one past the last one reachable
    /// (0 for an empty tensor); None on overflow.
    pub fn extent_bytes(&self) -> Option<usize> {
        if self.shape.contains(&0) {
            return Some(0);
        }
        let last = self
            .shape
            .iter()
            .zip(&self.strides)
            .try_fold(0usize, |acc, (&n, &s)| {
                acc.checked_add((n - 1).checked_mul(s)?)
            })?;
        last.checked_add(1)?.checked_mul(self.dtype.size_bytes())
    }

    /// Row-major with no gaps.
    pub fn is_compact(&self) -> bool {
        let mut expected = 1;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            if n != 1 && s != expected {
                return false;
            }
            expected *= n;
        }
        true
    }
}

/// A `vsdk_kernel_call_t`, checked and copied out of C memory.
#[derive(Debug, Clone)]
pub struct KernelCall {
    pub kernel: String,
    pub version: u32,
    pub device_index: u32,
    pub attrs: Attrs,
    pub inputs: Vec<TensorArg>,
    pub outputs: Vec<TensorArg>,
}

fn array<'a, T>(ptr: *const T, len: u64, what: &str) -> Result<&'a [T], ProviderError> {
    if len == 0 {
        return Ok(&[]);
    }
    if ptr.is_null() {
        return Err(ProviderError::invalid(format!(
            "{what}: NULL array with {len} entries"
        )));
    }
    let len = usize::try_from(len)
        .map_err(|_| ProviderError::invalid(format!("{what}: length overflows")))?;
    // SAFETY: the host guarantees `ptr` is valid for `len` entries for the call.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

fn c_str(p: *const c_char, what: &str) -> Result<String, ProviderError> {
    if p.is_null() {
        return Err(ProviderError::invalid(format!("{what} is NULL")));
    }
    // SAFETY: non-NULL; the host passes NUL-terminated strings, borrowed for the call.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str()
        .map(str::to_string)
        .map_err(|_| ProviderError::invalid(format!("{what} is not UTF-8")))
}

/// Reads an attribute array into catalog attributes.
///
/// # Safety
/// Every pointer in `attrs` is valid as `provider.h` documents.
pub unsafe fn attrs_of(attrs: &[vsdk_attr_t]) -> Result<Attrs, ProviderError> {
    let mut out = Attrs::new();
    for (i, a) in attrs.iter().enumerate() {
        let name = c_str(a.name, &format!("attribute #{i} name"))?;
        // SAFETY (all arms): `kind` says which union member the host wrote.
        let value = match a.kind {
            vsdk_ffi::VSDK_ATTR_INT => AttrValue::Int(unsafe { a.value.i }),
            vsdk_ffi::VSDK_ATTR_FLOAT => AttrValue::Float(unsafe { a.value.f }),
            vsdk_ffi::VSDK_ATTR_STRING => AttrValue::Str(c_str(unsafe { a.value.s }, &name)?),
            vsdk_ffi::VSDK_ATTR_INTS => {
                let l = unsafe { a.value.ints };
                AttrValue::Ints(array(l.data, l.len, &name)?.to_vec())
            }
            vsdk_ffi::VSDK_ATTR_FLOATS => {
                let l = unsafe { a.value.floats };
                AttrValue::Floats(array(l.data, l.len, &name)?.to_vec())
            }
            k => {
                return Err(ProviderError::invalid(format!(
                    "attribute `{name}`: unknown kind {k}"
                )))
            }
        };
        out.0.push((name, value));
    }
    Ok(out)
}

impl KernelCall {
    /// # Safety
    /// `call` is NULL or a valid call as `provider.h` documents.
    pub unsafe fn from_raw(call: *const vsdk_kernel_call_t) -> Result<Self, ProviderError> {
        // SAFETY: NULL or valid per the contract.
        let call =
            unsafe { call.as_ref() }.ok_or_else(|| ProviderError::invalid("call is NULL"))?;
        if call.struct_size < std::mem::size_of::<vsdk_kernel_call_t>() {
            return Err(ProviderError::invalid(format!(
                "vsdk_kernel_call_t.struct_size {} is smaller than v1's {}",
                call.struct_size,
                std::mem::size_of::<vsdk_kernel_call_t>()
            )));
        }
        let kernel = c_str(call.kernel, "kernel name")?;
        let tensors = |p, n, what: &str| -> Result<Vec<TensorArg>, ProviderError> {
            array(p, n, what)?
                .iter()
                .enumerate()
                // SAFETY: the host's descriptors are valid for the call.
                .map(|(i, t)| unsafe { TensorArg::from_raw(t, &format!("{kernel}: {what} {i}")) })
                .collect()
        };
        Ok(KernelCall {
            version: call.version,
            device_index: call.device_index,
            // SAFETY: the host's attributes are valid for the call.
            attrs: unsafe { attrs_of(array(call.attrs, call.num_attrs, "attrs")?)? },
            inputs: tensors(call.inputs, call.num_inputs, "input")?,
            outputs: tensors(call.outputs, call.num_outputs, "output")?,
            kernel,
        })
    }
}

impl KernelCall {
    /// Checks the host's outputs against the catalog's shape rule (`expected`,
    /// from `Node::infer`) and that each is compact row-major, as the ABI
    /// requires of outputs.
    pub fn check_outputs(&self, expected: &[TensorSpec]) -> Result<(), ProviderError> {
        if self.outputs.len() != expected.len() {
            return Err(ProviderError::invalid(format!(
                "{}: expected {} output(s), got {}",
                self.kernel,
                expected.len(),
                self.outputs.len()
            )));
        }
        for (i, (got, want)) in self.outputs.iter().zip(expected).enumerate() {
            if got.spec() != *want {
                return Err(ProviderError::invalid(format!(
                    "{}: output {i} is {} {:?}, the catalog's shape rule gives {} {:?}",
                    self.kernel, got.dtype, got.shape, want.dtype, want.shape
                )));
            }
            if !got.is_compact() {
                return Err(ProviderError::invalid(format!(
                    "{}: output {i} has strides {:?}; outputs are compact row-major",
                    self.kernel, got.strides
                )));
            }
        }
        Ok(())
    }
}

impl KernelCall {
    /// Every tensor of the call, named "input" or "output" for messages.
    pub fn tensors(&self) -> impl Iterator<Item = (&'static str, &TensorArg)> {
        let inputs = self.inputs.iter().map(|t| ("input", t));
        inputs.chain(self.outputs.iter().map(|t| ("output", t)))
    }
}

impl TensorArg {
    /// Checks that the tensor lives on `device` and is aligned for its dtype;
    /// returns the bytes it reaches from its first element (0 when empty),
    /// for the provider to check against its buffers.
    pub fn check_placement(
        &self,
        device: vsdk_ffi::vsdk_device_t,
        kernel: &str,
        what: &str,
    ) -> Result<usize, ProviderError> {
        if self.device.device_type != device.device_type
            || self.device.device_id != device.device_id
        {
            return Err(ProviderError::invalid(format!(
                "{kernel}: {what} lives on device ({}, {}), not this provider's device ({}, {})",
                self.device.device_type,
                self.device.device_id,
                device.device_type,
                device.device_id
            )));
        }
        if !(self.ptr as usize).is_multiple_of(self.dtype.size_bytes()) {
            return Err(ProviderError::invalid(format!(
                "{kernel}: {what} data is not aligned for {}",
                self.dtype
            )));
        }
        self.extent_bytes()
            .ok_or_else(|| ProviderError::invalid(format!("{kernel}: {what} extent overflows")))
    }
}
