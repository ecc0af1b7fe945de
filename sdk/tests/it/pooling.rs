//! The reductions (`vsdk.max_pool2d`, `vsdk.avg_pool2d`,
//! `vsdk.adaptive_avg_pool2d`, `vsdk.mean`, `vsdk.sum`) judged by the error
//! model on fresh random data, on a 14x14 plane where ceil_mode adds a window
//! hanging over the edge, adaptive bins overlap (14 into 5) and ResNet's head
//! (convolution, ReLU, max pool, global average) runs chained. The CPU
//! provider, the C template and the SIMT provider pass every stage and the
//! kernel contract; each port mistake fails exactly the stages it concerns.

use crate::common::suites::{self, assert_passes, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::{Mode, Status};
use vips_sdk::suite::Suite;
use vips_sdk::Device;

const OPS: [&str; 5] = [
    "vsdk.max_pool2d@1",
    "vsdk.avg_pool2d@1",
    "vsdk.adaptive_avg_pool2d@1",
    "vsdk.mean@1",
    "vsdk.sum@1",
];

fn suite(seed: u64, cpu: &Device) -> Suite {
    let stage = |name: &str, input: &str, op: &str, attrs: &str| {
        format!(
            "  - stage: {name}\n    algorithm: \"{op}\"\n    impl: \"torch\"\n    inputs: [{input}]\n    outputs: [{name}]\n    graph:\n      \
             - {{ op: {op}, attrs: {{ {attrs} }}, inputs: [{input}], outputs: [{name}] }}\n"
        )
    };
    let window = "kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1], ceil_mode: 1";
    let mut text = format!(
        r#"vips: 1
component: {{ id: pooling, version: 0.1.0, title: "pooling and reductions" }}
tensors:
  x:  {{ dtype: float32, shape: [2, 8, 14, 14], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 2.0] }} }} }}
  xc: {{ dtype: float32, shape: [2, 4, 14, 14], source: {{ seeded: {{ seed: {s1}, normal: [0.0, 1.0] }} }} }}
  wc: {{ dtype: float32, shape: [8, 4, 3, 3], source: {{ seeded: {{ seed: {s2}, normal: [0.0, 0.3] }} }} }}
  max: {{ dtype: float32, shape: [2, 8, 8, 8], source: golden }}
  avg_pad: {{ dtype: float32, shape: [2, 8, 8, 8], source: golden }}
  avg_exact: {{ dtype: float32, shape: [2, 8, 7, 7], source: golden }}
  adaptive: {{ dtype: float32, shape: [2, 8, 5, 5], source: golden }}
  squeeze: {{ dtype: float32, shape: [2, 8, 1, 1], source: golden }}
  channels: {{ dtype: float32, shape: [2, 14, 14], source: golden }}
  head: {{ dtype: float32, shape: [2, 8, 1, 1], source: golden }}
stages:
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
    );
    text += &stage("max", "x", "vsdk.max_pool2d", window);
    text += &stage(
        "avg_pad",
        "x",
        "vsdk.avg_pool2d",
        &format!("{window}, count_include_pad: 1"),
    );
    text += &stage(
        "avg_exact",
        "x",
        "vsdk.avg_pool2d",
        "kernel: [2, 2], strides: [2, 2], count_include_pad: 0",
    );
    text += &stage(
        "adaptive",
        "x",
        "vsdk.adaptive_avg_pool2d",
        "output_size: [5, 5]",
    );
    text += &stage("squeeze", "x", "vsdk.mean", "axes: [2, 3], keepdims: 1");
    text += &stage("channels", "x", "vsdk.sum", "axes: [-3]");
    text += r#"  - stage: head
    algorithm: "global average of max_pool(relu(conv3x3(x)))"
    impl: "ResNet's stem and head"
    inputs: [xc, wc]
    outputs: [head]
    graph:
      - { op: vsdk.conv2d, attrs: { pads: [1, 1, 1, 1] }, inputs: [xc, wc], outputs: [h] }
      - { op: vsdk.relu, inputs: [h], outputs: [r] }
      - { op: vsdk.max_pool2d, attrs: { kernel: [3, 3], strides: [2, 2], pads: [1, 1, 1, 1] }, inputs: [r], outputs: [p] }
      - { op: vsdk.adaptive_avg_pool2d, attrs: { output_size: [1, 1] }, inputs: [p], outputs: [head] }
"#;
    suites::from_yaml("pooling", &text, cpu)
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
fn the_c_template_and_the_simt_provider_pass() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let tmpl = device(vsdk_template_c::LIBRARY_PATH);
    for mode in [Mode::Isolated, Mode::Chained] {
        let contract = mode == Mode::Isolated;
        assert_passes(
            &run(&s, &tmpl, &cpu, mode, &[Tier::Fp32], contract),
            &format!("template {mode:?}"),
            &OPS,
        );
    }
    let simt = device("simt");
    let tiers = [Tier::Fp32, Tier::Fp16, Tier::Bf16];
    assert_passes(
        &run(&s, &simt, &cpu, Mode::Isolated, &tiers, true),
        "simt isolated",
        &OPS,
    );
}

/// Each port mistake fails the stages whose windows it gets wrong and no
/// other, and the kernel contract names a case of its operator.
#[test]
fn each_port_mistake_fails_exactly_its_stages() {
    use vsdk_broken_providers as broken;
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let mutants: [(&str, &str, &[&str]); 4] = [
        (
            "window shifted",
            broken::MUTANT_POOL_WINDOW_SHIFTED,
            &["max", "avg_pad"],
        ),
        (
            "overhang counted",
            broken::MUTANT_AVG_POOL_OVERHANG_COUNTED,
            &["avg_pad"],
        ),
        (
            "padding excluded",
            broken::MUTANT_AVG_POOL_PAD_EXCLUDED,
            &["avg_pad"],
        ),
        (
            "bins rounded",
            broken::MUTANT_ADAPTIVE_BINS_ROUNDED,
            &["adaptive"],
        ),
    ];
    for (what, path, stages) in mutants {
        let mutant = device(path);
        let r = run(&s, &mutant, &cpu, Mode::Isolated, &[Tier::Fp32], true);
        let failing = failing_stages(
            &r,
            what,
            &["vsdk.max_pool2d", "vsdk.avg_pool2d", "vsdk.adaptive"],
        );
        assert_eq!(failing, stages, "{what}");
        assert!(
            !suites::failing_cases(&r).is_empty(),
            "{what}: no contract case failed"
        );
    }
    // A pool that ignores ceil_mode computes fewer outputs than the call's:
    // the stages with a hanging window end in its error, naming the kernel.
    let mutant = device(broken::MUTANT_POOL_CEIL_IGNORED);
    let r = run(&s, &mutant, &cpu, Mode::Isolated, &[Tier::Fp32], false);
    assert!(!r.passed);
    let failing: Vec<_> = r.tiers[0]
        .stages
        .iter()
        .filter(|s| s.status != Status::Pass)
        .collect();
    let names: Vec<&str> = failing.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(names, ["max", "avg_pad"]);
    for st in failing {
        let reason = format!("{:?}", st.reason);
        assert!(reason.contains("pool2d"), "{}: {reason}", st.stage);
    }
}
