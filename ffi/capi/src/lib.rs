//! libvips_sdk: the VIPS SDK's C library for inference engines. Every
//! function of `include/vips_sdk/vips_sdk.h` is defined here, on top of the
//! `vips-sdk` crate; the header's types come from `vsdk-ffi` (bindgen).
//!
//! Every entry point runs inside `boundary::guard` (a panic becomes a
//! VSDK_STATUS_INTERNAL error, nothing unwinds into C), checks its pointers
//! and handles before use, and writes out-parameters only on success.

#![allow(clippy::missing_safety_doc)] // the header documents every contract

mod boundary;
mod provider;
mod report;
mod results;
mod suite;
mod tensors;

use boundary::{quiet, ErrorObject};
use std::ffi::c_char;
use vsdk_ffi::engine::vsdk_error_t;
use vsdk_ffi::vsdk_status_code_t;

// The header lets several threads use one handle: every handle type must be
// shareable (its fields checked by the compiler, not only by comments).
const _: () = {
    fn shareable<T: Send + Sync>() {}
    let _ = shareable::<provider::HostProvider>;
    let _ = shareable::<suite::SuiteHandle>;
    let _ = shareable::<results::Results>;
    let _ = shareable::<report::Report>;
    let _ = shareable::<ErrorObject>;
};

const VERSION: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(v) => v,
    Err(_) => panic!("the version has no NUL"),
};

#[no_mangle]
pub extern "C" fn vsdk_sdk_version() -> *const c_char {
    VERSION.as_ptr()
}

#[no_mangle]
pub extern "C" fn vsdk_sdk_version_number() -> u32 {
    let part = |s: &str| s.parse::<u32>().unwrap_or(0);
    let major = part(env!("CARGO_PKG_VERSION_MAJOR"));
    let minor = part(env!("CARGO_PKG_VERSION_MINOR"));
    let patch = part(env!("CARGO_PKG_VERSION_PATCH"));
    major * 10000 + minor * 100 + patch
}

#[no_mangle]
pub extern "C" fn vsdk_error_code(error: *const vsdk_error_t) -> vsdk_status_code_t {
    quiet(vsdk_ffi::VSDK_STATUS_INTERNAL, || {
        if error.is_null() {
            return vsdk_ffi::VSDK_STATUS_OK;
        }
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        unsafe { boundary::borrow::<ErrorObject>(error.cast(), "error") }
            .map_or(vsdk_ffi::VSDK_STATUS_INVALID_ARGUMENT, |e| e.code)
    })
}

#[no_mangle]
pub extern "C" fn vsdk_error_message(error: *const vsdk_error_t) -> *const c_char {
    quiet(c"".as_ptr(), || {
        if error.is_null() {
            return c"".as_ptr();
        }
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        unsafe { boundary::borrow::<ErrorObject>(error.cast(), "error") }
            .map_or(c"vsdk_error_message: not an error object".as_ptr(), |e| {
                e.message.as_ptr()
            })
    })
}

#[no_mangle]
pub extern "C" fn vsdk_error_free(error: *mut vsdk_error_t) {
    // SAFETY: the header's contract: a freed handle is NULL or one this library made, and is not used again.
    quiet((), || unsafe {
        boundary::free::<ErrorObject>(error.cast())
    })
}
