//! Finding suites: a path (directory with suite.yaml, or a document), or a
//! name looked up in `VSDK_SUITES_PATH` and the suite directories shipped
//! beside the program.

use std::path::{Path, PathBuf};

pub const SUITES_PATH_ENV: &str = "VSDK_SUITES_PATH";

/// Directories that hold suites, in search order.
pub fn suite_dirs() -> Vec<PathBuf> {
    let mut dirs = vips_sdk::dirs_from_env(SUITES_PATH_ENV);
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
    let mut found: Vec<(String, PathBuf)> = Vec::new();
    for dir in suite_dirs() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut names: Vec<_> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("suite.yaml").is_file())
            .collect();
        names.sort();
        for p in names {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !found.iter().any(|(n, _)| *n == name) {
                found.push((name, p));
            }
        }
    }
    found
}

/// A suite argument as a path: an existing path, or a suite name.
pub fn resolve(arg: &str) -> Result<PathBuf, String> {
    let p = Path::new(arg);
    if p.exists() {
        return Ok(p.to_path_buf());
    }
    all()
        .into_iter()
        .find(|(n, _)| n == arg)
        .map(|(_, p)| std::fs::canonicalize(&p).unwrap_or(p))
        .ok_or_else(|| {
            let known: Vec<String> = all().into_iter().map(|(n, _)| n).collect();
            format!(
                "no suite `{arg}`: not a path, and not among the suites found ({}) in {}",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                },
                suite_dirs()
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}
