//! `vsdk_suite_*`: a suite (document + golden file), its stages and tensors.

use crate::boundary::{self, c_string, guard, Error, Result, Tagged};
use std::collections::HashMap;
use std::ffi::{c_char, CString};
use vips_sdk::suite::Suite;
use vsdk_ffi::engine::{
    vsdk_error_t, vsdk_stage_info_t, vsdk_suite_info_t, vsdk_suite_t, vsdk_tensor_info_t,
    VSDK_STATUS_INVALID_FILE, VSDK_STATUS_NOT_FOUND,
};
use vsdk_ffi::vsdk_dtype_t;

/// The object behind `vsdk_suite_t*`.
#[repr(C)]
pub struct SuiteHandle {
    magic: u64,
    pub suite: Suite,
    component: CString,
    version: CString,
    document_sha256: CString,
    golden_sha256: CString,
    stages: Vec<StageStrings>,
    /// The declared tensors, in document order, as C sees them.
    tensors: Vec<TensorStrings>,
    /// Index into `tensors` by name.
    by_name: HashMap<String, usize>,
}

/// A tensor's name, dtype and shape as `vsdk_tensor_info_t` points at them.
pub(crate) struct TensorStrings {
    pub name: CString,
    dtype: vsdk_dtype_t,
    shape: Vec<i64>,
}

impl TensorStrings {
    pub fn of(name: &str, spec: &vips_sdk::TensorSpec) -> TensorStrings {
        TensorStrings {
            name: c_string(name),
            dtype: dl_dtype(spec.dtype),
            shape: spec.shape.iter().map(|&d| d as i64).collect(),
        }
    }
}

struct StageStrings {
    name: CString,
    algorithm: CString,
    inputs: Vec<CString>,
    input_ptrs: Vec<*const c_char>,
    outputs: Vec<CString>,
    output_ptrs: Vec<*const c_char>,
}

// SAFETY: the raw pointers point into the CStrings owned beside them, which
// are never mutated after construction; sharing them between threads is
// sharing immutable strings.
unsafe impl Send for StageStrings {}
// SAFETY: as above: immutable after construction.
unsafe impl Sync for StageStrings {}

impl Tagged for SuiteHandle {
    const MAGIC: u64 = 0x7673_646b_5375_6974; // "vsdkSuit"
    const KIND: &'static str = "suite";
    fn kill(&mut self) {
        self.magic = 0;
    }
}

