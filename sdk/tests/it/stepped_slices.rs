//! `vsdk.crop` with `steps` (a slice with a step: PyTorch's `x[..., a:b:k]`,
//! ONNX's `Slice` with steps) on fresh random data: a window whose last
//! element is the axis's last index, steps on two axes of a 4-d tensor, and a
//! strided downsample feeding a linear (chained). The CPU provider, the C
//! template and the SIMT provider pass every stage and the kernel contract's
//! stepped cases; a port that reads a contiguous window fails exactly the
//! stepped stages and a stepped contract case.

use crate::common::suites::{self, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::Mode;
use vips_sdk::suite::Suite;
use vips_sdk::Device;

const OPS: [&str; 1] = ["vsdk.crop@1"];

fn suite(seed: u64, cpu: &Device) -> Suite {
    let text = format!(
        r#"vips: 1
component: {{ id: stepped-slices, version: 0.1.0, title: "slices with a step" }}
tensors:
  x: {{ dtype: float32, shape: [2, 6, 11, 9], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 3.0] }} }} }}
  w: {{ dtype: float32, shape: [5, 3], source: {{ seeded: {{ seed: {s1}, normal: [0.0, 0.5] }} }} }}
  every_third: {{ dtype: float32, shape: [2, 6, 4, 9], source: golden }}
  two_axes: {{ dtype: float32, shape: [2, 3, 11, 3], source: golden }}
  plain: {{ dtype: float32, shape: [1, 6, 5, 9], source: golden }}
  mixed: {{ dtype: float32, shape: [2, 6, 4, 5], source: golden }}
stages:
  - stage: every_third
    algorithm: "x[:, :, 1::3]"
    impl: "torch"
    inputs: [x]
    outputs: [every_third]
    graph:
      - {{ op: vsdk.crop, attrs: {{ offsets: [0, 0, 1, 0], sizes: [2, 6, 4, 9], steps: [1, 1, 3, 1] }}, inputs: [x], outputs: [every_third] }}
  - stage: two_axes
    algorithm: "x[:, 1::2, :, ::4]"
    impl: "torch"
    inputs: [x]
    outputs: [two_axes]
    graph:
      - {{ op: vsdk.crop, attrs: {{ offsets: [0, 1, 0, 0], sizes: [2, 3, 11, 3], steps: [1, 2, 1, 4] }}, inputs: [x], outputs: [two_axes] }}
  - stage: plain
    algorithm: "x[1:, :, 3:8]"
    impl: "torch"
    inputs: [x]
    outputs: [plain]
    graph:
      - {{ op: vsdk.crop, attrs: {{ offsets: [1, 0, 3, 0], sizes: [1, 6, 5, 9] }}, inputs: [x], outputs: [plain] }}
  - stage: mixed
    algorithm: "linear(x[:, :, ::3, ::3])"
    impl: "a strided downsample feeding a linear"
    inputs: [x, w]
    outputs: [mixed]
    graph:
      - {{ op: vsdk.crop, attrs: {{ offsets: [0, 0, 0, 0], sizes: [2, 6, 4, 3], steps: [1, 1, 3, 3] }}, inputs: [x], outputs: [d] }}
      - {{ op: vsdk.linear, inputs: [d, w], outputs: [mixed] }}
"#,
        s0 = seed,
        s1 = seed + 1,
    );
    suites::from_yaml("stepped-slices", &text, cpu)
}

#[test]
fn every_provider_passes_in_both_modes() {
    let cpu = device("cpu");
    suites::assert_every_provider_passes(&suite(fresh_seed(), &cpu), &OPS);
}

/// A crop that ignores its steps reads a contiguous window of the right
/// shape: the stepped stages fail (the downsample's through drill-down at
/// the crop) and the plain one passes; the contract names a stepped case.
#[test]
fn a_crop_ignoring_its_steps_fails_exactly_the_stepped_stages() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let mutant = device(vsdk_broken_providers::MUTANT_CROP_STEP_IGNORED);
    let r = run(&s, &mutant, &cpu, Mode::Isolated, &[Tier::Fp32], true);
    let failing = failing_stages(&r, "steps ignored", &["vsdk.crop"]);
    assert_eq!(failing, ["every_third", "two_axes", "mixed"]);
    let caught = suites::failing_cases(&r);
    assert!(
        !caught.is_empty()
            && caught
                .iter()
                .all(|c| c.starts_with("vsdk.crop@1") && c.ends_with("stepped")),
        "{caught:?}"
    );
}
