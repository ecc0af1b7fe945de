//! A small binding of the HIP runtime and of hiprtc: only what the provider
//! calls, with the C signatures of ROCm 5.2's `hip_runtime_api.h` and
//! `hiprtc.h` (unchanged in ROCm 6 for these functions). The rest of the
//! provider sees one API ([`HipApi`], [`Hiprtc`]) whichever way it was bound.
//!
//! # Two bindings of the HIP runtime
//!
//! - **Default: `dlopen`** (libloading). Nothing of ROCm is linked, so the
//!   provider library loads on every machine, and without ROCm it reports
//!   zero devices and why instead of failing to load; this is what the
//!   conformance runner needs, since it opens every provider it finds. A
//!   missing library or symbol is an `Err` naming it, never a panic. The HIP
//!   runtime: `$VIPS_HIP_LIBRARY` when set (and only it), otherwise
//!   `libamdhip64.so.5`, `.so.6`, `.so.7` and `libamdhip64.so` on the
//!   loader's search path, then under `$ROCM_PATH/lib` and `/opt/rocm/lib`.
//! - **Feature `hip-sys`**, for distributions that ship ROCm (the flake's
//!   rocm package): the same function pointers are taken from hip-sys's
//!   `extern` declarations (`hip_sys::hiprt`), so the library links
//!   `libamdhip64` (`DT_NEEDED`) and the loader resolves them; building needs
//!   ROCm's headers and library (`HIP_PATH`, `/usr` on Debian).
//!   `$VIPS_HIP_LIBRARY` has no effect on the runtime there. hip-sys's
//!   bindings come from ROCm 5.4's headers and declare no
//!   `hipGetDevicePropertiesR0600`, so this build reads `gcnArchName` through
//!   `hipGetDeviceProperties` (the ROCm 5 layout, which ROCm 6 still exports
//!   under that name).
//!
//! Both fill the same struct of function pointers of the types below
//! (`Fn*`), and everything after that is one code path. The `hip-sys` build
//! converts each hip-sys function to our type only through the trait
//! `FnAgrees` (private module `linked`), which is implemented only when the
//! two prototypes agree parameter by parameter: identical types, or types
//! that are the same C type spelt differently (hip-sys's `#[repr(u32)]` enums `hipError_t` and
//! `hipMemcpyKind` where we pass a C `int`, typed opaque handles where we
//! pass `void *`), with their sizes and alignments compared at compile time.
//! Calling through our types also means a `hipError_t` that hip-sys's Rust
//! enum lacks arrives as a plain integer instead of an invalid enum value.
//! `tests/hip_sys_bindings.rs` (run with `--features hip-sys`) checks the same
//! independently: every function the dlopen binding looks up, its
//! signature, the constants below against hip-sys's values, and the
//! `hipDeviceProp_t` layout the architecture is read from.
//!
//! # hiprtc
//!
//! hip-sys has no hiprtc, so in both builds hiprtc is opened at run time:
//! `$VIPS_HIPRTC_LIBRARY` when set, otherwise `libhiprtc.so.{6,7}` /
//! `libhiprtc.so` (ROCm 6 and later), falling back to the HIP runtime
//! itself, which is where ROCm 5.x (Debian bookworm's 5.2.3) exports the
//! `hiprtc*` symbols. In the `hip-sys` build the fallback is the linked
//! runtime's own file (and `libhiprtc` beside it).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::OnceLock;

/// `hipError_t`.
pub type HipError = c_int;
pub const HIP_SUCCESS: HipError = 0;
pub const HIP_ERROR_OUT_OF_MEMORY: HipError = 2;
pub const HIP_ERROR_NO_DEVICE: HipError = 100;

/// `hipMemcpyKind`.
pub const HIP_MEMCPY_HOST_TO_DEVICE: c_int = 1;
pub const HIP_MEMCPY_DEVICE_TO_HOST: c_int = 2;
pub const HIP_MEMCPY_DEVICE_TO_DEVICE: c_int = 3;

/// `hipModule_t`, `hipFunction_t`, `hipStream_t`: opaque pointers.
pub type HipModule = *mut c_void;
pub type HipFunction = *mut c_void;
pub type HipStream = *mut c_void;

/// `hiprtcResult`.
pub type HiprtcResult = c_int;
pub const HIPRTC_SUCCESS: HiprtcResult = 0;
/// `hiprtcProgram`.
type HiprtcProgram = *mut c_void;

/// The environment variable naming the HIP runtime library to load instead
/// of searching for it.
pub const HIP_LIBRARY_ENV: &str = "VIPS_HIP_LIBRARY";
/// The environment variable naming the library that exports `hiprtc*`.
pub const HIPRTC_LIBRARY_ENV: &str = "VIPS_HIPRTC_LIBRARY";

const HIP_SONAMES: &[&str] = &[
    "libamdhip64.so.5",
    "libamdhip64.so.6",
    "libamdhip64.so.7",
    "libamdhip64.so",
];
const HIPRTC_SONAMES: &[&str] = &["libhiprtc.so.6", "libhiprtc.so.7", "libhiprtc.so"];

