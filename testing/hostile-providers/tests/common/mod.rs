//! A minimal host for the hostile libraries, straight on the C ABI (no SDK
//! loader in between): open a library, create an instance, allocate, copy,
//! run a kernel, read statuses.
#![allow(dead_code)]

use libloading::Library;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::{Mutex, MutexGuard};
use vsdk_ffi::*;

/// The libraries read their configuration with getenv, and a test changes it
/// with set_var: every test holds this for its whole body, so no C code reads
/// the environment while another test writes it.
pub fn env_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The CPU provider, a dev-dependency: cargo builds it into target/<profile>/
/// (test programs run from target/<profile>/deps/).
pub fn cpu_provider() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    let deps = exe.parent().expect("test program in a directory");
    let file = format!(
        "{}vsdk_provider_cpu{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    );
    let candidates = [deps.parent().map(|p| p.join(&file)), Some(deps.join(&file))];
    candidates
        .iter()
        .flatten()
        .find(|p| p.is_file())
        .cloned()
        .unwrap_or_else(|| panic!("{file} is not built beside {}", deps.display()))
}

/// Points every hostile library loaded from now on at the CPU provider.
pub fn target_cpu() {
    std::env::set_var(vsdk_hostile_providers::TARGET_ENV, cpu_provider());
}

/// A fresh seed per run (printed so a failure reproduces), or `VSDK_TEST_SEED`.
pub fn rng(test: &str) -> ChaCha8Rng {
    let seed = std::env::var("VSDK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: VSDK_TEST_SEED={seed}");
    ChaCha8Rng::seed_from_u64(seed)
}

/// Exact GELU in f64: x/2 * (1 + erf(x / sqrt 2)).
pub fn gelu(x: f32) -> f64 {
    let x = f64::from(x);
    0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2))
}

/// Asserts `y` is GELU of `x` within 1e-5 relative, element by element.
pub fn assert_gelu(x: &[f32], y: &[f32]) {
    assert_eq!(x.len(), y.len());
    for (i, (&x, &y)) in x.iter().zip(y).enumerate() {
        let want = gelu(x);
        let err = (f64::from(y) - want).abs();
        assert!(
            err <= 1e-5 * want.abs(),
            "element {i}: gelu({x}) = {want}, got {y} (relative error {})",
            err / want.abs()
        );
    }
}

pub fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// FNV-1a-64, as the replay variant keys its recordings.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

type Entry = unsafe extern "C" fn(u32, *mut u32) -> *const vsdk_provider_api_t;

/// A library that exports `vsdk_get_provider_api`, loaded.
pub fn load(path: &str) -> Library {
    // SAFETY: loading runs the library's initialisers: these are the test
    // fixtures built by this crate, which have none beyond libc's.
    let lib = unsafe { Library::new(path) }.unwrap_or_else(|e| panic!("cannot load {path}: {e}"));
    // SAFETY: the symbol has the provider ABI's entry type (provider.h).
    unsafe { lib.get::<Entry>(VSDK_ENTRY_SYMBOL) }
        .unwrap_or_else(|e| panic!("{path} exports no vsdk_get_provider_api: {e}"));
    lib
}

/// The table of a loaded library, negotiated at ABI version 1.
pub fn table(lib: &Library) -> &'static vsdk_provider_api_t {
    // SAFETY: the symbol has the provider ABI's entry type (provider.h).
    let entry = unsafe { lib.get::<Entry>(VSDK_ENTRY_SYMBOL) }.expect("entry symbol");
    let mut answered = 0;
    // SAFETY: the entry point takes a version and a valid out pointer.
    let api = unsafe { entry(VSDK_ABI_VERSION, &mut answered) };
    assert_eq!(answered, VSDK_ABI_VERSION);
    assert!(!api.is_null(), "the library refused ABI version 1");
    // SAFETY: non-NULL, and static in the library, which the caller keeps
    // loaded for as long as it uses the table.
    unsafe { &*api }
}

/// Ok, or the status's (code, message); frees the status.
pub fn status(api: &vsdk_provider_api_t, st: *mut vsdk_status_t) -> Result<(), (i32, String)> {
    if st.is_null() {
        return Ok(());
    }
    // SAFETY: a non-NULL status from this table, read then destroyed once;
    // its message is NUL-terminated and lives until the destroy.
    unsafe {
        let code = api.status_code.unwrap()(st);
        let message = CStr::from_ptr(api.status_message.unwrap()(st))
            .to_string_lossy()
            .into_owned();
        api.status_destroy.unwrap()(st);
        Err((code, message))
    }
}

/// A new instance, or `create`'s status as (code, message).
pub fn create(api: &vsdk_provider_api_t) -> Result<*mut vsdk_provider_t, (i32, String)> {
    let options = vsdk_create_options_t {
        struct_size: size_of::<vsdk_create_options_t>(),
        host_abi_version: VSDK_ABI_VERSION,
        reserved: 0,
    };
    let mut provider = null_mut();
    // SAFETY: `create` is a required slot; options and out pointer are valid
    // for the call.
    status(api, unsafe { api.create.unwrap()(&options, &mut provider) })?;
    Ok(provider)
}

