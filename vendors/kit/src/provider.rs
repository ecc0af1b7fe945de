//! The provider ABI's function table for a provider written in Rust: the
//! provider implements [`Provider`] on safe types, and [`table`] supplies
//! every C entry point around it (NULL checks, out-struct `struct_size`,
//! the panic guard, the catalog's kernel list). One line exports it:
//! [`export_provider!`](crate::export_provider).

use crate::{guard, non_null, write_field, KernelCall, ProviderError};
use std::ffi::{c_char, c_void, CStr, CString};
use std::mem::offset_of;
use std::sync::OnceLock;
use vsdk_catalog::{DType, Op, ALL_OPS};
use vsdk_ffi::*;

/// What `device_info` reports; the strings live as long as the provider.
pub struct DeviceDescription<'a> {
    pub device: vsdk_device_t,
    pub name: &'a CStr,
    pub driver_version: &'a CStr,
    pub stable_id: &'a CStr,
    pub memory_bytes: u64,
}

/// A provider instance (`create` makes one; the host may make several).
/// The table checks device indices (with [`Provider::check_device`]) and
/// NULL pointers before calling the methods that take them; byte ranges are
/// `(address, offset)` and a length as the host passed them, for the
/// provider to check against its buffers.
pub trait Provider: Sized + Send + Sync + 'static {
    const NAME: &'static CStr;
    const VENDOR: &'static CStr;
    /// The provider's version: `vsdk_provider_kit::package_version!()`.
    const VERSION: &'static CStr;

    fn create() -> Result<Self, ProviderError>;
    /// One line; a provider without devices says why here.
    fn description(&self) -> &CStr;
    fn device_count(&self) -> u32;
    /// An error naming the index when there is no such device.
    fn check_device(&self, index: u32) -> Result<(), ProviderError>;
    fn device_info(&self, index: u32) -> Result<DeviceDescription<'_>, ProviderError>;
    /// Whether `op` runs on `dtype` on device `index` (a checked index).
    fn supports(&self, index: u32, op: Op, dtype: DType) -> bool;
    fn alloc(&self, index: u32, size: u64, alignment: u64) -> Result<*mut c_void, ProviderError>;
    fn free(&self, index: u32, ptr: *mut c_void);
    /// Copies `n` bytes to the device address `dst` (a buffer's address plus
    /// the host's offset, summed without overflow by the table), which the
    /// provider checks against its buffers.
    ///
    /// # Safety
    /// `src` is non-NULL and valid for `n` bytes (the ABI's contract on the
    /// host; the table checked NULL).
    unsafe fn copy_to_device(
        &self,
        index: u32,
        dst: usize,
        src: *const c_void,
        n: usize,
    ) -> Result<(), ProviderError>;
    /// As [`Provider::copy_to_device`], from the device address `src`.
    ///
    /// # Safety
    /// `dst` is non-NULL and valid for `n` bytes of writes (the ABI's contract
    /// on the host; the table checked NULL).
    unsafe fn copy_to_host(
        &self,
        index: u32,
        dst: *mut c_void,
        src: usize,
        n: usize,
    ) -> Result<(), ProviderError>;
    /// Between two device addresses; the ranges may overlap.
    fn copy_on_device(
        &self,
        index: u32,
        dst: usize,
        src: usize,
        n: usize,
    ) -> Result<(), ProviderError>;
    fn synchronize(&self, index: u32) -> Result<(), ProviderError>;
    /// A call copied out of C memory and checked for shape (not yet against
    /// the catalog or the provider's buffers: that is the provider's job).
    fn execute(&self, call: KernelCall) -> Result<(), ProviderError>;
}

/// The function table of provider `P`.
pub const fn table<P: Provider>() -> vsdk_provider_api_t {
    vsdk_provider_api_t {
        struct_size: std::mem::size_of::<vsdk_provider_api_t>(),
        abi_version: VSDK_ABI_VERSION,
        concurrency: VSDK_CONCURRENCY_THREAD_SAFE,
        status_code: Some(crate::status_code),
        status_message: Some(crate::status_message),
        status_destroy: Some(crate::status_destroy),
        create: Some(create::<P>),
        destroy: Some(destroy::<P>),
        get_info: Some(get_info::<P>),
        device_count: Some(device_count::<P>),
        device_info: Some(device_info::<P>),
        kernel_count: Some(kernel_count),
        kernel_info: Some(kernel_info),
        kernel_supports: Some(kernel_supports::<P>),
        alloc: Some(alloc::<P>),
        free: Some(free::<P>),
        copy_to_device: Some(copy_to_device::<P>),
        copy_to_host: Some(copy_to_host::<P>),
        synchronize: Some(synchronize::<P>),
        execute: Some(execute::<P>),
        copy_on_device: Some(copy_on_device::<P>),
    }
}