/// `hipDeviceProp_t` of ROCm 5.x ("R0000"): `gcnArchName[256]` at byte 396
/// of 792 (`offsetof` with ROCm 5.2.3's `hip_runtime_api.h`).
pub const PROPS_R0000_ARCH_OFFSET: usize = 396;
/// `hipDeviceProp_tR0600` of ROCm 6 and later (`hipGetDevicePropertiesR0600`):
/// `gcnArchName[256]` at byte 1160 of 1472.
pub const PROPS_R0600_ARCH_OFFSET: usize = 1160;
/// Bytes handed to `hipGetDeviceProperties*`: more than either layout needs.
pub const PROPS_BUFFER_BYTES: usize = 4096;
/// The size of `gcnArchName`.
pub const ARCH_NAME_BYTES: usize = 256;

// The HIP runtime's functions as this binding calls them (public for
// tests/hip_sys_bindings.rs, which checks hip-sys's declarations against them).
pub type FnInit = unsafe extern "C" fn(c_uint) -> HipError;
pub type FnGetDeviceCount = unsafe extern "C" fn(*mut c_int) -> HipError;
pub type FnSetDevice = unsafe extern "C" fn(c_int) -> HipError;
pub type FnDeviceGet = unsafe extern "C" fn(*mut c_int, c_int) -> HipError;
pub type FnDeviceGetName = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipError;
pub type FnDeviceTotalMem = unsafe extern "C" fn(*mut usize, c_int) -> HipError;
pub type FnGetVersion = unsafe extern "C" fn(*mut c_int) -> HipError;
pub type FnDeviceGetUuid = unsafe extern "C" fn(*mut [u8; 16], c_int) -> HipError;
pub type FnDeviceGetPciBusId = unsafe extern "C" fn(*mut c_char, c_int, c_int) -> HipError;
pub type FnGetDeviceProperties = unsafe extern "C" fn(*mut c_void, c_int) -> HipError;
pub type FnMalloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> HipError;
pub type FnFree = unsafe extern "C" fn(*mut c_void) -> HipError;
pub type FnMemcpy = unsafe extern "C" fn(*mut c_void, *const c_void, usize, c_int) -> HipError;
pub type FnDeviceSynchronize = unsafe extern "C" fn() -> HipError;
pub type FnModuleLoadData = unsafe extern "C" fn(*mut HipModule, *const c_void) -> HipError;
pub type FnModuleUnload = unsafe extern "C" fn(HipModule) -> HipError;
pub type FnModuleGetFunction =
    unsafe extern "C" fn(*mut HipFunction, HipModule, *const c_char) -> HipError;
#[allow(clippy::type_complexity)]
pub type FnModuleLaunchKernel = unsafe extern "C" fn(
    HipFunction,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    c_uint,
    HipStream,
    *mut *mut c_void,
    *mut *mut c_void,
) -> HipError;
pub type FnGetErrorString = unsafe extern "C" fn(HipError) -> *const c_char;

