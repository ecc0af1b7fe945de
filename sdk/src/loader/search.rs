//! Finding providers by name: `VSDK_PROVIDER_PATH`, then beside the running
//! program, then the system directories.

use std::path::{Path, PathBuf};

/// Colon-separated directories searched first (`;` on Windows).
pub const PROVIDER_PATH_ENV: &str = "VSDK_PROVIDER_PATH";

const PREFIX: &str = if cfg!(windows) {
    "vsdk_provider_"
} else {
    "libvsdk_provider_"
};

/// The file a provider called `name` lives in: `libvsdk_provider_<name>.so`.
pub fn library_file_name(name: &str) -> String {
    format!("{PREFIX}{name}{}", std::env::consts::DLL_SUFFIX)
}

/// The directories listed in environment variable `name` (`:`-separated;
/// `;` on Windows), empty entries skipped.
pub fn dirs_from_env(name: &str) -> Vec<PathBuf> {
    std::env::var_os(name)
        .map(|v| {
            std::env::split_paths(&v)
                .filter(|p| !p.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// The directories searched, in order.
pub fn search_path() -> Vec<PathBuf> {
    let mut dirs = dirs_from_env(PROVIDER_PATH_ENV);
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(exe_dir.join("../lib/vips-sdk/providers"));
        // Beside the program, and its parent: cargo puts test programs in
        // target/<profile>/deps and libraries in target/<profile>.
        if let Some(parent) = exe_dir.parent() {
            dirs.push(exe_dir.clone());
            dirs.push(parent.to_path_buf());
        } else {
            dirs.push(exe_dir);
        }
    }
    // The SDK inside a shared library (libvips_sdk.so in <prefix>/lib): the
    // providers installed beside it.
    if let Some(dir) = sdk_binary_dir() {
        let beside = dir.join("vips-sdk/providers");
        if !dirs.contains(&beside) {
            dirs.push(beside);
        }
    }
    dirs.push(PathBuf::from("/usr/local/lib/vips-sdk/providers"));
    dirs.push(PathBuf::from("/usr/lib/vips-sdk/providers"));
    dirs
}

/// The directory of the file this code was loaded from: the program, or the
/// shared library (libvips_sdk.so) the SDK is part of.
pub fn sdk_binary_dir() -> Option<PathBuf> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        // SAFETY: `Dl_info` is plain pointers, valid zeroed; `dladdr` fills it
        // for an address inside a loaded object (this function's own code)
        // and `dli_fname` then points to a NUL-terminated path owned by the
        // dynamic loader, read at once.
        unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            let here = sdk_binary_dir as *const libc::c_void;
            if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
                return None;
            }
            let path = std::ffi::CStr::from_ptr(info.dli_fname);
            let path = Path::new(std::ffi::OsStr::from_bytes(path.to_bytes()));
            // Inside the main program glibc answers argv[0], which may be
            // relative to another directory or a bare name from PATH.
            let path = if path.is_absolute() {
                path.canonicalize().ok()?
            } else {
                std::env::current_exe().ok()?.canonicalize().ok()?
            };
            path.parent().map(Path::to_path_buf)
        }
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The first file for `name` on the search path, or every place looked.
pub fn find(name: &str) -> Result<PathBuf, (String, Vec<PathBuf>)> {
    let file = library_file_name(name);
    let dirs = search_path();
    dirs.iter()
        .map(|d| d.join(&file))
        .find(|p| p.is_file())
        .ok_or((file, dirs))
}

/// A provider library found on the search path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    pub name: String,
    pub path: PathBuf,
}

/// Every provider library on the search path; a name found twice keeps its
/// first place (the same precedence as [`find`]).
pub fn discover() -> Vec<Discovered> {
    let mut found: Vec<Discovered> = Vec::new();
    for dir in search_path() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<_> = entries.flatten().map(|e| e.file_name()).collect();
        names.sort();
        for file in names {
            let file = file.to_string_lossy();
            let name = file
                .strip_prefix(PREFIX)
                .and_then(|rest| rest.strip_suffix(std::env::consts::DLL_SUFFIX));
            if let Some(name) = name {
                if !found.iter().any(|d| d.name == name) {
                    found.push(Discovered {
                        name: name.to_string(),
                        path: dir.join(&*file),
                    });
                }
            }
        }
    }
    found
}
