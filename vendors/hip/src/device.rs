//! [`Hip`]: one AMD GPU opened through the HIP runtime, as a
//! [`vsdk_gpu::Backend`]. Memory is `hipMalloc`'d, copies are synchronous
//! `hipMemcpy`s, kernels run on the device's null stream (so launches and
//! copies on one device happen in the order they were issued), and the kernel
//! source is compiled by hiprtc for the device's architecture on the first
//! launch, then kept.

use crate::hip_api::{
    HipApi, HipError, HipFunction, HipModule, Hiprtc, HIP_ERROR_NO_DEVICE, HIP_ERROR_OUT_OF_MEMORY,
    HIP_MEMCPY_DEVICE_TO_DEVICE, HIP_MEMCPY_DEVICE_TO_HOST, HIP_MEMCPY_HOST_TO_DEVICE, HIP_SUCCESS,
};
use std::collections::HashMap;
use std::ffi::{c_void, CStr};
use std::sync::{Arc, Mutex, MutexGuard};
use vsdk_gpu::{Backend, DeviceInfo, DevicePtr};
use vsdk_provider_kit::ProviderError;

/// Overrides the architecture hiprtc compiles for (`gfx90a`), for a runtime
/// whose device properties this binding cannot read.
pub const ARCH_ENV: &str = "VIPS_HIP_ARCH";

/// The options hiprtc gets besides `--gpu-architecture`.
pub const HIPRTC_OPTIONS: &[&str] = &["-O3"];

/// Compiles [`vsdk_gpu::KERNEL_SOURCE`] (with [`vsdk_gpu::DEVICE_HEADER`]
/// as `vips_device.h`) for `arch` (`gfx90a`, `gfx1030`; a target ID's
/// feature suffix such as `:xnack-` is dropped, which gives a code object
/// that runs whatever the device's xnack/sramecc mode). No GPU is needed.
pub fn compile_kernels(rtc: &Hiprtc, arch: &str) -> Result<Vec<u8>, String> {
    let processor = arch.split(':').next().unwrap_or(arch);
    let arch_opt = format!("--gpu-architecture={processor}");
    let mut options = vec![arch_opt.as_str()];
    options.extend_from_slice(HIPRTC_OPTIONS);
    rtc.compile(
        vsdk_gpu::KERNEL_SOURCE,
        "vips_kernels.cu",
        &[(vsdk_gpu::DEVICE_HEADER_NAME, vsdk_gpu::DEVICE_HEADER)],
        &options,
    )
    .map(|o| o.code)
}

/// A code object compiled for one architecture, or hiprtc's error.
type CodeObject = Result<Arc<Vec<u8>>, String>;

/// What the devices of one `open_all` share: the runtime (process-wide,
/// never unloaded) and the code objects compiled so far, by architecture.
struct Shared {
    api: &'static HipApi,
    code: Mutex<HashMap<String, CodeObject>>,
}

impl Shared {
    fn code_for(&self, arch: &str) -> CodeObject {
        let mut cache = lock(&self.code);
        if let Some(r) = cache.get(arch) {
            return r.clone();
        }
        let r = crate::hip_api::hiprtc().and_then(|rtc| compile_kernels(rtc, arch).map(Arc::new));
        cache.insert(arch.to_string(), r.clone());
        r
    }
}

/// A HIP handle that the runtime lets any thread use.
#[derive(Clone, Copy)]
struct Handle(*mut c_void);
// SAFETY: HIP module and function handles are process-wide, not tied to the
// thread that created them; access to the map holding them is under a Mutex.
unsafe impl Send for Handle {}

/// The device's loaded code object and the functions looked up in it.
#[derive(Default)]
struct Module {
    /// `None` until the first launch; an `Err` is kept and returned again.
    module: Option<Result<Handle, String>>,
    functions: HashMap<String, Handle>,
}