type FnRtcCreateProgram = unsafe extern "C" fn(
    *mut HiprtcProgram,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> HiprtcResult;
type FnRtcCompileProgram =
    unsafe extern "C" fn(HiprtcProgram, c_int, *const *const c_char) -> HiprtcResult;
type FnRtcGetSize = unsafe extern "C" fn(HiprtcProgram, *mut usize) -> HiprtcResult;
type FnRtcGetBytes = unsafe extern "C" fn(HiprtcProgram, *mut c_char) -> HiprtcResult;
type FnRtcDestroyProgram = unsafe extern "C" fn(*mut HiprtcProgram) -> HiprtcResult;
type FnRtcGetErrorString = unsafe extern "C" fn(HiprtcResult) -> *const c_char;

/// Opens the first of `candidates` that loads: (the library, its name).
/// `what` names the library in the error.
fn open_first(what: &str, candidates: &[PathBuf]) -> Result<(libloading::Library, String), String> {
    let mut failures = Vec::new();
    for c in candidates {
        // SAFETY: loading the HIP runtime runs its ELF constructors, which
        // only register the runtime (no device is touched before hipInit).
        match unsafe { libloading::Library::new(c) } {
            Ok(lib) => return Ok((lib, c.display().to_string())),
            Err(e) => failures.push(e.to_string()),
        }
    }
    Err(format!(
        "{what} not found: tried {} ({})",
        candidates
            .iter()
            .map(|c| c.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        failures.join("; ")
    ))
}

/// Sonames first (the dynamic loader's search path), then the same names
/// under `$ROCM_PATH/lib` and `/opt/rocm/lib`.
fn candidates(env: &str, sonames: &[&str]) -> Vec<PathBuf> {
    if let Some(p) = std::env::var_os(env).filter(|p| !p.is_empty()) {
        return vec![PathBuf::from(p)];
    }
    let mut out: Vec<PathBuf> = sonames.iter().map(PathBuf::from).collect();
    let mut dirs = Vec::new();
    if let Some(r) = std::env::var_os("ROCM_PATH").filter(|p| !p.is_empty()) {
        dirs.push(PathBuf::from(r).join("lib"));
    }
    dirs.push(PathBuf::from("/opt/rocm/lib"));
    for d in dirs {
        out.extend(sonames.iter().map(|s| d.join(s)));
    }
    out
}

/// The HIP runtime as hiprtc's fallback (ROCm 5.x exports `hiprtc*` from it):
/// the library the runtime binding would open.
#[cfg(not(feature = "hip-sys"))]
fn runtime_candidates() -> Vec<PathBuf> {
    candidates(HIP_LIBRARY_ENV, HIP_SONAMES)
}

/// The HIP runtime as hiprtc's fallback, in the `hip-sys` build: `libhiprtc`
/// beside the linked runtime, then the runtime's own file; the sonames (which
/// `dlopen` matches against the loaded runtime) if it cannot be named.
#[cfg(feature = "hip-sys")]
fn runtime_candidates() -> Vec<PathBuf> {
    match linked::runtime_file() {
        Some(file) => {
            let mut out: Vec<PathBuf> = file
                .parent()
                .map(|d| HIPRTC_SONAMES.iter().map(|s| d.join(s)).collect())
                .unwrap_or_default();
            out.push(file);
            out
        }
        None => HIP_SONAMES.iter().map(PathBuf::from).collect(),
    }
}

/// Copies the function pointer named `name` out of `lib`.
///
/// # Safety
/// `T` is the symbol's exact C function type, and the pointer is only used
/// while `lib` stays loaded.
unsafe fn sym<T: Copy>(lib: &libloading::Library, path: &str, name: &str) -> Result<T, String> {
    let mut z = Vec::with_capacity(name.len() + 1);
    z.extend_from_slice(name.as_bytes());
    z.push(0);
    // SAFETY: per this function's contract.
    unsafe { lib.get::<T>(&z) }
        .map(|s| *s)
        .map_err(|e| format!("{path} lacks {name}: {e}"))
}

/// The HIP runtime's functions, valid while `_lib` is loaded (it is dropped
/// last, with the struct).
pub struct HipApi {
    /// Where the runtime was loaded from.
    pub path: String,
    init: FnInit,
    get_device_count: FnGetDeviceCount,
    set_device: FnSetDevice,
    device_get: FnDeviceGet,
    device_get_name: FnDeviceGetName,
    device_total_mem: FnDeviceTotalMem,
    driver_get_version: FnGetVersion,
    runtime_get_version: FnGetVersion,
    device_get_uuid: Option<FnDeviceGetUuid>,
    device_get_pci_bus_id: Option<FnDeviceGetPciBusId>,
    /// hipGetDevicePropertiesR0600 (ROCm 6+) or hipGetDeviceProperties
    /// (ROCm 5), with the offset of `gcnArchName` in what it writes.
    get_device_properties: Option<(FnGetDeviceProperties, usize)>,
    malloc: FnMalloc,
    free: FnFree,
    memcpy: FnMemcpy,
    device_synchronize: FnDeviceSynchronize,
    module_load_data: FnModuleLoadData,
    module_unload: FnModuleUnload,
    module_get_function: FnModuleGetFunction,
    module_launch_kernel: FnModuleLaunchKernel,
    get_error_string: FnGetErrorString,
    get_error_name: FnGetErrorString,
    /// The dlopen'ed runtime; `None` when it is linked (feature `hip-sys`).
    _lib: Option<libloading::Library>,
}

impl HipApi {
    /// Binds the HIP runtime linked through hip-sys (the feature `hip-sys`):
    /// never fails, the dynamic loader has resolved every function.
    #[cfg(feature = "hip-sys")]
    pub fn load() -> Result<HipApi, String> {
        Ok(linked::api())
    }

    /// Opens the HIP runtime (see the module documentation for where) and
    /// looks up its functions.
    #[cfg(not(feature = "hip-sys"))]
    pub fn load() -> Result<HipApi, String> {
        let (lib, path) = open_first(
            "libamdhip64.so.5 (the HIP runtime)",
            &candidates(HIP_LIBRARY_ENV, HIP_SONAMES),
        )?;
        // SAFETY: each type below is the C prototype of that function in
        // hip_runtime_api.h; the pointers live in the returned struct with
        // the library that backs them.
        unsafe {
            let get_device_properties = match sym(&lib, &path, "hipGetDevicePropertiesR0600") {
                Ok(f) => Some((f, PROPS_R0600_ARCH_OFFSET)),
                Err(_) => sym(&lib, &path, "hipGetDeviceProperties")
                    .ok()
                    .map(|f| (f, PROPS_R0000_ARCH_OFFSET)),
            };
            Ok(HipApi {
                init: sym(&lib, &path, "hipInit")?,
                get_device_count: sym(&lib, &path, "hipGetDeviceCount")?,
                set_device: sym(&lib, &path, "hipSetDevice")?,
                device_get: sym(&lib, &path, "hipDeviceGet")?,
                device_get_name: sym(&lib, &path, "hipDeviceGetName")?,
                device_total_mem: sym(&lib, &path, "hipDeviceTotalMem")?,
                driver_get_version: sym(&lib, &path, "hipDriverGetVersion")?,
                runtime_get_version: sym(&lib, &path, "hipRuntimeGetVersion")?,
                device_get_uuid: sym(&lib, &path, "hipDeviceGetUuid").ok(),
                device_get_pci_bus_id: sym(&lib, &path, "hipDeviceGetPCIBusId").ok(),
                get_device_properties,
                malloc: sym(&lib, &path, "hipMalloc")?,
                free: sym(&lib, &path, "hipFree")?,
                memcpy: sym(&lib, &path, "hipMemcpy")?,
                device_synchronize: sym(&lib, &path, "hipDeviceSynchronize")?,
                module_load_data: sym(&lib, &path, "hipModuleLoadData")?,
                module_unload: sym(&lib, &path, "hipModuleUnload")?,
                module_get_function: sym(&lib, &path, "hipModuleGetFunction")?,
                module_launch_kernel: sym(&lib, &path, "hipModuleLaunchKernel")?,
                get_error_string: sym(&lib, &path, "hipGetErrorString")?,
                get_error_name: sym(&lib, &path, "hipGetErrorName")?,
                path,
                _lib: Some(lib),
            })
        }
    }

    /// `hipErrorNoDevice (no device found) [100]`-style text for `e`.
    pub fn error_text(&self, e: HipError) -> String {
        // SAFETY: both functions take any value and return NULL or a static
        // NUL-terminated string.
        let (name, text) = unsafe {
            (
                c_text((self.get_error_name)(e)),
                c_text((self.get_error_string)(e)),
            )
        };
        match (name, text) {
            (Some(n), Some(t)) if n != t => format!("{n} ({t})"),
            (Some(n), _) => n,
            (None, Some(t)) => format!("{t} [{e}]"),
            (None, None) => format!("HIP error {e}"),
        }
    }

    /// The error name alone (`hipErrorNoDevice`).
    pub fn error_name(&self, e: HipError) -> String {
        // SAFETY: as in `error_text`.
        unsafe { c_text((self.get_error_name)(e)) }.unwrap_or_else(|| format!("HIP error {e}"))
    }

    fn check(&self, what: &str, e: HipError) -> Result<(), (HipError, String)> {
        if e == HIP_SUCCESS {
            Ok(())
        } else {
            Err((e, format!("{what} failed: {}", self.error_text(e))))
        }
    }

    /// `hipInit(0)`: the raw code.
    pub fn init(&self) -> HipError {
        // SAFETY: takes a flags value, 0 as documented.
        unsafe { (self.init)(0) }
    }

    /// `hipGetDeviceCount`: Ok(count) or the raw code.
    pub fn device_count(&self) -> Result<i32, HipError> {
        let mut n: c_int = 0;
        // SAFETY: a valid out pointer.
        let e = unsafe { (self.get_device_count)(&mut n) };
        if e == HIP_SUCCESS {
            Ok(n)
        } else {
            Err(e)
        }
    }

    /// Makes `ordinal` the calling thread's current device (HIP keeps it per
    /// thread; every device call of the provider sets it first).
    pub fn set_device(&self, ordinal: i32) -> Result<(), (HipError, String)> {
        // SAFETY: plain value argument.
        let e = unsafe { (self.set_device)(ordinal) };
        self.check("hipSetDevice", e)
    }

    /// `hipDeviceGet`: the device handle of an ordinal.
    pub fn device_handle(&self, ordinal: i32) -> Result<c_int, (HipError, String)> {
        let mut d: c_int = 0;
        // SAFETY: a valid out pointer.
        let e = unsafe { (self.device_get)(&mut d, ordinal) };
        self.check("hipDeviceGet", e).map(|()| d)
    }

    /// The marketing name (`hipDeviceGetName`).
    pub fn device_name(&self, device: c_int) -> Result<String, (HipError, String)> {
        let mut buf = [0 as c_char; 256];
        // SAFETY: the buffer holds `len` bytes; HIP NUL-terminates within it.
        let e = unsafe { (self.device_get_name)(buf.as_mut_ptr(), buf.len() as c_int, device) };
        self.check("hipDeviceGetName", e)?;
        Ok(buf_text(&buf))
    }

    pub fn total_mem(&self, device: c_int) -> Result<u64, (HipError, String)> {
        let mut n: usize = 0;
        // SAFETY: a valid out pointer.
        let e = unsafe { (self.device_total_mem)(&mut n, device) };
        self.check("hipDeviceTotalMem", e).map(|()| n as u64)
    }

    /// (`hipRuntimeGetVersion`, `hipDriverGetVersion`), each `None` on error.
    pub fn versions(&self) -> (Option<i32>, Option<i32>) {
        let (mut r, mut d): (c_int, c_int) = (0, 0);
        // SAFETY: valid out pointers.
        let (er, ed) = unsafe {
            (
                (self.runtime_get_version)(&mut r),
                (self.driver_get_version)(&mut d),
            )
        };
        (
            (er == HIP_SUCCESS).then_some(r),
            (ed == HIP_SUCCESS).then_some(d),
        )
    }

    /// The 16 bytes of `hipDeviceGetUuid` (ROCm 5.1+), when it answers.
    pub fn uuid(&self, device: c_int) -> Option<[u8; 16]> {
        let f = self.device_get_uuid?;
        let mut u = [0u8; 16];
        // SAFETY: hipUUID is `char bytes[16]`; a valid out pointer.
        let e = unsafe { f(&mut u, device) };
        (e == HIP_SUCCESS).then_some(u)
    }

    /// `hipDeviceGetPCIBusId` (`0000:03:00.0`), when it answers.
    pub fn pci_bus_id(&self, device: c_int) -> Option<String> {
        let f = self.device_get_pci_bus_id?;
        let mut buf = [0 as c_char; 64];
        // SAFETY: the buffer holds `len` bytes.
        let e = unsafe { f(buf.as_mut_ptr(), buf.len() as c_int, device) };
        (e == HIP_SUCCESS)
            .then(|| buf_text(&buf))
            .filter(|s| !s.is_empty())
    }

    /// `gcnArchName` (`gfx90a:sramecc+:xnack-`) from the device properties,
    /// read at the offset of the layout that the found symbol writes (see
    /// the constants above) into a buffer larger than either layout. `None`
    /// when there is no such symbol, the call fails, or what is there does
    /// not look like an architecture name (a layout this binding does not
    /// know): the caller then needs `VIPS_HIP_ARCH`.
    pub fn gcn_arch_name(&self, ordinal: i32) -> Option<String> {
        let (f, offset) = self.get_device_properties?;
        let mut buf = vec![0u64; PROPS_BUFFER_BYTES / 8];
        // SAFETY: the buffer is 8-aligned, zeroed, and larger than every
        // known hipDeviceProp_t; HIP writes at most its own struct's size.
        let e = unsafe { f(buf.as_mut_ptr().cast(), ordinal) };
        if e != HIP_SUCCESS {
            return None;
        }
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let field = bytes.get(offset..offset + ARCH_NAME_BYTES)?;
        let end = field.iter().position(|&b| b == 0)?;
        let name = std::str::from_utf8(&field[..end]).ok()?;
        (name.starts_with("gfx") && name.bytes().all(|b| b.is_ascii_graphic()))
            .then(|| name.to_string())
    }

    pub fn malloc(&self, bytes: usize) -> Result<*mut c_void, (HipError, String)> {
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: a valid out pointer.
        let e = unsafe { (self.malloc)(&mut p, bytes) };
        self.check("hipMalloc", e)?;
        if p.is_null() {
            return Err((e, "hipMalloc returned success and a NULL pointer".into()));
        }
        Ok(p)
    }

    /// # Safety
    /// `p` came from `malloc` on the current device and is not freed yet.
    pub unsafe fn free(&self, p: *mut c_void) -> Result<(), (HipError, String)> {
        // SAFETY: per this function's contract.
        let e = unsafe { (self.free)(p) };
        self.check("hipFree", e)
    }

    /// `hipMemcpy` (synchronous with respect to the host).
    ///
    /// # Safety
    /// `dst` and `src` are valid for `n` bytes in the memory `kind` names.
    pub unsafe fn memcpy(
        &self,
        dst: *mut c_void,
        src: *const c_void,
        n: usize,
        kind: c_int,
    ) -> Result<(), (HipError, String)> {
        // SAFETY: per this function's contract.
        let e = unsafe { (self.memcpy)(dst, src, n, kind) };
        self.check("hipMemcpy", e)
    }

    pub fn device_synchronize(&self) -> Result<(), (HipError, String)> {
        // SAFETY: no arguments.
        let e = unsafe { (self.device_synchronize)() };
        self.check("hipDeviceSynchronize", e)
    }

    /// Loads a code object on the current device.
    pub fn module_load_data(&self, image: &[u8]) -> Result<HipModule, (HipError, String)> {
        let mut m: HipModule = std::ptr::null_mut();
        // SAFETY: `image` is a whole code object (HIP reads its ELF header
        // for the size) and stays alive for the call; a valid out pointer.
        let e = unsafe { (self.module_load_data)(&mut m, image.as_ptr().cast()) };
        self.check("hipModuleLoadData", e).map(|()| m)
    }

    /// # Safety
    /// `m` came from `module_load_data` and is not used afterwards.
    pub unsafe fn module_unload(&self, m: HipModule) -> Result<(), (HipError, String)> {
        // SAFETY: per this function's contract.
        let e = unsafe { (self.module_unload)(m) };
        self.check("hipModuleUnload", e)
    }

    /// # Safety
    /// `m` is a loaded module.
    pub unsafe fn module_get_function(
        &self,
        m: HipModule,
        name: &str,
    ) -> Result<HipFunction, (HipError, String)> {
        let z = CString::new(name).map_err(|_| (1, format!("kernel name {name:?} has a NUL")))?;
        let mut f: HipFunction = std::ptr::null_mut();
        // SAFETY: `m` is loaded (contract); NUL-terminated name; out pointer.
        let e = unsafe { (self.module_get_function)(&mut f, m, z.as_ptr()) };
        self.check(&format!("hipModuleGetFunction({name})"), e)
            .map(|()| f)
    }

    /// `hipModuleLaunchKernel` on the null stream.
    ///
    /// # Safety
    /// `f` is a function of a loaded module of the current device, and
    /// `params` holds one valid pointer per kernel parameter, to a value of
    /// that parameter's type.
    pub unsafe fn launch(
        &self,
        f: HipFunction,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u32,
        params: &[*mut c_void],
    ) -> Result<(), (HipError, String)> {
        let kp = if params.is_empty() {
            std::ptr::null_mut()
        } else {
            // HIP only reads the array.
            params.as_ptr().cast_mut()
        };
        // SAFETY: per this function's contract; `extra` is NULL.
        let e = unsafe {
            (self.module_launch_kernel)(
                f,
                grid[0],
                grid[1],
                grid[2],
                block[0],
                block[1],
                block[2],
                shared_bytes,
                std::ptr::null_mut(),
                kp,
                std::ptr::null_mut(),
            )
        };
        self.check("hipModuleLaunchKernel", e)
    }
}

/// The `hip-sys` build's binding: [`HipApi`] filled from hip-sys's `extern`
/// declarations, each converted to this binding's pointer type by [`cast`],
/// which compiles only for prototypes that agree (see the module
/// documentation).
#[cfg(feature = "hip-sys")]
mod linked {
    use super::*;
    use hip_sys::hiprt;
    use std::mem::{align_of, size_of};

    /// hip-sys's type `Self` and this binding's `Ours` are the same C type:
    /// a value of one is passed, returned and stored exactly as the other.
    ///
    /// # Safety
    /// Only for pairs with the same size, alignment and calling convention
    /// (the cases that differ in spelling are checked below at compile
    /// time), or for a C struct that is only ever behind a pointer and that
    /// we hold as `void *`. Pointers agree when their pointees do.
    unsafe trait Agrees<Ours> {}

    macro_rules! same {
        ($($t:ty),*) => {
            // SAFETY: a type agrees with itself.
            $(unsafe impl Agrees<$t> for $t {})*
        };
    }
    same!(c_int, c_uint, usize, c_char, c_void);

    macro_rules! spelt_differently {
        ($($sys:ty => $ours:ty),* $(,)?) => {
            $(
                const _: () = assert!(
                    size_of::<$sys>() == size_of::<$ours>()
                        && align_of::<$sys>() == align_of::<$ours>()
                );
                // SAFETY: the same C type (see each line below); size and
                // alignment asserted above.
                unsafe impl Agrees<$ours> for $sys {}
            )*
        };
    }
    spelt_differently! {
        // C enums whose values all fit: `unsigned int` in GCC and Clang,
        // passed in the same 32-bit register as the `int` we declare on the
        // targets ROCm supports (x86-64, AArch64).
        hiprt::hipError_t => c_int,
        hiprt::hipMemcpyKind => c_int,
        // `struct { char bytes[16]; }`.
        hiprt::hipUUID => [u8; 16],
    }
    // SAFETY: opaque structs, only ever behind a pointer (`hipModule_t` is
    // `ihipModule_t *` ...), which we hold as `void *`.
    unsafe impl Agrees<c_void> for hiprt::ihipModule_t {}
    // SAFETY: as above (`hipFunction_t`).
    unsafe impl Agrees<c_void> for hiprt::ihipModuleSymbol_t {}
    // SAFETY: as above (`hipStream_t`).
    unsafe impl Agrees<c_void> for hiprt::ihipStream_t {}
    // `hipDeviceProp_t *`: we pass a larger buffer as `void *` and read
    // `gcnArchName` at PROPS_R0000_ARCH_OFFSET (tests/hip_sys_bindings.rs
    // checks that offset against hip-sys's struct).
    const _: () = assert!(size_of::<hiprt::hipDeviceProp_t>() <= PROPS_BUFFER_BYTES);
    // SAFETY: only ever behind a pointer, to a buffer larger than the struct.
    unsafe impl Agrees<c_void> for hiprt::hipDeviceProp_t {}

    // SAFETY: pointers to agreeing types are the same C pointer type.
    unsafe impl<S: Agrees<O>, O> Agrees<*mut O> for *mut S {}
    // SAFETY: as above.
    unsafe impl<S: Agrees<O>, O> Agrees<*const O> for *const S {}

    /// `Self` (a hip-sys function's pointer type) and `Ours` are the same C
    /// prototype: as many parameters, each agreeing, and agreeing results.
    ///
    /// # Safety
    /// Only implemented below, from [`Agrees`].
    unsafe trait FnAgrees<Ours>: Copy {}

    macro_rules! fn_agrees {
        ($($s:ident $o:ident),*) => {
            // SAFETY: every parameter and the result agree.
            unsafe impl<RS: Agrees<RO>, RO, $($s: Agrees<$o>, $o),*>
                FnAgrees<unsafe extern "C" fn($($o),*) -> RO> for unsafe extern "C" fn($($s),*) -> RS
            {
            }
        };
    }
    fn_agrees!();
    fn_agrees!(S1 O1);
    fn_agrees!(S1 O1, S2 O2);
    fn_agrees!(S1 O1, S2 O2, S3 O3);
    fn_agrees!(S1 O1, S2 O2, S3 O3, S4 O4);
    fn_agrees!(S1 O1, S2 O2, S3 O3, S4 O4, S5 O5, S6 O6, S7 O7, S8 O8, S9 O9, S10 O10, S11 O11);

    /// hip-sys's function as this binding's pointer type.
    fn cast<S: FnAgrees<O>, O: Copy>(f: S) -> O {
        const { assert!(size_of::<S>() == size_of::<O>()) };
        // SAFETY: both are function pointers (same size, asserted) to the
        // same C prototype (`FnAgrees`), so calling the function through `O`
        // is calling it through its own prototype.
        unsafe { std::mem::transmute_copy(&f) }
    }

    /// `cast(hiprt::NAME)`, the underscores giving the arity.
    macro_rules! link {
        ($name:ident($($arg:tt),*)) => {
            cast(hiprt::$name as unsafe extern "C" fn($($arg),*) -> _)
        };
    }

    /// The file the linked runtime was loaded from (`dladdr` of `hipInit`).
    pub(super) fn runtime_file() -> Option<PathBuf> {
        let f: FnInit = link!(hipInit(_));
        // SAFETY: an all-zero `Dl_info` is valid (NULL pointers).
        let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
        // SAFETY: `f` is an address in the linked runtime; dladdr only fills
        // `info`, whose strings live as long as the runtime stays loaded
        // (always: it is linked).
        let found = unsafe { libc::dladdr(f as *const c_void, &mut info) };
        if found == 0 {
            return None;
        }
        // SAFETY: NULL or a NUL-terminated string (see above).
        unsafe { c_text(info.dli_fname) }
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
    }

    pub(super) fn api() -> HipApi {
        HipApi {
            path: runtime_file()
                .map(|p| format!("{} (linked)", p.display()))
                .unwrap_or_else(|| "libamdhip64 (linked)".to_string()),
            init: link!(hipInit(_)),
            get_device_count: link!(hipGetDeviceCount(_)),
            set_device: link!(hipSetDevice(_)),
            device_get: link!(hipDeviceGet(_, _)),
            device_get_name: link!(hipDeviceGetName(_, _, _)),
            device_total_mem: link!(hipDeviceTotalMem(_, _)),
            driver_get_version: link!(hipDriverGetVersion(_)),
            runtime_get_version: link!(hipRuntimeGetVersion(_)),
            device_get_uuid: Some(link!(hipDeviceGetUuid(_, _))),
            device_get_pci_bus_id: Some(link!(hipDeviceGetPCIBusId(_, _, _))),
            // hip-sys (ROCm 5.4's headers) has only the ROCm 5 layout's
            // function; ROCm 6 still exports it under this name.
            get_device_properties: Some((
                link!(hipGetDeviceProperties(_, _)),
                PROPS_R0000_ARCH_OFFSET,
            )),
            malloc: link!(hipMalloc(_, _)),
            free: link!(hipFree(_)),
            memcpy: link!(hipMemcpy(_, _, _, _)),
            device_synchronize: link!(hipDeviceSynchronize()),
            module_load_data: link!(hipModuleLoadData(_, _)),
            module_unload: link!(hipModuleUnload(_)),
            module_get_function: link!(hipModuleGetFunction(_, _, _)),
            module_launch_kernel: link!(hipModuleLaunchKernel(_, _, _, _, _, _, _, _, _, _, _)),
            get_error_string: link!(hipGetErrorString(_)),
            get_error_name: link!(hipGetErrorName(_)),
            _lib: None,
        }
    }
}

/// What hiprtc produced: the code object and the compiler's log (warnings).
#[derive(Debug, Clone)]
pub struct CompileOutput {
    pub code: Vec<u8>,
    pub log: String,
}

/// hiprtc's functions, valid while `_lib` is loaded.
pub struct Hiprtc {
    /// Where the `hiprtc*` symbols were found.
    pub path: String,
    create_program: FnRtcCreateProgram,
    compile_program: FnRtcCompileProgram,
    get_program_log_size: FnRtcGetSize,
    get_program_log: FnRtcGetBytes,
    get_code_size: FnRtcGetSize,
    get_code: FnRtcGetBytes,
    destroy_program: FnRtcDestroyProgram,
    get_error_string: FnRtcGetErrorString,
    _lib: libloading::Library,
}

/// Destroys a hiprtc program when dropped.
struct Program<'a> {
    rtc: &'a Hiprtc,
    p: HiprtcProgram,
}

impl Drop for Program<'_> {
    fn drop(&mut self) {
        if self.p.is_null() {
            return;
        }
        // SAFETY: `p` was created by hiprtcCreateProgram and is destroyed once.
        unsafe {
            (self.rtc.destroy_program)(&mut self.p);
        }
    }
}

