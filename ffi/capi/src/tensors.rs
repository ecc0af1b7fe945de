//! `vsdk_tensors_*`: named host tensors an engine hands to `vsdk_check`,
//! read from capture files (.npy, .npz, .safetensors, as the CLI's
//! `check --tensors`) or copied from DLPack-compatible descriptors.

use crate::boundary::{self, guard, Error, Result, Tagged};
use crate::suite::{tensor_info, TensorStrings};
use std::sync::Mutex;
use vips_sdk::{DType, HostTensor, TensorSpec};
use vsdk_ffi::engine::{
    vsdk_error_t, vsdk_tensor_info_t, vsdk_tensors_t, VSDK_STATUS_INVALID_FILE,
    VSDK_STATUS_NOT_FOUND,
};
use vsdk_ffi::vsdk_tensor_t;

/// The most tensors one set holds.
const MAX_TENSORS: usize = 1 << 16;

/// The object behind `vsdk_tensors_t*`. Entries are only appended: the
/// names and shapes handed out stay where they are until the set is freed.
#[repr(C)]
pub struct Tensors {
    magic: u64,
    entries: Mutex<Vec<Entry>>,
}

struct Entry {
    strings: TensorStrings,
    tensor: HostTensor,
}

impl Tagged for Tensors {
    const MAGIC: u64 = 0x7673_646b_5473_6e73; // "vsdkTsns"
    const KIND: &'static str = "tensors";
    fn kill(&mut self) {
        self.magic = 0;
    }
}

