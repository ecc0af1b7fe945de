//! The operators of a diffusion UNet's decoder block, on fresh random data:
//! group norm (32 channels in 8 groups) and SiLU, a nearest 2x upsample and
//! a convolution, a bilinear resize both ways round its corners, and
//! spatial self-attention written with batched matmuls (`q @ kᵀ` and
//! `softmax(·) @ v`, one batch axis broadcast). The CPU provider, the C
//! template and the SIMT provider pass every stage and the kernel contract;
//! each port mistake fails exactly the stages it concerns.

use crate::common::suites::{self, device, failing_stages, fresh_seed, run};
use vips_sdk::compare::Tier;
use vips_sdk::runner::Mode;
use vips_sdk::suite::Suite;
use vips_sdk::Device;

const OPS: [&str; 4] = [
    "vsdk.group_norm@1",
    "vsdk.resize_nearest@1",
    "vsdk.resize_bilinear@1",
    "vsdk.matmul@1",
];

fn suite(seed: u64, cpu: &Device) -> Suite {
    let text = format!(
        r#"vips: 1
component: {{ id: unet-ops, version: 0.1.0, title: "a UNet decoder block's operators" }}
tensors:
  x:  {{ dtype: float32, shape: [2, 32, 6, 5], source: {{ seeded: {{ seed: {s0}, normal: [0.5, 2.0] }} }} }}
  gw: {{ dtype: float32, shape: [32], source: {{ seeded: {{ seed: {s1}, normal: [1.0, 0.2] }} }} }}
  gb: {{ dtype: float32, shape: [32], source: {{ seeded: {{ seed: {s2}, normal: [0.0, 0.2] }} }} }}
  cw: {{ dtype: float32, shape: [8, 32, 3, 3], source: {{ seeded: {{ seed: {s3}, normal: [0.0, 0.06] }} }} }}
  q:  {{ dtype: float32, shape: [2, 4, 30, 16], source: {{ seeded: {{ seed: {s4}, normal: [0.0, 1.0] }} }} }}
  k:  {{ dtype: float32, shape: [2, 1, 16, 30], source: {{ seeded: {{ seed: {s5}, normal: [0.0, 0.25] }} }} }}
  v:  {{ dtype: float32, shape: [2, 1, 30, 16], source: {{ seeded: {{ seed: {s6}, normal: [0.0, 1.0] }} }} }}
  norm: {{ dtype: float32, shape: [2, 32, 6, 5], source: golden }}
  up_conv: {{ dtype: float32, shape: [2, 8, 12, 10], source: golden }}
  half_pixel: {{ dtype: float32, shape: [2, 32, 11, 9], source: golden }}
  corners: {{ dtype: float32, shape: [2, 32, 11, 9], source: golden }}
  exact: {{ dtype: float32, shape: [2, 32, 4, 3], source: golden }}
  attention: {{ dtype: float32, shape: [2, 4, 30, 16], source: golden }}
stages:
  - stage: norm
    algorithm: "silu(group_norm(x, 8))"
    impl: "torch"
    inputs: [x, gw, gb]
    outputs: [norm]
    graph:
      - {{ op: vsdk.group_norm, attrs: {{ groups: 8, eps: 1.0e-6 }}, inputs: [x, gw, gb], outputs: [g] }}
      - {{ op: vsdk.silu, inputs: [g], outputs: [norm] }}
  - stage: up_conv
    algorithm: "conv2d(interpolate(x, scale_factor=2, mode='nearest'), w, padding=1)"
    impl: "torch"
    inputs: [x, cw]
    outputs: [up_conv]
    graph:
      - {{ op: vsdk.resize_nearest, attrs: {{ scale_factor: [2.0, 2.0] }}, inputs: [x], outputs: [u] }}
      - {{ op: vsdk.conv2d, attrs: {{ pads: [1, 1, 1, 1] }}, inputs: [u, cw], outputs: [up_conv] }}
  - stage: half_pixel
    algorithm: "interpolate(x, size=(11, 9), mode='bilinear')"
    impl: "torch"
    inputs: [x]
    outputs: [half_pixel]
    graph:
      - {{ op: vsdk.resize_bilinear, attrs: {{ size: [11, 9] }}, inputs: [x], outputs: [half_pixel] }}
  - stage: corners
    algorithm: "interpolate(x, size=(11, 9), mode='bilinear', align_corners=True)"
    impl: "torch"
    inputs: [x]
    outputs: [corners]
    graph:
      - {{ op: vsdk.resize_bilinear, attrs: {{ size: [11, 9], align_corners: 1 }}, inputs: [x], outputs: [corners] }}
  - stage: exact
    algorithm: "interpolate(x, size=(4, 3), mode='nearest-exact')"
    impl: "torch"
    inputs: [x]
    outputs: [exact]
    graph:
      - {{ op: vsdk.resize_nearest, attrs: {{ size: [4, 3], exact: 1 }}, inputs: [x], outputs: [exact] }}
  - stage: attention
    algorithm: "softmax(q @ k, -1) @ v"
    impl: "spatial self-attention, one key/value head broadcast over four query heads"
    inputs: [q, k, v]
    outputs: [attention]
    graph:
      - {{ op: vsdk.matmul, inputs: [q, k], outputs: [s] }}
      - {{ op: vsdk.softmax, attrs: {{ axis: -1 }}, inputs: [s], outputs: [p] }}
      - {{ op: vsdk.matmul, inputs: [p, v], outputs: [attention] }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
        s3 = seed + 3,
        s4 = seed + 4,
        s5 = seed + 5,
        s6 = seed + 6,
    );
    suites::from_yaml("unet-ops", &text, cpu)
}

#[test]
fn every_provider_passes_in_both_modes() {
    let cpu = device("cpu");
    suites::assert_every_provider_passes(&suite(fresh_seed(), &cpu), &OPS);
}

/// Each port mistake, on the C template: the stages it concerns fail (at
/// fp32, in isolation), the others pass, and a contract case of its
/// operator catches it.
#[test]
fn each_port_mistake_fails_exactly_its_stages() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    for (mutant, op, stages) in [
        (
            vsdk_broken_providers::MUTANT_BILINEAR_CORNERS_FLIPPED,
            "vsdk.resize_bilinear",
            &["half_pixel", "corners"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_NEAREST_CENTRES_FLIPPED,
            "vsdk.resize_nearest",
            &["exact"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_GROUP_NORM_UNBIASED,
            "vsdk.group_norm",
            &["norm"][..],
        ),
        (
            vsdk_broken_providers::MUTANT_MATMUL_BATCH_FIRST,
            "vsdk.matmul",
            &["attention"][..],
        ),
    ] {
        let r = run(
            &s,
            &device(mutant),
            &cpu,
            Mode::Isolated,
            &[Tier::Fp32],
            true,
        );
        assert_eq!(failing_stages(&r, op, &[op]), stages, "{op}");
        let caught = suites::failing_cases(&r);
        assert!(
            !caught.is_empty() && caught.iter().all(|c| c.starts_with(&format!("{op}@1"))),
            "{op}: {caught:?}"
        );
    }
}

/// The component resizes both ways round the corners and both to corners
/// and centres (`exact` given on one node, left to its default on another):
/// the kernel contract requires the cases of every convention it uses.
#[test]
fn the_contract_requires_every_convention_the_component_uses() {
    let cpu = device("cpu");
    let s = suite(fresh_seed(), &cpu);
    let stages: Vec<_> = s.document.stages.iter().collect();
    let needed = vips_sdk::contract::needed(&s, &stages, Tier::Fp32);
    let claimed: Vec<_> = needed
        .iter()
        .map(|n| (n.op, vips_sdk::DType::F32))
        .collect();
    let cases = vips_sdk::contract::cases(&needed, &claimed, fresh_seed());
    for (kernel, flag) in [
        ("vsdk.resize_bilinear@1", "align_corners"),
        ("vsdk.resize_nearest@1", "exact"),
    ] {
        for on in [0, 1] {
            let variant = format!("{flag}={on} ");
            let of: Vec<_> = cases
                .iter()
                .filter(|c| c.name.starts_with(kernel) && c.name.contains(&variant))
                .collect();
            assert_eq!(of.len(), 2, "{kernel} {variant}");
            assert!(of.iter().all(|c| c.required), "{kernel} {variant}");
        }
    }
}
