//! NVRTC, loaded at run time with `libloading` and bound by hand (ten
//! functions): cudarc's binding finds the library only by soname and cannot
//! return a cubin or the ptxas log, both of which the provider and the
//! compile tests need.
//!
//! The library is `$VIPS_NVRTC_LIBRARY` (a file path) when set, else
//! `libnvrtc.so.12` or `libnvrtc.so` on the loader's search path, else the
//! CUDA toolkit's `/usr/local/cuda/lib64/libnvrtc.so.12`. The CUDA
//! headers that NVRTC does not carry (`cuda_fp16.h`, …) are looked up by
//! [`include_dir`].

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The name NVRTC gives the kernel source in its messages.
pub const PROGRAM_NAME: &str = "vips_kernels.cu";

/// Tried when `VIPS_NVRTC_LIBRARY` is not set, in order: the loader's
/// search path, then a CUDA toolkit's default location.
const CANDIDATES: [&str; 3] = [
    "libnvrtc.so.12",
    "libnvrtc.so",
    "/usr/local/cuda/lib64/libnvrtc.so.12",
];

const NVRTC_SUCCESS: c_int = 0;

type Program = *mut c_void;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;
type ErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type CreateProgramFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileProgramFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type SizeFn = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type BytesFn = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyProgramFn = unsafe extern "C" fn(*mut Program) -> c_int;
type IntOutFn = unsafe extern "C" fn(*mut c_int) -> c_int;

/// The loaded library and the functions used. The function pointers stay
/// valid as long as `_lib` is loaded, which is for the life of the process
/// (the value lives in a static).
struct Api {
    _lib: libloading::Library,
    path: Option<PathBuf>,
    version: VersionFn,
    error_string: ErrorStringFn,
    create_program: CreateProgramFn,
    compile_program: CompileProgramFn,
    log_size: SizeFn,
    log: BytesFn,
    ptx_size: SizeFn,
    ptx: BytesFn,
    destroy_program: DestroyProgramFn,
    /// CUDA 11.1+.
    cubin: Option<(SizeFn, BytesFn)>,
    /// CUDA 11.2+.
    supported_archs: Option<(IntOutFn, IntOutFn)>,
}

/// What a compilation produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Image {
    /// For `--gpu-architecture=sm_XY`: machine code for exactly that GPU.
    Cubin(Vec<u8>),
    /// For `--gpu-architecture=compute_XY`: PTX, NUL-terminated (as
    /// `cuModuleLoadData` takes it); the driver compiles it for the device.
    Ptx(Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct Compiled {
    pub image: Image,
    /// The PTX text, also for a cubin (NVRTC 12 keeps it): the kernels'
    /// `.entry` lines list what the module exports.
    pub ptx: String,
    /// NVRTC's program log: warnings, and with `--ptxas-options=-v` ptxas'
    /// resource report per kernel.
    pub log: String,
}

/// What to compile for: machine code for one GPU, or PTX for a virtual
/// architecture that newer GPUs can JIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Cubin(u32),
    Ptx(u32),
}

impl Target {
    /// The `--gpu-architecture=` option.
    pub fn option(self) -> String {
        match self {
            Target::Cubin(a) => format!("--gpu-architecture=sm_{a}"),
            Target::Ptx(a) => format!("--gpu-architecture=compute_{a}"),
        }
    }

    /// Chooses for a device of compute capability `major.minor`, given the
    /// architectures this NVRTC knows (`None`: it cannot say, before 11.2).
    /// A cubin when NVRTC knows the device (cubins built by a newer CUDA 12
    /// load on any CUDA 12 driver); else PTX for the newest architecture
    /// NVRTC knows that the device can run, which the driver JIT-compiles.
    pub fn for_device(major: u32, minor: u32, supported: Option<&[u32]>) -> Result<Self, String> {
        let arch = major * 10 + minor;
        let Some(archs) = supported else {
            return Ok(Target::Cubin(arch));
        };
        if archs.contains(&arch) {
            return Ok(Target::Cubin(arch));
        }
        match archs.iter().copied().filter(|&a| a <= arch).max() {
            Some(a) => Ok(Target::Ptx(a)),
            None => Err(format!(
                "NVRTC does not support compute capability {major}.{minor}: its oldest \
                 architecture is sm_{}",
                archs.iter().min().copied().unwrap_or(0)
            )),
        }
    }
}