/// A NUL-terminated string the provider owns, copied.
pub fn c_string(p: *const std::ffi::c_char) -> String {
    assert!(!p.is_null(), "a provider string is NULL");
    // SAFETY: non-NULL, NUL-terminated and owned by the live instance (provider.h).
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub const F32: vsdk_dtype_t = vsdk_dtype_t {
    code: VSDK_DTYPE_FLOAT,
    bits: 32,
    lanes: 1,
};
pub const F16: vsdk_dtype_t = vsdk_dtype_t {
    code: VSDK_DTYPE_FLOAT,
    bits: 16,
    lanes: 1,
};
pub const BF16: vsdk_dtype_t = vsdk_dtype_t {
    code: VSDK_DTYPE_BFLOAT,
    bits: 16,
    lanes: 1,
};

/// A compact tensor (f32 unless made with [`Tensor::typed`]) at
/// `byte_offset` inside a device buffer.
pub struct Tensor {
    pub ptr: *mut c_void,
    pub byte_offset: u64,
    pub shape: Vec<i64>,
    pub dtype: vsdk_dtype_t,
    strides: Vec<i64>,
}

impl Tensor {
    pub fn new(ptr: *mut c_void, byte_offset: u64, shape: &[i64]) -> Tensor {
        Tensor::typed(ptr, byte_offset, shape, F32)
    }
    pub fn typed(ptr: *mut c_void, byte_offset: u64, shape: &[i64], dtype: vsdk_dtype_t) -> Tensor {
        let mut strides = vec![1i64; shape.len()];
        for k in (0..shape.len().saturating_sub(1)).rev() {
            strides[k] = strides[k + 1] * shape[k + 1];
        }
        Tensor {
            ptr,
            byte_offset,
            shape: shape.to_vec(),
            dtype,
            strides,
        }
    }
    pub fn bytes(&self) -> usize {
        self.shape.iter().product::<i64>() as usize * usize::from(self.dtype.bits / 8)
    }
    fn raw(&self, device: vsdk_device_t) -> vsdk_tensor_t {
        vsdk_tensor_t {
            data: self.ptr,
            device,
            ndim: self.shape.len() as i32,
            dtype: self.dtype,
            shape: self.shape.as_ptr(),
            strides: self.strides.as_ptr(),
            byte_offset: self.byte_offset,
        }
    }
}

/// One instance of a provider on its device 0; frees its buffers and destroys
/// the instance when dropped.
pub struct Driver {
    pub api: &'static vsdk_provider_api_t,
    pub provider: *mut vsdk_provider_t,
    pub device: vsdk_device_t,
    buffers: Vec<*mut c_void>,
    _lib: Library,
}

impl Driver {
    pub fn open(path: &str) -> Driver {
        let lib = load(path);
        let api = table(&lib);
        let provider = create(api).unwrap_or_else(|e| panic!("create of {path}: {e:?}"));
        let mut driver = Driver {
            api,
            provider,
            device: vsdk_device_t {
                device_type: 0,
                device_id: 0,
            },
            buffers: Vec::new(),
            _lib: lib,
        };
        driver.device = driver.device_info(0).device;
        driver
    }

    pub fn name(&self) -> String {
        let mut info = vsdk_provider_info_t {
            struct_size: size_of::<vsdk_provider_info_t>(),
            ..Default::default()
        };
        // SAFETY: a live instance and a valid out struct (as for every slot below).
        status(self.api, unsafe {
            self.api.get_info.unwrap()(self.provider, &mut info)
        })
        .expect("get_info");
        c_string(info.name)
    }

    pub fn device_info(&self, index: u32) -> vsdk_device_info_t {
        let mut info = vsdk_device_info_t {
            struct_size: size_of::<vsdk_device_info_t>(),
            ..Default::default()
        };
        // SAFETY: see `name`.
        status(self.api, unsafe {
            self.api.device_info.unwrap()(self.provider, index, &mut info)
        })
        .expect("device_info");
        info
    }

    pub fn device_count(&self) -> u32 {
        let mut n = 0;
        // SAFETY: see `name`.
        status(self.api, unsafe {
            self.api.device_count.unwrap()(self.provider, &mut n)
        })
        .expect("device_count");
        n
    }

    pub fn kernel_count(&self) -> u64 {
        let mut n = 0;
        // SAFETY: see `name`.
        status(self.api, unsafe {
            self.api.kernel_count.unwrap()(self.provider, &mut n)
        })
        .expect("kernel_count");
        n
    }

    /// "name@version" of kernel `index`.
    pub fn kernel_name(&self, index: u64) -> String {
        let mut info = vsdk_kernel_info_t {
            struct_size: size_of::<vsdk_kernel_info_t>(),
            ..Default::default()
        };
        // SAFETY: see `name`.
        status(self.api, unsafe {
            self.api.kernel_info.unwrap()(self.provider, index, &mut info)
        })
        .expect("kernel_info");
        format!("{}@{}", c_string(info.name), info.version)
    }

    pub fn alloc(&mut self, bytes: usize) -> *mut c_void {
        let mut ptr = null_mut();
        // SAFETY: see `name`.
        status(self.api, unsafe {
            self.api.alloc.unwrap()(self.provider, 0, bytes as u64, 64, &mut ptr)
        })
        .expect("alloc");
        self.buffers.push(ptr);
        ptr
    }

    pub fn upload(&self, ptr: *mut c_void, offset: usize, bytes: &[u8]) {
        // SAFETY: `ptr` is this instance's buffer; the provider checks the
        // range; `bytes` is valid for the call.
        status(self.api, unsafe {
            self.api.copy_to_device.unwrap()(
                self.provider,
                0,
                ptr,
                offset as u64,
                bytes.as_ptr().cast(),
                bytes.len() as u64,
            )
        })
        .expect("copy_to_device");
    }

    pub fn download(&self, ptr: *mut c_void, offset: usize, len: usize) -> Vec<u8> {
        let mut bytes = vec![0u8; len];
        // SAFETY: as for `upload`, into `bytes` of `len` bytes.
        status(self.api, unsafe {
            self.api.copy_to_host.unwrap()(
                self.provider,
                0,
                bytes.as_mut_ptr().cast(),
                ptr,
                offset as u64,
                len as u64,
            )
        })
        .expect("copy_to_host");
        bytes
    }

    /// `kernel`@1 with no attributes, then synchronize.
    pub fn execute(
        &self,
        kernel: &str,
        inputs: &[&Tensor],
        outputs: &[&Tensor],
    ) -> Result<(), (i32, String)> {
        let name = CString::new(kernel).unwrap();
        let raw_in: Vec<vsdk_tensor_t> = inputs.iter().map(|t| t.raw(self.device)).collect();
        let raw_out: Vec<vsdk_tensor_t> = outputs.iter().map(|t| t.raw(self.device)).collect();
        let call = vsdk_kernel_call_t {
            struct_size: size_of::<vsdk_kernel_call_t>(),
            kernel: name.as_ptr(),
            version: 1,
            device_index: 0,
            attrs: std::ptr::null(),
            num_attrs: 0,
            inputs: raw_in.as_ptr(),
            num_inputs: raw_in.len() as u64,
            outputs: raw_out.as_ptr(),
            num_outputs: raw_out.len() as u64,
        };
        // SAFETY: `call` and everything it points to (name, descriptors,
        // shapes) live until the call returns; the buffers are this instance's.
        status(self.api, unsafe {
            self.api.execute.unwrap()(self.provider, &call)
        })?;
        // SAFETY: see `name`.
        status(self.api, unsafe {
            self.api.synchronize.unwrap()(self.provider, 0)
        })
    }

    /// Uploads `x` into a fresh buffer and runs vsdk.gelu into `out` (which
    /// the caller allocated and poisoned as it likes).
    pub fn gelu_into(&mut self, x: &[f32], out: &Tensor) -> Result<(), (i32, String)> {
        let input = self.alloc(x.len() * 4);
        self.upload(input, 0, &f32_bytes(x));
        let input = Tensor::new(input, 0, &out.shape);
        self.execute("vsdk.gelu", &[&input], &[out])
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: each buffer came from this instance's `alloc` and is freed
        // once, then the instance is destroyed once, with nothing left using it.
        unsafe {
            for &ptr in &self.buffers {
                self.api.free.unwrap()(self.provider, 0, ptr);
            }
            self.api.destroy.unwrap()(self.provider);
        }
    }
}

/// Live processes whose `/proc/<pid>/comm` is `name` (zombies are dead:
/// not counted).
pub fn processes_named(name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    let Ok(proc) = std::fs::read_dir("/proc") else {
        return found;
    };
    for entry in proc.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        // The state follows the command in parentheses, which may hold spaces.
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.chars().next());
        if comm.trim_end_matches('\n') == name && !matches!(state, Some('Z' | 'X') | None) {
            found.push(pid);
        }
    }
    found
}

/// Kills every process named like one of these when dropped (when the
/// test fails too): what a hostile driver may leave behind.
pub struct Reaper(pub &'static [&'static str]);

impl Drop for Reaper {
    fn drop(&mut self) {
        // A few rounds: a process forking when the first round looked.
        for _ in 0..20 {
            let left: Vec<i32> = self.0.iter().flat_map(|n| processes_named(n)).collect();
            if left.is_empty() {
                return;
            }
            for pid in left {
                // SAFETY: kill has no memory effects; at worst the pid is gone.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
