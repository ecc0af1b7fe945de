//! The provider ABI over any [`Backend`]: one function table per backend
//! type, built by [`export_provider!`](crate::export_provider). Every entry
//! runs inside the kit's panic guard; every tensor is checked against the
//! catalog and against this instance's live allocations before a kernel
//! sees it.

use crate::backend::{Backend, DevicePtr};
use crate::memory::Allocations;
use crate::ops;
use std::ffi::{c_char, c_void, CStr, CString};
use std::mem::offset_of;
use vsdk_catalog::{DType, Node, Op, ALL_OPS};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{guard, non_null, write_field, KernelCall, ProviderError, TensorArg};

/// One opened device and what the instance reports and tracks for it.
struct Device<B> {
    backend: B,
    name: CString,
    driver_version: CString,
    stable_id: CString,
    memory_bytes: u64,
    allocations: Allocations,
}

struct Instance<B> {
    devices: Vec<Device<B>>,
    /// The backend's description, with the reason when there is no device.
    description: CString,
    kernel_names: Vec<CString>,
}

fn cstring(s: impl Into<String>) -> CString {
    CString::new(s.into().replace('\0', " ")).unwrap_or_default()
}

const VERSION: &CStr = {
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("package version contains NUL"),
    }
};

/// The function table of backend `B`.
pub const fn table<B: Backend>() -> vsdk_provider_api_t {
    vsdk_provider_api_t {
        struct_size: std::mem::size_of::<vsdk_provider_api_t>(),
        abi_version: VSDK_ABI_VERSION,
        concurrency: VSDK_CONCURRENCY_THREAD_SAFE,
        status_code: Some(vsdk_provider_kit::status_code),
        status_message: Some(vsdk_provider_kit::status_message),
        status_destroy: Some(vsdk_provider_kit::status_destroy),
        create: Some(create::<B>),
        destroy: Some(destroy::<B>),
        get_info: Some(get_info::<B>),
        device_count: Some(device_count::<B>),
        device_info: Some(device_info::<B>),
        kernel_count: Some(kernel_count::<B>),
        kernel_info: Some(kernel_info::<B>),
        kernel_supports: Some(kernel_supports::<B>),
        alloc: Some(alloc::<B>),
        free: Some(free::<B>),
        copy_to_device: Some(copy_to_device::<B>),
        copy_to_host: Some(copy_to_host::<B>),
        synchronize: Some(synchronize::<B>),
        execute: Some(execute::<B>),
        copy_on_device: Some(copy_on_device::<B>),
    }
}

/// Defines `vsdk_get_provider_api`, the provider's entry point, for a
/// [`Backend`] type: one line in the provider crate's `lib.rs`.
#[macro_export]
macro_rules! export_provider {
    ($backend:ty) => {
        static VSDK_PROVIDER_TABLE: $crate::ffi::vsdk_provider_api_t =
            $crate::abi::table::<$backend>();

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

/// The operators' dtypes on these kernels: float math in f32, f16 and bf16
/// (no float64 on GPUs), casts among the types the kernels load and store,
/// data movement on any dtype (a copy of 1, 2, 4 or 8 bytes).
pub fn supports(op: Op, dtype: DType) -> bool {
    let kernel_types = [DType::U8, DType::F16, DType::BF16, DType::F32];
    op.dtypes().contains(&dtype)
        && match op {
            Op::Crop | Op::Concat | Op::Reshape | Op::Permute => true,
            Op::Cast | Op::ResizePilBicubic => kernel_types.contains(&dtype),
            _ => dtype != DType::F64,
        }
}

/// # Safety
/// `p` is NULL or an instance from `create::<B>` that is still alive.
unsafe fn instance<'a, B>(p: *mut vsdk_provider_t) -> Result<&'a Instance<B>, ProviderError> {
    // SAFETY: per the contract, a non-NULL pointer is a live Instance<B>.
    unsafe { p.cast::<Instance<B>>().as_ref() }
        .ok_or_else(|| ProviderError::invalid("provider is NULL"))
}

impl<B> Instance<B> {
    fn device(&self, index: u32) -> Result<&Device<B>, ProviderError> {
        self.devices.get(index as usize).ok_or_else(|| {
            ProviderError::invalid(format!(
                "device index {index} out of range ({} device(s))",
                self.devices.len()
            ))
        })
    }
}

unsafe extern "C" fn create<B: Backend>(
    _options: *const vsdk_create_options_t,
    out: *mut *mut vsdk_provider_t,
) -> *mut vsdk_status_t {
    guard(|| {
        let out = non_null(out, "out")?;
        let (backends, description) = match B::open_all() {
            Ok(devices) if !devices.is_empty() => (devices, B::DESCRIPTION.to_string()),
            Ok(_) => (Vec::new(), format!("{} (no devices)", B::DESCRIPTION)),
            Err(reason) => (
                Vec::new(),
                format!("{} (no devices: {reason})", B::DESCRIPTION),
            ),
        };
        let devices = backends
            .into_iter()
            .map(|backend| {
                let info = backend.info();
                Device {
                    backend,
                    name: cstring(info.name),
                    driver_version: cstring(info.driver_version),
                    stable_id: cstring(info.stable_id),
                    memory_bytes: info.memory_bytes,
                    allocations: Allocations::default(),
                }
            })
            .collect();
        let instance = Box::new(Instance::<B> {
            devices,
            description: cstring(description),
            kernel_names: ALL_OPS.iter().map(|op| cstring(op.name())).collect(),
        });
        // SAFETY: `out` is non-NULL and writable per the ABI.
        unsafe { out.write(Box::into_raw(instance).cast()) };
        Ok(())
    })
}

unsafe extern "C" fn destroy<B: Backend>(p: *mut vsdk_provider_t) {
    let _ = guard(|| {
        if !p.is_null() {
            // SAFETY: `p` came from `create::<B>` and the host destroys it once.
            let instance = unsafe { Box::from_raw(p.cast::<Instance<B>>()) };
            // The host frees every buffer first; free what a broken host left.
            for d in &instance.devices {
                for ptr in d.allocations.drain() {
                    d.backend.free(ptr);
                }
            }
        }
        Ok(())
    });
}

unsafe extern "C" fn get_info<B: Backend>(
    p: *mut vsdk_provider_t,
    out: *mut vsdk_provider_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<B>(p)? };
        let out = non_null(out, "out")?;
        type I = vsdk_provider_info_t;
        // SAFETY: `out` is a host-owned struct whose struct_size the helper honours;
        // the strings live as long as the instance or the program.
        unsafe {
            write_field(out, offset_of!(I, name), B::NAME.as_ptr());
            write_field(out, offset_of!(I, vendor), B::VENDOR.as_ptr());
            write_field(out, offset_of!(I, version), VERSION.as_ptr());
            write_field(out, offset_of!(I, description), inst.description.as_ptr());
        }
        Ok(())
    })
}