static API: OnceLock<Result<Api, String>> = OnceLock::new();

fn api() -> Result<&'static Api, String> {
    API.get_or_init(load).as_ref().map_err(Clone::clone)
}

fn load() -> Result<Api, String> {
    let (lib, requested) = match std::env::var_os("VIPS_NVRTC_LIBRARY") {
        Some(path) if !path.is_empty() => {
            // SAFETY: loading NVRTC runs its initialisers, which only set up
            // the library itself; the path is the user's explicit choice.
            let lib = unsafe { libloading::Library::new(&path) }.map_err(|e| {
                format!(
                    "NVRTC not found: VIPS_NVRTC_LIBRARY={} could not be loaded: {e}",
                    Path::new(&path).display()
                )
            })?;
            (lib, Some(PathBuf::from(path)))
        }
        _ => {
            let mut failures = Vec::new();
            let mut found = None;
            for name in CANDIDATES {
                // SAFETY: as above; the soname is NVRTC's own.
                match unsafe { libloading::Library::new(name) } {
                    Ok(lib) => {
                        found = Some(lib);
                        break;
                    }
                    Err(e) => failures.push(format!("{name}: {e}")),
                }
            }
            let lib = found.ok_or_else(|| {
                format!(
                    "NVRTC not found ({}): set VIPS_NVRTC_LIBRARY to a libnvrtc.so.12 (from a \
                     CUDA toolkit or pip's nvidia-cuda-nvrtc-cu12 wheel; in the VIPS SDK's \
                     repository `eval \"$(tools/gpu-toolchains)\"` installs one and sets it)",
                    failures.join("; ")
                )
            })?;
            (lib, None)
        }
    };

    fn symbol<T: Copy>(lib: &libloading::Library, name: &str) -> Result<T, String> {
        // SAFETY: every `T` used below is the C signature of the function of
        // that name in nvrtc.h (CUDA 11/12), which NVRTC exports unchanged.
        unsafe { lib.get::<T>(name.as_bytes()) }
            .map(|s| *s)
            .map_err(|e| format!("the NVRTC library lacks {name} (too old?): {e}"))
    }
    let version: VersionFn = symbol(&lib, "nvrtcVersion")?;
    let cubin = match (
        symbol::<SizeFn>(&lib, "nvrtcGetCUBINSize"),
        symbol::<BytesFn>(&lib, "nvrtcGetCUBIN"),
    ) {
        (Ok(size), Ok(bytes)) => Some((size, bytes)),
        _ => None,
    };
    let supported_archs = match (
        symbol::<IntOutFn>(&lib, "nvrtcGetNumSupportedArchs"),
        symbol::<IntOutFn>(&lib, "nvrtcGetSupportedArchs"),
    ) {
        (Ok(n), Ok(list)) => Some((n, list)),
        _ => None,
    };
    let path = requested.or_else(|| loaded_from(version as *const c_void));
    Ok(Api {
        path,
        version,
        error_string: symbol(&lib, "nvrtcGetErrorString")?,
        create_program: symbol(&lib, "nvrtcCreateProgram")?,
        compile_program: symbol(&lib, "nvrtcCompileProgram")?,
        log_size: symbol(&lib, "nvrtcGetProgramLogSize")?,
        log: symbol(&lib, "nvrtcGetProgramLog")?,
        ptx_size: symbol(&lib, "nvrtcGetPTXSize")?,
        ptx: symbol(&lib, "nvrtcGetPTX")?,
        destroy_program: symbol(&lib, "nvrtcDestroyProgram")?,
        cubin,
        supported_archs,
        _lib: lib,
    })
}

/// The file a loaded symbol lives in (`dladdr`), to find the headers beside
/// a library that was loaded by soname.
fn loaded_from(addr: *const c_void) -> Option<PathBuf> {
    // SAFETY: an all-zero Dl_info is a valid value (null pointers).
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: `addr` is the address of a function in a loaded library and
    // `info` is a valid out-parameter; dladdr only reads the loader's tables.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dli_fname is a NUL-terminated path owned by the loader, valid
    // while the library stays loaded (for the process: `API` is static).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    let path = PathBuf::from(name.to_str().ok()?);
    path.is_absolute().then_some(path)
}

