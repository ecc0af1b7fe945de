//! Lays a kernel call out in C memory for the duration of one `execute`.

use super::DeviceTensor;
use std::ffi::CString;
use vips_data::Error;
use vsdk_catalog::{AttrValue, Attrs};
use vsdk_ffi::*;

/// Owns everything the raw call points to.
pub struct Marshalled<'a> {
    names: Vec<CString>,
    strings: Vec<Option<CString>>,
    attrs: &'a Attrs,
    tensors: Vec<TensorStorage>,
    num_inputs: usize,
    raw_attrs: Vec<vsdk_attr_t>,
    raw_tensors: Vec<vsdk_tensor_t>,
}

struct TensorStorage {
    data: *mut std::ffi::c_void,
    byte_offset: u64,
    dtype: vsdk_dtype_t,
    shape: Vec<i64>,
    strides: Vec<i64>,
}

fn storage(t: &DeviceTensor) -> TensorStorage {
    let shape: Vec<i64> = t.spec.shape.iter().map(|&d| d as i64).collect();
    let (strides, byte_offset) = t.strides_and_offset();
    let (code, bits) = t.spec.dtype.dlpack();
    TensorStorage {
        data: t.ptr,
        byte_offset,
        dtype: vsdk_dtype_t {
            code,
            bits,
            lanes: 1,
        },
        shape,
        strides,
    }
}

fn no_nul(s: &str) -> Result<CString, Error> {
    CString::new(s).map_err(|_| Error::Tensor(format!("{s:?} contains a NUL byte")))
}

impl<'a> Marshalled<'a> {
    pub fn new(
        device: vsdk_device_t,
        attrs: &'a Attrs,
        inputs: &[&DeviceTensor],
        outputs: &[DeviceTensor],
    ) -> Result<Self, Error> {
        let names = attrs
            .0
            .iter()
            .map(|(n, _)| no_nul(n))
            .collect::<Result<Vec<_>, _>>()?;
        let strings = attrs
            .0
            .iter()
            .map(|(_, v)| match v {
                AttrValue::Str(s) => no_nul(s).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        let tensors: Vec<TensorStorage> =
            inputs.iter().copied().chain(outputs).map(storage).collect();
        let mut m = Marshalled {
            names,
            strings,
            attrs,
            num_inputs: inputs.len(),
            tensors,
            raw_attrs: Vec::new(),
            raw_tensors: Vec::new(),
        };
        m.raw_attrs = (0..m.attrs.0.len()).map(|i| m.raw_attr(i)).collect();
        m.raw_tensors = m
            .tensors
            .iter()
            .map(|t| vsdk_tensor_t {
                data: t.data,
                device,
                ndim: t.shape.len() as i32,
                dtype: t.dtype,
                shape: t.shape.as_ptr(),
                strides: t.strides.as_ptr(),
                byte_offset: t.byte_offset,
            })
            .collect();
        Ok(m)
    }

    fn raw_attr(&self, i: usize) -> vsdk_attr_t {
        let (kind, value) = match &self.attrs.0[i].1 {
            AttrValue::Int(v) => (VSDK_ATTR_INT, vsdk_attr_value_t { i: *v }),
            AttrValue::Float(v) => (VSDK_ATTR_FLOAT, vsdk_attr_value_t { f: *v }),
            AttrValue::Str(_) => {
                let s = self.strings[i]
                    .as_ref()
                    .expect("string attributes are converted in new");
                (VSDK_ATTR_STRING, vsdk_attr_value_t { s: s.as_ptr() })
            }
            AttrValue::Ints(v) => (
                VSDK_ATTR_INTS,
                vsdk_attr_value_t {
                    ints: vsdk_int_list_t {
                        data: v.as_ptr(),
                        len: v.len() as u64,
                    },
                },
            ),
            AttrValue::Floats(v) => (
                VSDK_ATTR_FLOATS,
                vsdk_attr_value_t {
                    floats: vsdk_float_list_t {
                        data: v.as_ptr(),
                        len: v.len() as u64,
                    },
                },
            ),
        };
        vsdk_attr_t {
            name: self.names[i].as_ptr(),
            kind,
            reserved: 0,
            value,
        }
    }

    /// The raw call; valid while `self` is borrowed.
    pub fn call(
        &'a self,
        kernel: &str,
        version: u32,
        device_index: u32,
    ) -> Result<RawCall<'a>, Error> {
        let kernel = no_nul(kernel)?;
        let (inputs, outputs) = self.raw_tensors.split_at(self.num_inputs);
        let raw = vsdk_kernel_call_t {
            struct_size: std::mem::size_of::<vsdk_kernel_call_t>(),
            kernel: kernel.as_ptr(),
            version,
            device_index,
            attrs: self.raw_attrs.as_ptr(),
            num_attrs: self.raw_attrs.len() as u64,
            inputs: inputs.as_ptr(),
            num_inputs: inputs.len() as u64,
            outputs: outputs.as_ptr(),
            num_outputs: outputs.len() as u64,
        };
        Ok(RawCall {
            raw,
            _kernel: kernel,
            _borrow: std::marker::PhantomData,
        })
    }
}

/// A `vsdk_kernel_call_t` and the name string it points to.
pub struct RawCall<'a> {
    pub raw: vsdk_kernel_call_t,
    _kernel: CString,
    _borrow: std::marker::PhantomData<&'a ()>,
}
