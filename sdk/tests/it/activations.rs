//! The activations of CNNs and LLM blocks (`vsdk.relu`, `clamp`, `sigmoid`,
//! `tanh`, `exp`, `sqrt`, `rsqrt`, `hardswish`, `hardsigmoid`) judged by the
//! error model on fresh random data: each alone, a block whose errors cross
//! ReLU's and the hard sigmoid's kinks (propagation by the secant), and a
//! chain through `tanh`, `exp` and `sqrt`. (`exp` on N(0, 2): its results stay
//! inside float16's range, as the catalog requires for a judged result.) The CPU provider, the C template
//! and the SIMT provider pass every stage and the kernel contract's cases;
//! each template mutant fails exactly the stages (or contract cases) of its
//! operator, and drill-down names it.

use crate::common::suites::{self, assert_passes, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::{Mode, Status};
use vips_sdk::suite::Suite;
use vips_sdk::Device;

/// Every operator of this family, as contract cases name them.
const OPS: [&str; 9] = [
    "vsdk.relu@1",
    "vsdk.clamp@1",
    "vsdk.sigmoid@1",
    "vsdk.tanh@1",
    "vsdk.exp@1",
    "vsdk.sqrt@1",
    "vsdk.rsqrt@1",
    "vsdk.hardswish@1",
    "vsdk.hardsigmoid@1",
];

/// The suite, its seeded tensors drawn from `seed`.
fn suite(seed: u64, cpu: &Device) -> Suite {
    let one = |op: &str, x: &str, y: &str| {
        format!(
            "  - stage: {y}\n    algorithm: \"{op}\"\n    impl: \"test\"\n    inputs: [{x}]\n    outputs: [{y}]\n    graph:\n      - {{ op: vsdk.{op}, inputs: [{x}], outputs: [{y}] }}\n"
        )
    };
    let mut stages = String::new();
    for (op, x) in [
        ("relu", "x"),
        ("sigmoid", "big"),
        ("tanh", "big"),
        ("exp", "small"),
        ("sqrt", "pos"),
        ("rsqrt", "pos"),
        ("hardswish", "x"),
        ("hardsigmoid", "x"),
    ] {
        stages += &one(op, x, op);
    }
    let text = format!(
        r#"vips: 1
component: {{ id: activations, version: 0.1.0, title: "activations of CNNs and LLM blocks" }}
tensors:
  x:   {{ dtype: float32, shape: [48, 96], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 4.0] }} }} }}
  small: {{ dtype: float32, shape: [48, 96], source: {{ seeded: {{ seed: {s5}, normal: [0.0, 2.0] }} }} }}
  big: {{ dtype: float32, shape: [16, 64], source: {{ seeded: {{ seed: {s1}, uniform: [-120.0, 120.0] }} }} }}
  pos: {{ dtype: float32, shape: [24, 40], source: {{ seeded: {{ seed: {s2}, uniform: [0.01, 50.0] }} }} }}
  w1:  {{ dtype: float32, shape: [64, 96], source: {{ seeded: {{ seed: {s3}, normal: [0.0, 0.2] }} }} }}
  w2:  {{ dtype: float32, shape: [32, 64], source: {{ seeded: {{ seed: {s4}, normal: [0.0, 0.2] }} }} }}
  relu: {{ dtype: float32, shape: [48, 96], source: golden }}
  sigmoid: {{ dtype: float32, shape: [16, 64], source: golden }}
  tanh: {{ dtype: float32, shape: [16, 64], source: golden }}
  exp: {{ dtype: float32, shape: [48, 96], source: golden }}
  sqrt: {{ dtype: float32, shape: [24, 40], source: golden }}
  rsqrt: {{ dtype: float32, shape: [24, 40], source: golden }}
  hardswish: {{ dtype: float32, shape: [48, 96], source: golden }}
  hardsigmoid: {{ dtype: float32, shape: [48, 96], source: golden }}
  relu6: {{ dtype: float32, shape: [48, 96], source: golden }}
  above: {{ dtype: float32, shape: [48, 96], source: golden }}
  gated: {{ dtype: float32, shape: [48, 32], source: golden }}
  chain: {{ dtype: float32, shape: [48, 96], source: golden }}
