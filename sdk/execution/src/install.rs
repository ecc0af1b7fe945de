//! Where the SDK finds the files of its installation (docs/c-api.md, "Where
//! suites, providers and the worker are found"): the binary the SDK's code is
//! part of (libvips_sdk.so, or a program linked with libvips_sdk.a), and the
//! prefix `tools/install` recorded into the installed library.
//!
//! The recorded prefix is what a statically linked program has: its own
//! location says nothing about where the SDK was installed. `tools/install`
//! writes the prefix into [`RECORDED_PREFIX`] of the installed `.so` and `.a`
//! (binary prefix replacement, as conda does: the value after the marker is
//! overwritten in place, NUL-padded to the same size). A build that was not
//! installed records nothing.

use std::path::{Path, PathBuf};

/// The environment variable naming directories of suites (colon-separated).
pub const SUITES_PATH_ENV: &str = "VSDK_SUITES_PATH";

/// The marker that `tools/install` looks for; the prefix follows it. It must
/// be in the binary exactly once, in [`RECORDED_PREFIX`]: nothing else may
/// hold these bytes (code compares no string with it; a test counts it).
const PREFIX_MARKER: &[u8; 20] = b"vsdk-install-prefix:";
/// The bytes after the marker: the prefix, NUL-terminated and NUL-padded
/// (so at most `PREFIX_CAPACITY - 1` bytes long).
const PREFIX_CAPACITY: usize = 4096;
const PREFIX_BYTES: usize = PREFIX_MARKER.len() + PREFIX_CAPACITY;

const fn placeholder() -> [u8; PREFIX_BYTES] {
    let mut bytes = [0u8; PREFIX_BYTES];
    let mut i = 0;
    while i < PREFIX_MARKER.len() {
        bytes[i] = PREFIX_MARKER[i];
        i += 1;
    }
    bytes
}

/// The prefix recorded at install time: the marker, then the value (empty
/// until `tools/install` patches the installed file). Not exported (the
/// shared library exports `vsdk_` functions only); `#[used]` keeps it, and
/// [`recorded_prefix`] reads it with a volatile read so the compiler never
/// folds the empty value it was compiled with.
#[used]
static RECORDED_PREFIX: [u8; PREFIX_BYTES] = placeholder();

/// The prefix `tools/install` recorded into this binary, if any.
pub fn recorded_prefix() -> Option<PathBuf> {
    // SAFETY: a valid, aligned static; the volatile read only keeps the
    // compiler from assuming its compile-time value (the file on disk was
    // patched after compilation).
    let bytes = unsafe { std::ptr::read_volatile(&RECORDED_PREFIX) };
    prefix_value(&bytes[PREFIX_MARKER.len()..])
}

/// The value of a (patched) placeholder, the bytes after the marker: up to
/// the first NUL; none when empty or unterminated.
fn prefix_value(value: &[u8]) -> Option<PathBuf> {
    let end = value.iter().position(|&b| b == 0)?;
    if end == 0 {
        return None;
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        Some(PathBuf::from(std::ffi::OsStr::from_bytes(&value[..end])))
    }
    #[cfg(not(unix))]
    {
        std::str::from_utf8(&value[..end]).ok().map(PathBuf::from)
    }
}

/// The file the SDK's code was loaded from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SdkBinary {
    /// Its directory (canonical).
    pub dir: PathBuf,
    /// A shared library (libvips_sdk.so), not the program itself (the CLI,
    /// or a program linked with libvips_sdk.a).
    pub shared_library: bool,
}

/// The file this code was loaded from: the program, or the shared library
/// (libvips_sdk.so) the SDK is part of.
pub fn sdk_binary() -> Option<SdkBinary> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let exe = std::env::current_exe()
            .ok()
            .and_then(|e| e.canonicalize().ok());
        // SAFETY: `Dl_info` is plain pointers, valid zeroed; `dladdr` fills it
        // for an address inside a loaded object (this function's own code)
        // and `dli_fname` then points to a NUL-terminated path owned by the
        // dynamic loader, read at once.
        let path = unsafe {
            let mut info: libc::Dl_info = std::mem::zeroed();
            let here = sdk_binary as *const libc::c_void;
            if libc::dladdr(here, &mut info) == 0 || info.dli_fname.is_null() {
                return None;
            }
            let path = std::ffi::CStr::from_ptr(info.dli_fname);
            Path::new(std::ffi::OsStr::from_bytes(path.to_bytes())).to_path_buf()
        };
        // Inside the main program glibc answers argv[0], which may be
        // relative to another directory or a bare name from PATH.
        let path = if path.is_absolute() {
            path.canonicalize().ok()?
        } else {
            exe.clone()?
        };
        Some(SdkBinary {
            dir: path.parent()?.to_path_buf(),
            shared_library: exe.as_deref() != Some(path.as_path()),
        })
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The directory of the file this code was loaded from: the program, or the
/// shared library (libvips_sdk.so) the SDK is part of.
pub fn sdk_binary_dir() -> Option<PathBuf> {
    sdk_binary().map(|b| b.dir)
}

