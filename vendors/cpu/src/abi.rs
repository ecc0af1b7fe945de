//! The C face of the CPU provider: the entry point and the function table.
//! Every function runs its body inside `guard`, so no panic crosses into the host.

use crate::device::DeviceInfo;
use crate::kernels;
use crate::memory::Allocations;
use std::ffi::{c_char, c_void, CStr};
use std::mem::offset_of;
use vsdk_catalog::{DType, Node, Op, ALL_OPS};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{guard, non_null, write_field, KernelCall, ProviderError, TensorArg};

struct Instance {
    allocations: Allocations,
    device: DeviceInfo,
    kernel_names: Vec<std::ffi::CString>,
}

const NAME: &CStr = c"cpu";
const VENDOR: &CStr = c"VIPS SDK reference";
const DESCRIPTION: &CStr = c"CPU reference provider: f64/f32/f16/bf16, multithreaded (rayon, gemm)";
const VERSION: &CStr = {
    match CStr::from_bytes_with_nul(concat!(env!("CARGO_PKG_VERSION"), "\0").as_bytes()) {
        Ok(v) => v,
        Err(_) => panic!("package version contains NUL"),
    }
};

static TABLE: vsdk_provider_api_t = vsdk_provider_api_t {
    struct_size: std::mem::size_of::<vsdk_provider_api_t>(),
    abi_version: VSDK_ABI_VERSION,
    concurrency: VSDK_CONCURRENCY_THREAD_SAFE,
    status_code: Some(vsdk_provider_kit::status_code),
    status_message: Some(vsdk_provider_kit::status_message),
    status_destroy: Some(vsdk_provider_kit::status_destroy),
    create: Some(create),
    destroy: Some(destroy),
    get_info: Some(get_info),
    device_count: Some(device_count),
    device_info: Some(device_info),
    kernel_count: Some(kernel_count),
    kernel_info: Some(kernel_info),
    kernel_supports: Some(kernel_supports),
    alloc: Some(alloc),
    free: Some(free),
    copy_to_device: Some(copy_to_device),
    copy_to_host: Some(copy_to_host),
    synchronize: Some(synchronize),
    execute: Some(execute),
    copy_on_device: Some(copy_on_device),
};

/// The provider's entry point (`VSDK_ENTRY_SYMBOL`).
///
/// # Safety
/// `provider_abi_version` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn vsdk_get_provider_api(
    host_abi_version: u32,
    provider_abi_version: *mut u32,
) -> *const vsdk_provider_api_t {
    // SAFETY: forwarded caller contract.
    unsafe { vsdk_provider_kit::negotiate(host_abi_version, provider_abi_version, &TABLE) }
}

/// # Safety
/// `p` is NULL or an instance from `create` that is still alive.
unsafe fn instance<'a>(p: *mut vsdk_provider_t) -> Result<&'a Instance, ProviderError> {
    // SAFETY: per the contract, a non-NULL pointer is a live Instance.
    unsafe { p.cast::<Instance>().as_ref() }
        .ok_or_else(|| ProviderError::invalid("provider is NULL"))
}

fn check_device(index: u32) -> Result<(), ProviderError> {
    if index == 0 {
        Ok(())
    } else {
        Err(ProviderError::invalid(format!(
            "device index {index} out of range (1 device)"
        )))
    }
}

unsafe extern "C" fn create(
    _options: *const vsdk_create_options_t,
    out: *mut *mut vsdk_provider_t,
) -> *mut vsdk_status_t {
    guard(|| {
        let out = non_null(out, "out")?;
        let instance = Box::new(Instance {
            allocations: Allocations::default(),
            device: DeviceInfo::probe(),
            kernel_names: ALL_OPS
                .iter()
                .map(|op| std::ffi::CString::new(op.name()).expect("catalog names have no NUL"))
                .collect(),
        });
        // SAFETY: `out` is non-NULL and writable per the ABI.
        unsafe { out.write(Box::into_raw(instance).cast()) };
        Ok(())
    })
}

