//! One CUDA device through the driver API (cudarc's raw bindings, loaded at
//! run time): its primary context, one stream on which every copy, launch
//! and GEMM is queued in call order, and the kernel module compiled for it.
//!
//! cudarc panics when `libcuda` or one of its symbols is missing, so
//! [`Cuda::open_all`] first loads the driver itself and checks every symbol
//! this file uses; only then does it call into cudarc. (cudarc types
//! `CUresult` as a Rust enum: a driver newer than CUDA 12.9 returning an
//! error code 12.9 did not define would be outside it. Every code the calls
//! below can return exists in 12.9.)

mod blas;

use crate::nvrtc::{self, Compiled, Image, Target};
use blas::Blas;
use cudarc::driver::sys::{self, CUresult};
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::{Arc, Mutex, OnceLock};
use vsdk_gpu::{DeviceInfo, DevicePtr};
use vsdk_provider_kit::{ffi, ProviderError};

/// Every driver function this provider calls (through cudarc or the cuBLAS
/// path), checked present before the first call. All exist since CUDA 11.4; the
/// code NVRTC 12 makes needs a CUDA 12 driver anyway.
const DRIVER_SYMBOLS: &[&str] = &[
    "cuInit",
    "cuDriverGetVersion",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetName",
    "cuDeviceTotalMem_v2",
    "cuDeviceGetUuid_v2",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuModuleLoadData",
    "cuModuleUnload",
    "cuModuleGetFunction",
    "cuFuncSetAttribute",
    "cuLaunchKernel",
];

/// Static shared memory a kernel may use without opting in.
const DEFAULT_SHARED_BYTES: u32 = 48 * 1024;

/// A driver handle (a pointer) shared between threads.
#[derive(Clone, Copy)]
struct Handle<T>(T);
// SAFETY: CUDA driver handles (contexts, streams, modules, functions) are
// process-wide and may be used from any thread once the owning context is
// current there, which every entry point below ensures (`bind`).
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above; the driver synchronises concurrent use of one handle.
unsafe impl<T> Sync for Handle<T> {}

/// One opened device.
pub struct Cuda {
    device: sys::CUdevice,
    context: Handle<sys::CUcontext>,
    stream: Handle<sys::CUstream>,
    info: DeviceInfo,
    /// Compute capability (major, minor).
    capability: (u32, u32),
    /// The kernel source, compiled and loaded on first launch (or the
    /// reason it could not be, kept so that it is not retried every call).
    module: OnceLock<Result<Handle<sys::CUmodule>, String>>,
    functions: Mutex<HashMap<String, Handle<sys::CUfunction>>>,
    /// cuBLAS, created on the first GEMM.
    pub(crate) blas: Mutex<Option<Blas>>,
}

impl Cuda {
    pub(crate) fn stream(&self) -> sys::CUstream {
        self.stream.0
    }

    pub(crate) fn capability(&self) -> (u32, u32) {
        self.capability
    }

    /// Makes this device's context current on the calling thread.
    pub(crate) fn bind(&self) -> Result<(), ProviderError> {
        // SAFETY: the context was retained in `open` and is released only in
        // `drop`.
        let r = unsafe { sys::cuCtxSetCurrent(self.context.0) };
        check(r, "cuCtxSetCurrent").map_err(provider_error(r))
    }

    fn sync(&self) -> Result<(), ProviderError> {
        // SAFETY: the stream is live (created in `open`, destroyed in `drop`).
        let r = unsafe { sys::cuStreamSynchronize(self.stream.0) };
        check(r, "cuStreamSynchronize").map_err(provider_error(r))
    }