/// The directories named in environment variable `name` (`:`-separated;
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

/// The prefixes the SDK may be installed in, in order: the one holding the
/// binary the SDK is in (the parent of libvips_sdk.so's `lib/`, or of the
/// program's `bin/`: a relocated tree still finds itself), the prefix
/// recorded by `tools/install`, `/usr/local`, `/usr`; each once.
pub fn install_prefixes() -> Vec<PathBuf> {
    let mut prefixes = Vec::new();
    if let Some(dir) = sdk_binary().and_then(|b| b.dir.parent().map(Path::to_path_buf)) {
        prefixes.push(dir);
    }
    prefixes.extend(recorded_prefix());
    prefixes.push(PathBuf::from("/usr/local"));
    prefixes.push(PathBuf::from("/usr"));
    let mut unique: Vec<PathBuf> = Vec::new();
    for p in prefixes {
        push_unique(&mut unique, p);
    }
    unique
}

/// Appends `dir` unless `dirs` holds it already (under another spelling:
/// `lib/../share` and `share`, or through a symbolic link).
pub fn push_unique(dirs: &mut Vec<PathBuf>, dir: PathBuf) {
    let key = |p: &Path| p.canonicalize().unwrap_or_else(|_| lexical(p));
    let k = key(&dir);
    if !dirs.iter().any(|d| key(d) == k) {
        dirs.push(dir);
    }
}

/// `path` with `.` and `..` taken away by their names alone.
fn lexical(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            c => out.push(c),
        }
    }
    out
}

/// Where suites are looked up by name: `VSDK_SUITES_PATH`, then
/// `share/vips-sdk/suites` of each [`install_prefixes`].
pub fn suite_dirs() -> Vec<PathBuf> {
    let mut dirs = dirs_from_env(SUITES_PATH_ENV);
    for p in install_prefixes() {
        push_unique(&mut dirs, p.join("share/vips-sdk/suites"));
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patched_placeholder_reads_up_to_its_nul() {
        let mut value = [0u8; PREFIX_CAPACITY];
        value[..8].copy_from_slice(b"/opt/vip");
        assert_eq!(prefix_value(&value), Some(PathBuf::from("/opt/vip")));
        // Unterminated (the whole capacity used): not trusted.
        value.fill(b'x');
        assert_eq!(prefix_value(&value), None);
    }

    #[test]
    fn the_marker_is_in_the_binary_once_followed_by_the_empty_value() {
        // What tools/install patches: exactly one marker in the file, at the
        // start of the placeholder. The marker is spelt backwards here, so
        // that this test adds no copy of it.
        let marker: Vec<u8> = b":xiferp-llatsni-kdsv".iter().rev().copied().collect();
        let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let at: Vec<usize> = exe
            .windows(marker.len())
            .enumerate()
            .filter(|(_, w)| *w == marker.as_slice())
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at.len(), 1, "the marker is at {at:?}");
        let value = &exe[at[0] + marker.len()..][..PREFIX_CAPACITY];
        assert!(value.iter().all(|&b| b == 0));
        assert_eq!(recorded_prefix(), None);
    }

    #[test]
    fn a_directory_is_listed_once_however_it_is_spelt() {
        let mut dirs = vec![PathBuf::from("/no/such/bin/../share/x")];
        push_unique(&mut dirs, PathBuf::from("/no/such/share/x"));
        push_unique(&mut dirs, PathBuf::from("/no/such/share/./x"));
        push_unique(&mut dirs, PathBuf::from("/no/such/share/y"));
        assert_eq!(dirs.len(), 2, "{dirs:?}");
    }
}
