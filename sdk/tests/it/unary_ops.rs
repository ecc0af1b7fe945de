//! `vsdk.silu`, `vsdk.gelu_tanh`, `vsdk.sin` and `vsdk.cos` judged by the
//! error model on fresh random data: alone, inside an MLP (propagation through
//! SiLU and the tanh GELU) and in a sinusoidal embedding `sin(t·f)`,
//! `cos(t·f)` with arguments up to 1000 (propagation through sin and cos).
//! The CPU provider, the C template and the SIMT provider pass every stage
//! and the kernel contract's cases; each mutant of the template fails exactly
//! the stages that use its operator, and drill-down names it.

use crate::common::suites::{self, assert_passes, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::Mode;
use vips_sdk::suite::Suite;
use vips_sdk::Device;

/// The four operators, as contract cases name them.
const UNARY_OPS: [&str; 4] = [
    "vsdk.silu@1",
    "vsdk.gelu_tanh@1",
    "vsdk.sin@1",
    "vsdk.cos@1",
];

/// The suite, its seeded tensors drawn from `seed`.
fn suite(seed: u64, cpu: &Device) -> Suite {
    let text = format!(
        r#"vips: 1
component: {{ id: unary, version: 0.1.0, title: "element-wise functions of one input" }}
tensors:
  x:  {{ dtype: float32, shape: [48, 96], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 4.0] }} }} }}
  w1: {{ dtype: float32, shape: [64, 96], source: {{ seeded: {{ seed: {s1}, normal: [0.0, 0.2] }} }} }}
  w2: {{ dtype: float32, shape: [32, 64], source: {{ seeded: {{ seed: {s2}, normal: [0.0, 0.2] }} }} }}
  t:  {{ dtype: float32, shape: [40, 1], source: {{ seeded: {{ seed: {s3}, uniform: [0.0, 1000.0] }} }} }}
  f:  {{ dtype: float32, shape: [1, 64], source: {{ seeded: {{ seed: {s4}, uniform: [0.0, 1.0] }} }} }}
  z:  {{ dtype: float32, shape: [64, 64], source: {{ seeded: {{ seed: {s5}, uniform: [-1000.0, 1000.0] }} }} }}
  ys: {{ dtype: float32, shape: [48, 96], source: golden }}
  yg: {{ dtype: float32, shape: [48, 96], source: golden }}
  ym: {{ dtype: float32, shape: [48, 32], source: golden }}
  es: {{ dtype: float32, shape: [40, 64], source: golden }}
  ec: {{ dtype: float32, shape: [40, 64], source: golden }}
  zs: {{ dtype: float32, shape: [64, 64], source: golden }}
  zc: {{ dtype: float32, shape: [64, 64], source: golden }}
stages:
  - stage: silu
    algorithm: "x·σ(x)"
    impl: "torch.nn.SiLU()"
    inputs: [x]
    outputs: [ys]
    graph:
      - {{ op: vsdk.silu, inputs: [x], outputs: [ys] }}
  - stage: gelu_tanh
    algorithm: "GELU, tanh approximation"
    impl: "torch.nn.GELU(approximate='tanh')"
    inputs: [x]
    outputs: [yg]
    graph:
      - {{ op: vsdk.gelu_tanh, inputs: [x], outputs: [yg] }}
  - stage: mlp
    algorithm: "GELU_tanh(SiLU(x·w1ᵀ)·w2ᵀ)"
    impl: "test"
    inputs: [x, w1, w2]
    outputs: [ym]
    graph:
      - {{ op: vsdk.linear, inputs: [x, w1], outputs: [h] }}
      - {{ op: vsdk.silu, inputs: [h], outputs: [a] }}
      - {{ op: vsdk.linear, inputs: [a, w2], outputs: [h2] }}
      - {{ op: vsdk.gelu_tanh, inputs: [h2], outputs: [ym] }}
  - stage: embed
    algorithm: "sin(t·f), cos(t·f)"
    impl: "test"
    inputs: [t, f]
    outputs: [es, ec]
    graph:
      - {{ op: vsdk.mul, inputs: [t, f], outputs: [p] }}
      - {{ op: vsdk.sin, inputs: [p], outputs: [es] }}
      - {{ op: vsdk.cos, inputs: [p], outputs: [ec] }}
  - stage: trig
    algorithm: "sin(z), cos(z)"
    impl: "test"
    inputs: [z]
    outputs: [zs, zc]
    graph:
      - {{ op: vsdk.sin, inputs: [z], outputs: [zs] }}
      - {{ op: vsdk.cos, inputs: [z], outputs: [zc] }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
        s3 = seed + 3,
        s4 = seed + 4,
        s5 = seed + 5,
    );
    suites::from_yaml("unary", &text, cpu)
}

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    assert_passes(
        &run(&s, &cpu, &cpu, Mode::Isolated, &tiers, true),
        "cpu isolated",
        &UNARY_OPS,
    );
    // Chained at fp32 only: at 16 bits sin(t·f) of arguments in the hundreds
    // is off the float32 golden by tenths (t·f itself is stored in 16 bits),
    // which the end-to-end criterion rightly refuses; TRELLIS computes its
    // embeddings in float32 (a stage `precision`).
    assert_passes(
        &run(&s, &cpu, &cpu, Mode::Chained, &[Tier::Fp32], false),
        "cpu chained",
        &UNARY_OPS,
    );
}

#[test]
fn the_c_template_passes_in_both_modes() {
    let cpu = device("cpu");
    let tmpl = device(vsdk_template_c::LIBRARY_PATH);
    let s = suite(fresh_seed(), &cpu);
    assert_passes(
        &run(&s, &tmpl, &cpu, Mode::Isolated, &[Tier::Fp32], true),
        "template isolated",
        &UNARY_OPS,
    );
    assert_passes(
        &run(&s, &tmpl, &cpu, Mode::Chained, &[Tier::Fp32], false),
        "template chained",
        &UNARY_OPS,
    );
}

#[test]
fn the_simt_provider_passes_at_every_gpu_tier() {
    let cpu = device("cpu");
    let simt = device("simt");
    let s = suite(fresh_seed(), &cpu);
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    assert_passes(
        &run(&s, &simt, &cpu, Mode::Isolated, &tiers, true),
        "simt isolated",
        &UNARY_OPS,
    );
    assert_passes(
        &run(&s, &simt, &cpu, Mode::Chained, &[Tier::Fp32], false),
        "simt chained",
        &UNARY_OPS,
    );
}

/// Each mutant fails exactly `stages` (in both modes at fp32), and
/// drill-down names `op` where the stage has more than one node.
#[test]
fn each_mutant_fails_the_stages_of_its_operator() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    // A swapped or badly reduced sin/cos: the stage's first of the two is named.
    let trig = &["vsdk.sin", "vsdk.cos"][..];
    for (path, ops, stages) in [
        (
            vsdk_broken_providers::MUTANT_SILU_SIGMOID,
            &["vsdk.silu"][..],
            &["silu", "mlp"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_GELU_TANH_ERF,
            &["vsdk.gelu_tanh"][..],
            &["gelu_tanh", "mlp"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_SIN_COS_SWAPPED,
            trig,
            &["embed", "trig"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_TRIG_F32_2PI,
            trig,
            &["embed", "trig"][..],
        ),
    ] {
        let mutant = device(path);
        for mode in [Mode::Isolated, Mode::Chained] {
            let r = run(&s, &mutant, &cpu, mode, &[Tier::Fp32], false);
            let what = format!("{path} {mode:?}");
            assert_eq!(failing_stages(&r, &what, ops), stages, "{what}");
        }
    }
}
