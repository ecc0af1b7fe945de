//! TRELLIS's sparse-structure flow transformer, quick variant
//! (`trellis-ss-flow-quick`, written by tools/make_trellis_flow_suite.py;
//! the official trellis-3d-python modules pass it: docs/validation.md): its
//! committed golden file is what `generate` computes; the CPU provider passes
//! it at every float tier in both modes (with the differential round), the
//! GPU kernel source under SIMT emulation at every tier and the C template at
//! fp32; a template computing one of its new operators wrongly fails exactly
//! the stages that use it, and drill-down names the operator.

use std::collections::BTreeSet;
use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{Device, Provider};

const SUITE: &str = "trellis-ss-flow-quick";
const ALL_TIERS: [Tier; 3] = [Tier::Fp32, Tier::Fp16, Tier::Bf16];

fn suite() -> Suite {
    Suite::open(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(SUITE),
    )
    .unwrap()
}

fn device(path: &str) -> Device {
    Provider::open(Path::new(path)).unwrap().device(0).unwrap()
}

/// A provider built beside this test program (a dev-dependency).
fn built(name: &str) -> Device {
    let dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    Provider::open(dir.join(vips_sdk::library_file_name(name)))
        .unwrap()
        .device(0)
        .unwrap()
}

fn run(provider: &Device, mode: Mode, tiers: &[Tier], differential: bool) -> runner::RunReport {
    let cpu = built("cpu");
    let options = RunOptions {
        mode,
        tiers: tiers.to_vec(),
        differential,
        ..RunOptions::default()
    };
    runner::run(&suite(), provider, &cpu, &options).unwrap()
}

/// Every stage (and differential record, and end-to-end output) passed.
fn assert_passes(r: &runner::RunReport, what: &str) {
    let bad: Vec<String> = r
        .tiers
        .iter()
        .flat_map(|t| {
            t.stages
                .iter()
                .chain(&t.differential)
                .filter(|s| s.status != Status::Pass)
                .map(move |s| {
                    format!(
                        "{} {} {:?}: {:?}",
                        t.tier.name(),
                        s.stage,
                        s.round,
                        s.reason
                    )
                })
        })
        .chain(r.tiers.iter().flat_map(|t| {
            t.end_to_end
                .iter()
                .filter(|e| !e.passed)
                .map(move |e| format!("{} end to end {}", t.tier.name(), e.tensor))
        }))
        .collect();
    assert!(r.passed && bad.is_empty(), "{what}: {bad:#?}");
    for t in &r.tiers {
        // 3 embedding stages + 2 blocks + the output layer + the sampler step.
        assert_eq!(t.stages.len(), 7, "{what} {}", t.tier.name());
    }
}

#[test]
fn the_committed_golden_file_is_what_generate_computes() {
    let s = suite();
    let fresh = vips_sdk::generate::generate(&s.document, &built("cpu"), &[]).unwrap();
    let committed = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("suites")
            .join(SUITE)
            .join("suite.golden"),
    )
    .unwrap();
    assert!(
        fresh == committed,
        "suite.golden differs from `vips-conformance generate {SUITE}`"
    );
}

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let cpu = built("cpu");
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = run(&cpu, mode, &ALL_TIERS, mode == Mode::Isolated);
        assert_passes(&r, &format!("cpu {mode:?}"));
        if mode == Mode::Chained {
            for t in &r.tiers {
                let outputs: Vec<&str> = t.end_to_end.iter().map(|e| e.tensor.as_str()).collect();
                assert_eq!(outputs, ["x_prev"], "the sampler's next latent");
            }
        }
    }
}

/// Without the differential round (the CPU test runs it): the emulated
/// kernels are slow, and the round is about replays, not arithmetic.
#[test]
fn the_gpu_kernels_under_simt_emulation_pass_at_every_tier_in_both_modes() {
    let simt = built("simt");
    for mode in [Mode::Isolated, Mode::Chained] {
        assert_passes(
            &run(&simt, mode, &ALL_TIERS, false),
            &format!("simt {mode:?}"),
        );
    }
}

#[test]
fn the_c_template_passes_at_fp32_in_both_modes() {
    let template = device(vsdk_template_c::LIBRARY_PATH);
    for mode in [Mode::Isolated, Mode::Chained] {
        assert_passes(
            &run(&template, mode, &[Tier::Fp32], false),
            &format!("template {mode:?}"),
        );
    }
}

/// The TRELLIS variant pitfalls a port hits (docs/validation.md): each
/// template mutant fails exactly the stages that use its operator, and the
/// drill-down names it.
#[test]
fn a_wrong_new_operator_fails_exactly_its_stages() {
    for (mutant, op, stages) in [
        (
            vsdk_broken_providers::MUTANT_GELU_TANH_ERF,
            "vsdk.gelu_tanh@1",
            &["block_00", "block_01"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_SIN_COS_SWAPPED,
            "vsdk.cos@1",
            &["position_embedding", "timestep_embedding"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_SILU_SIGMOID,
            "vsdk.silu@1",
            &["block_00", "block_01", "timestep_embedding"][..],
        ),
    ] {
        let r = run(&device(mutant), Mode::Isolated, &[Tier::Fp32], false);
        assert!(!r.passed, "{mutant} passed");
        let t = &r.tiers[0];
        let failed: BTreeSet<&str> = t
            .stages
            .iter()
            .filter(|s| s.status == Status::Fail)
            .map(|s| s.stage.as_str())
            .collect();
        assert_eq!(
            failed,
            stages.iter().copied().collect::<BTreeSet<_>>(),
            "{mutant}"
        );
        for s in t.stages.iter().filter(|s| s.status == Status::Fail) {
            let named = s.drill_down.as_ref().map(|d| d.op.as_str());
            assert!(
                named == Some(op) || (op == "vsdk.cos@1" && named == Some("vsdk.sin@1")),
                "{mutant} {}: drill-down names {named:?}, not {op}",
                s.stage
            );
        }
    }
}
