//! `vsdk_provider_*`: a loaded provider library and its devices.

use crate::boundary::{self, c_string, guard, Error, Result, Tagged};
use std::ffi::{c_char, CString};
use vips_sdk::Provider;
use vsdk_ffi::engine::{vsdk_error_t, vsdk_host_provider_info_t, vsdk_host_provider_t};
use vsdk_ffi::{vsdk_device_info_t, vsdk_device_t};

/// The object behind `vsdk_host_provider_t*`: the provider and every string
/// the header hands out for it.
#[repr(C)]
pub struct HostProvider {
    magic: u64,
    pub provider: Provider,
    name: CString,
    vendor: CString,
    version: CString,
    library: CString,
    devices: Vec<Device>,
}

struct Device {
    info: vips_sdk::DeviceInfo,
    name: CString,
    driver_version: CString,
    stable_id: CString,
}

impl Tagged for HostProvider {
    const MAGIC: u64 = 0x7673_646b_5072_6f76; // "vsdkProv"
    const KIND: &'static str = "provider";
    fn kill(&mut self) {
        self.magic = 0;
    }
}

/// A provider error as a C error, with the code of its kind.
pub fn provider_error(e: vips_sdk::Error) -> Error {
    use vips_sdk::Error as E;
    let code = match &e {
        E::NotFound { .. } | E::Missing { .. } => vsdk_ffi::engine::VSDK_STATUS_NOT_FOUND,
        E::Open { .. }
        | E::NotAProvider { .. }
        | E::AbiMismatch { .. }
        | E::BadTable { .. }
        | E::NullRequiredSlot { .. } => vsdk_ffi::engine::VSDK_STATUS_INVALID_FILE,
        E::Provider { code, .. } => *code,
        _ => vsdk_ffi::VSDK_STATUS_INVALID_ARGUMENT,
    };
    Error::new(code, e.to_string())
}

fn open(name: &str) -> Result<HostProvider> {
    let provider = Provider::open_by_name(name).map_err(provider_error)?;
    let devices = provider
        .devices()
        .map_err(provider_error)?
        .into_iter()
        .map(|info| Device {
            name: c_string(&info.name),
            driver_version: c_string(&info.driver_version),
            stable_id: c_string(&info.stable_id),
            info,
        })
        .collect();
    let info = provider.info().clone();
    Ok(HostProvider {
        magic: HostProvider::MAGIC,
        name: c_string(&info.name),
        vendor: c_string(&info.vendor),
        version: c_string(&info.version),
        library: c_string(&info.library.display().to_string()),
        devices,
        provider,
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_provider_open(
    path_or_name: *const c_char,
    out: *mut *mut vsdk_host_provider_t,
) -> *mut vsdk_error_t {
    guard("vsdk_provider_open", || {
        boundary::check_out(out, "out")?;
        // SAFETY: the header's contract: a string argument is NULL or NUL-terminated and valid for the call.
        let name = unsafe { boundary::str_arg(path_or_name, "path_or_name") }?;
        let handle = boundary::into_handle(open(name)?);
        // SAFETY: `out` was checked non-NULL (`check_out`) and, by the header's contract, can hold a handle.
        unsafe { boundary::write_handle(out, "out", handle.cast()) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_provider_free(provider: *mut vsdk_host_provider_t) {
    // SAFETY: the header's contract: a freed handle is NULL or one this library made, and is not used again.
    boundary::quiet((), || unsafe {
        boundary::free::<HostProvider>(provider.cast())
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_provider_info(
    provider: *const vsdk_host_provider_t,
    out: *mut vsdk_host_provider_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_provider_info", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let p = unsafe { boundary::borrow::<HostProvider>(provider.cast(), "provider") }?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out(
                out,
                "out",
                vsdk_host_provider_info_t {
                    struct_size: 0,
                    name: p.name.as_ptr(),
                    vendor: p.vendor.as_ptr(),
                    version: p.version.as_ptr(),
                    library: p.library.as_ptr(),
                    abi_version: p.provider.info().abi_version,
                    device_count: p.devices.len() as u32,
                },
            )
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn vsdk_provider_device_info(
    provider: *const vsdk_host_provider_t,
    index: u32,
    out: *mut vsdk_device_info_t,
) -> *mut vsdk_error_t {
    guard("vsdk_provider_device_info", || {
        // SAFETY: the header's contract: a handle argument is NULL or a handle this library made; `borrow` checks NULL and the kind before use.
        let p = unsafe { boundary::borrow::<HostProvider>(provider.cast(), "provider") }?;
        let d = p.devices.get(index as usize).ok_or_else(|| {
            Error::new(
                vsdk_ffi::engine::VSDK_STATUS_NOT_FOUND,
                format!(
                    "device {index}: the provider has {} device(s)",
                    p.devices.len()
                ),
            )
        })?;
        // SAFETY: the header's contract: an out struct is NULL or holds `struct_size` writable bytes.
        unsafe {
            boundary::write_out(
                out,
                "out",
                vsdk_device_info_t {
                    struct_size: 0,
                    device: vsdk_device_t {
                        device_type: d.info.device_type,
                        device_id: d.info.index as i32,
                    },
                    name: d.name.as_ptr(),
                    driver_version: d.driver_version.as_ptr(),
                    stable_id: d.stable_id.as_ptr(),
                    memory_bytes: d.info.memory_bytes,
                },
            )
        }
    })
}