unsafe extern "C" fn device_count<B: Backend>(
    p: *mut vsdk_provider_t,
    out: *mut u32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<B>(p)? };
        let n = u32::try_from(inst.devices.len()).unwrap_or(u32::MAX);
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out")?.write(n) };
        Ok(())
    })
}

unsafe extern "C" fn device_info<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u32,
    out: *mut vsdk_device_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let d = unsafe { instance::<B>(p)? }.device(index)?;
        let out = non_null(out, "out")?;
        type I = vsdk_device_info_t;
        let device = vsdk_device_t {
            device_type: B::DEVICE_TYPE,
            device_id: index as i32,
        };
        // SAFETY: `out` is a host-owned struct whose struct_size the helper honours;
        // the strings live as long as the instance.
        unsafe {
            write_field(out, offset_of!(I, device), device);
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

unsafe extern "C" fn kernel_count<B: Backend>(
    p: *mut vsdk_provider_t,
    out: *mut u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<B>(p)? };
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out")?.write(inst.kernel_names.len() as u64) };
        Ok(())
    })
}

unsafe extern "C" fn kernel_info<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u64,
    out: *mut vsdk_kernel_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<B>(p)? };
        let i = usize::try_from(index).ok().filter(|&i| i < ALL_OPS.len());
        let i =
            i.ok_or_else(|| ProviderError::invalid(format!("kernel index {index} out of range")))?;
        let out = non_null(out, "out")?;
        type I = vsdk_kernel_info_t;
        // SAFETY: host-owned struct, struct_size honoured; the name lives with the instance.
        unsafe {
            write_field(out, offset_of!(I, name), inst.kernel_names[i].as_ptr());
            write_field(out, offset_of!(I, version), ALL_OPS[i].version());
        }
        Ok(())
    })
}

unsafe extern "C" fn kernel_supports<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u32,
    kernel: *const c_char,
    version: u32,
    dtype: vsdk_dtype_t,
    out: *mut i32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        unsafe { instance::<B>(p)? }.device(index)?;
        let kernel = non_null(kernel.cast_mut(), "kernel")?;
        // SAFETY: non-NULL NUL-terminated string borrowed for the call.
        let name = unsafe { CStr::from_ptr(kernel) }.to_string_lossy();
        let supported = match (
            Op::lookup(&name, version),
            DType::from_dlpack(dtype.code, dtype.bits, dtype.lanes),
        ) {
            (Ok(op), Some(d)) => supports(op, d),
            _ => false,
        };
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out_supported")?.write(i32::from(supported)) };
        Ok(())
    })
}

unsafe extern "C" fn alloc<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u32,
    size: u64,
    alignment: u64,
    out: *mut *mut c_void,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let d = unsafe { instance::<B>(p)? }.device(index)?;
        let out = non_null(out, "out_ptr")?;
        if alignment > 256 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(ProviderError::invalid(format!(
                "alignment {alignment}: device buffers are 256-byte aligned; a power of two up to 256 is required"
            )));
        }
        let bytes = usize::try_from(size.max(1))
            .map_err(|_| ProviderError::out_of_memory(format!("cannot allocate {size} bytes")))?;
        let ptr = d.backend.alloc(bytes)?;
        d.allocations.insert(ptr, bytes);
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { out.write(ptr as usize as *mut c_void) };
        Ok(())
    })
}

