//! Finding suites: a path (it contains `/` or ends in `.yaml`: a directory
//! with suite.yaml, or a document), or a name looked up in
//! `VSDK_SUITES_PATH`, the suite directories shipped beside the program (or
//! in this checkout), then those of the installed SDK
//! (`vips_sdk::install::suite_dirs`).

use std::path::{Path, PathBuf};
use vips_sdk::install::push_unique;
pub use vips_sdk::suite::Located;

/// Directories that hold suites, in search order.
pub fn suite_dirs() -> Vec<PathBuf> {
    let mut dirs = vips_sdk::dirs_from_env(vips_sdk::suite::SUITES_PATH_ENV);
    if let Some(exe_dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
    {
        push_unique(&mut dirs, exe_dir.join("../share/vips-sdk/suites"));
        // A cargo build: target/<profile>/vips-conformance, suites in the source tree.
        push_unique(&mut dirs, exe_dir.join("../../conformance/suites"));
    }
    push_unique(
        &mut dirs,
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("suites"),
    );
    for d in vips_sdk::install::suite_dirs() {
        push_unique(&mut dirs, d);
    }
    dirs
}

/// Every suite directory found (one with a suite.yaml), first of each name.
pub fn all() -> Vec<(String, PathBuf)> {
    vips_sdk::suite::find_all(&suite_dirs())
}

/// A suite argument located: a path or a name (`vips_sdk::suite::locate`).
pub fn locate(arg: &str) -> Result<Located, String> {
    vips_sdk::suite::locate(arg, &suite_dirs())
}