unsafe extern "C" fn destroy(p: *mut vsdk_provider_t) {
    let _ = guard(|| {
        if !p.is_null() {
            // SAFETY: `p` came from `create` and the host destroys it once.
            drop(unsafe { Box::from_raw(p.cast::<Instance>()) });
        }
        Ok(())
    });
}

unsafe extern "C" fn get_info(
    p: *mut vsdk_provider_t,
    out: *mut vsdk_provider_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        unsafe { instance(p)? };
        let out = non_null(out, "out")?;
        type I = vsdk_provider_info_t;
        // SAFETY: `out` is a host-owned struct whose struct_size the helper honours.
        unsafe {
            write_field(out, offset_of!(I, name), NAME.as_ptr());
            write_field(out, offset_of!(I, vendor), VENDOR.as_ptr());
            write_field(out, offset_of!(I, version), VERSION.as_ptr());
            write_field(out, offset_of!(I, description), DESCRIPTION.as_ptr());
        }
        Ok(())
    })
}

unsafe extern "C" fn device_count(p: *mut vsdk_provider_t, out: *mut u32) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        unsafe { instance(p)? };
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out")?.write(1) };
        Ok(())
    })
}

unsafe extern "C" fn device_info(
    p: *mut vsdk_provider_t,
    index: u32,
    out: *mut vsdk_device_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        check_device(index)?;
        let out = non_null(out, "out")?;
        let d = &inst.device;
        type I = vsdk_device_info_t;
        let device = vsdk_device_t {
            device_type: VSDK_DEVICE_CPU,
            device_id: 0,
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

unsafe extern "C" fn kernel_count(p: *mut vsdk_provider_t, out: *mut u64) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out")?.write(inst.kernel_names.len() as u64) };
        Ok(())
    })
}

unsafe extern "C" fn kernel_info(
    p: *mut vsdk_provider_t,
    index: u64,
    out: *mut vsdk_kernel_info_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        let i = usize::try_from(index).ok().filter(|&i| i < ALL_OPS.len());
        let i =
            i.ok_or_else(|| ProviderError::invalid(format!("kernel index {index} out of range")))?;
        let out = non_null(out, "out")?;
        type I = vsdk_kernel_info_t;
        // SAFETY: host-owned struct, struct_size honoured; name lives with the instance.
        unsafe {
            write_field(out, offset_of!(I, name), inst.kernel_names[i].as_ptr());
            write_field(out, offset_of!(I, version), ALL_OPS[i].version());
        }
        Ok(())
    })
}

unsafe extern "C" fn kernel_supports(
    p: *mut vsdk_provider_t,
    index: u32,
    kernel: *const c_char,
    version: u32,
    dtype: vsdk_dtype_t,
    out: *mut i32,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        unsafe { instance(p)? };
        check_device(index)?;
        let kernel = non_null(kernel.cast_mut(), "kernel")?;
        // SAFETY: non-NULL NUL-terminated string borrowed for the call.
        let name = unsafe { CStr::from_ptr(kernel) }.to_string_lossy();
        let supported = match (
            Op::lookup(&name, version),
            DType::from_dlpack(dtype.code, dtype.bits, dtype.lanes),
        ) {
            (Ok(op), Some(d)) => op.dtypes().contains(&d),
            _ => false,
        };
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { non_null(out, "out_supported")?.write(i32::from(supported)) };
        Ok(())
    })
}

unsafe extern "C" fn alloc(
    p: *mut vsdk_provider_t,
    index: u32,
    size: u64,
    alignment: u64,
    out: *mut *mut c_void,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        check_device(index)?;
        let out = non_null(out, "out_ptr")?;
        let ptr = inst.allocations.alloc(size, alignment)?;
        // SAFETY: non-NULL, writable per the ABI.
        unsafe { out.write(ptr.cast()) };
        Ok(())
    })
}