/// Where NVRTC was loaded from, when known.
pub fn library_path() -> Result<Option<PathBuf>, String> {
    Ok(api()?.path.clone())
}

/// NVRTC's version, e.g. `(12, 9)`.
pub fn version() -> Result<(i32, i32), String> {
    let api = api()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: two valid out-parameters.
    let r = unsafe { (api.version)(&mut major, &mut minor) };
    check(api, r, "nvrtcVersion")?;
    Ok((major, minor))
}

/// The `sm_XY` architectures this NVRTC compiles for (`XY` as numbers), or
/// `None` when it is too old to say.
pub fn supported_archs() -> Result<Option<Vec<u32>>, String> {
    let api = api()?;
    let Some((count_fn, list_fn)) = api.supported_archs else {
        return Ok(None);
    };
    let mut n: c_int = 0;
    // SAFETY: a valid out-parameter.
    let r = unsafe { count_fn(&mut n) };
    check(api, r, "nvrtcGetNumSupportedArchs")?;
    let mut archs = vec![0 as c_int; usize::try_from(n).unwrap_or(0)];
    if !archs.is_empty() {
        // SAFETY: the buffer holds exactly the count NVRTC just reported.
        let r = unsafe { list_fn(archs.as_mut_ptr()) };
        check(api, r, "nvrtcGetSupportedArchs")?;
    }
    Ok(Some(
        archs
            .into_iter()
            .filter_map(|a| u32::try_from(a).ok())
            .collect(),
    ))
}

/// The directory holding `cuda_fp16.h` and `cuda_bf16.h`, which NVRTC does
/// not bundle: `$VIPS_CUDA_INCLUDE` when set; else, beside an NVRTC from
/// PyPI's wheel (`…/nvidia/cuda_nvrtc/lib/libnvrtc.so.12`), the runtime
/// wheel's `…/nvidia/cuda_runtime/include`; else `/usr/local/cuda/include`.
/// `None` when none exists.
pub fn include_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("VIPS_CUDA_INCLUDE").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    let beside_nvrtc = library_path().ok().flatten().and_then(|lib| {
        let dir = lib.parent()?.join("../../cuda_runtime/include");
        dir.is_dir().then_some(dir)
    });
    beside_nvrtc.or_else(|| {
        let dir = PathBuf::from("/usr/local/cuda/include");
        dir.is_dir().then_some(dir)
    })
}