    /// The device's module: the kernel source compiled for it, loaded.
    fn module(&self) -> Result<sys::CUmodule, ProviderError> {
        let module = self.module.get_or_init(|| {
            let compiled = compiled_for(self.capability)?;
            let image = match &compiled.image {
                Image::Cubin(bytes) | Image::Ptx(bytes) => bytes,
            };
            let mut module: sys::CUmodule = std::ptr::null_mut();
            // SAFETY: the context is current (callers `bind` first); `image`
            // is a complete cubin or NUL-terminated PTX from NVRTC, and the
            // driver copies it before returning.
            let r = unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) };
            check(r, "cuModuleLoadData")
                .map_err(|e| format!("loading the kernels compiled for {}: {e}", self.info.name))?;
            Ok(Handle(module))
        });
        match module {
            Ok(m) => Ok(m.0),
            Err(e) => Err(ProviderError::new(ffi::VSDK_STATUS_DEVICE_ERROR, e.clone())),
        }
    }

    fn function(&self, name: &str) -> Result<sys::CUfunction, ProviderError> {
        let mut functions = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = functions.get(name) {
            return Ok(f.0);
        }
        let module = self.module()?;
        let cname = std::ffi::CString::new(name)
            .map_err(|_| ProviderError::invalid(format!("kernel name {name:?} contains NUL")))?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: the module is loaded and live; `cname` is NUL-terminated.
        let r = unsafe { sys::cuModuleGetFunction(&mut f, module, cname.as_ptr()) };
        check(r, &format!("cuModuleGetFunction({name})")).map_err(provider_error(r))?;
        functions.insert(name.to_string(), Handle(f));
        Ok(f)
    }

    fn open(ordinal: c_int, driver_version: &str) -> Result<Cuda, String> {
        let mut device: sys::CUdevice = 0;
        // SAFETY: cuInit succeeded and `ordinal` is below cuDeviceGetCount.
        let r = unsafe { sys::cuDeviceGet(&mut device, ordinal) };
        check(r, "cuDeviceGet")?;

        let mut name = [0 as c_char; 256];
        // SAFETY: the buffer's length is passed; the driver NUL-terminates.
        let r = unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as c_int, device) };
        check(r, "cuDeviceGetName")?;
        // SAFETY: NUL-terminated within the buffer (the driver truncates).
        let name = unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned();

        let mut memory_bytes = 0usize;
        // SAFETY: a valid out-parameter and device.
        let r = unsafe { sys::cuDeviceTotalMem_v2(&mut memory_bytes, device) };
        check(r, "cuDeviceTotalMem")?;

        let mut uuid = sys::CUuuid { bytes: [0; 16] };
        // SAFETY: a valid out-parameter and device.
        let r = unsafe { sys::cuDeviceGetUuid_v2(&mut uuid, device) };
        check(r, "cuDeviceGetUuid")?;

        let attribute = |a: sys::CUdevice_attribute, what: &str| -> Result<u32, String> {
            let mut v: c_int = 0;
            // SAFETY: a valid out-parameter, attribute and device.
            let r = unsafe { sys::cuDeviceGetAttribute(&mut v, a, device) };
            check(r, what)?;
            u32::try_from(v).map_err(|_| format!("{what} returned {v}"))
        };
        let major = attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)",
        )?;
        let minor = attribute(
            sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)",
        )?;

        let mut context: sys::CUcontext = std::ptr::null_mut();
        // SAFETY: a valid out-parameter and device; released in `drop` (or
        // below when the stream cannot be created).
        let r = unsafe { sys::cuDevicePrimaryCtxRetain(&mut context, device) };
        check(r, "cuDevicePrimaryCtxRetain")?;
        let mut stream: sys::CUstream = std::ptr::null_mut();
        let created = {
            // SAFETY: the context was just retained.
            let r = unsafe { sys::cuCtxSetCurrent(context) };
            check(r, "cuCtxSetCurrent")
        }
        .and_then(|()| {
            let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
            // SAFETY: a valid out-parameter; the stream is created in the
            // current context and destroyed in `drop`.
            let r = unsafe { sys::cuStreamCreate(&mut stream, flags) };
            check(r, "cuStreamCreate")
        });
        if let Err(e) = created {
            // SAFETY: balances the retain above; nothing uses the context.
            unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) };
            return Err(e);
        }

        Ok(Cuda {
            device,
            context: Handle(context),
            stream: Handle(stream),
            info: DeviceInfo {
                name,
                driver_version: driver_version.to_string(),
                stable_id: format_uuid(&uuid.bytes),
                memory_bytes: memory_bytes as u64,
            },
            capability: (major, minor),
            module: OnceLock::new(),
            functions: Mutex::new(HashMap::new()),
            blas: Mutex::new(None),
        })
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // Best effort, errors ignored: nothing may fail or panic here.
        if self.bind().is_err() {
            return;
        }
        let _ = self.sync();
        if let Some(blas) = self
            .blas
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            blas.destroy();
        }
        if let Some(Ok(module)) = self.module.get() {
            // SAFETY: the stream is idle; no function of the module is used
            // after this.
            unsafe { sys::cuModuleUnload(module.0) };
        }
        // SAFETY: created in `open`, idle, destroyed once.
        unsafe { sys::cuStreamDestroy_v2(self.stream.0) };
        // SAFETY: balances the retain in `open`.
        unsafe { sys::cuDevicePrimaryCtxRelease_v2(self.device) };
    }
}

