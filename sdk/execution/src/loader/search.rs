//! Finding providers by name: `VSDK_PROVIDER_PATH`, then beside the running
//! program, then beside libvips_sdk.so, then the prefixes the SDK may be
//! installed in (`crate::install`: the recorded prefix, the system's).

pub use crate::install::dirs_from_env;
use crate::install::{install_prefixes, push_unique, sdk_binary};
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

/// Why a provider argument is a path rather than a name (docs/c-api.md,
/// "Names and paths"): it contains `/`, or ends in the library suffix
/// (`.so`). Anything else is a name, looked up on [`search_path`] as
/// [`library_file_name`].
pub fn path_reason(arg: &str) -> Option<&'static str> {
    if arg.contains('/') || arg.contains(std::path::MAIN_SEPARATOR) {
        Some("it contains `/`")
    } else if arg.ends_with(std::env::consts::DLL_SUFFIX) {
        Some(if cfg!(windows) {
            "it ends in `.dll`"
        } else if cfg!(target_os = "macos") {
            "it ends in `.dylib`"
        } else {
            "it ends in `.so`"
        })
    } else {
        None
    }
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
    if let Some(b) = sdk_binary().filter(|b| b.shared_library) {
        push_unique(&mut dirs, b.dir.join("vips-sdk/providers"));
    }
    // The prefix recorded at install time (what a program linked with
    // libvips_sdk.a has), then /usr/local and /usr.
    for prefix in install_prefixes() {
        push_unique(&mut dirs, prefix.join("lib/vips-sdk/providers"));
    }
    dirs
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
