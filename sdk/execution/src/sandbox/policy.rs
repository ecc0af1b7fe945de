//! What the runner asks of a worker's sandbox: limits, the files it sees,
//! its environment. Sent to the worker as the first message; the same for
//! the CLI and the C library (`vsdk_run`).

use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// A host path bound into the worker's private root at the same place.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bind {
    /// Absolute, as bytes (paths need not be UTF-8).
    pub path: Vec<u8>,
    pub writable: bool,
}

impl Bind {
    pub fn path(&self) -> PathBuf {
        use std::os::unix::ffi::OsStringExt;
        PathBuf::from(OsString::from_vec(self.path.clone()))
    }

    fn of(path: &Path, writable: bool) -> Bind {
        use std::os::unix::ffi::OsStrExt;
        Bind {
            path: path.as_os_str().as_bytes().to_vec(),
            writable,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// The most memory the worker's processes may hold (cgroup when the
    /// runner could make one, and RLIMIT_DATA).
    pub memory_limit_bytes: u64,
    /// A cgroup directory the runner made for this worker (the launcher
    /// joins it before creating the worker's namespaces).
    pub cgroup: Option<Vec<u8>>,
    /// RLIMIT_NPROC: threads count too.
    pub max_processes: u64,
    /// RLIMIT_FSIZE: the largest file it may write (a private /tmp, caches).
    pub max_file_bytes: u64,
    /// The size of its private /tmp.
    pub tmp_bytes: u64,
    /// Bound besides the system's libraries.
    pub binds: Vec<Bind>,
    /// Hidden even where a bind would show them (the signing key).
    pub masked: Vec<Vec<u8>>,
}

/// The user a root runner's worker is outside its namespace.
pub const NOBODY: u32 = 65534;

/// 1 GiB, plus 16 times the largest stage's tensors: both runs of a stage
/// with its guards are about 3 times, a GPU driver's host-side staging
/// about as much again.
pub const BASE_MEMORY: u64 = 1 << 30;
pub const MEMORY_PER_STAGE_BYTE: u64 = 16;
/// A 4-way SMT machine with 512 hardware threads and headroom for helpers.
const PROCESSES_PER_CPU: u64 = 4;
const BASE_PROCESSES: u64 = 256;
const MAX_FILE_BYTES: u64 = 1 << 30;
const TMP_BYTES: u64 = 256 << 20;

/// System directories every worker sees read-only: the dynamic linker, the
/// C library and whatever a driver links.
pub const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/lib", "/lib64", "/lib32", "/libx32", "/bin", "/sbin", "/opt",
];
/// Files of /etc that the dynamic linker and common libraries read (the
/// rest of /etc is not shown).
pub const ETC_FILES: [&str; 9] = [
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/etc/group",
    "/etc/localtime",
    "/etc/OpenCL",
];

/// Parts of /sys hidden under an empty read-only tmpfs wherever /sys is
/// shown (to GPU workers: drivers read /sys/bus/pci, /sys/devices,
/// /sys/module): the cgroup tree lists the host's processes, and the rest
/// are kernel interfaces no driver needs.
pub const HIDDEN_SYSTEM_DIRS: [&str; 7] = [
    "/sys/fs/cgroup",
    "/sys/fs/bpf",
    "/sys/fs/pstore",
    "/sys/kernel/debug",
    "/sys/kernel/tracing",
    "/sys/kernel/security",
    "/sys/firmware",
];

/// Environment variables a worker gets from the runner's environment, by
/// prefix or name (anything else, `VIPS_SIGN_KEY` among it, is dropped):
/// the SDK's own, the GPU runtimes', the threading libraries', the locale.
pub const ENV_PREFIXES: [&str; 11] = [
    "VSDK_", "CUDA_", "NVIDIA_", "HIP_", "ROCR_", "HSA_", "AMD_", "OMP_", "RAYON_", "LC_", "GPU_",
];
pub const ENV_NAMES: [&str; 4] = ["LD_LIBRARY_PATH", "PATH", "LANG", "TZ"];

/// The reference GPU providers' settings (vendors/cuda and vendors/hip
/// READMEs): passed to the worker, and the files and directories they name
/// shown to it read-only (a library's whole directory: NVRTC loads its
/// builtins from beside itself). Named one by one: the `VIPS_` prefix holds
/// `VIPS_SIGN_KEY`.
pub const PROVIDER_SETTINGS: [(&str, Setting); 5] = [
    ("VIPS_NVRTC_LIBRARY", Setting::Library),
    ("VIPS_CUDA_INCLUDE", Setting::Directory),
    ("VIPS_HIP_LIBRARY", Setting::Library),
    ("VIPS_HIPRTC_LIBRARY", Setting::Library),
    ("VIPS_HIP_ARCH", Setting::Value),
];

/// What a provider setting's value is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Setting {
    /// A library file: its directory is shown.
    Library,
    /// A directory, shown.
    Directory,
    /// Not a path.
    Value,
}