unsafe extern "C" fn free(p: *mut vsdk_provider_t, _index: u32, ptr: *mut c_void) {
    let _ = guard(|| {
        // SAFETY: host contract.
        unsafe { instance(p)? }.allocations.free(ptr.cast());
        Ok(())
    });
}

fn offset_ptr(base: *const c_void, offset: u64) -> Result<*const u8, ProviderError> {
    let offset = usize::try_from(offset).map_err(|_| ProviderError::invalid("offset overflows"))?;
    Ok(base.cast::<u8>().wrapping_add(offset))
}

fn size(n: u64) -> Result<usize, ProviderError> {
    usize::try_from(n).map_err(|_| ProviderError::invalid("size overflows"))
}

unsafe extern "C" fn copy_to_device(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    dst_offset: u64,
    src: *const c_void,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        check_device(index)?;
        let (dst, n) = (offset_ptr(dst, dst_offset)?.cast_mut(), size(n)?);
        inst.allocations
            .check(dst, n, "copy_to_device destination")?;
        non_null(src.cast_mut(), "src")?;
        // SAFETY: dst checked inside a live buffer; src is host memory valid for n
        // bytes per the ABI; the host's buffer and ours never overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.cast::<u8>(), dst, n) };
        Ok(())
    })
}

unsafe extern "C" fn copy_to_host(
    p: *mut vsdk_provider_t,
    index: u32,
    dst: *mut c_void,
    src: *const c_void,
    src_offset: u64,
    n: u64,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        check_device(index)?;
        let (src, n) = (offset_ptr(src, src_offset)?, size(n)?);
        inst.allocations.check(src, n, "copy_to_host source")?;
        let dst = non_null(dst, "dst")?;
        // SAFETY: src checked inside a live buffer; dst is host memory valid for n bytes.
        unsafe { std::ptr::copy_nonoverlapping(src, dst.cast::<u8>(), n) };
        Ok(())
    })
}

unsafe extern "C" fn copy_on_device(
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
        let inst = unsafe { instance(p)? };
        check_device(index)?;
        let (src, dst, n) = (
            offset_ptr(src, src_offset)?,
            offset_ptr(dst, dst_offset)?.cast_mut(),
            size(n)?,
        );
        inst.allocations.check(src, n, "copy_on_device source")?;
        inst.allocations
            .check(dst, n, "copy_on_device destination")?;
        // SAFETY: both ranges lie in live buffers; `copy` tolerates overlap.
        unsafe { std::ptr::copy(src, dst, n) };
        Ok(())
    })
}

unsafe extern "C" fn synchronize(p: *mut vsdk_provider_t, index: u32) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        unsafe { instance(p)? };
        // Kernels run synchronously: nothing is ever pending.
        check_device(index)
    })
}

unsafe extern "C" fn execute(
    p: *mut vsdk_provider_t,
    call: *const vsdk_kernel_call_t,
) -> *mut vsdk_status_t {
    guard(|| {
        // SAFETY: host contract.
        let inst = unsafe { instance(p)? };
        // SAFETY: host contract: the call and everything it points to is valid for the call.
        let call = unsafe { KernelCall::from_raw(call)? };
        check_device(call.device_index)?;
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
            check_tensor(inst, &call.kernel, what, t)?;
        }
        kernels::run(&node, &call.inputs, &call.outputs)
    })
}

fn check_tensor(
    inst: &Instance,
    kernel: &str,
    what: &str,
    t: &TensorArg,
) -> Result<(), ProviderError> {
    if t.device.device_type != VSDK_DEVICE_CPU || t.device.device_id != 0 {
        return Err(ProviderError::invalid(format!(
            "{kernel}: {what} lives on device ({}, {}), not this CPU device",
            t.device.device_type, t.device.device_id
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
        inst.allocations
            .check(t.ptr, extent, &format!("{kernel}: {what}"))?;
    }
    Ok(())
}