/// Defines `vsdk_get_provider_api`, the entry point, for a [`Provider`].
#[macro_export]
macro_rules! export_provider {
    ($provider:ty) => {
        static VSDK_PROVIDER_TABLE: $crate::ffi::vsdk_provider_api_t = $crate::table::<$provider>();

        /// The provider's entry point (`VSDK_ENTRY_SYMBOL`).
        ///
        /// # Safety
        /// `provider_abi_version` is NULL or valid for one write.
        #[no_mangle]
        pub unsafe extern "C" fn vsdk_get_provider_api(
            host_abi_version: u32,
            provider_abi_version: *mut u32,
        ) -> *const $crate::ffi::vsdk_provider_api_t {
            // SAFETY: forwarded caller contract.
            unsafe {
                $crate::negotiate(host_abi_version, provider_abi_version, &VSDK_PROVIDER_TABLE)
            }
        }
    };
}

/// # Safety
/// `p` is NULL or an instance from `create::<P>` that is still alive.
unsafe fn instance<'a, P>(p: *mut vsdk_provider_t) -> Result<&'a P, ProviderError> {
    // SAFETY: per the contract, a non-NULL pointer is a live P.
    unsafe { p.cast::<P>().as_ref() }.ok_or_else(|| ProviderError::invalid("provider is NULL"))
}

/// The catalog's kernel names as C strings, made once.
fn kernel_names() -> &'static [CString] {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    NAMES.get_or_init(|| {
        ALL_OPS
            .iter()
            .map(|op| CString::new(op.name()).unwrap_or_default())
            .collect()
    })
}

unsafe extern "C" fn create<P: Provider>(
    _options: *const vsdk_create_options_t,
    out: *mut *mut vsdk_provider_t,
) -> *mut vsdk_status_t {
    guard(|| {
        let out = non_null(out, "out")?;
        let instance = Box::new(P::create()?);
        // SAFETY: `out` is non-NULL and writable per the ABI.
        unsafe { out.write(Box::into_raw(instance).cast()) };
        Ok(())
    })
}

unsafe extern "C" fn destroy<P: Provider>(p: *mut vsdk_provider_t) {
    let _ = guard(|| {
        if !p.is_null() {
            // SAFETY: `p` came from `create::<P>` and the host destroys it once.
            drop(unsafe { Box::from_raw(p.cast::<P>()) });
        }
        Ok(())
    });
}

unsafe extern "C" fn get_info<P: Provider>(
    p: *mut vsdk_provider_t,
    out: *mut vsdk_provider_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        let out = non_null(out, "out")?;
        type I = vsdk_provider_info_t;
        // SAFETY: `out` is a host-owned struct whose struct_size the helper honours;
        // the strings live as long as the instance or the program.
        unsafe {
            write_field(out, offset_of!(I, name), P::NAME.as_ptr());
            write_field(out, offset_of!(I, vendor), P::VENDOR.as_ptr());
            write_field(out, offset_of!(I, version), P::VERSION.as_ptr());
            write_field(out, offset_of!(I, description), inst.description().as_ptr());
        }
        Ok(())
    })
}

unsafe extern "C" fn device_count<P: Provider>(
    p: *mut vsdk_provider_t,
    out: *mut u32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let n = unsafe { instance::<P>(p)? }.device_count();
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out")?.write(n) };
        Ok(())
    })
}

unsafe extern "C" fn device_info<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
    out: *mut vsdk_device_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let d = unsafe { instance::<P>(p)? }.device_info(index)?;
        let out = non_null(out, "out")?;
        type I = vsdk_device_info_t;
        // SAFETY: `out` is a host-owned struct whose struct_size the helper honours;
        // the strings live as long as the instance.
        unsafe {
            write_field(out, offset_of!(I, device), d.device);
            write_field(out, offset_of!(I, name), d.name.as_ptr());
            write_field(
                out,
                offset_of!(I, driver_version),
                d.driver_version.as_ptr(),
            );
            write_field(out, offset_of!(I, stable_id), d.stable_id.as_ptr());
            write_field(out, offset_of!(I, memory_bytes), d.memory_bytes);
        }
        Ok(())
    })
}

unsafe extern "C" fn kernel_count(p: *mut vsdk_provider_t, out: *mut u64) -> *mut vsdk_status_t {
    guard(|| {
        non_null(p, "provider")?;
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out")?.write(kernel_names().len() as u64) };
        Ok(())
    })
}