/// One AMD GPU.
pub struct Hip {
    shared: Arc<Shared>,
    ordinal: i32,
    info: DeviceInfo,
    /// The architecture hiprtc targets, or why it is unknown.
    arch: Result<String, String>,
    module: Mutex<Module>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic never happens under these locks; recover the data if one did.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn internal((_, msg): (HipError, String)) -> ProviderError {
    ProviderError::internal(msg)
}

/// `5.2.21153` from HIP's `major * 10^7 + minor * 10^5 + patch`.
#[doc(hidden)] // public for tests/it only
pub fn hip_version(v: i32) -> String {
    format!("{}.{}.{}", v / 10_000_000, (v / 100_000) % 100, v % 100_000)
}

/// The UUID as HIP gives it: ROCm fills the 16 bytes with the ASCII hex
/// digits that follow `GPU-` in the HSA agent UUID; other (binary) content is
/// hex encoded. `None` for what devices without a UUID report: zeros, all
/// `f`, or short text such as `XX`.
#[doc(hidden)] // public for tests/it only
pub fn uuid_text(u: &[u8; 16]) -> Option<String> {
    if u.iter().all(|&b| b == 0) {
        return None;
    }
    let text_len = u.iter().position(|&b| b == 0).unwrap_or(u.len());
    if u[..text_len].iter().all(|b| b.is_ascii_graphic()) {
        let text = std::str::from_utf8(&u[..text_len]).ok()?;
        let hex = text.len() == 16 && text.chars().all(|c| c.is_ascii_hexdigit());
        let placeholder =
            text.chars().all(|c| c == '0') || text.chars().all(|c| c == 'f' || c == 'F');
        return (hex && !placeholder).then(|| format!("GPU-{text}"));
    }
    Some(format!(
        "GPU-{}",
        u.iter().map(|b| format!("{b:02x}")).collect::<String>()
    ))
}

impl Hip {
    fn open(shared: &Arc<Shared>, ordinal: i32) -> Result<Hip, String> {
        let api = shared.api;
        let ctx = |(_, m): (HipError, String)| format!("HIP device {ordinal}: {m}");
        api.set_device(ordinal).map_err(ctx)?;
        let device = api.device_handle(ordinal).map_err(ctx)?;
        let arch = match std::env::var(ARCH_ENV).ok().filter(|a| !a.is_empty()) {
            Some(a) => Ok(a),
            None => api.gcn_arch_name(ordinal).ok_or_else(|| {
                format!(
                    "the architecture (gcnArchName) of HIP device {ordinal} could not be read \
                     from {}; set {ARCH_ENV} (for example gfx90a)",
                    api.path
                )
            }),
        };
        let name = api
            .device_name(device)
            .ok()
            .filter(|n| !n.is_empty())
            .or_else(|| arch.clone().ok())
            .unwrap_or_else(|| format!("AMD GPU {ordinal}"));
        let memory_bytes = api.total_mem(device).map_err(ctx)?;
        let (runtime, driver) = api.versions();
        let mut driver_version = format!(
            "HIP runtime {}",
            runtime.map_or("unknown".into(), hip_version)
        );
        if let Some(d) = driver.filter(|&d| Some(d) != runtime) {
            driver_version.push_str(&format!(", driver {}", hip_version(d)));
        }
        if let Ok(a) = &arch {
            driver_version.push_str(&format!(", {a}"));
        }
        let stable_id = api
            .uuid(device)
            .and_then(|u| uuid_text(&u))
            .or_else(|| api.pci_bus_id(device).map(|p| format!("pci:{p}")))
            .unwrap_or_else(|| format!("hip-ordinal:{ordinal}"));
        Ok(Hip {
            shared: Arc::clone(shared),
            ordinal,
            info: DeviceInfo {
                name,
                driver_version,
                stable_id,
                memory_bytes,
            },
            arch,
            module: Mutex::new(Module::default()),
        })
    }

    fn api(&self) -> &HipApi {
        self.shared.api
    }

    /// Makes this device current on the calling thread.
    fn current(&self) -> Result<&HipApi, ProviderError> {
        let api = self.api();
        api.set_device(self.ordinal).map_err(internal)?;
        Ok(api)
    }

    /// The architecture hiprtc compiles for.
    pub fn arch(&self) -> Result<&str, String> {
        self.arch.as_deref().map_err(Clone::clone)
    }