/// The environment a worker starts with: the allowed variables of this
/// process's environment, and a home in its private /tmp.
pub fn worker_env() -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let name = k.to_string_lossy();
            if let Some((_, setting)) = PROVIDER_SETTINGS.iter().find(|(n, _)| *n == name) {
                // The path as bound: a relative one, or one through a
                // symbolic link outside the binds, would not resolve there.
                let v = match setting {
                    Setting::Value => v,
                    _ => Path::new(&v)
                        .canonicalize()
                        .map_or(v, PathBuf::into_os_string),
                };
                return Some((k, v));
            }
            let kept = ENV_NAMES.contains(&name.as_ref())
                || ENV_PREFIXES.iter().any(|p| name.starts_with(p));
            kept.then_some((k, v))
        })
        .collect();
    env.push(("HOME".into(), "/tmp".into()));
    env.push(("TMPDIR".into(), "/tmp".into()));
    env
}

impl Policy {
    /// The policy for a provider library: its directory, the provider search
    /// path's directories (forwarding providers load others from there), the
    /// directories of LD_LIBRARY_PATH and the paths of [`PROVIDER_SETTINGS`]
    /// read-only; `stage_bytes`, the
    /// largest stage's tensors, sets the memory limit unless `memory` is given.
    pub fn for_library(library: &Path, stage_bytes: u64, memory: Option<u64>) -> Policy {
        let mut binds = Vec::new();
        // Never the whole host (`LD_LIBRARY_PATH=/`, a library in `/`): the
        // worker would see every file the runner can read.
        let mut add = |p: &Path| {
            let whole_host = p.parent().is_none();
            if p.is_absolute()
                && !whole_host
                && p.exists()
                && !binds.iter().any(|b: &Bind| b.path() == p)
            {
                binds.push(Bind::of(p, false));
            }
        };
        if let Some(dir) = library
            .canonicalize()
            .ok()
            .as_deref()
            .and_then(Path::parent)
        {
            add(dir);
        }
        for dir in crate::loader::search::dirs_from_env(crate::loader::search::PROVIDER_PATH_ENV)
            .into_iter()
            .chain(crate::loader::search::dirs_from_env("LD_LIBRARY_PATH"))
        {
            if let Ok(dir) = dir.canonicalize() {
                add(&dir);
            }
        }
        for (name, setting) in PROVIDER_SETTINGS {
            let Some(path) = std::env::var_os(name).map(PathBuf::from) else {
                continue;
            };
            let shown = match setting {
                Setting::Library => path
                    .canonicalize()
                    .ok()
                    .and_then(|p| p.parent().map(Path::to_path_buf)),
                Setting::Directory => path.canonicalize().ok(),
                Setting::Value => None,
            };
            if let Some(p) = shown {
                add(&p);
            }
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
        Policy {
            memory_limit_bytes: memory.unwrap_or_else(|| {
                BASE_MEMORY.saturating_add(stage_bytes.saturating_mul(MEMORY_PER_STAGE_BYTE))
            }),
            cgroup: None,
            max_processes: BASE_PROCESSES + PROCESSES_PER_CPU * cpus,
            max_file_bytes: MAX_FILE_BYTES,
            tmp_bytes: TMP_BYTES,
            binds,
            masked: Vec::new(),
        }
    }

    /// Also shows `path` (read-only unless `writable`).
    pub fn bind(&mut self, path: &Path, writable: bool) {
        let path = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        self.binds.retain(|b| b.path() != path);
        self.binds.push(Bind::of(&path, writable));
    }

    /// Why the worker could not use `library` or a writable bind: when the
    /// runner is root the worker is `nobody` outside its namespace and reads
    /// the host's files as "other" (mode bits, not ownership, decide).
    pub fn inaccessible(&self, library: &Path) -> Option<String> {
        use std::os::unix::fs::MetadataExt;
        if !nix::unistd::geteuid().is_root() {
            return None;
        }
        let lacks = |p: &Path, bits: u32| {
            std::fs::metadata(p).is_ok_and(|m| m.uid() != NOBODY && m.mode() & bits != bits)
        };
        let fix = "the worker runs as `nobody` (uid 65534) outside its sandbox";
        if lacks(library, 0o004) {
            return Some(format!(
                "{}: not readable by other users: {fix}; `chmod o+r` it",
                library.display()
            ));
        }
        if let Some(dir) = library.parent().filter(|d| lacks(d, 0o001)) {
            return Some(format!(
                "{}: not searchable by other users: {fix}; `chmod o+x` the provider's directory",
                dir.display()
            ));
        }
        self.binds
            .iter()
            .filter(|b| b.writable && lacks(&b.path(), 0o003))
            .map(|b| {
                format!(
                    "--sandbox-bind-rw {}: not writable by other users: {fix}; `chmod o+wx` it or `chown 65534` it",
                    b.path().display()
                )
            })
            .next()
    }

    /// Hides `path` (a file such as the signing key) wherever it would show.
    pub fn mask(&mut self, path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        for p in [Some(path.to_path_buf()), path.canonicalize().ok()]
            .into_iter()
            .flatten()
        {
            let bytes = p.as_os_str().as_bytes().to_vec();
            if p.is_absolute() && !self.masked.contains(&bytes) {
                self.masked.push(bytes);
            }
        }
    }
}