/// A suite argument is a path when it contains `/` or ends in `.yaml`, else a
/// name looked up in `VSDK_SUITES_PATH`, then `share/vips-sdk/suites` of the
/// prefix libvips_sdk.so is in (or the program linked with libvips_sdk.a),
/// of the prefix recorded by `tools/install`, of `/usr/local` and `/usr`
/// (`vips_sdk::install::suite_dirs`; docs/c-api.md, "Names and paths").
fn open(arg: &str) -> Result<SuiteHandle> {
    let located = vips_sdk::suite::locate(arg, &vips_sdk::install::suite_dirs())
        .map_err(|m| Error::new(VSDK_STATUS_NOT_FOUND, m))?;
    let suite = located
        .open()
        .map_err(|m| Error::new(VSDK_STATUS_INVALID_FILE, m))?;
    let names = |v: &[String]| v.iter().map(|n| c_string(n)).collect::<Vec<_>>();
    let stages = suite
        .document
        .stages
        .iter()
        .map(|s| {
            let inputs = names(&s.inputs);
            let outputs = names(&s.outputs);
            StageStrings {
                name: c_string(&s.name),
                algorithm: c_string(&s.algorithm),
                input_ptrs: inputs.iter().map(|c| c.as_ptr()).collect(),
                output_ptrs: outputs.iter().map(|c| c.as_ptr()).collect(),
                inputs,
                outputs,
            }
        })
        .collect();
    let tensors: Vec<TensorStrings> = suite
        .document
        .tensors
        .iter()
        .filter_map(|t| Some(TensorStrings::of(&t.name, suite.spec(&t.name)?)))
        .collect();
    let by_name = tensors
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.to_string_lossy().into_owned(), i))
        .collect();
    Ok(SuiteHandle {
        magic: SuiteHandle::MAGIC,
        component: c_string(&suite.document.component.id),
        version: c_string(&suite.document.component.version),
        document_sha256: c_string(&hex::encode(suite.document.sha256)),
        golden_sha256: c_string(&hex::encode(suite.golden.file_sha256)),
        stages,
        tensors,
        by_name,
        suite,
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_open(
    path_or_name: *const c_char,
    out: *mut *mut vsdk_suite_t,
) -> *mut vsdk_error_t {
    guard("vsdk_suite_open", || {
        boundary::check_out(out, "out")?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let arg = unsafe { boundary::str_arg(path_or_name, "path_or_name") }?;
        let handle = boundary::into_handle(open(arg)?);
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe { boundary::write_handle(out, "out", handle.cast()) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_free(suite: *mut vsdk_suite_t) {
    // SAFETY: the header's contract: a freed handle is NULL or one this library made, and is not used again.
    boundary::quiet((), || unsafe {
        boundary::free::<SuiteHandle>(suite.cast())
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_info(
    suite: *const vsdk_suite_t,
    out: *mut vsdk_suite_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_suite_info", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out(
                out,
                "out",
                vsdk_suite_info_t {
                    struct_size: 0,
                    component: s.component.as_ptr(),
                    version: s.version.as_ptr(),
                    document_sha256: s.document_sha256.as_ptr(),
                    golden_sha256: s.golden_sha256.as_ptr(),
                    stage_count: s.stages.len(),
                    tensor_count: s.tensors.len(),
                },
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_stage(
    suite: *const vsdk_suite_t,
    index: usize,
    out: *mut vsdk_stage_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_suite_stage", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        let st = s.stages.get(index).ok_or_else(|| {
            Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!("stage {index}: the suite has {} stage(s)", s.stages.len()),
            )
        })?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out(
                out,
                "out",
                vsdk_stage_info_t {
                    struct_size: 0,
                    name: st.name.as_ptr(),
                    algorithm: st.algorithm.as_ptr(),
                    input_count: st.inputs.len(),
                    inputs: st.input_ptrs.as_ptr(),
                    output_count: st.outputs.len(),
                    outputs: st.output_ptrs.as_ptr(),
                },
            )
        }
    })
}

/// A catalog dtype as DLPack's (code, bits, lanes).
pub fn dl_dtype(d: vips_sdk::DType) -> vsdk_dtype_t {
    use vips_sdk::DType as D;
    let (code, bits) = match d {
        D::F64 => (vsdk_ffi::VSDK_DTYPE_FLOAT, 64),
        D::F32 => (vsdk_ffi::VSDK_DTYPE_FLOAT, 32),
        D::F16 => (vsdk_ffi::VSDK_DTYPE_FLOAT, 16),
        D::BF16 => (vsdk_ffi::VSDK_DTYPE_BFLOAT, 16),
        D::U8 => (vsdk_ffi::VSDK_DTYPE_UINT, 8),
        D::I32 => (vsdk_ffi::VSDK_DTYPE_INT, 32),
        D::I64 => (vsdk_ffi::VSDK_DTYPE_INT, 64),
    };
    vsdk_dtype_t {
        code,
        bits,
        lanes: 1,
    }
}

pub(crate) fn tensor_info(t: &TensorStrings) -> vsdk_tensor_info_t {
    vsdk_tensor_info_t {
        struct_size: 0,
        name: t.name.as_ptr(),
        dtype: vsdk_dtype_t {
            code: t.dtype.code,
            bits: t.dtype.bits,
            lanes: t.dtype.lanes,
        },
        ndim: t.shape.len() as i32,
        shape: t.shape.as_ptr(),
    }
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_tensor(
    suite: *const vsdk_suite_t,
    name: *const c_char,
    out: *mut vsdk_tensor_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_suite_tensor", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let name = unsafe { boundary::str_arg(name, "name") }?;
        let t = s.by_name.get(name).map(|&i| &s.tensors[i]).ok_or_else(|| {
            Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!(
                    "no tensor `{name}` in suite `{}`",
                    s.suite.document.component.id
                ),
            )
        })?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe { boundary::write_out(out, "out", tensor_info(t)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_tensor_at(
    suite: *const vsdk_suite_t,
    index: usize,
    out: *mut vsdk_tensor_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_suite_tensor_at", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        let t = s.tensors.get(index).ok_or_else(|| {
            Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!(
                    "tensor {index}: the suite declares {} tensor(s)",
                    s.tensors.len()
                ),
            )
        })?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe { boundary::write_out(out, "out", tensor_info(t)) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_suite_read_f32(
    suite: *const vsdk_suite_t,
    name: *const c_char,
    dst: *mut f32,
    count: usize,
) -> *mut vsdk_error_t {
    guard("vsdk_suite_read_f32", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let s = unsafe { boundary::borrow::<SuiteHandle>(suite.cast(), "suite") }?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let name = unsafe { boundary::str_arg(name, "name") }?;
        if s.suite.spec(name).is_none() {
            return Err(Error::new(
                VSDK_STATUS_NOT_FOUND,
                format!(
                    "no tensor `{name}` in suite `{}`",
                    s.suite.document.component.id
                ),
            ));
        }
        let t = s
            .suite
            .tensor(name)
            .map_err(|e| Error::new(VSDK_STATUS_INVALID_FILE, e.to_string()))?;
        let values: Vec<f32> = t
            .cast(vips_sdk::DType::F32)
            .to_vec()
            .map_err(|e| Error::invalid(e.to_string()))?;
        if count != values.len() {
            return Err(Error::invalid(format!(
                "`count` is {count}; tensor `{name}` has {} elements",
                values.len()
            )));
        }
        if dst.is_null() {
            return Err(Error::invalid("`dst` is NULL"));
        }
        // SAFETY: non-null; the caller provides room for `count` floats,
        // which is the number copied.
        unsafe { std::ptr::copy_nonoverlapping(values.as_ptr(), dst, count) };
        Ok(())
    })
}
