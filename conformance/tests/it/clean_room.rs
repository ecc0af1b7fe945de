//! The clean-room provider (`testing/clean-room/`: C written from
//! docs/operators.md and the ABI header alone, without reading any provider;
//! its README has the protocol and the gaps found) keeps passing the three
//! quick suites of the shared components and its own suite of the features
//! they leave unused, kernel contract included. If the runner, the catalog
//! or the error model drift from what the pages say, this fails: the pages
//! are the specification a vendor implements.
//!
//! Built as a float32 device computes (`-DCLEANROOM_REAL=float`), at fp32:
//! its float64 build and the other tiers are `testing/clean-room/run_all.sh`.

use crate::common::{self, suites::built};
use std::path::Path;
use std::process::Command;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;

/// `testing/clean-room/provider.c` compiled into a fresh directory.
fn clean_room_provider(dir: &Path) -> vips_sdk::Device {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    common::require(&cc, &["--version"], "a C compiler");
    let repo = common::repo();
    let lib = dir.join(vips_sdk::library_file_name("cleanroom"));
    let out = Command::new(&cc)
        .args(["-std=c11", "-O2", "-Wall", "-Werror", "-fPIC", "-shared"])
        .args(["-fvisibility=hidden", "-DCLEANROOM_REAL=float", "-I"])
        .arg(repo.join("include"))
        .arg(repo.join("testing/clean-room/provider.c"))
        .args(["-lm", "-o"])
        .arg(&lib)
        .output()
        .expect("the C compiler runs");
    assert!(
        out.status.success(),
        "provider.c does not compile: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::suites::device(lib.to_str().expect("a UTF-8 path"))
}

#[test]
fn a_provider_written_from_the_pages_alone_passes_the_shared_components() {
    let dir = tempfile::tempdir().unwrap();
    let provider = clean_room_provider(dir.path());
    let extras = common::repo().join("testing/clean-room/extras");
    let suites = [
        common::suites::suite("resnet50-quick"),
        common::suites::suite("mobilenetv3-small-quick"),
        common::suites::suite("llama3-8b-block-quick"),
        Suite::open(&extras).unwrap(),
    ];
    for suite in &suites {
        let options = RunOptions {
            mode: Mode::Isolated,
            tiers: vec![Tier::Fp32],
            differential: true,
            contract: true,
            ..common::suites::options()
        };
        let r = runner::run(suite, &provider, &built("cpu"), &options).unwrap();
        let stages = r.tiers[0].stages.len();
        common::suites::assert_passes(&r, &r.component, stages);
        let contract = &r.tiers[0].contract;
        assert!(stages > 0 && !contract.is_empty(), "{}", r.component);
        for case in contract {
            assert_eq!(case.status, Status::Pass, "{}: {case:?}", r.component);
        }
    }
}
