//! A Llama-3-style decoder block, quick variant (`llama3-8b-block-quick`,
//! written by `vips-export --torch llama_block:tiny --weights seeded` from
//! Hugging Face transformers' own `LlamaDecoderLayer`, whose captures pass it
//! at every tier: docs/validation.md): RMSNorm as its decomposition, rotary
//! embedding (rotate-half, tables of positions 12-15), grouped key/value
//! heads (8 query heads over 2) read from a 12-token KV cache, the causal
//! mask after it, SwiGLU. Its
//! committed golden file is what `generate` computes; the CPU provider passes
//! it at every tier in both modes, the GPU kernel source under SIMT and the C
//! template at fp32; templates that map grouped heads by modulo, stop the
//! causal rows a key short or pair rotary features GPT-J's way fail exactly
//! the attention stage, and drill-down names the operator.

use crate::common;
use common::suites::{assert_fails_exactly, assert_golden_is_generated, built, device, ALL_TIERS};
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, Mode};
use vips_sdk::suite::Suite;

const SUITE: &str = "llama3-8b-block-quick";
/// Both norms, attention, the MLP and the two residual additions.
const STAGES: usize = 6;

fn suite() -> Suite {
    common::suites::suite(SUITE)
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

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let cpu = built("cpu");
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = run(&cpu, mode, &ALL_TIERS, mode == Mode::Isolated);
        common::suites::assert_passes(&r, &format!("cpu {mode:?}"), STAGES);
    }
}

#[test]
fn the_gpu_kernels_under_simt_and_the_c_template_pass() {
    let simt = built("simt");
    let r = run(&simt, Mode::Isolated, &ALL_TIERS, false);
    common::suites::assert_passes(&r, "simt isolated", STAGES);
    let template = device(vsdk_template_c::LIBRARY_PATH);
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = run(&template, mode, &[Tier::Fp32], false);
        common::suites::assert_passes(&r, &format!("template {mode:?}"), STAGES);
    }
}

#[test]
fn grouped_heads_by_modulo_a_causal_mask_one_off_or_rotary_pairs_swapped_fail_the_attention_stage()
{
    use vsdk_broken_providers as broken;
    for (mutant, op) in [
        (broken::MUTANT_SDPA_GQA_MODULO, "vsdk.sdpa@1"),
        (broken::MUTANT_SDPA_CAUSAL_ONE_OFF, "vsdk.sdpa@1"),
        (
            broken::MUTANT_ROTARY_LAYOUT_SWAPPED,
            "vsdk.rotary_embedding@1",
        ),
    ] {
        let r = run(&device(mutant), Mode::Isolated, &[Tier::Fp32], false);
        assert_fails_exactly(&r, mutant, &["layer.self_attn"], &[op]);
    }
}

/// The full-width block (`llama3-8b-block`: Llama-3-8B's 4096 wide, 32 query
/// and 8 key/value heads of 128, SwiGLU 14336; 218 M seeded parameters).
#[test]
#[ignore = "extended (tools/test-extended): 218 M parameters regenerated and a float64 reference; CI runs the quick variant"]
fn the_full_width_block_is_generated_and_passes_on_the_cpu_provider() {
    assert_golden_is_generated("llama3-8b-block");
    let s = common::suites::suite("llama3-8b-block");
    let r = common::suites::run(&s, &built("cpu"), Mode::Isolated, &[Tier::Fp32], false);
    common::suites::assert_passes(&r, "cpu isolated fp32", STAGES);
}