impl Hiprtc {
    /// Loads hiprtc (see the module documentation for where).
    pub fn load() -> Result<Hiprtc, String> {
        let explicit = std::env::var_os(HIPRTC_LIBRARY_ENV).is_some_and(|p| !p.is_empty());
        let mut cands = candidates(HIPRTC_LIBRARY_ENV, HIPRTC_SONAMES);
        if !explicit {
            cands.extend(runtime_candidates());
        }
        let mut failures = Vec::new();
        // Each candidate must open *and* export hiprtc: a ROCm 6 runtime
        // without libhiprtc beside it opens but has no hiprtc symbols.
        for c in &cands {
            let (lib, path) = match open_first("hiprtc", std::slice::from_ref(c)) {
                Ok(x) => x,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            match Self::bind(lib, path) {
                Ok(r) => return Ok(r),
                Err(e) => failures.push(e),
            }
        }
        Err(format!(
            "hiprtc not found (libhiprtc.so, or libamdhip64.so.5 which exports it in ROCm 5): {}",
            failures.join("; ")
        ))
    }

    fn bind(lib: libloading::Library, path: String) -> Result<Hiprtc, String> {
        // SAFETY: each type is the C prototype in hiprtc.h; the pointers live
        // in the returned struct with the library that backs them.
        unsafe {
            Ok(Hiprtc {
                create_program: sym(&lib, &path, "hiprtcCreateProgram")?,
                compile_program: sym(&lib, &path, "hiprtcCompileProgram")?,
                get_program_log_size: sym(&lib, &path, "hiprtcGetProgramLogSize")?,
                get_program_log: sym(&lib, &path, "hiprtcGetProgramLog")?,
                get_code_size: sym(&lib, &path, "hiprtcGetCodeSize")?,
                get_code: sym(&lib, &path, "hiprtcGetCode")?,
                destroy_program: sym(&lib, &path, "hiprtcDestroyProgram")?,
                get_error_string: sym(&lib, &path, "hiprtcGetErrorString")?,
                path,
                _lib: lib,
            })
        }
    }

    fn result_text(&self, r: HiprtcResult) -> String {
        // SAFETY: takes any value; returns NULL or a static string.
        unsafe { c_text((self.get_error_string)(r)) }
            .map(|s| format!("{s} [{r}]"))
            .unwrap_or_else(|| format!("hiprtc error {r}"))
    }

    fn fail(&self, what: &str, r: HiprtcResult) -> Result<(), String> {
        if r == HIPRTC_SUCCESS {
            Ok(())
        } else {
            Err(format!("{what} failed: {}", self.result_text(r)))
        }
    }

    /// Compiles `source` (called `name` in messages) with in-memory
    /// `headers` (include name, text) and `options` into a code object. The
    /// `Err` carries hiprtc's result and the compiler's whole log.
    pub fn compile(
        &self,
        source: &str,
        name: &str,
        headers: &[(&str, &str)],
        options: &[&str],
    ) -> Result<CompileOutput, String> {
        let z = |s: &str, what: &str| {
            CString::new(s).map_err(|_| format!("hiprtc: the {what} contains a NUL byte"))
        };
        let src = z(source, "source")?;
        let cname = z(name, "program name")?;
        let header_texts = headers
            .iter()
            .map(|(_, t)| z(t, "header"))
            .collect::<Result<Vec<_>, _>>()?;
        let header_names = headers
            .iter()
            .map(|(n, _)| z(n, "header name"))
            .collect::<Result<Vec<_>, _>>()?;
        let opts = options
            .iter()
            .map(|o| z(o, "option"))
            .collect::<Result<Vec<_>, _>>()?;
        let header_ptrs: Vec<*const c_char> = header_texts.iter().map(|c| c.as_ptr()).collect();
        let name_ptrs: Vec<*const c_char> = header_names.iter().map(|c| c.as_ptr()).collect();
        let opt_ptrs: Vec<*const c_char> = opts.iter().map(|c| c.as_ptr()).collect();
        let count = |n: usize| c_int::try_from(n).map_err(|_| "hiprtc: too many".to_string());

        let mut prog = Program {
            rtc: self,
            p: std::ptr::null_mut(),
        };
        // SAFETY: every string is NUL-terminated and outlives the call; the
        // header arrays have `headers.len()` entries; valid out pointer.
        let r = unsafe {
            (self.create_program)(
                &mut prog.p,
                src.as_ptr(),
                cname.as_ptr(),
                count(headers.len())?,
                if headers.is_empty() {
                    std::ptr::null()
                } else {
                    header_ptrs.as_ptr()
                },
                if headers.is_empty() {
                    std::ptr::null()
                } else {
                    name_ptrs.as_ptr()
                },
            )
        };
        if r != HIPRTC_SUCCESS {
            // Nothing to destroy.
            prog.p = std::ptr::null_mut();
            return Err(format!(
                "hiprtcCreateProgram failed: {}",
                self.result_text(r)
            ));
        }
        // SAFETY: a created program; `opt_ptrs` has `options.len()` strings.
        let r = unsafe { (self.compile_program)(prog.p, count(options.len())?, opt_ptrs.as_ptr()) };
        let log = self.log(prog.p);
        if r != HIPRTC_SUCCESS {
            return Err(format!(
                "hiprtc could not compile {name} ({}): {}\n{}",
                options.join(" "),
                self.result_text(r),
                log.trim_end()
            ));
        }
        let mut size = 0usize;
        // SAFETY: a compiled program; valid out pointer.
        self.fail("hiprtcGetCodeSize", unsafe {
            (self.get_code_size)(prog.p, &mut size)
        })?;
        let mut code = vec![0u8; size];
        if size > 0 {
            // SAFETY: the buffer holds the `size` bytes hiprtc reported.
            self.fail("hiprtcGetCode", unsafe {
                (self.get_code)(prog.p, code.as_mut_ptr().cast())
            })?;
        }
        if code.is_empty() {
            return Err(format!(
                "hiprtc compiled {name} but returned an empty code object\n{log}"
            ));
        }
        Ok(CompileOutput { code, log })
    }

    /// The program's log, or a note saying why there is none.
    fn log(&self, p: HiprtcProgram) -> String {
        let mut size = 0usize;
        // SAFETY: a created program; valid out pointer.
        let r = unsafe { (self.get_program_log_size)(p, &mut size) };
        if r != HIPRTC_SUCCESS {
            return format!("(no log: hiprtcGetProgramLogSize: {})", self.result_text(r));
        }
        if size == 0 {
            return String::new();
        }
        let mut buf = vec![0u8; size];
        // SAFETY: the buffer holds the `size` bytes hiprtc reported.
        let r = unsafe { (self.get_program_log)(p, buf.as_mut_ptr().cast()) };
        if r != HIPRTC_SUCCESS {
            return format!("(no log: hiprtcGetProgramLog: {})", self.result_text(r));
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }
}

/// A C string returned by the runtime, if not NULL.
///
/// # Safety
/// `p` is NULL or a NUL-terminated string that lives for the call.
unsafe fn c_text(p: *const c_char) -> Option<String> {
    if p.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The text of a NUL-padded buffer (the whole buffer if there is no NUL).
fn buf_text(buf: &[c_char]) -> String {
    let bytes: Vec<u8> = buf
        .iter()
        .map(|&c| c as u8)
        .take_while(|&b| b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// The HIP runtime, loaded once per process and never unloaded: closing
/// libamdhip64 after `hipInit` crashes in ROCm's teardown, and the runtime
/// cannot be initialised again after a reload (every provider instance and
/// every `open_all` shares this one).
pub fn runtime() -> Result<&'static HipApi, String> {
    static RUNTIME: OnceLock<Result<HipApi, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(HipApi::load)
        .as_ref()
        .map_err(Clone::clone)
}

/// hiprtc, loaded on first use, once per process, never unloaded (see [`runtime`]).
pub fn hiprtc() -> Result<&'static Hiprtc, String> {
    static HIPRTC: OnceLock<Result<Hiprtc, String>> = OnceLock::new();
    HIPRTC
        .get_or_init(Hiprtc::load)
        .as_ref()
        .map_err(Clone::clone)
}
