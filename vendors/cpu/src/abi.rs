//! The CPU provider behind the provider ABI: one device, host memory. The C
//! entry points, their NULL checks and panic guard are the kit's
//! ([`vsdk_provider_kit::table`]); this file checks every call against the
//! catalog and the provider's own buffers before a kernel sees it.

use crate::device::DeviceInfo;
use crate::kernels;
use crate::memory::Allocations;
use std::ffi::{c_void, CStr};
use vsdk_catalog::{DType, Node, Op};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{DeviceDescription, KernelCall, Provider, ProviderError, TensorArg};

pub struct Cpu {
    allocations: Allocations,
    device: DeviceInfo,
}

vsdk_provider_kit::export_provider!(Cpu);

impl Provider for Cpu {
    const NAME: &'static CStr = c"cpu";
    const VENDOR: &'static CStr = c"VIPS SDK reference";
    const VERSION: &'static CStr = vsdk_provider_kit::package_version!();

    fn create() -> Result<Self, ProviderError> {
        Ok(Cpu {
            allocations: Allocations::default(),
            device: DeviceInfo::probe(),
        })
    }

    fn description(&self) -> &CStr {
        c"CPU reference provider: f64/f32/f16/bf16, multithreaded (rayon, gemm)"
    }

    fn device_count(&self) -> u32 {
        1
    }

    fn check_device(&self, index: u32) -> Result<(), ProviderError> {
        if index == 0 {
            Ok(())
        } else {
            Err(ProviderError::invalid(format!(
                "device index {index} out of range (1 device)"
            )))
        }
    }

    fn device_info(&self, index: u32) -> Result<DeviceDescription<'_>, ProviderError> {
        self.check_device(index)?;
        let d = &self.device;
        Ok(DeviceDescription {
            device: vsdk_device_t {
                device_type: VSDK_DEVICE_CPU,
                device_id: 0,
            },
            name: &d.name,
            driver_version: &d.driver_version,
            stable_id: &d.stable_id,
            memory_bytes: d.memory_bytes,
        })
    }

    fn supports(&self, _index: u32, op: Op, dtype: DType) -> bool {
        op.dtypes().contains(&dtype)
    }

    fn alloc(&self, _index: u32, size: u64, alignment: u64) -> Result<*mut c_void, ProviderError> {
        Ok(self.allocations.alloc(size, alignment)?.cast())
    }

    fn free(&self, _index: u32, ptr: *mut c_void) {
        self.allocations.free(ptr.cast());
    }

    unsafe fn copy_to_device(
        &self,
        _index: u32,
        dst: usize,
        src: *const c_void,
        n: usize,
    ) -> Result<(), ProviderError> {
        let dst = dst as *mut u8;
        self.allocations
            .check(dst, n, "copy_to_device destination")?;
        // SAFETY: dst checked inside a live buffer; src is valid for n bytes per the
        // caller's contract. `copy`: a host may pass one of our buffers as src.
        unsafe { std::ptr::copy(src.cast::<u8>(), dst, n) };
        Ok(())
    }

    unsafe fn copy_to_host(
        &self,
        _index: u32,
        dst: *mut c_void,
        src: usize,
        n: usize,
    ) -> Result<(), ProviderError> {
        let src = src as *const u8;
        self.allocations.check(src, n, "copy_to_host source")?;
        // SAFETY: src checked inside a live buffer; dst is valid for n bytes per the
        // caller's contract. `copy`: a host may pass one of our buffers as dst.
        unsafe { std::ptr::copy(src, dst.cast::<u8>(), n) };
        Ok(())
    }

    fn copy_on_device(
        &self,
        _index: u32,
        dst: usize,
        src: usize,
        n: usize,
    ) -> Result<(), ProviderError> {
        let (src, dst) = (src as *const u8, dst as *mut u8);
        self.allocations.check(src, n, "copy_on_device source")?;
        self.allocations
            .check(dst, n, "copy_on_device destination")?;
        // SAFETY: both ranges lie in live buffers; `copy` tolerates overlap.
        unsafe { std::ptr::copy(src, dst, n) };
        Ok(())
    }

    fn synchronize(&self, _index: u32) -> Result<(), ProviderError> {
        // Kernels run synchronously: nothing is ever pending.
        Ok(())
    }

    fn execute(&self, call: KernelCall) -> Result<(), ProviderError> {
        let op = Op::lookup(&call.kernel, call.version)?;
        let specs: Vec<_> = call.inputs.iter().map(TensorArg::spec).collect();
        let (node, expected) = Node::infer(op, &call.attrs, &specs)?;
        call.check_outputs(&expected)?;
        for (what, t) in call.tensors() {
            self.check_tensor(&call.kernel, what, t)?;
        }
        kernels::run(&node, &call.inputs, &call.outputs)
    }
}

impl Cpu {
    fn check_tensor(&self, kernel: &str, what: &str, t: &TensorArg) -> Result<(), ProviderError> {
        let here = vsdk_device_t {
            device_type: VSDK_DEVICE_CPU,
            device_id: 0,
        };
        let extent = t.check_placement(here, kernel, what)?;
        if extent > 0 {
            self.allocations
                .check(t.ptr, extent, &format!("{kernel}: {what}"))?;
        }
        Ok(())
    }
}