unsafe extern "C" fn kernel_info(
    p: *mut vsdk_provider_t,
    index: u64,
    out: *mut vsdk_kernel_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        non_null(p, "provider")?;
        let i = usize::try_from(index).ok().filter(|&i| i < ALL_OPS.len());
        let i =
            i.ok_or_else(|| ProviderError::invalid(format!("kernel index {index} out of range")))?;
        let out = non_null(out, "out")?;
        type I = vsdk_kernel_info_t;
        // SAFETY: host-owned struct, struct_size honoured; the name is static.
        unsafe {
            write_field(out, offset_of!(I, name), kernel_names()[i].as_ptr());
            write_field(out, offset_of!(I, version), ALL_OPS[i].version());
        }
        Ok(())
    })
}

unsafe extern "C" fn kernel_supports<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
    kernel: *const c_char,
    version: u32,
    dtype: vsdk_dtype_t,
    out: *mut i32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        let kernel = non_null(kernel.cast_mut(), "kernel")?;
        // SAFETY: non-NULL NUL-terminated string borrowed for the call.
        let name = unsafe { CStr::from_ptr(kernel) }.to_string_lossy();
        let supported = match (
            Op::lookup(&name, version),
            DType::from_dlpack(dtype.code, dtype.bits, dtype.lanes),
        ) {
            (Ok(op), Some(d)) => inst.supports(index, op, d),
            _ => false,
        };
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out_supported")?.write(i32::from(supported)) };
        Ok(())
    })
}

unsafe extern "C" fn alloc<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
    size: u64,
    alignment: u64,
    out: *mut *mut c_void,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        let out = non_null(out, "out_ptr")?;
        let ptr = inst.alloc(index, size, alignment)?;
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { out.write(ptr) };
        Ok(())
    })
}

unsafe extern "C" fn free<P: Provider>(p: *mut vsdk_provider_t, index: u32, ptr: *mut c_void) {
    let _ = guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        inst.free(index, ptr);
        Ok(())
    });
}

unsafe extern "C" fn copy_to_device<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    dst_offset: u64,
    src: *const c_void,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        let src = non_null(src.cast_mut(), "src")?;
        let (dst, n) = (offset_address(dst, dst_offset)?, byte_count(n)?);
        // SAFETY: the host's source is valid for n bytes per the ABI.
        unsafe { inst.copy_to_device(index, dst, src, n) }
    })
}

unsafe extern "C" fn copy_to_host<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    src: *const c_void,
    src_offset: u64,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        let dst = non_null(dst, "dst")?;
        let (src, n) = (offset_address(src, src_offset)?, byte_count(n)?);
        // SAFETY: the host's destination is valid for n bytes per the ABI.
        unsafe { inst.copy_to_host(index, dst, src, n) }
    })
}

unsafe extern "C" fn copy_on_device<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    dst_offset: u64,
    src: *const c_void,
    src_offset: u64,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        let dst = offset_address(dst, dst_offset)?;
        let src = offset_address(src, src_offset)?;
        inst.copy_on_device(index, dst, src, byte_count(n)?)
    })
}

unsafe extern "C" fn synchronize<P: Provider>(
    p: *mut vsdk_provider_t,
    index: u32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        inst.check_device(index)?;
        inst.synchronize(index)
    })
}

unsafe extern "C" fn execute<P: Provider>(
    p: *mut vsdk_provider_t,
    call: *const vsdk_kernel_call_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<P>(p)? };
        // SAFETY: host contract: the call and everything it points to is valid for the call.
        let call = unsafe { KernelCall::from_raw(call)? };
        inst.check_device(call.device_index)?;
        inst.execute(call)
    })
}

/// The calling crate's version as a C string constant, for [`Provider::VERSION`].
#[macro_export]
macro_rules! package_version {
    () => {
        match ::std::ffi::CStr::from_bytes_with_nul(
            concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
        ) {
            Ok(v) => v,
            Err(_) => panic!("package version contains NUL"),
        }
    };
}

/// `base + offset`, or an error when it overflows.
fn offset_address(base: *const c_void, offset: u64) -> Result<usize, ProviderError> {
    usize::try_from(offset)
        .ok()
        .and_then(|o| (base as usize).checked_add(o))
        .ok_or_else(|| ProviderError::invalid("offset overflows"))
}

/// A byte count as `usize`.
fn byte_count(n: u64) -> Result<usize, ProviderError> {
    usize::try_from(n).map_err(|_| ProviderError::invalid("size overflows"))
}