impl Tensors {
    fn new() -> Tensors {
        Tensors {
            magic: Tensors::MAGIC,
            entries: Mutex::new(Vec::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        // A panic while holding the lock left the Vec whole (pushes only).
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds `tensor` as `name`; `from` says where it came from in errors.
    fn add(&self, name: &str, tensor: HostTensor, from: &str) -> Result<()> {
        let mut entries = self.entries();
        if entries
            .iter()
            .any(|e| e.strings.name.as_bytes() == name.as_bytes())
        {
            return Err(Error::invalid(format!(
                "{from}: a tensor named `{name}` is already in the set"
            )));
        }
        if entries.len() >= MAX_TENSORS {
            return Err(Error::invalid(format!(
                "{from}: the set already holds {MAX_TENSORS} tensors"
            )));
        }
        entries.push(Entry {
            strings: TensorStrings::of(name, &tensor.spec),
            tensor,
        });
        Ok(())
    }

    fn read(&self, path: &std::path::Path) -> Result<()> {
        if !path.exists() {
            return Err(Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!("{}: no such file", path.display()),
            ));
        }
        let read = vips_sdk::capture::read(path)
            .map_err(|e| Error::new(VSDK_STATUS_INVALID_FILE, e.to_string()))?;
        let from = path.display().to_string();
        for (name, t) in read {
            self.add(&name, t, &from)?;
        }
        Ok(())
    }

    /// The tensors by name, for a check.
    pub fn by_name(&self) -> std::collections::HashMap<String, HostTensor> {
        self.entries()
            .iter()
            .map(|e| {
                let name = e.strings.name.to_string_lossy().into_owned();
                (name, e.tensor.clone())
            })
            .collect()
    }
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_new(out: *mut *mut vsdk_tensors_t) -> *mut vsdk_error_t {
    guard("vsdk_tensors_new", || {
        boundary::check_out(out, "out")?;
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe { boundary::write_handle(out, "out", boundary::into_handle(Tensors::new()).cast()) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_open(
    path: *const std::ffi::c_char,
    out: *mut *mut vsdk_tensors_t,
) -> *mut vsdk_error_t {
    guard("vsdk_tensors_open", || {
        boundary::check_out(out, "out")?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let path = unsafe { boundary::str_arg(path, "path") }?;
        let tensors = Tensors::new();
        tensors.read(std::path::Path::new(path))?;
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe { boundary::write_handle(out, "out", boundary::into_handle(tensors).cast()) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_read(
    tensors: *mut vsdk_tensors_t,
    path: *const std::ffi::c_char,
) -> *mut vsdk_error_t {
    guard("vsdk_tensors_read", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let t = unsafe { boundary::borrow::<Tensors>(tensors.cast(), "tensors") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let path = unsafe { boundary::str_arg(path, "path") }?;
        t.read(std::path::Path::new(path))
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_add(
    tensors: *mut vsdk_tensors_t,
    name: *const std::ffi::c_char,
    tensor: *const vsdk_tensor_t,
) -> *mut vsdk_error_t {
    guard("vsdk_tensors_add", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let t = unsafe { boundary::borrow::<Tensors>(tensors.cast(), "tensors") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let name = unsafe { boundary::str_arg(name, "name") }?;
        if tensor.is_null() {
            return Err(Error::invalid("`tensor` is NULL"));
        }
        // SAFETY: non-null; the header's contract: one readable descriptor.
        let d = unsafe { tensor.read_unaligned() };
        // SAFETY: the header's contract for `tensor`: its arrays and the memory it describes are readable.
        let value = unsafe { host_tensor(&d, None, &format!("`{name}`")) }?;
        t.add(name, value, "vsdk_tensors_add")
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_count(
    tensors: *const vsdk_tensors_t,
    out: *mut usize,
) -> *mut vsdk_error_t {
    guard("vsdk_tensors_count", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let t = unsafe { boundary::borrow::<Tensors>(tensors.cast(), "tensors") }?;
        if out.is_null() {
            return Err(Error::invalid("`out` is NULL"));
        }
        // SAFETY: non-null; the caller passes writable storage for a size_t.
        unsafe { out.write_unaligned(t.entries().len()) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_at(
    tensors: *const vsdk_tensors_t,
    index: usize,
    out: *mut vsdk_tensor_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_tensors_at", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let t = unsafe { boundary::borrow::<Tensors>(tensors.cast(), "tensors") }?;
        let entries = t.entries();
        let e = entries.get(index).ok_or_else(|| {
            Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!("tensor {index}: the set holds {}", entries.len()),
            )
        })?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe { boundary::write_out(out, "out", tensor_info(&e.strings)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_tensors_free(tensors: *mut vsdk_tensors_t) {
    // SAFETY: the header's contract: a freed handle is NULL or one this library made, and is not used again.
    boundary::quiet((), || unsafe { boundary::free::<Tensors>(tensors.cast()) })
}

/// The most dimensions a checked tensor may have.
const MAX_NDIM: i32 = 32;

fn dtype_of(t: &vsdk_tensor_t, what: &str) -> Result<DType> {
    let d = t.dtype;
    let found = DType::ALL.into_iter().find(|&x| {
        let dl = crate::suite::dl_dtype(x);
        (dl.code, dl.bits, dl.lanes) == (d.code, d.bits, d.lanes)
    });
    found.ok_or_else(|| {
        Error::invalid(format!(
            "{what}: dtype (code {}, bits {}, lanes {}) is not a catalog dtype",
            d.code, d.bits, d.lanes
        ))
    })
}

/// Copies a DLPack-compatible host tensor (strided or not) into a compact
/// HostTensor, after checking it against the declared shape (None: the
/// descriptor's own, bounded in size like every tensor).
///
/// # Safety
/// `t.shape` and `t.strides` are NULL or hold `t.ndim` entries, and every
/// element the view describes is readable host memory (the header's contract
/// for `vsdk_check`).
pub unsafe fn host_tensor(
    t: &vsdk_tensor_t,
    declared: Option<&[usize]>,
    what: &str,
) -> Result<HostTensor> {
    if t.device.device_type != vsdk_ffi::VSDK_DEVICE_CPU {
        return Err(Error::invalid(format!(
            "{what}: device type {} is not host memory (VSDK_DEVICE_CPU)",
            t.device.device_type
        )));
    }
    if !(0..=MAX_NDIM).contains(&t.ndim) {
        return Err(Error::invalid(format!(
            "{what}: ndim {} is not in 0..={MAX_NDIM}",
            t.ndim
        )));
    }
    let ndim = t.ndim as usize;
    let dtype = dtype_of(t, what)?;
    let read = |ptr: *const i64, name: &str| -> Result<Vec<i64>> {
        if ndim == 0 {
            return Ok(Vec::new());
        }
        if ptr.is_null() {
            return Err(Error::invalid(format!(
                "{what}: `{name}` is NULL with ndim {ndim}"
            )));
        }
        // SAFETY: non-null; the header requires `ndim` entries.
        Ok((0..ndim)
            .map(|i| unsafe { ptr.add(i).read_unaligned() })
            .collect())
    };
    let shape = read(t.shape, "shape")?;
    if shape.iter().any(|&d| d < 0) {
        return Err(Error::invalid(format!("{what}: negative shape {shape:?}")));
    }
    let own: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
    let declared = declared.unwrap_or(&own);
    if shape.len() != declared.len()
        || shape
            .iter()
            .zip(declared)
            .any(|(&a, &b)| a < 0 || a as u64 != b as u64)
    {
        return Err(Error::invalid(format!(
            "{what}: shape {shape:?}, the document declares {declared:?}"
        )));
    }
    let spec = TensorSpec::new(dtype, declared);
    // Bounded before anything is allocated or read.
    let bytes = spec
        .bounded_size_bytes()
        .map_err(|e| Error::invalid(format!("{what}: {e}")))?;
    let elem = dtype.size_bytes();
    let strides = if t.strides.is_null() {
        // Compact row-major.
        let mut s = vec![1i64; ndim];
        for k in (0..ndim.saturating_sub(1)).rev() {
            s[k] = s[k + 1] * shape[k + 1];
        }
        s
    } else {
        read(t.strides, "strides")?
    };
    if strides.iter().any(|&s| s < 0) {
        return Err(Error::invalid(format!(
            "{what}: negative strides {strides:?}"
        )));
    }
    let numel = bytes / elem.max(1);
    if numel > 0 && t.data.is_null() {
        return Err(Error::invalid(format!("{what}: `data` is NULL")));
    }
    // The farthest byte read, computed with overflow checks before any
    // pointer arithmetic: beyond isize::MAX no allocation can hold it.
    let last = if numel == 0 {
        Some(0u64)
    } else {
        strides
            .iter()
            .zip(declared)
            .try_fold(0u64, |acc, (&s, &d)| {
                (s as u64).checked_mul(d as u64 - 1)?.checked_add(acc)
            })
            .and_then(|e| e.checked_add(1)?.checked_mul(elem as u64))
            .and_then(|b| b.checked_add(t.byte_offset))
    };
    if last.is_none_or(|b| b > isize::MAX as u64) {
        return Err(Error::invalid(format!(
            "{what}: strides {strides:?} with byte_offset {} reach past any allocation",
            t.byte_offset
        )));
    }
    let base = t.data as *const u8;
    let mut out = vec![0u8; bytes];
    let mut index = vec![0usize; ndim];
    for e in 0..numel {
        // Within `last` (checked above), so no overflow.
        let offset = index
            .iter()
            .zip(&strides)
            .map(|(&i, &s)| i as u64 * s as u64)
            .sum::<u64>()
            * elem as u64
            + t.byte_offset;
        // SAFETY: `offset + elem` is at most `last` <= isize::MAX (checked
        // above, overflow-free), and the header makes the caller guarantee
        // that every element of the view (index within `shape`, at `data +
        // byte_offset + sum(i*stride)*size`) is readable host memory for
        // the call.
        unsafe {
            std::ptr::copy_nonoverlapping(
                base.add(offset as usize),
                out.as_mut_ptr().add(e * elem),
                elem,
            );
        }
        for k in (0..ndim).rev() {
            index[k] += 1;
            if index[k] < declared[k] {
                break;
            }
            index[k] = 0;
        }
    }
    HostTensor::from_bytes(spec, out).map_err(|e| Error::invalid(format!("{what}: {e}")))
}
