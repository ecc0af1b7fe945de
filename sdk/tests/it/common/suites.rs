//! Suites written by a test (YAML with fresh seeds), their goldens generated
//! on the CPU provider, run on a provider and checked to pass whole.

use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::golden::GoldenFile;
use vips_sdk::reference_cache::ReferenceCache;
use vips_sdk::runner::{self, Mode, RunOptions, RunReport, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{Device, Provider};

/// The runner's defaults, with the reference cache this test program's
/// build keeps in `target/tmp` (golden-fed references computed once for
/// every provider, mode and test that judges the same files at a tier),
/// bounded at 512 MiB: most suites of the tests are drawn afresh and never
/// read back.
pub fn options() -> RunOptions {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("reference-cache");
    RunOptions {
        reference_cache: ReferenceCache::for_this_build(&dir, 512 << 20),
        ..RunOptions::default()
    }
}

/// Device 0 of a provider named or given by path.
pub fn device(path_or_name: &str) -> Device {
    Provider::open_by_name(path_or_name)
        .unwrap()
        .device(0)
        .unwrap()
}

/// A fresh seed for a suite's seeded tensors, or `VSDK_TEST_SEED` (printed:
/// a failure reproduces with it).
pub fn fresh_seed() -> u64 {
    let seed = std::env::var("VSDK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| u64::from(rand::random::<u32>()));
    eprintln!("seed {seed} (VSDK_TEST_SEED={seed} reproduces)");
    seed
}

/// The suite document `text` (named `name` in messages), its golden file
/// generated on `cpu`.
pub fn from_yaml(name: &str, text: &str, cpu: &Device) -> Suite {
    let doc =
        vips_sdk::document::Document::parse(Path::new(&format!("{name}.yaml")), text).unwrap();
    let bytes = vips_sdk::generate::generate(&doc, cpu, &[]).unwrap();
    Suite::new(
        doc,
        GoldenFile::from_bytes(Path::new(&format!("{name}.golden")), bytes).unwrap(),
    )
    .unwrap()
}

/// `suite` on `dev` (the reference `cpu`) at `tiers` in `mode`, with or
/// without the kernel contract (the differential round as by default).
pub fn run(
    suite: &Suite,
    dev: &Device,
    cpu: &Device,
    mode: Mode,
    tiers: &[Tier],
    contract: bool,
) -> RunReport {
    let opts = RunOptions {
        mode,
        tiers: tiers.to_vec(),
        contract,
        ..options()
    };
    runner::run(suite, dev, cpu, &opts).unwrap()
}

/// Every stage, differential stage and contract case passed, and where the
/// contract ran it had cases of each of `ops` (`vsdk.name@1`).
pub fn assert_passes(r: &RunReport, what: &str, ops: &[&str]) {
    for t in &r.tiers {
        for s in t.stages.iter().chain(&t.contract).chain(&t.differential) {
            assert_eq!(
                s.status,
                Status::Pass,
                "{what} {:?} {}: {:?} {:#?}",
                t.tier,
                s.stage,
                s.reason,
                s.outputs
            );
        }
        if !t.contract.is_empty() {
            for op in ops {
                assert!(
                    t.contract.iter().any(|c| c.stage.starts_with(op)),
                    "{what} {:?}: no contract case of {op}",
                    t.tier
                );
            }
        }
    }
    assert!(r.passed, "{what}");
}

/// The CPU provider and SIMT at every tier, the C template (float32 only) at
/// fp32, isolated with the contract and chained at fp32: each passes, with
/// contract cases of each of `ops`.
pub fn assert_every_provider_passes(s: &Suite, ops: &[&str]) {
    let cpu = device("cpu");
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    for (name, dev, tiers) in [
        ("cpu", device("cpu"), &tiers[..]),
        (
            "template",
            device(vsdk_template_c::LIBRARY_PATH),
            &tiers[..1],
        ),
        ("simt", device("simt"), &tiers[..]),
    ] {
        assert_passes(
            &run(s, &dev, &cpu, Mode::Isolated, tiers, true),
            &format!("{name} isolated"),
            ops,
        );
        assert_passes(
            &run(s, &dev, &cpu, Mode::Chained, &[Tier::Fp32], false),
            &format!("{name} chained"),
            ops,
        );
    }
}

/// The kernel-contract cases of the first tier that did not pass.
pub fn failing_cases(r: &RunReport) -> Vec<&str> {
    r.tiers[0]
        .contract
        .iter()
        .filter(|c| c.status != Status::Pass)
        .map(|c| c.stage.as_str())
        .collect()
}

/// The stages of the first tier that did not pass, after checking each is a
/// failure (not an error) whose drill-down, where the stage has one, names an
/// operator starting with one of `ops`.
pub fn failing_stages<'r>(r: &'r RunReport, what: &str, ops: &[&str]) -> Vec<&'r str> {
    assert!(!r.passed, "{what}");
    let failing: Vec<_> = r.tiers[0]
        .stages
        .iter()
        .filter(|s| s.status != Status::Pass)
        .collect();
    for st in &failing {
        assert_eq!(st.status, Status::Fail, "{what} {}", st.stage);
        if let Some(d) = &st.drill_down {
            assert!(
                ops.iter().any(|op| d.op.starts_with(op)),
                "{what} {}: drill-down names {}",
                st.stage,
                d.op
            );
        }
    }
    failing.iter().map(|s| s.stage.as_str()).collect()
}