    /// The function `kernel`, compiling and loading the kernel source on
    /// first use. The device is current.
    fn function(&self, kernel: &str) -> Result<HipFunction, ProviderError> {
        let mut m = lock(&self.module);
        if let Some(f) = m.functions.get(kernel) {
            return Ok(f.0);
        }
        let module = match &m.module {
            Some(r) => r.clone(),
            None => {
                let r = self.load_module();
                m.module = Some(r.clone());
                r
            }
        }
        .map_err(ProviderError::internal)?;
        // SAFETY: `module` is loaded and unloaded only in Drop.
        let f = unsafe {
            self.api()
                .module_get_function(module.0 as HipModule, kernel)
        }
        .map_err(internal)?;
        m.functions.insert(kernel.to_string(), Handle(f));
        Ok(f)
    }

    fn load_module(&self) -> Result<Handle, String> {
        let arch = self.arch.clone()?;
        let code = self.shared.code_for(&arch)?;
        self.api()
            .module_load_data(&code)
            .map(Handle)
            .map_err(|(_, m)| format!("{m} (kernel code object for {arch})"))
    }

    /// Whether `[dst, dst+n)` and `[src, src+n)` overlap.
    #[doc(hidden)] // public for tests/it only
    pub fn overlaps(dst: DevicePtr, src: DevicePtr, n: usize) -> bool {
        let n = n as u64;
        dst < src.saturating_add(n) && src < dst.saturating_add(n)
    }
}

impl Drop for Hip {
    fn drop(&mut self) {
        let m = lock(&self.module);
        if let Some(Ok(module)) = &m.module {
            if self.api().set_device(self.ordinal).is_ok() {
                // SAFETY: loaded by this device, unloaded once, and no
                // function of it is used after the device is dropped.
                let _ = unsafe { self.api().module_unload(module.0) };
            }
        }
    }
}

impl Backend for Hip {
    const NAME: &'static CStr = c"hip";
    const VENDOR: &'static CStr = c"VIPS SDK reference";
    const DESCRIPTION: &'static str =
        "HIP reference provider: AMD GPUs through the HIP runtime, kernels compiled by hiprtc, \
         the kernel source's own GEMM";
    const DEVICE_TYPE: i32 = vsdk_provider_kit::ffi::VSDK_DEVICE_ROCM;

    fn open_all() -> Result<Vec<Self>, String> {
        let api = crate::hip_api::runtime()?;
        let init = api.init();
        let count = match api.device_count() {
            Ok(n) if n > 0 => n,
            other => {
                let why = match other {
                    Ok(n) => format!("hipGetDeviceCount returned {n} devices"),
                    Err(e) => format!("hipGetDeviceCount returned {}", api.error_name(e)),
                };
                let mut reason = format!("no AMD GPU: {why}");
                if init != HIP_SUCCESS {
                    reason.push_str(&format!("; hipInit returned {}", api.error_name(init)));
                }
                if !std::path::Path::new("/dev/kfd").exists() {
                    reason.push_str(
                        "; there is no /dev/kfd (the amdgpu kernel driver's compute interface)",
                    );
                }
                return Err(reason);
            }
        };
        if init != HIP_SUCCESS && init != HIP_ERROR_NO_DEVICE {
            return Err(format!(
                "hipInit failed: {} (runtime {})",
                api.error_text(init),
                api.path
            ));
        }
        let shared = Arc::new(Shared {
            api,
            code: Mutex::new(HashMap::new()),
        });
        // A device that fails to open is left out, as the CUDA provider does;
        // only when none opens is that the reason for zero devices.
        let (devices, failures): (Vec<_>, Vec<_>) = (0..count)
            .map(|i| Hip::open(&shared, i))
            .partition(Result::is_ok);
        if devices.is_empty() {
            let failures: Vec<String> = failures.into_iter().filter_map(Result::err).collect();
            return Err(format!(
                "no HIP device could be opened: {}",
                failures.join("; ")
            ));
        }
        Ok(devices.into_iter().filter_map(Result::ok).collect())
    }

    fn info(&self) -> DeviceInfo {
        self.info.clone()
    }