unsafe extern "C" fn free<B: Backend>(p: *mut vsdk_provider_t, index: u32, ptr: *mut c_void) {
    let _ = guard(|| {
        // SAFETY: host contract.
        let d = unsafe { instance::<B>(p)? }.device(index)?;
        if d.allocations.remove(ptr as DevicePtr) {
            d.backend.free(ptr as DevicePtr);
        }
        Ok(())
    });
}

fn span(base: *const c_void, offset: u64, n: u64) -> Result<(DevicePtr, usize), ProviderError> {
    let addr = (base as DevicePtr)
        .checked_add(offset)
        .ok_or_else(|| ProviderError::invalid("offset overflows"))?;
    let n = usize::try_from(n).map_err(|_| ProviderError::invalid("size overflows"))?;
    Ok((addr, n))
}

unsafe extern "C" fn copy_to_device<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    dst_offset: u64,
    src: *const c_void,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let d = unsafe { instance::<B>(p)? }.device(index)?;
        let (dst, n) = span(dst, dst_offset, n)?;
        d.allocations.check(dst, n, "copy_to_device destination")?;
        let src = non_null(src.cast_mut(), "src")?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: host memory valid for n bytes per the ABI, borrowed for the call.
        let src = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) };
        d.backend.copy_to_device(dst, src)
    })
}

unsafe extern "C" fn copy_to_host<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    src: *const c_void,
    src_offset: u64,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let d = unsafe { instance::<B>(p)? }.device(index)?;
        let (src, n) = span(src, src_offset, n)?;
        d.allocations.check(src, n, "copy_to_host source")?;
        let dst = non_null(dst, "dst")?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: host memory valid for n bytes per the ABI, not aliased during the call.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), n) };
        d.backend.copy_to_host(dst, src)
    })
}

unsafe extern "C" fn copy_on_device<B: Backend>(
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
        let d = unsafe { instance::<B>(p)? }.device(index)?;
        let (src, _) = span(src, src_offset, 0)?;
        let (dst, n) = span(dst, dst_offset, n)?;
        d.allocations.check(src, n, "copy_on_device source")?;
        d.allocations.check(dst, n, "copy_on_device destination")?;
        if n == 0 {
            return Ok(());
        }
        d.backend.copy_on_device(dst, src, n)
    })
}

unsafe extern "C" fn synchronize<B: Backend>(
    p: *mut vsdk_provider_t,
    index: u32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        unsafe { instance::<B>(p)? }
            .device(index)?
            .backend
            .synchronize()
    })
}

unsafe extern "C" fn execute<B: Backend>(
    p: *mut vsdk_provider_t,
    call: *const vsdk_kernel_call_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance::<B>(p)? };
        // SAFETY: host contract: the call and everything it points to is valid for the call.
        let call = unsafe { KernelCall::from_raw(call)? };
        let d = inst.device(call.device_index)?;
        let op = Op::lookup(&call.kernel, call.version)?;
        let specs: Vec<_> = call.inputs.iter().map(TensorArg::spec).collect();
        let (node, expected) = Node::infer(op, &call.attrs, &specs)?;
        call.check_outputs(&expected)?;
        for (what, t) in call
            .inputs
            .iter()
            .map(|t| ("input", t))
            .chain(call.outputs.iter().map(|t| ("output", t)))
        {
            check_tensor::<B>(d, call.device_index, &call.kernel, what, t)?;
            if !supports(op, t.dtype) {
                return Err(ProviderError::unsupported(format!(
                    "{}: {what} dtype {} is not supported by the {} provider",
                    call.kernel,
                    t.dtype,
                    B::NAME.to_string_lossy()
                )));
            }
        }
        ops::run(&d.backend, &node, &call.inputs, &call.outputs)
    })
}

fn check_tensor<B: Backend>(
    d: &Device<B>,
    index: u32,
    kernel: &str,
    what: &str,
    t: &TensorArg,
) -> Result<(), ProviderError> {
    if t.device.device_type != B::DEVICE_TYPE || t.device.device_id != index as i32 {
        return Err(ProviderError::invalid(format!(
            "{kernel}: {what} lives on device ({}, {}), not this provider's device ({}, {index})",
            t.device.device_type,
            t.device.device_id,
            B::DEVICE_TYPE
        )));
    }
    if !(t.ptr as usize).is_multiple_of(t.dtype.size_bytes()) {
        return Err(ProviderError::invalid(format!(
            "{kernel}: {what} data is not aligned for {}",
            t.dtype
        )));
    }
    let extent = t
        .extent_bytes()
        .ok_or_else(|| ProviderError::invalid(format!("{kernel}: {what} extent overflows")))?;
    if extent > 0 {
        d.allocations
            .check(t.ptr as DevicePtr, extent, &format!("{kernel}: {what}"))?;
    }
    Ok(())
}
