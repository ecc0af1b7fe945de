//! `vsdk.rotary_embedding` in both layouts, whole and partial (16 of 24
//! features turned), judged by the error model on fresh random data: the CPU
//! provider at every tier in both modes, the C template and the SIMT provider
//! pass every stage and the kernel contract; a template pairing features in
//! the other layout fails both stages.

use crate::common::suites::{self, assert_passes, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::Mode;
use vips_sdk::suite::Suite;
use vips_sdk::Device;

fn suite(seed: u64, cpu: &Device) -> Suite {
    let text = format!(
        r#"vips: 1
component: {{ id: rotary, version: 0.1.0, title: "rotary position embedding" }}
tensors:
  q:  {{ dtype: float32, shape: [2, 4, 9, 32], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 1.0] }} }} }}
  c16: {{ dtype: float32, shape: [9, 16], source: {{ seeded: {{ seed: {s1}, uniform: [-1.0, 1.0] }} }} }}
  s16: {{ dtype: float32, shape: [9, 16], source: {{ seeded: {{ seed: {s2}, uniform: [-1.0, 1.0] }} }} }}
  k:  {{ dtype: float32, shape: [1, 3, 5, 24], source: {{ seeded: {{ seed: {s3}, normal: [0.0, 2.0] }} }} }}
  c8: {{ dtype: float32, shape: [5, 8], source: {{ seeded: {{ seed: {s4}, uniform: [-1.0, 1.0] }} }} }}
  s8: {{ dtype: float32, shape: [5, 8], source: {{ seeded: {{ seed: {s5}, uniform: [-1.0, 1.0] }} }} }}
  half: {{ dtype: float32, shape: [2, 4, 9, 32], source: golden }}
  pairs: {{ dtype: float32, shape: [1, 3, 5, 24], source: golden }}
stages:
  - stage: half
    algorithm: "rotate-half (Llama)"
    impl: "transformers' apply_rotary_pos_emb"
    inputs: [q, c16, s16]
    outputs: [half]
    graph:
      - {{ op: vsdk.rotary_embedding, inputs: [q, c16, s16], outputs: [half] }}
  - stage: pairs
    algorithm: "interleaved pairs (GPT-J), 16 of 24 features"
    impl: "GPT-J's rotary on a partial head"
    inputs: [k, c8, s8]
    outputs: [pairs]
    graph:
      - {{ op: vsdk.rotary_embedding, attrs: {{ interleaved: 1 }}, inputs: [k, c8, s8], outputs: [pairs] }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
        s3 = seed + 3,
        s4 = seed + 4,
        s5 = seed + 5,
    );
    suites::from_yaml("rotary", &text, cpu)
}

#[test]
fn the_cpu_provider_the_c_template_and_the_simt_provider_pass() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    for (mode, contract) in [(Mode::Isolated, true), (Mode::Chained, false)] {
        assert_passes(
            &run(&s, &cpu, &cpu, mode, &tiers, contract),
            &format!("cpu {mode:?}"),
            &["vsdk.rotary_embedding@1"],
        );
    }
    let tmpl = device(vsdk_template_c::LIBRARY_PATH);
    assert_passes(
        &run(&s, &tmpl, &cpu, Mode::Isolated, &[Tier::Fp32], true),
        "template",
        &["vsdk.rotary_embedding@1"],
    );
    let simt = device("simt");
    assert_passes(
        &run(&s, &simt, &cpu, Mode::Isolated, &tiers, true),
        "simt",
        &["vsdk.rotary_embedding@1"],
    );
}

#[test]
fn pairs_in_the_other_layout_fail_both_stages() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let mutant = device(vsdk_broken_providers::MUTANT_ROTARY_LAYOUT_SWAPPED);
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = run(&s, &mutant, &cpu, mode, &[Tier::Fp32], false);
        let what = format!("{mode:?}");
        let failing = failing_stages(&r, &what, &["vsdk.rotary_embedding"]);
        assert_eq!(failing, ["half", "pairs"], "{what}");
    }
}
