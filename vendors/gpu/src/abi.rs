//! A GPU provider behind the provider ABI: [`GpuProvider`] over any
//! [`Backend`]. The C entry points are the kit's ([`vsdk_provider_kit::table`]);
//! here every tensor is checked against the catalog and against this
//! instance's live device buffers before a kernel sees its address.

use crate::backend::{Backend, DevicePtr};
use crate::memory::Allocations;
use crate::ops;
use std::ffi::{c_void, CStr, CString};
use vsdk_catalog::{DType, Node, Op};
use vsdk_provider_kit::ffi::vsdk_device_t;
use vsdk_provider_kit::{DeviceDescription, KernelCall, Provider, ProviderError, TensorArg};

/// Defines `vsdk_get_provider_api`, the provider's entry point, for a
/// [`Backend`] type: one line in the provider crate's `lib.rs`.
#[macro_export]
macro_rules! export_provider {
    ($backend:ty) => {
        $crate::kit::export_provider!($crate::GpuProvider<$backend>);
    };
}

/// One opened device and what the instance reports and tracks for it.
struct Device<B: Backend> {
    backend: B,
    name: CString,
    driver_version: CString,
    stable_id: CString,
    memory_bytes: u64,
    allocations: Allocations,
}

/// A provider instance over the devices backend `B` opened.
pub struct GpuProvider<B: Backend> {
    devices: Vec<Device<B>>,
    /// The backend's description, with the reason when there is no device.
    description: CString,
}

fn cstring(s: impl Into<String>) -> CString {
    CString::new(s.into().replace('\0', " ")).unwrap_or_default()
}

/// The operators' dtypes on these kernels: float math in f32, f16 and bf16
/// (no float64 on GPUs), casts among the types the kernels load and store,
/// data movement on any dtype (a copy of 1, 2, 4 or 8 bytes), sparse
/// coordinates in int32, rasterization of float32 positions.
pub fn supports(op: Op, dtype: DType) -> bool {
    let kernel_types = [DType::U8, DType::F16, DType::BF16, DType::F32];
    op.dtypes().contains(&dtype)
        && match op {
            Op::Crop
            | Op::Pad
            | Op::Concat
            | Op::Reshape
            | Op::Permute
            | Op::GatherRows
            | Op::RepeatRows
            | Op::SparseDownsampleCoords
            | Op::SparseDownsampleIndex
            | Op::SparseSubdivideCoords => true,
            // From int32 to the float types (sparse coordinates as numbers).
            Op::Cast => kernel_types.contains(&dtype) || dtype == DType::I32,
            Op::ResizePilBicubic | Op::ResizePilLanczos => kernel_types.contains(&dtype),
            // Positions in float32 (window coordinates need its bits);
            // interpolate, like the float math below, in f32, f16 and bf16.
            Op::Rasterize => dtype == DType::F32,
            _ => dtype != DType::F64,
        }
}

impl<B: Backend> GpuProvider<B> {
    fn device(&self, index: u32) -> Result<&Device<B>, ProviderError> {
        self.devices.get(index as usize).ok_or_else(|| {
            ProviderError::invalid(format!(
                "device index {index} out of range ({} device(s))",
                self.devices.len()
            ))
        })
    }
}

impl<B: Backend> Drop for GpuProvider<B> {
    fn drop(&mut self) {
        // The host frees every buffer first; free what a broken host left.
        for d in &self.devices {
            for ptr in d.allocations.drain() {
                d.backend.free(ptr);
            }
        }
    }
}

impl<B: Backend> Provider for GpuProvider<B> {
    const NAME: &'static CStr = B::NAME;
    const VENDOR: &'static CStr = B::VENDOR;
    const VERSION: &'static CStr = vsdk_provider_kit::package_version!();

    fn create() -> Result<Self, ProviderError> {
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
        Ok(GpuProvider {
            devices,
            description: cstring(description),
        })
    }

    fn description(&self) -> &CStr {
        &self.description
    }

    fn device_count(&self) -> u32 {
        u32::try_from(self.devices.len()).unwrap_or(u32::MAX)
    }

    fn check_device(&self, index: u32) -> Result<(), ProviderError> {
        self.device(index).map(|_| ())
    }

