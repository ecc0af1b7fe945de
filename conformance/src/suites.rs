//! Finding suites: a path (directory with suite.yaml, or a document), or a
//! name looked up in `VSDK_SUITES_PATH` and the suite directories shipped
//! beside the program.

use std::path::{Path, PathBuf};

/// Directories that hold suites, in search order.
pub fn suite_dirs() -> Vec<PathBuf> {
    let mut dirs = vips_sdk::dirs_from_env(vips_sdk::suite::SUITES_PATH_ENV);
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        dirs.push(exe_dir.join("../share/vips-sdk/suites"));
        // A cargo build: target/<profile>/vips-conformance, suites in the source tree.
        dirs.push(exe_dir.join("../../conformance/suites"));
    }
    dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("suites"));
    dirs
}

/// Every suite directory found (one with a suite.yaml), first of each name.
pub fn all() -> Vec<(String, PathBuf)> {
    vips_sdk::suite::find_all(&suite_dirs())
}

/// A suite argument as a path: an existing path, or a suite name.
pub fn resolve(arg: &str) -> Result<PathBuf, String> {
    vips_sdk::suite::resolve(arg, &suite_dirs())
}