/// Compiles `source` (named [`PROGRAM_NAME`]) with in-memory `headers`
/// (include name, text) and NVRTC `options`, adding `-I` [`include_dir`].
/// The image is a cubin when the options name an `sm_XY` architecture, else
/// PTX. On failure the error holds NVRTC's log (the compiler's error lines).
pub fn compile(
    source: &str,
    headers: &[(&str, &str)],
    options: &[String],
) -> Result<Compiled, String> {
    let api = api()?;
    let include = include_dir();
    let c = |s: &str, what: &str| {
        CString::new(s).map_err(|_| format!("the {what} contains a NUL byte"))
    };
    let src = c(source, "kernel source")?;
    let name = c(PROGRAM_NAME, "program name")?;
    let header_texts = headers
        .iter()
        .map(|(_, text)| c(text, "header"))
        .collect::<Result<Vec<_>, _>>()?;
    let header_names = headers
        .iter()
        .map(|(n, _)| c(n, "header name"))
        .collect::<Result<Vec<_>, _>>()?;
    let mut opts = options
        .iter()
        .map(|o| c(o, "compiler option"))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(dir) = &include {
        opts.push(c(&format!("-I{}", dir.display()), "include path")?);
    }
    let text_ptrs: Vec<*const c_char> = header_texts.iter().map(|h| h.as_ptr()).collect();
    let name_ptrs: Vec<*const c_char> = header_names.iter().map(|h| h.as_ptr()).collect();
    let opt_ptrs: Vec<*const c_char> = opts.iter().map(|o| o.as_ptr()).collect();
    let n_headers = c_int::try_from(headers.len()).map_err(|_| "too many headers".to_string())?;
    let n_opts = c_int::try_from(opt_ptrs.len()).map_err(|_| "too many options".to_string())?;

    let mut prog: Program = std::ptr::null_mut();
    // SAFETY: every string is NUL-terminated and outlives the call; the two
    // header arrays hold `n_headers` pointers each (NVRTC copies them).
    let r = unsafe {
        (api.create_program)(
            &mut prog,
            src.as_ptr(),
            name.as_ptr(),
            n_headers,
            if headers.is_empty() {
                std::ptr::null()
            } else {
                text_ptrs.as_ptr()
            },
            if headers.is_empty() {
                std::ptr::null()
            } else {
                name_ptrs.as_ptr()
            },
        )
    };
    check(api, r, "nvrtcCreateProgram")?;
    let program = ProgramGuard { api, prog };

    // SAFETY: `prog` is live; `opt_ptrs` holds `n_opts` NUL-terminated
    // strings that outlive the call.
    let r = unsafe { (api.compile_program)(program.prog, n_opts, opt_ptrs.as_ptr()) };
    let log = program.bytes(api.log_size, api.log, "nvrtcGetProgramLog")?;
    let log = String::from_utf8_lossy(trim_nul(&log)).into_owned();
    if r != NVRTC_SUCCESS {
        let mut msg = format!(
            "NVRTC could not compile {PROGRAM_NAME} ({}, options: {}):\n{}",
            error_name(api, r),
            options.join(" "),
            log.trim_end()
        );
        if include.is_none() {
            msg.push_str(
                "\n(no CUDA include directory was found for cuda_fp16.h: set VIPS_CUDA_INCLUDE)",
            );
        }
        return Err(msg);
    }
    let ptx = program.bytes(api.ptx_size, api.ptx, "nvrtcGetPTX")?;
    let cubin = match api.cubin {
        Some((size, bytes)) if program.size(size, "nvrtcGetCUBINSize")? > 0 => {
            Some(program.bytes(size, bytes, "nvrtcGetCUBIN")?)
        }
        _ => None,
    };
    let ptx_text = String::from_utf8_lossy(trim_nul(&ptx)).into_owned();
    let image = match cubin {
        Some(c) => Image::Cubin(c),
        None => {
            let mut ptx = ptx;
            if ptx.last() != Some(&0) {
                ptx.push(0);
            }
            Image::Ptx(ptx)
        }
    };
    Ok(Compiled {
        image,
        ptx: ptx_text,
        log,
    })
}

/// Destroys the program on every path out of [`compile`].
struct ProgramGuard {
    api: &'static Api,
    prog: Program,
}

impl ProgramGuard {
    fn size(&self, size_fn: SizeFn, what: &str) -> Result<usize, String> {
        let mut n = 0usize;
        // SAFETY: `prog` is live and `n` a valid out-parameter.
        let r = unsafe { size_fn(self.prog, &mut n) };
        check(self.api, r, what)?;
        Ok(n)
    }

    fn bytes(&self, size_fn: SizeFn, bytes_fn: BytesFn, what: &str) -> Result<Vec<u8>, String> {
        let n = self.size(size_fn, what)?;
        let mut buf = vec![0u8; n];
        if n > 0 {
            // SAFETY: the buffer holds the `n` bytes NVRTC reported for
            // this program's output.
            let r = unsafe { bytes_fn(self.prog, buf.as_mut_ptr().cast()) };
            check(self.api, r, what)?;
        }
        Ok(buf)
    }
}

impl Drop for ProgramGuard {
    fn drop(&mut self) {
        // SAFETY: `prog` came from nvrtcCreateProgram and is destroyed once.
        unsafe { (self.api.destroy_program)(&mut self.prog) };
    }
}

fn trim_nul(bytes: &[u8]) -> &[u8] {
    match bytes.iter().position(|&b| b == 0) {
        Some(end) => &bytes[..end],
        None => bytes,
    }
}

fn error_name(api: &Api, r: c_int) -> String {
    // SAFETY: nvrtcGetErrorString accepts any value and returns a static
    // string (or NULL).
    let p = unsafe { (api.error_string)(r) };
    if p.is_null() {
        return format!("NVRTC error {r}");
    }
    // SAFETY: a NUL-terminated static string owned by NVRTC.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn check(api: &Api, r: c_int, what: &str) -> Result<(), String> {
    if r == NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(format!("{what} failed: {}", error_name(api, r)))
    }
}
