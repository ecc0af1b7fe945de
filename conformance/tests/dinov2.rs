//! The DINOv2 ViT-S/14 suites: the committed golden files are what `generate`
//! computes, the CPU provider passes the full suite at every float tier, the
//! C template passes the quick suite, and a wrong GELU is caught in every block.
//!
//! Still to come (issue 4): calibrated tolerances, the independent PyTorch
//! validation and the remaining deliberately wrong variants.

use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{Device, Provider};

fn suite(name: &str) -> Suite {
    Suite::open(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(name),
    )
    .unwrap()
}

fn device(p: &str) -> Device {
    Provider::open_by_name(p).unwrap().device(0).unwrap()
}

fn cpu() -> Device {
    // The CPU provider is a dev-dependency, built beside this test program.
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    Provider::open(dir.join(vips_sdk::library_file_name("cpu")))
        .unwrap()
        .device(0)
        .unwrap()
}

fn opts(tiers: &[Tier]) -> RunOptions {
    RunOptions {
        mode: Mode::Isolated,
        tiers: tiers.to_vec(),
        ..RunOptions::default()
    }
}

#[test]
fn committed_golden_files_are_what_generate_computes() {
    let cpu = cpu();
    for name in ["dinov2-vits14", "dinov2-vits14-quick"] {
        let s = suite(name);
        let fresh = vips_sdk::generate::generate(&s.document, &cpu).unwrap();
        let committed = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("suites")
                .join(name)
                .join("suite.golden"),
        )
        .unwrap();
        assert!(
            fresh == committed,
            "{name}: suite.golden differs from `vips-conformance generate {name}`"
        );
    }
}

#[test]
fn the_cpu_provider_passes_the_full_suite_at_every_float_tier() {
    let cpu = cpu();
    let r = runner::run(
        &suite("dinov2-vits14"),
        &cpu,
        Some(&cpu),
        &opts(&[Tier::Fp32, Tier::Fp16, Tier::Bf16]),
    )
    .unwrap();
    for t in &r.tiers {
        let bad: Vec<_> = t
            .stages
            .iter()
            .filter(|s| s.status != Status::Pass)
            .map(|s| &s.stage)
            .collect();
        assert!(bad.is_empty(), "{}: {bad:?}", t.tier.name());
        assert_eq!(t.stages.len(), 17);
    }
}

#[test]
fn the_c_template_passes_the_quick_suite() {
    let r = runner::run(
        &suite("dinov2-vits14-quick"),
        &device(vsdk_template_c::LIBRARY_PATH),
        None,
        &opts(&[Tier::Fp32]),
    )
    .unwrap();
    assert!(
        r.passed,
        "{:?}",
        r.tiers[0]
            .stages
            .iter()
            .map(|s| (&s.stage, s.status))
            .collect::<Vec<_>>()
    );
}

#[test]
fn gelu_by_tanh_fails_every_block_and_drill_down_names_it() {
    let cpu = cpu();
    let mutant = device(vsdk_broken_providers::MUTANT_GELU_TANH);
    let r = runner::run(
        &suite("dinov2-vits14-quick"),
        &mutant,
        Some(&cpu),
        &opts(&[Tier::Fp32]),
    )
    .unwrap();
    for s in &r.tiers[0].stages {
        if s.stage.starts_with("block_") {
            assert_eq!(s.status, Status::Fail, "{}", s.stage);
            assert_eq!(
                s.drill_down.as_ref().map(|d| d.op.as_str()),
                Some("vsdk.gelu@1"),
                "{}",
                s.stage
            );
        } else {
            assert_eq!(s.status, Status::Pass, "{} has no GELU", s.stage);
        }
    }
}
