//! What ran, pinned by content: the library file by its real path and
//! SHA-256 (a library may claim any name), the device, the SDK and the
//! runner binary.

use serde::{Deserialize, Serialize};
use std::path::Path;
use vips_execution::backend::Backend;
use vips_execution::{library_file_name, DeviceInfo, ProviderInfo};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Identity {
    /// The provider library's real path (symlinks resolved).
    pub library: String,
    pub library_sha256: String,
    /// What the library says it is (`None`: it never loaded).
    pub claimed: Option<ProviderInfo>,
    /// Set when the library file is not the one its claimed name stands for.
    pub claim_note: Option<String>,
    pub device: Option<DeviceInfo>,
    pub sdk_version: String,
    pub runner: String,
    pub runner_sha256: String,
    /// The worker program (`None` in process).
    #[serde(default)]
    pub worker_sha256: Option<String>,
    /// The provider ran in a worker process.
    pub isolated: bool,
    /// What confined the worker (`None`: in process).
    #[serde(default)]
    pub sandbox: Option<vips_execution::sandbox::Facts>,
    pub host: Host,
    /// The reference provider every verdict was computed against.
    pub reference: Reference,
}

/// The reference provider, pinned like the provider under test: it computes
/// the float64 reference and the bounds, so it decides every verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub library: String,
    pub library_sha256: String,
    pub name: String,
    pub version: String,
}

impl Reference {
    pub fn of(device: &vips_execution::Device) -> Reference {
        let info = device.provider_info();
        let library = info
            .library
            .canonicalize()
            .unwrap_or_else(|_| info.library.clone());
        Reference {
            library_sha256: hash_or_reason(&library),
            library: library.display().to_string(),
            name: info.name.clone(),
            version: info.version.clone(),
        }
    }
}

/// The machine the run was on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Host {
    /// `PRETTY_NAME` of /etc/os-release, else the OS family.
    pub os: String,
    /// `uname -sr`.
    pub kernel: String,
    pub arch: String,
    /// The CPU's model name.
    pub cpu: String,
    pub logical_cpus: usize,
}

impl Host {
    pub fn this() -> Host {
        let os = std::fs::read_to_string("/etc/os-release")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                    .map(|v| v.trim_matches('"').to_string())
            })
            .unwrap_or_else(|| std::env::consts::OS.to_string());
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find(|l| {
                l.starts_with("model name") || l.starts_with("Model") || l.starts_with("cpu model")
            })
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "unknown".into());
        let logical_cpus = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count()
            .max(std::thread::available_parallelism().map_or(1, |n| n.get()));
        Host {
            os,
            kernel: kernel(),
            arch: std::env::consts::ARCH.to_string(),
            cpu,
            logical_cpus,
        }
    }
}

#[cfg(unix)]
fn kernel() -> String {
    // SAFETY: `utsname` is plain bytes, valid zeroed; `uname` fills it and
    // NUL-terminates each field (POSIX), so reading them as C strings holds.
    unsafe {
        let mut u: libc::utsname = std::mem::zeroed();
        if libc::uname(&mut u) != 0 {
            return std::env::consts::OS.to_string();
        }
        let field = |f: &[libc::c_char]| {
            std::ffi::CStr::from_ptr(f.as_ptr())
                .to_string_lossy()
                .into_owned()
        };
        format!("{} {}", field(&u.sysname), field(&u.release))
    }
}

#[cfg(not(unix))]
fn kernel() -> String {
    std::env::consts::OS.to_string()
}

/// Hex SHA-256 of a library or runner file.
pub fn sha256_file(path: &Path) -> Result<String, String> {
    vips_data::limits::sha256_regular_file(path, vips_data::limits::MAX_HASHED_FILE_BYTES)
}

fn hash_or_reason(path: &Path) -> String {
    sha256_file(path).unwrap_or_else(|e| format!("unreadable: {e}"))
}

impl Identity {
    pub(super) fn of(
        backend: &Backend,
        claims: Option<(ProviderInfo, DeviceInfo)>,
        reference: &vips_execution::Device,
    ) -> Identity {
        let library = backend.library();
        let library = library.canonicalize().unwrap_or(library);
        let runner = std::env::current_exe().unwrap_or_default();
        let file_name = library
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let claim_note = claims.as_ref().and_then(|(p, _)| {
            let expected = library_file_name(&p.name);
            (file_name != expected).then(|| {
                format!(
                    "the library `{file_name}` claims to be provider `{}`, whose file is `{expected}`: it is identified by its path and hash, not by its claim",
                    p.name
                )
            })
        });
        let (claimed, device) = claims.map_or((None, None), |(p, d)| (Some(p), Some(d)));
        Identity {
            library_sha256: hash_or_reason(&library),
            library: library.display().to_string(),
            claimed,
            claim_note,
            device,
            sdk_version: env!("CARGO_PKG_VERSION").to_string(),
            runner_sha256: hash_or_reason(&runner),
            runner: runner.display().to_string(),
            worker_sha256: backend.worker_program().map(|p| hash_or_reason(&p)),
            isolated: backend.isolated(),
            sandbox: backend.sandbox(),
            host: Host::this(),
            reference: Reference::of(reference),
        }
    }
}
