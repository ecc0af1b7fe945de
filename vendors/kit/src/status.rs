use std::ffi::{c_char, CString};
use vsdk_ffi::{vsdk_status_code_t, vsdk_status_t};

/// An error a provider returns to the host: a status code and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderError {
    pub code: vsdk_status_code_t,
    pub message: String,
}

impl ProviderError {
    pub fn new(code: vsdk_status_code_t, message: impl Into<String>) -> Self {
        ProviderError {
            code,
            message: message.into(),
        }
    }
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(vsdk_ffi::VSDK_STATUS_INVALID_ARGUMENT, message)
    }
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self::new(vsdk_ffi::VSDK_STATUS_UNSUPPORTED, message)
    }
    pub fn out_of_memory(message: impl Into<String>) -> Self {
        Self::new(vsdk_ffi::VSDK_STATUS_OUT_OF_MEMORY, message)
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(vsdk_ffi::VSDK_STATUS_INTERNAL, message)
    }

    /// Moves the error into a heap status object that the host frees with
    /// [`status_destroy`].
    pub fn into_raw(self) -> *mut vsdk_status_t {
        // Interior NULs would truncate the C string: replace them.
        let message = CString::new(self.message.replace('\0', "\u{FFFD}"))
            .unwrap_or_else(|_| CString::from(c"(unprintable message)"));
        Box::into_raw(Box::new(Status {
            code: self.code,
            message,
        }))
        .cast()
    }
}

impl From<vsdk_catalog::CatalogError> for ProviderError {
    fn from(e: vsdk_catalog::CatalogError) -> Self {
        let code = match e {
            vsdk_catalog::CatalogError::UnknownKernel { .. } => vsdk_ffi::VSDK_STATUS_UNSUPPORTED,
            _ => vsdk_ffi::VSDK_STATUS_INVALID_ARGUMENT,
        };
        ProviderError::new(code, e.to_string())
    }
}

/// What a `vsdk_status_t*` from a Rust provider points to.
struct Status {
    code: vsdk_status_code_t,
    message: CString,
}

/// The table's `status_code` slot.
///
/// # Safety
/// `status` is NULL or was returned by [`ProviderError::into_raw`] and not yet destroyed.
pub unsafe extern "C" fn status_code(status: *const vsdk_status_t) -> vsdk_status_code_t {
    // SAFETY: per the contract, a non-NULL status points to a live `Status`.
    match unsafe { status.cast::<Status>().as_ref() } {
        Some(s) => s.code,
        None => vsdk_ffi::VSDK_STATUS_OK,
    }
}

/// The table's `status_message` slot: never NULL.
///
/// # Safety
/// As [`status_code`].
pub unsafe extern "C" fn status_message(status: *const vsdk_status_t) -> *const c_char {
    // SAFETY: per the contract, a non-NULL status points to a live `Status`.
    match unsafe { status.cast::<Status>().as_ref() } {
        Some(s) => s.message.as_ptr(),
        None => c"".as_ptr(),
    }
}

/// The table's `status_destroy` slot; NULL is a no-op.
///
/// # Safety
/// As [`status_code`]; the status is not used afterwards.
pub unsafe extern "C" fn status_destroy(status: *mut vsdk_status_t) {
    if !status.is_null() {
        // SAFETY: it came from `Box::into_raw` in `into_raw` and is freed once.
        drop(unsafe { Box::from_raw(status.cast::<Status>()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn status_round_trip() {
        let raw = ProviderError::invalid("bad\0shape").into_raw();
        // SAFETY: `raw` is a live status from `into_raw`, destroyed once below.
        unsafe {
            assert_eq!(status_code(raw), vsdk_ffi::VSDK_STATUS_INVALID_ARGUMENT);
            assert_eq!(
                CStr::from_ptr(status_message(raw)).to_str().unwrap(),
                "bad\u{FFFD}shape"
            );
            status_destroy(raw);
            status_destroy(std::ptr::null_mut());
        }
    }
}
