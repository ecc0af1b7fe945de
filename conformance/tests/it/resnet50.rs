//! timm's ResNet-50, quick variant (`resnet50-quick`, 32×32, written by
//! `vips-export --torch timm_cnns:resnet50 --weights seeded`; PyTorch's own
//! captures pass it at every tier, and the full 224×224 suite `resnet50`
//! likewise: docs/validation.md): convolutions, inference batch norms with
//! trained-looking running statistics, ReLU, the stem's max pool and the
//! global average pool, each a kernel of its own (no emulation). Its committed
//! golden file is what `generate` computes; the CPU provider passes it at
//! every tier isolated and chained at fp32, the GPU kernel source under SIMT and the C
//! template at fp32; a template using Keras's batch-norm eps fails exactly the
//! stages holding a batch norm.

use crate::common;
use common::suites::{assert_fails_exactly, assert_golden_is_generated, built, device, ALL_TIERS};
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode};
use vips_sdk::suite::Suite;
use vips_sdk::Op;

const SUITE: &str = "resnet50-quick";

fn suite() -> Suite {
    common::suites::suite(SUITE)
}

fn stages() -> usize {
    suite().document.stages.len()
}

fn run(
    provider: &vips_sdk::Device,
    mode: Mode,
    tiers: &[Tier],
    differential: bool,
) -> runner::RunReport {
    common::suites::run(&suite(), provider, mode, tiers, differential)
}

#[test]
fn the_committed_golden_file_is_what_generate_computes() {
    assert_golden_is_generated(SUITE);
}

/// Isolated at every tier (with the kernel contract), chained at fp32: the
/// differential round and the 16-bit chains are the DINOv2 and TRELLIS
/// tests' (CI's 30 minutes).
#[test]
fn the_cpu_provider_passes_at_every_tier_isolated_and_chained_at_fp32() {
    let cpu = built("cpu");
    for (mode, tiers) in [
        (Mode::Isolated, &ALL_TIERS[..]),
        (Mode::Chained, &[Tier::Fp32][..]),
    ] {
        let r = run(&cpu, mode, tiers, false);
        common::suites::assert_passes(&r, &format!("cpu {mode:?}"), stages());
    }
}

#[test]
fn the_gpu_kernels_under_simt_and_the_c_template_pass_at_fp32() {
    let simt = built("simt");
    let r = run(&simt, Mode::Isolated, &[Tier::Fp32], false);
    common::suites::assert_passes(&r, "simt isolated", stages());
    let template = device(vsdk_template_c::LIBRARY_PATH);
    let r = run(&template, Mode::Isolated, &[Tier::Fp32], false);
    common::suites::assert_passes(&r, "template isolated", stages());
}

#[test]
fn a_batch_norm_with_kerass_eps_fails_exactly_the_stages_holding_one() {
    let s = suite();
    let with_bn: Vec<&str> = s
        .document
        .stages
        .iter()
        .filter(|st| st.graph.iter().any(|n| n.op == Op::BatchNorm))
        .map(|st| st.name.as_str())
        .collect();
    assert!(with_bn.len() >= 17, "{with_bn:?}");
    let r = run(
        &device(vsdk_broken_providers::MUTANT_BATCH_NORM_EPS),
        Mode::Isolated,
        &[Tier::Fp32],
        false,
    );
    assert_fails_exactly(&r, "batch norm eps", &with_bn, &["vsdk.batch_norm@1"]);
}

/// The full suite (`resnet50`, 224×224, a 7.7 MB golden file).
#[test]
#[ignore = "extended (tools/test-extended): ResNet-50 at 224x224 in float64; CI runs the quick variant"]
fn the_full_suite_is_generated_and_passes_on_the_cpu_provider() {
    assert_golden_is_generated("resnet50");
    let s = common::suites::suite("resnet50");
    let n = s.document.stages.len();
    let r = common::suites::run(&s, &built("cpu"), Mode::Isolated, &[Tier::Fp32], false);
    common::suites::assert_passes(&r, "cpu isolated fp32", n);
}
