use crate::ProviderError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use vsdk_ffi::{vsdk_provider_api_t, vsdk_status_t};

/// Runs `f` at the C boundary: `Ok` becomes NULL, an error becomes a status
/// object, and a panic becomes a `VSDK_STATUS_INTERNAL` status with its message.
pub fn guard(f: impl FnOnce() -> Result<(), ProviderError>) -> *mut vsdk_status_t {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => e.into_raw(),
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "(non-string panic payload)".into());
            ProviderError::internal(format!("provider panicked: {what}")).into_raw()
        }
    }
}

/// The entry point's negotiation for a provider that speaks ABI v1 only:
/// writes the version it uses, returns the table, or NULL if the host is
/// older than v1.
///
/// # Safety
/// `provider_abi_version` is NULL or valid for one write.
pub unsafe fn negotiate(
    host_abi_version: u32,
    provider_abi_version: *mut u32,
    table: &'static vsdk_provider_api_t,
) -> *const vsdk_provider_api_t {
    if !provider_abi_version.is_null() {
        // SAFETY: checked non-NULL; the caller guarantees it is writable.
        unsafe { provider_abi_version.write(vsdk_ffi::VSDK_ABI_VERSION) };
    }
    if host_abi_version >= vsdk_ffi::VSDK_ABI_VERSION {
        table
    } else {
        std::ptr::null()
    }
}

/// Writes `value` into the field at `offset` of an out-struct whose first
/// member is the host's `struct_size`, only if the field fits in it (a host
/// built against an older header has a smaller struct).
///
/// # Safety
/// `out` points to a writable struct of at least `struct_size` bytes whose
/// first member is `size_t struct_size`, and `T` is the field's type.
pub unsafe fn write_field<S, T>(out: *mut S, offset: usize, value: T) {
    // SAFETY: the first member of every out-struct is `size_t struct_size`.
    let struct_size = unsafe { out.cast::<usize>().read() };
    if offset + std::mem::size_of::<T>() <= struct_size {
        // SAFETY: the field lies inside the host's struct, per the check above.
        unsafe {
            out.cast::<u8>()
                .add(offset)
                .cast::<T>()
                .write_unaligned(value)
        };
    }
}

/// `p`, or an invalid-argument error naming `what` when it is NULL.
pub fn non_null<T>(p: *mut T, what: &str) -> Result<*mut T, ProviderError> {
    if p.is_null() {
        Err(ProviderError::invalid(format!("{what} is NULL")))
    } else {
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_internal_errors() {
        let status = guard(|| panic!("kernel exploded at {}", 7));
        // SAFETY: `status` is a live status object, destroyed once.
        unsafe {
            assert_eq!(crate::status_code(status), vsdk_ffi::VSDK_STATUS_INTERNAL);
            let msg = std::ffi::CStr::from_ptr(crate::status_message(status));
            assert_eq!(
                msg.to_str().unwrap(),
                "provider panicked: kernel exploded at 7"
            );
            crate::status_destroy(status);
        }
        assert!(guard(|| Ok(())).is_null());
    }

    #[test]
    fn write_field_respects_struct_size() {
        #[repr(C)]
        struct Out {
            struct_size: usize,
            a: u64,
            b: u64,
        }
        let mut out = Out {
            struct_size: 16,
            a: 1,
            b: 2,
        };
        // SAFETY: `out` is a live `Out` whose first field is struct_size.
        unsafe {
            write_field(&mut out, std::mem::offset_of!(Out, a), 10u64);
            write_field(&mut out, std::mem::offset_of!(Out, b), 20u64);
        }
        assert_eq!((out.a, out.b), (10, 2), "b lies past struct_size and stays");
    }
}
