//! What a GPU provider implements per device API (CUDA driver, HIP, the CPU
//! SIMT emulation): memory, copies, and launching a kernel of
//! [`crate::KERNEL_SOURCE`] by name. Everything else (the C ABI, checking
//! calls against the catalog and against live buffers, choosing kernels and
//! launch shapes) is shared and lives in this crate, so the emulated provider
//! tests the very code the real ones run.

use std::ffi::{c_void, CStr};
use vsdk_provider_kit::ProviderError;

/// A device address, as kernels see it (a `CUdeviceptr`, a HIP device
/// pointer, or a host address under emulation).
pub type DevicePtr = u64;

/// What `device_info` reports about one device.
#[derive(Debug, Clone)]
pub struct DeviceInfo {
    pub name: String,
    pub driver_version: String,
    /// Stable across runs and reboots (the GPU's UUID), never an index.
    pub stable_id: String,
    pub memory_bytes: u64,
}

/// The element type of a GEMM handed to a vendor library.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GemmType {
    F32,
    F16,
    BF16,
}

/// `out[m, n] = Σ_k x[m, k] · w[n, k]` (+ `bias[n]`), row-major, compact:
/// the catalog's `vsdk.linear` with the leading dimensions of `x` folded into `m`.
#[derive(Debug, Clone, Copy)]
pub struct Gemm {
    pub dtype: GemmType,
    pub x: DevicePtr,
    pub w: DevicePtr,
    pub bias: Option<DevicePtr>,
    pub out: DevicePtr,
    pub m: usize,
    pub n: usize,
    pub k: usize,
}

/// One device API. A value is one device, opened.
pub trait Backend: Sized + Send + Sync + 'static {
    /// `get_info`'s name (the provider's file is `libvsdk_provider_<name>.so`).
    const NAME: &'static CStr;
    const VENDOR: &'static CStr;
    /// One line; when there are no devices the reason is appended to it.
    const DESCRIPTION: &'static str;
    /// `VSDK_DEVICE_CUDA`, `VSDK_DEVICE_ROCM`, or `VSDK_DEVICE_CPU` for an
    /// emulation whose device memory is host memory.
    const DEVICE_TYPE: i32;

    /// Loads the driver and opens every device. `Err` says why there are none
    /// (no driver library, no device, a driver too old): the provider then
    /// loads, reports zero devices and that reason, and never crashes.
    fn open_all() -> Result<Vec<Self>, String>;

    fn info(&self) -> DeviceInfo;

    /// `bytes > 0`. The address is aligned to at least 256 bytes.
    fn alloc(&self, bytes: usize) -> Result<DevicePtr, ProviderError>;
    /// Frees an address `alloc` returned (the caller tracks which).
    fn free(&self, ptr: DevicePtr);

    /// The ranges are inside live allocations (checked by the caller).
    fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), ProviderError>;
    fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), ProviderError>;
    /// May overlap.
    fn copy_on_device(&self, dst: DevicePtr, src: DevicePtr, n: usize)
        -> Result<(), ProviderError>;
    /// Waits for everything queued on this device.
    fn synchronize(&self) -> Result<(), ProviderError>;

    /// Launches `kernel` (an `extern "C"` name in the kernel source) with
    /// `params[i]` pointing at the i-th argument's value, as `cuLaunchKernel`
    /// takes them, and `param_sizes[i]` its size in bytes (CUDA and HIP know
    /// the kernel's signature from the compiled module; the SIMT emulation
    /// checks each size against it, so a launch whose integer widths do not
    /// match the source fails in the tests instead of corrupting memory on a
    /// GPU). The source is compiled for this device on first use and kept.
    /// Launches on one device run in order.
    ///
    /// # Safety
    /// `params` matches the kernel's parameter list in number and types, and
    /// every device pointer among the values is inside a live allocation
    /// sized for what the kernel reads and writes.
    unsafe fn launch(
        &self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &[*mut c_void],
        param_sizes: &[usize],
    ) -> Result<(), ProviderError>;

    /// A vendor GEMM (cuBLAS) when the device has one and supports `g.dtype`;
    /// `None` runs the kernel source's own tiled GEMM.
    fn gemm(&self, g: &Gemm) -> Option<Result<(), ProviderError>> {
        let _ = g;
        None
    }
}
