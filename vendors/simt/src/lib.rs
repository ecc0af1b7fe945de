//! The GPU providers' kernel source and host code, run on the CPU: each
//! launch's blocks go to a few OS threads, a block's threads run as fibers
//! switched at `__syncthreads` and warp shuffles (`emulator/simt.cpp`).
//! Device memory is host memory. As a provider (`libvsdk_provider_simt.so`)
//! it runs the conformance suites through the ABI on the very kernels and
//! launch code the CUDA and HIP providers use, on a machine without a GPU.

use std::alloc::Layout;
use std::collections::HashMap;
use std::ffi::{c_char, c_void, CStr, CString};
use std::sync::Mutex;
use vsdk_gpu::{Backend, DeviceInfo, DevicePtr};
use vsdk_provider_kit::ProviderError;

extern "C" {
    fn vips_simt_launch(
        name: *const c_char,
        grid: *const u32,
        block: *const u32,
        shared_bytes: u32,
        params: *const *mut c_void,
        param_sizes: *const usize,
        n_params: usize,
        max_threads: u32,
        error: *mut c_char,
        error_len: usize,
    ) -> i32;
    fn vips_simt_kernel_count() -> usize;
    fn vips_simt_kernel_name(i: usize) -> *const c_char;
}

/// Device buffers' alignment, as `cudaMalloc` gives.
const ALIGN: usize = 256;

/// The emulated device: host memory, and the launch's worker threads.
pub struct Simt {
    buffers: Mutex<HashMap<DevicePtr, Layout>>,
    threads: u32,
}

/// The kernels the emulator's registry holds (every `VIPS_REGISTER` of the source).
pub fn registered_kernels() -> Vec<String> {
    // SAFETY: the registry is filled by static constructors before any Rust
    // code runs and never changes; names are NUL-terminated and static.
    unsafe {
        (0..vips_simt_kernel_count())
            .filter_map(|i| {
                let p = vips_simt_kernel_name(i);
                (!p.is_null()).then(|| CStr::from_ptr(p).to_string_lossy().into_owned())
            })
            .collect()
    }
}

impl Simt {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<DevicePtr, Layout>> {
        // Single inserts and removes: a poisoned map is still consistent.
        self.buffers.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Backend for Simt {
    const NAME: &'static CStr = c"simt";
    const VENDOR: &'static CStr = c"VIPS SDK reference";
    const DESCRIPTION: &'static str = "the CUDA/HIP kernel source on the CPU under a SIMT emulation (tests the GPU providers without a GPU)";
    const DEVICE_TYPE: i32 = vsdk_provider_kit::ffi::VSDK_DEVICE_CPU;

    fn open_all() -> Result<Vec<Self>, String> {
        #[cfg(simt_fma)]
        if !std::arch::is_x86_feature_detected!("fma") {
            return Err(
                "this build of the emulator uses FMA instructions (built on a CPU with them), \
                 and this CPU has none: rebuild vsdk-provider-simt here"
                    .into(),
            );
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(vec![Simt {
            buffers: Mutex::default(),
            threads: u32::try_from(threads).unwrap_or(1),
        }])
    }

    fn info(&self) -> DeviceInfo {
        DeviceInfo {
            name: format!("SIMT emulation on the CPU ({} threads)", self.threads),
            driver_version: format!("vsdk-provider-simt {}", env!("CARGO_PKG_VERSION")),
            stable_id: format!("simt:{}", std::env::consts::ARCH),
            memory_bytes: 0,
        }
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, ProviderError> {
        let layout = Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|_| ProviderError::out_of_memory(format!("cannot allocate {bytes} bytes")))?;
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { std::alloc::alloc(layout) };
        if p.is_null() {
            return Err(ProviderError::out_of_memory(format!(
                "allocation of {bytes} bytes failed"
            )));
        }
        self.lock().insert(p as DevicePtr, layout);
        Ok(p as DevicePtr)
    }

    fn free(&self, ptr: DevicePtr) {
        if let Some(layout) = self.lock().remove(&ptr) {
            // SAFETY: allocated by `alloc` with this layout, removed from the map: freed once.
            unsafe { std::alloc::dealloc(ptr as usize as *mut u8, layout) };
        }
    }

    fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), ProviderError> {
        // SAFETY: the caller checked dst..dst+len inside a live buffer (host
        // memory here). `copy`: a host may pass one of our buffers as src.
        unsafe { std::ptr::copy(src.as_ptr(), dst as usize as *mut u8, src.len()) };
        Ok(())
    }

    fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), ProviderError> {
        // SAFETY: as copy_to_device, the other way.
        unsafe { std::ptr::copy(src as usize as *const u8, dst.as_mut_ptr(), dst.len()) };
        Ok(())
    }

    fn copy_on_device(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        n: usize,
    ) -> Result<(), ProviderError> {
        // SAFETY: both ranges checked inside live buffers; `copy` allows overlap.
        unsafe { std::ptr::copy(src as usize as *const u8, dst as usize as *mut u8, n) };
        Ok(())
    }

    fn synchronize(&self) -> Result<(), ProviderError> {
        // Launches return when their blocks have run.
        Ok(())
    }

    unsafe fn launch(
        &self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &[*mut c_void],
        param_sizes: &[usize],
    ) -> Result<(), ProviderError> {
        let name = CString::new(kernel)
            .map_err(|_| ProviderError::invalid(format!("kernel name {kernel:?} has a NUL")))?;
        if params.len() != param_sizes.len() {
            return Err(ProviderError::internal(format!(
                "{kernel}: {} parameters but {} sizes",
                params.len(),
                param_sizes.len()
            )));
        }
        let mut error = [0 as c_char; 512];
        // SAFETY: the arrays live across the call; the emulator checks the
        // name and the parameter count and catches every C++ exception; the
        // parameters' types and pointers are the caller's contract.
        let rc = unsafe {
            vips_simt_launch(
                name.as_ptr(),
                grid.as_ptr(),
                block.as_ptr(),
                shared_bytes,
                params.as_ptr(),
                param_sizes.as_ptr(),
                params.len(),
                self.threads,
                error.as_mut_ptr(),
                error.len(),
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            // SAFETY: the emulator NUL-terminates what it writes into `error`.
            let message = unsafe { CStr::from_ptr(error.as_ptr()) };
            Err(ProviderError::internal(format!(
                "SIMT emulation: {}",
                message.to_string_lossy()
            )))
        }
    }
}

impl Drop for Simt {
    fn drop(&mut self) {
        for (ptr, layout) in self.lock().drain() {
            // SAFETY: every entry is a live allocation made with its layout.
            unsafe { std::alloc::dealloc(ptr as usize as *mut u8, layout) };
        }
    }
}

vsdk_gpu::export_provider!(Simt);