stages:
{stages}  - stage: relu6
    algorithm: "clamp to [0, 6]"
    impl: "torch.nn.ReLU6()"
    inputs: [x]
    outputs: [relu6]
    graph:
      - {{ op: vsdk.clamp, attrs: {{ min: 0.0, max: 6.0 }}, inputs: [x], outputs: [relu6] }}
  - stage: above
    algorithm: "clamp from below"
    impl: "torch.clamp(x, min=-1.5)"
    inputs: [x]
    outputs: [above]
    graph:
      - {{ op: vsdk.clamp, attrs: {{ min: -1.5 }}, inputs: [x], outputs: [above] }}
  - stage: gated
    algorithm: "g·hardsigmoid(g), g = ReLU(x·w1ᵀ)·w2ᵀ"
    impl: "test"
    inputs: [x, w1, w2]
    outputs: [gated]
    graph:
      - {{ op: vsdk.linear, inputs: [x, w1], outputs: [h] }}
      - {{ op: vsdk.relu, inputs: [h], outputs: [a] }}
      - {{ op: vsdk.linear, inputs: [a, w2], outputs: [g] }}
      - {{ op: vsdk.hardsigmoid, inputs: [g], outputs: [s] }}
      - {{ op: vsdk.mul, inputs: [g, s], outputs: [gated] }}
  - stage: chain
    algorithm: "√exp(tanh(x))"
    impl: "test"
    inputs: [x]
    outputs: [chain]
    graph:
      - {{ op: vsdk.tanh, inputs: [x], outputs: [t] }}
      - {{ op: vsdk.exp, inputs: [t], outputs: [e] }}
      - {{ op: vsdk.sqrt, inputs: [e], outputs: [chain] }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
        s3 = seed + 3,
        s4 = seed + 4,
        s5 = seed + 5,
    );
    suites::from_yaml("activations", &text, cpu)
}

#[test]
fn the_cpu_provider_passes_at_every_tier_in_both_modes() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    assert_passes(
        &run(&s, &cpu, &cpu, Mode::Isolated, &tiers, true),
        "cpu isolated",
        &OPS,
    );
    assert_passes(
        &run(&s, &cpu, &cpu, Mode::Chained, &tiers, false),
        "cpu chained",
        &OPS,
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
        &OPS,
    );
    assert_passes(
        &run(&s, &tmpl, &cpu, Mode::Chained, &[Tier::Fp32], false),
        "template chained",
        &OPS,
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
        &OPS,
    );
    assert_passes(
        &run(&s, &simt, &cpu, Mode::Chained, &[Tier::Fp32], false),
        "simt chained",
        &OPS,
    );
}

/// Each mutant fails exactly `stages` (in both modes at fp32), drill-down
/// naming `op` where the stage has more than one node; one whose mistake no
/// model's data shows (ReLU of NaN) fails only the contract's cases of its
/// operator.
#[test]
fn each_mutant_fails_the_stages_of_its_operator() {
    use vsdk_broken_providers as b;
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    // The stages each must fail, and those it may also fail: the tanh form
    // (e − 1)/(e + 1) also cancels near 0, which the chain may show.
    for (path, op, stages, may) in [
        (
            b::MUTANT_HARDSIGMOID_KERAS,
            "vsdk.hardsigmoid",
            &["hardsigmoid", "gated"][..],
            &[][..],
        ),
        (
            b::MUTANT_SIGMOID_OVERFLOWING,
            "vsdk.sigmoid",
            &["sigmoid"],
            &[],
        ),
        (
            b::MUTANT_TANH_OVERFLOWING,
            "vsdk.tanh",
            &["tanh"],
            &["chain"],
        ),
    ] {
        let mutant = device(path);
        for mode in [Mode::Isolated, Mode::Chained] {
            let r = run(&s, &mutant, &cpu, mode, &[Tier::Fp32], false);
            let what = format!("{path} {mode:?}");
            let failing = failing_stages(&r, &what, &[op]);
            assert!(
                stages.iter().all(|s| failing.contains(s))
                    && failing
                        .iter()
                        .all(|f| stages.contains(f) || may.contains(f)),
                "{what}: {failing:?}"
            );
        }
    }
    let relu = device(b::MUTANT_RELU_FMAXF);
    let r = run(&s, &relu, &cpu, Mode::Isolated, &[Tier::Fp32], true);
    assert!(!r.passed);
    let t = &r.tiers[0];
    assert!(t.stages.iter().all(|s| s.status == Status::Pass));
    let failing = suites::failing_cases(&r);
    assert!(!failing.is_empty(), "no contract case caught fmaxf");
    assert!(
        failing.iter().all(|c| c.starts_with("vsdk.relu@1")),
        "{failing:?}"
    );
    assert!(
        failing.iter().any(|c| c.contains("extremes")),
        "the NaN case: {failing:?}"
    );
}