    fn alloc(&self, bytes: usize) -> Result<DevicePtr, ProviderError> {
        let api = self.current()?;
        match api.malloc(bytes) {
            Ok(p) => Ok(p as DevicePtr),
            Err((e, m)) if e == HIP_ERROR_OUT_OF_MEMORY => {
                Err(ProviderError::out_of_memory(format!("{m} ({bytes} bytes)")))
            }
            Err((_, m)) => Err(ProviderError::internal(format!("{m} ({bytes} bytes)"))),
        }
    }

    fn free(&self, ptr: DevicePtr) {
        if let Ok(api) = self.current() {
            // SAFETY: the caller passes an address `alloc` returned, once.
            let _ = unsafe { api.free(ptr as *mut c_void) };
        }
    }

    fn copy_to_device(&self, dst: DevicePtr, src: &[u8]) -> Result<(), ProviderError> {
        if src.is_empty() {
            return Ok(());
        }
        let api = self.current()?;
        // SAFETY: `dst` is inside a live allocation for `src.len()` bytes
        // (checked by the caller); `src` is a host slice of that length.
        unsafe {
            api.memcpy(
                dst as *mut c_void,
                src.as_ptr().cast(),
                src.len(),
                HIP_MEMCPY_HOST_TO_DEVICE,
            )
        }
        .map_err(internal)
    }

    fn copy_to_host(&self, dst: &mut [u8], src: DevicePtr) -> Result<(), ProviderError> {
        if dst.is_empty() {
            return Ok(());
        }
        let api = self.current()?;
        // SAFETY: `src` is inside a live allocation for `dst.len()` bytes
        // (checked by the caller); `dst` is a host slice of that length.
        unsafe {
            api.memcpy(
                dst.as_mut_ptr().cast(),
                src as *const c_void,
                dst.len(),
                HIP_MEMCPY_DEVICE_TO_HOST,
            )
        }
        .map_err(internal)
    }

    fn copy_on_device(
        &self,
        dst: DevicePtr,
        src: DevicePtr,
        n: usize,
    ) -> Result<(), ProviderError> {
        if n == 0 || dst == src {
            return Ok(());
        }
        let api = self.current()?;
        if !Self::overlaps(dst, src, n) {
            // SAFETY: both ranges are inside live allocations (checked by
            // the caller) and do not overlap.
            return unsafe {
                api.memcpy(
                    dst as *mut c_void,
                    src as *const c_void,
                    n,
                    HIP_MEMCPY_DEVICE_TO_DEVICE,
                )
            }
            .map_err(internal);
        }
        // hipMemcpy's ranges must not overlap: go through a scratch buffer.
        let tmp = self.alloc(n)?;
        // SAFETY: `tmp` is a fresh allocation of `n` bytes, disjoint from
        // both ranges, which are inside live allocations.
        let r = unsafe {
            api.memcpy(
                tmp as *mut c_void,
                src as *const c_void,
                n,
                HIP_MEMCPY_DEVICE_TO_DEVICE,
            )
            .and_then(|()| {
                api.memcpy(
                    dst as *mut c_void,
                    tmp as *const c_void,
                    n,
                    HIP_MEMCPY_DEVICE_TO_DEVICE,
                )
            })
        };
        // hipFree waits for the copies that use `tmp`.
        self.free(tmp);
        r.map_err(internal)
    }

    fn synchronize(&self) -> Result<(), ProviderError> {
        self.current()?.device_synchronize().map_err(internal)
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
        if grid.contains(&0) || block.contains(&0) {
            return Err(ProviderError::invalid(format!(
                "{kernel}: empty launch (grid {grid:?}, block {block:?})"
            )));
        }
        let threads = block.iter().map(|&b| u64::from(b)).product::<u64>();
        if threads > 1024 {
            return Err(ProviderError::invalid(format!(
                "{kernel}: {threads} threads per block (at most 1024)"
            )));
        }
        let api = self.current()?;
        let f = self.function(kernel)?;
        // SAFETY: `f` belongs to this device's loaded module (current on
        // this thread); the caller guarantees `params` matches the kernel's
        // parameters and the device pointers among them are live.
        unsafe { api.launch(f, grid, block, shared_bytes, params) }
            .map_err(|(_, m)| ProviderError::internal(format!("{kernel}: {m}")))
    }
}