    fn device_info(&self, index: u32) -> Result<DeviceDescription<'_>, ProviderError> {
        let d = self.device(index)?;
        Ok(DeviceDescription {
            device: vsdk_device_t {
                device_type: B::DEVICE_TYPE,
                device_id: index as i32,
            },
            name: &d.name,
            driver_version: &d.driver_version,
            stable_id: &d.stable_id,
            memory_bytes: d.memory_bytes,
        })
    }

    fn supports(&self, _index: u32, op: Op, dtype: DType) -> bool {
        supports(op, dtype)
    }

    fn alloc(&self, index: u32, size: u64, alignment: u64) -> Result<*mut c_void, ProviderError> {
        let d = self.device(index)?;
        if alignment > 256 || (alignment != 0 && !alignment.is_power_of_two()) {
            return Err(ProviderError::invalid(format!(
                "alignment {alignment}: device buffers are 256-byte aligned; a power of two up to 256 is required"
            )));
        }
        let bytes = usize::try_from(size.max(1))
            .map_err(|_| ProviderError::out_of_memory(format!("cannot allocate {size} bytes")))?;
        let ptr = d.backend.alloc(bytes)?;
        d.allocations.insert(ptr, bytes);
        Ok(ptr as usize as *mut c_void)
    }

    fn free(&self, index: u32, ptr: *mut c_void) {
        if let Ok(d) = self.device(index) {
            if d.allocations.remove(ptr as DevicePtr) {
                d.backend.free(ptr as DevicePtr);
            }
        }
    }

    unsafe fn copy_to_device(
        &self,
        index: u32,
        dst: usize,
        src: *const c_void,
        n: usize,
    ) -> Result<(), ProviderError> {
        let d = self.device(index)?;
        let dst = dst as DevicePtr;
        d.allocations.check(dst, n, "copy_to_device destination")?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: host memory valid for n bytes per the caller's contract, borrowed for the call.
        let src = unsafe { std::slice::from_raw_parts(src.cast::<u8>(), n) };
        d.backend.copy_to_device(dst, src)
    }

    unsafe fn copy_to_host(
        &self,
        index: u32,
        dst: *mut c_void,
        src: usize,
        n: usize,
    ) -> Result<(), ProviderError> {
        let d = self.device(index)?;
        let src = src as DevicePtr;
        d.allocations.check(src, n, "copy_to_host source")?;
        if n == 0 {
            return Ok(());
        }
        // SAFETY: host memory valid for n bytes per the caller's contract, not aliased during the call.
        let dst = unsafe { std::slice::from_raw_parts_mut(dst.cast::<u8>(), n) };
        d.backend.copy_to_host(dst, src)
    }

    fn copy_on_device(
        &self,
        index: u32,
        dst: usize,
        src: usize,
        n: usize,
    ) -> Result<(), ProviderError> {
        let d = self.device(index)?;
        let (src, dst) = (src as DevicePtr, dst as DevicePtr);
        d.allocations.check(src, n, "copy_on_device source")?;
        d.allocations.check(dst, n, "copy_on_device destination")?;
        if n == 0 {
            return Ok(());
        }
        d.backend.copy_on_device(dst, src, n)
    }

    fn synchronize(&self, index: u32) -> Result<(), ProviderError> {
        self.device(index)?.backend.synchronize()
    }

    fn execute(&self, call: KernelCall) -> Result<(), ProviderError> {
        let d = self.device(call.device_index)?;
        let op = Op::lookup(&call.kernel, call.version)?;
        let specs: Vec<_> = call.inputs.iter().map(TensorArg::spec).collect();
        let (node, expected) = Node::infer(op, &call.attrs, &specs)?;
        call.check_outputs(&expected)?;
        for (i, (what, t)) in call.tensors().enumerate() {
            check_tensor::<B>(d, call.device_index, &call.kernel, what, t)?;
            // The first input and the outputs carry the kernel's dtypes; the
            // catalog fixed the rest (the same, or a sparse op's int32
            // coordinates and indices).
            let data = i == 0 || what == "output";
            if data && !supports(op, t.dtype) {
                return Err(ProviderError::unsupported(format!(
                    "{}: {what} dtype {} is not supported by the {} provider",
                    call.kernel,
                    t.dtype,
                    B::NAME.to_string_lossy()
                )));
            }
        }
        ops::run(&d.backend, &node, &call.inputs, &call.outputs)
    }
}

fn check_tensor<B: Backend>(
    d: &Device<B>,
    index: u32,
    kernel: &str,
    what: &str,
    t: &TensorArg,
) -> Result<(), ProviderError> {
    let here = vsdk_device_t {
        device_type: B::DEVICE_TYPE,
        device_id: index as i32,
    };
    let extent = t.check_placement(here, kernel, what)?;
    if extent > 0 {
        d.allocations
            .check(t.ptr as DevicePtr, extent, &format!("{kernel}: {what}"))?;
    }
    Ok(())
}
