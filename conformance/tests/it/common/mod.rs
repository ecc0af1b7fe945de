//! Shared by the command-line tests that run other programs: the
//! repository root, a program's outcome, and tools the tests require.
#![allow(dead_code)] // each test file uses its part

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod suites;

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A finished program: exit code (-1 when killed by a signal) and output.
pub struct Out {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// The outcome; no program of ours may panic.
    pub fn of(o: Output) -> Out {
        let r = Out {
            code: o.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        };
        assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
        r
    }

    pub fn text(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }
}

/// Fails, saying what is missing and that CI installs it, unless
/// `program args` succeeds: these tests never skip.
pub fn require(program: &str, args: &[&str], what: &str) {
    let ok = Command::new(program)
        .args(args)
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ok,
        "{what} is required by this test (CI installs it: .ci/run); `{program} {}` failed",
        args.join(" ")
    );
}