impl vsdk_gpu::Backend for Cuda {
    const NAME: &'static CStr = c"cuda";
    const VENDOR: &'static CStr = c"VIPS SDK reference";
    const DESCRIPTION: &'static str =
        "CUDA reference provider: the shared GPU kernels compiled by NVRTC per device, cuBLAS for float32 linears";
    const DEVICE_TYPE: i32 = ffi::VSDK_DEVICE_CUDA;

    fn open_all() -> Result<Vec<Self>, String> {
        let library = probe_driver()?;
        // SAFETY: the driver is loaded and has every symbol used (probed).
        let r = unsafe { sys::cuInit(0) };
        check(r, "cuInit")
            .map_err(|e| format!("the NVIDIA driver ({library}) could not start: {e}"))?;
        let mut version: c_int = 0;
        // SAFETY: a valid out-parameter.
        let r = unsafe { sys::cuDriverGetVersion(&mut version) };
        check(r, "cuDriverGetVersion")?;
        let version = format!("{}.{}", version / 1000, (version % 1000) / 10);
        let mut count: c_int = 0;
        // SAFETY: a valid out-parameter, after cuInit.
        let r = unsafe { sys::cuDeviceGetCount(&mut count) };
        check(r, "cuDeviceGetCount")?;
        if count <= 0 {
            return Err(format!(
                "the NVIDIA driver ({library}, CUDA {version}) reports no CUDA device"
            ));
        }
        let mut devices = Vec::new();
        let mut failures = Vec::new();
        for ordinal in 0..count {
            match Cuda::open(ordinal, &version) {
                Ok(d) => devices.push(d),
                Err(e) => failures.push(format!("device {ordinal}: {e}")),
            }
        }
        if devices.is_empty() {
            return Err(format!(
                "no CUDA device could be opened ({library}, CUDA {version}): {}",
                failures.join("; ")
            ));
        }
        Ok(devices)
    }

    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, ProviderError> {
        self.bind()?;
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: a valid out-parameter; the context is current.
        let r = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) };
        check(r, &format!("cuMemAlloc({bytes} bytes)")).map_err(provider_error(r))?;
        Ok(ptr)
    }

    fn free(&self, ptr: DevicePtr) {
        if self.bind().is_err() {
            return;
        }
        // Work queued on the stream may still use the buffer.
        let _ = self.sync();
        // SAFETY: `ptr` came from `alloc` (the caller tracks that) and no
        // queued work uses it any more.
        unsafe { sys::cuMemFree_v2(ptr) };
    }

    fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), ProviderError> {
        if src.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `dst..dst+len` is inside a live allocation (the caller
        // checks); `src` stays borrowed until the stream is synchronised
        // below, so the copy never reads freed host memory.
        let r = unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src.as_ptr().cast(), src.len(), self.stream.0)
        };
        check(r, "cuMemcpyHtoDAsync").map_err(provider_error(r))?;
        self.sync()
    }

    fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), ProviderError> {
        if dst.is_empty() {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: `src..src+len` is inside a live allocation (the caller
        // checks); `dst` stays borrowed until the stream is synchronised.
        let r = unsafe {
            sys::cuMemcpyDtoHAsync_v2(dst.as_mut_ptr().cast(), src, dst.len(), self.stream.0)
        };
        check(r, "cuMemcpyDtoHAsync").map_err(provider_error(r))?;
        self.sync()
    }

    fn copy_on_device(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        n: usize,
    ) -> Result<(), ProviderError> {
        if n == 0 {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: both ranges are inside live allocations (the caller
        // checks); the copy is queued in order on the stream.
        let r = unsafe { sys::cuMemcpyDtoDAsync_v2(dst, src, n, self.stream.0) };
        check(r, "cuMemcpyDtoDAsync").map_err(provider_error(r))
    }

    fn synchronize(&self) -> Result<(), ProviderError> {
        self.bind()?;
        self.sync()
    }

    unsafe fn launch(
        &self,
        kernel: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &[*mut c_void],
        _param_sizes: &[usize],
    ) -> Result<(), ProviderError> {
        self.bind()?;
        let f = self.function(kernel)?;
        if shared_bytes > DEFAULT_SHARED_BYTES {
            let bytes = c_int::try_from(shared_bytes).map_err(|_| {
                ProviderError::invalid(format!("{kernel}: {shared_bytes} bytes of shared memory"))
            })?;
            // SAFETY: a live function handle; the driver checks the value
            // against the device's opt-in limit.
            let r = unsafe {
                sys::cuFuncSetAttribute(
                    f,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    bytes,
                )
            };
            check(
                r,
                &format!("{kernel}: {shared_bytes} bytes of shared memory"),
            )
            .map_err(provider_error(r))?;
        }
        let params_ptr = if params.is_empty() {
            std::ptr::null_mut()
        } else {
            params.as_ptr().cast_mut()
        };
        // SAFETY: `f` is a kernel of the loaded module; the caller guarantees
        // that `params` matches its parameters and that every device pointer
        // among them is inside a live allocation; the driver copies the
        // values before returning and never writes through `params_ptr`.
        let r = unsafe {
            sys::cuLaunchKernel(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_bytes,
                self.stream.0,
                params_ptr,
                std::ptr::null_mut(),
            )
        };
        check(
            r,
            &format!(
                "cuLaunchKernel({kernel}, grid {grid:?}, block {block:?}, {shared_bytes} B shared)"
            ),
        )
        .map_err(provider_error(r))
    }

    fn gemm(&self, g: &vsdk_gpu::Gemm) -> Option<Result<(), ProviderError>> {
        blas::gemm(self, g)
    }
}

/// Compiled kernel source per compute capability (or why it did not compile).
type CompileCache = Mutex<HashMap<(u32, u32), Result<Arc<Compiled>, String>>>;

/// The kernel source compiled for a compute capability: once per process and
/// capability (devices of one kind share it).
fn compiled_for(capability: (u32, u32)) -> Result<Arc<Compiled>, String> {
    static CACHE: OnceLock<CompileCache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
    cache
        .entry(capability)
        .or_insert_with(|| {
            let (major, minor) = capability;
            let target = Target::for_device(major, minor, nvrtc::supported_archs()?.as_deref())?;
            crate::compile_kernel_source(target, &[]).map(Arc::new)
        })
        .clone()
}

/// Loads the driver library the way cudarc will (same names, same order) and
/// checks that it has every function used, so that cudarc never panics.
/// Returns the library's name. Probed once per process; the library stays
/// loaded.
pub(crate) fn probe_driver() -> Result<String, String> {
    static PROBE: OnceLock<Result<(String, libloading::Library), String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let candidates: Vec<String> = ["cuda", "nvcuda"]
                .iter()
                .flat_map(|n| cudarc::get_lib_name_candidates(n))
                .collect();
            let (name, lib) = load_first(&candidates).map_err(|failures| {
                // cudarc tries some 30 names; the soname a driver installs says it all.
                let why = failures
                    .iter()
                    .find(|(n, _)| n == "libcuda.so.1")
                    .or(failures.last())
                    .map_or_else(String::new, |(_, e)| format!(" ({e})"));
                format!("libcuda.so.1 not found: no NVIDIA driver on this machine{why}")
            })?;
            let missing = missing_symbols(&lib, DRIVER_SYMBOLS);
            if !missing.is_empty() {
                return Err(format!(
                    "the NVIDIA driver {name} is too old for this provider (a CUDA 12 driver \
                     is needed): it lacks {}",
                    missing.join(", ")
                ));
            }
            Ok((name, lib))
        })
        .as_ref()
        .map(|(name, _)| name.clone())
        .map_err(Clone::clone)
}

/// The first of `candidates` that loads, or every name's loader error.
pub(crate) fn load_first(
    candidates: &[String],
) -> Result<(String, libloading::Library), Vec<(String, String)>> {
    let mut failures = Vec::new();
    for name in candidates {
        // SAFETY: loading a vendor library runs its initialisers, which set
        // up only that library; the names are its documented sonames.
        match unsafe { libloading::Library::new(name) } {
            Ok(lib) => return Ok((name.clone(), lib)),
            Err(e) => failures.push((name.clone(), e.to_string())),
        }
    }
    Err(failures)
}

/// Which of `symbols` `lib` does not export.
pub(crate) fn missing_symbols(lib: &libloading::Library, symbols: &[&str]) -> Vec<String> {
    symbols
        .iter()
        // SAFETY: only the address is looked up; nothing is called.
        .filter(|s| unsafe { lib.get::<*const c_void>(s.as_bytes()) }.is_err())
        .map(|s| s.to_string())
        .collect()
}

/// `GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`, as nvidia-smi prints it.
#[doc(hidden)] // public for tests/it only
pub fn format_uuid(bytes: &[c_char; 16]) -> String {
    let hex: String = bytes.iter().map(|&b| format!("{:02x}", b as u8)).collect();
    format!(
        "GPU-{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// `Ok` for `CUDA_SUCCESS`, else "`what`: CUDA_ERROR_… (description)".
pub(crate) fn check(r: CUresult, what: &str) -> Result<(), String> {
    if r == CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut name: *const c_char = std::ptr::null();
    let mut text: *const c_char = std::ptr::null();
    // SAFETY: valid out-parameters; the driver returns static strings or
    // leaves them NULL for an unknown code.
    unsafe {
        sys::cuGetErrorName(r, &mut name);
        sys::cuGetErrorString(r, &mut text);
    }
    let show = |p: *const c_char| {
        // SAFETY: NULL or a static NUL-terminated string from the driver.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    let name = show(name).unwrap_or_else(|| format!("CUresult {}", r as u32));
    Err(match show(text) {
        Some(text) => format!("{what}: {name} ({text})"),
        None => format!("{what}: {name}"),
    })
}

/// Maps a driver failure to the provider's status code.
pub(crate) fn provider_error(r: CUresult) -> impl Fn(String) -> ProviderError {
    move |message| {
        let code = if r == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            ffi::VSDK_STATUS_OUT_OF_MEMORY
        } else {
            ffi::VSDK_STATUS_DEVICE_ERROR
        };
        ProviderError::new(code, message)
    }
}
