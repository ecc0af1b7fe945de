//! The DINOv2 ViT-S/14 suites: the committed golden files are what `generate`
//! computes, the CPU provider passes the full suite at every float tier, the
//! C template passes the quick suite, and a wrong GELU is caught in every block.
//!
//! Every deliberately wrong variant of issue 4 fails at fp32, in isolated mode,
//! at exactly the stages where its operator lives, and drill-down names it.
//! The bugs are injected by testing/mutant-provider (attribute rewrites over
//! the CPU provider) and by the GELU-by-tanh mutant of the C template.

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

/// Runs the full suite through the CLI on the CPU provider with one injected
/// bug; returns (stage, status, drill-down operator) per stage.
fn mutated_run(mutation: &str) -> Vec<(String, String, Option<String>)> {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args(["run", "dinov2-vits14", "--json", "--provider"])
        .arg(dir.join("libvsdk_mutant_provider.so"))
        .env("VSDK_PROVIDER_PATH", &dir)
        .env(
            "VSDK_MUTANT_TARGET",
            dir.join(vips_sdk::library_file_name("cpu")),
        )
        .env("VSDK_MUTATION", mutation)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{mutation}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    report["tiers"][0]["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let op = s["drill_down"]["op"].as_str().map(str::to_string);
            (
                s["stage"].as_str().unwrap().to_string(),
                s["status"].as_str().unwrap().to_string(),
                op,
            )
        })
        .collect()
}

/// The mutation fails exactly `stages`, each drilled down to `op`.
fn fails_exactly(mutation: &str, stages: &[&str], op: &str) {
    let results = mutated_run(mutation);
    let failed: Vec<&str> = results
        .iter()
        .filter(|r| r.1 != "pass")
        .map(|r| r.0.as_str())
        .collect();
    assert_eq!(failed, stages, "{mutation}");
    for (stage, _, drilled) in results.iter().filter(|r| r.1 != "pass") {
        assert_eq!(drilled.as_deref(), Some(op), "{mutation}: {stage}");
    }
}

fn blocks() -> Vec<String> {
    (0..12).map(|i| format!("block_{i:02}")).collect()
}

#[test]
fn position_embedding_resized_with_size_instead_of_scale_factor() {
    fails_exactly("resize_size", &["pos_embed"], "vsdk.resize_bicubic@1");
}

#[test]
fn position_embedding_resized_with_antialias() {
    fails_exactly("resize_antialias", &["pos_embed"], "vsdk.resize_bicubic@1");
}

#[test]
fn preprocessing_resize_without_antialias() {
    fails_exactly(
        "resize_no_antialias",
        &["preprocess"],
        "vsdk.resize_pil_bicubic@1",
    );
}

#[test]
fn center_crop_off_by_one() {
    fails_exactly("crop_off_by_one", &["preprocess"], "vsdk.crop@1");
}

#[test]
fn attention_scale_one_over_sqrt_384() {
    let b = blocks();
    fails_exactly(
        "attention_scale",
        &b.iter().map(String::as_str).collect::<Vec<_>>(),
        "vsdk.sdpa@1",
    );
}

#[test]
fn layer_norm_eps_1e5() {
    // LayerNorm lives in every block and in the final norm.
    let stages: Vec<String> = blocks()
        .into_iter()
        .chain(["final_norm".to_string()])
        .collect();
    fails_exactly(
        "layer_norm_eps",
        &stages.iter().map(String::as_str).collect::<Vec<_>>(),
        "vsdk.layer_norm@1",
    );
}
