//! `vsdk.pad` in its four modes (constant with a value no float dtype holds,
//! reflect, replicate, circular) on fresh random data: pads that differ on
//! every side of an image-shaped tensor, reflect as far as it reaches, and a
//! reflect pad feeding a convolution (chained, as in a generator's
//! `ReflectionPad2d` + `Conv2d`). The CPU provider, the C template and the
//! SIMT provider pass every stage and the kernel contract; a port whose
//! reflect repeats the edge element fails exactly the reflecting stages and
//! a reflect contract case.

use crate::common::suites::{self, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::Mode;
use vips_sdk::suite::Suite;
use vips_sdk::Device;

const OPS: [&str; 1] = ["vsdk.pad@1"];

fn suite(seed: u64, cpu: &Device) -> Suite {
    let stage = |name: &str, attrs: &str, shape: &str| {
        (
            format!("  {name}: {{ dtype: float32, shape: {shape}, source: golden }}\n"),
            format!(
                "  - stage: {name}\n    algorithm: \"F.pad\"\n    impl: \"torch\"\n    inputs: [x]\n    outputs: [{name}]\n    graph:\n      \
                 - {{ op: vsdk.pad, attrs: {{ {attrs} }}, inputs: [x], outputs: [{name}] }}\n"
            ),
        )
    };
    let pads = "pads: [0, 0, 2, 5, 0, 0, 3, 0]";
    let stages = [
        stage(
            "constant",
            &format!("{pads}, value: -0.1"),
            "[2, 4, 12, 11]",
        ),
        stage(
            "reflect",
            &format!("{pads}, mode: reflect"),
            "[2, 4, 12, 11]",
        ),
        stage(
            "replicate",
            &format!("{pads}, mode: replicate"),
            "[2, 4, 12, 11]",
        ),
        stage(
            "circular",
            &format!("{pads}, mode: circular"),
            "[2, 4, 12, 11]",
        ),
    ];
    let mut text = format!(
        r#"vips: 1
component: {{ id: padding, version: 0.1.0, title: "padding in four modes" }}
tensors:
  x: {{ dtype: float32, shape: [2, 4, 7, 6], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 2.0] }} }} }}
  w: {{ dtype: float32, shape: [5, 4, 3, 3], source: {{ seeded: {{ seed: {s1}, normal: [0.0, 0.3] }} }} }}
  conv: {{ dtype: float32, shape: [2, 5, 7, 6], source: golden }}
"#,
        s0 = seed,
        s1 = seed + 1,
    );
    for (tensor, _) in &stages {
        text += tensor;
    }
    text += "stages:\n";
    for (_, s) in &stages {
        text += s;
    }
    text += r#"  - stage: conv
    algorithm: "conv2d(F.pad(x, (1, 1, 1, 1), mode='reflect'), w)"
    impl: "a reflection pad feeding a convolution"
    inputs: [x, w]
    outputs: [conv]
    graph:
      - { op: vsdk.pad, attrs: { pads: [0, 0, 1, 1, 0, 0, 1, 1], mode: reflect }, inputs: [x], outputs: [p] }
      - { op: vsdk.conv2d, inputs: [p, w], outputs: [conv] }
"#;
    suites::from_yaml("padding", &text, cpu)
}

#[test]
fn every_provider_passes_in_both_modes() {
    let cpu = device("cpu");
    suites::assert_every_provider_passes(&suite(fresh_seed(), &cpu), &OPS);
}

/// NumPy's `symmetric` in place of `reflect`: the shape is right, the
/// constant, replicate and circular stages pass; the reflecting ones fail
/// (the convolution's through drill-down at its pad), and so does a reflect
/// case of the contract, required because the component reflects.
#[test]
fn a_reflect_pad_repeating_the_edge_fails_exactly_the_reflecting_stages() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let mutant = device(vsdk_broken_providers::MUTANT_PAD_REFLECT_SYMMETRIC);
    let r = run(&s, &mutant, &cpu, Mode::Isolated, &[Tier::Fp32], true);
    let failing = failing_stages(&r, "reflect as symmetric", &["vsdk.pad"]);
    assert_eq!(failing, ["reflect", "conv"]);
    let caught = suites::failing_cases(&r);
    assert!(
        !caught.is_empty()
            && caught
                .iter()
                .all(|c| c.starts_with("vsdk.pad@1") && c.ends_with("reflect")),
        "{caught:?}"
    );
}
