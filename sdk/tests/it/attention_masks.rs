//! `vsdk.sdpa` with grouped key/value heads (Llama-3's 4 query heads per
//! key/value head), a causal mask after a KV cache (`causal_offset`), an
//! additive mask broadcast over heads, and all three at once, judged by the
//! error model on fresh random data. The CPU provider, the C template and the
//! SIMT provider pass every stage and the kernel contract; a template mapping
//! query heads to key/value heads by modulo, and one whose causal rows stop a
//! key short, fail exactly their stages.

use crate::common::suites::{self, assert_passes, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::{Mode, Status};
use vips_sdk::suite::Suite;
use vips_sdk::Device;

fn suite(seed: u64, cpu: &Device) -> Suite {
    let t = |name: &str, shape: &str, k: u64, scale: f64| {
        format!(
            "  {name}: {{ dtype: float32, shape: {shape}, source: {{ seeded: {{ seed: {}, normal: [0.0, {scale}] }} }} }}\n",
            seed + k
        )
    };
    let stage = |name: &str, ins: &[&str], attrs: &str| {
        format!(
            "  - stage: {name}\n    algorithm: \"sdpa\"\n    impl: \"F.scaled_dot_product_attention\"\n    inputs: [{i}]\n    outputs: [{name}]\n    graph:\n      \
             - {{ op: vsdk.sdpa, attrs: {{ {attrs} }}, inputs: [{i}], outputs: [{name}] }}\n",
            i = ins.join(", ")
        )
    };
    let mut text = String::from(
        "vips: 1\ncomponent: { id: attention-masks, version: 0.1.0, title: \"masked and grouped attention\" }\ntensors:\n",
    );
    text += &t("gq", "[1, 8, 6, 16]", 0, 0.5);
    text += &t("gk", "[1, 2, 6, 16]", 1, 0.5);
    text += &t("gv", "[1, 2, 6, 16]", 2, 1.0);
    text += &t("cq", "[1, 4, 7, 16]", 3, 0.5);
    text += &t("ck", "[1, 4, 12, 16]", 4, 0.5);
    text += &t("cv", "[1, 4, 12, 16]", 5, 1.0);
    text += &t("mq", "[2, 4, 5, 16]", 6, 0.5);
    text += &t("mk", "[2, 4, 9, 16]", 7, 0.5);
    text += &t("mv", "[2, 4, 9, 16]", 8, 1.0);
    text += &t("mm", "[2, 1, 5, 9]", 9, 2.0);
    text += &t("lq", "[1, 8, 5, 16]", 10, 0.5);
    text += &t("lk", "[1, 2, 9, 16]", 11, 0.5);
    text += &t("lv", "[1, 2, 9, 16]", 12, 1.0);
    text += &t("lm", "[1, 1, 5, 9]", 13, 1.0);
    for (name, shape) in [
        ("gqa", "[1, 8, 6, 16]"),
        ("causal", "[1, 4, 7, 16]"),
        ("masked", "[2, 4, 5, 16]"),
        ("llama", "[1, 8, 5, 16]"),
    ] {
        text += &format!("  {name}: {{ dtype: float32, shape: {shape}, source: golden }}\n");
    }
    text += "stages:\n";
    // The kernel contract takes the first use as its template: the one with
    // every feature.
    text += &stage("llama", &["lq", "lk", "lv", "lm"], "causal_offset: 4");
    text += &stage("gqa", &["gq", "gk", "gv"], "");
    text += &stage("causal", &["cq", "ck", "cv"], "causal_offset: 5");
    text += &stage("masked", &["mq", "mk", "mv", "mm"], "scale: 0.3");
    suites::from_yaml("attention_masks", &text, cpu)
}

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    for (mode, contract) in [(Mode::Isolated, true), (Mode::Chained, false)] {
        assert_passes(
            &run(&s, &cpu, &cpu, mode, &tiers, contract),
            &format!("cpu {mode:?}"),
            &["vsdk.sdpa@1"],
        );
    }
}

#[test]
fn the_c_template_and_the_simt_provider_pass() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let tmpl = device(vsdk_template_c::LIBRARY_PATH);
    assert_passes(
        &run(&s, &tmpl, &cpu, Mode::Isolated, &[Tier::Fp32], true),
        "template",
        &["vsdk.sdpa@1"],
    );
    let simt = device("simt");
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    assert_passes(
        &run(&s, &simt, &cpu, Mode::Isolated, &tiers, true),
        "simt isolated",
        &["vsdk.sdpa@1"],
    );
}

#[test]
fn grouped_heads_mapped_by_modulo_and_a_causal_mask_one_off_fail_their_stages() {
    use vsdk_broken_providers as broken;
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    for (what, path, stages) in [
        (
            "heads by modulo",
            broken::MUTANT_SDPA_GQA_MODULO,
            ["llama", "gqa"],
        ),
        (
            "causal one off",
            broken::MUTANT_SDPA_CAUSAL_ONE_OFF,
            ["llama", "causal"],
        ),
    ] {
        let mutant = device(path);
        let r = run(&s, &mutant, &cpu, Mode::Isolated, &[Tier::Fp32], true);
        assert_eq!(failing_stages(&r, what, &["vsdk.sdpa"]), stages, "{what}");
        assert!(
            r.tiers[0].contract.iter().any(|c| c.status != Status::Pass),
            "{what}: no contract case failed"
        );
    }
}
