//! The error model on the sparse voxel kernels (docs/operators.md, "Sparse
//! voxel tensors"): the CPU provider passes a document of them at every float
//! tier in both modes (the C template at fp32, the GPU kernel source under
//! SIMT emulation at every tier), an engine computing them
//! correctly passes `check`, and
//! engines with the ports' classic mistakes fail at the stage that has them.

use crate::common;
use common::sparse::{shell, sparse_conv3d_with};
use common::T;
use rand::Rng;
use std::collections::HashMap;
use std::path::Path;
use vips_sdk::compare::Tier;
use vips_sdk::golden::GoldenFile;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{DType, HostTensor};

const C: usize = 6;

fn sparse_suite(voxels: &[[i32; 4]], seed: u64) -> Suite {
    let n = voxels.len();
    let mut parents: Vec<[i32; 4]> = voxels
        .iter()
        .map(|p| [p[0], p[1] / 2, p[2] / 2, p[3] / 2])
        .collect();
    parents.sort();
    parents.dedup();
    let m = parents.len();
    let coords: Vec<String> = voxels.iter().flatten().map(|c| c.to_string()).collect();
    let text = format!(
        r#"vips: 1
component: {{ id: sparse-test, version: 0.1.0, title: "sparse kernels test" }}
tensors:
  coords: {{ dtype: int32, shape: [{n}, 4], source: {{ values: [{coords}] }} }}
  feats: {{ dtype: float32, shape: [{n}, {C}], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 1.0] }} }} }}
  w: {{ dtype: float32, shape: [27, {C}, {C}], source: {{ seeded: {{ seed: {s1}, normal: [0.0, 0.15] }} }} }}
  b: {{ dtype: float32, shape: [{C}], source: {{ seeded: {{ seed: {s2}, uniform: [-0.1, 0.1] }} }} }}
  y: {{ dtype: float32, shape: [{n}, {C}], source: golden }}
  pc: {{ dtype: int32, shape: [{m}, 4], source: golden }}
  inv: {{ dtype: int32, shape: [{n}], source: golden }}
  pm: {{ dtype: float32, shape: [{m}, {C}], source: golden }}
  up: {{ dtype: float32, shape: [{n}, {C}], source: golden }}
  sc: {{ dtype: int32, shape: [{n8}, 4], source: golden }}
  sf: {{ dtype: float32, shape: [{n8}, {C}], source: golden }}
stages:
  - stage: conv
    algorithm: "SubMConv3d(C, C, 3)"
    impl: "test"
    inputs: [feats, coords, w, b]
    outputs: [y]
    graph:
      - {{ op: vsdk.sparse_conv3d, inputs: [feats, coords, w, b], outputs: [y] }}
  - stage: pool
    algorithm: "SparseDownsample(2)"
    impl: "test"
    inputs: [y, coords]
    outputs: [pc, inv, pm]
    graph:
      - {{ op: vsdk.sparse_downsample_coords, inputs: [coords], outputs: [pc], attrs: {{ voxels: {m} }} }}
      - {{ op: vsdk.sparse_downsample_index, inputs: [coords], outputs: [inv], attrs: {{ voxels: {m} }} }}
      - {{ op: vsdk.segment_mean, inputs: [y, inv], outputs: [pm], attrs: {{ segments: {m} }} }}
  - stage: unpool
    algorithm: "SparseUpsample(2)"
    impl: "test"
    inputs: [pm, inv]
    outputs: [up]
    graph:
      - {{ op: vsdk.gather_rows, inputs: [pm, inv], outputs: [up] }}
  - stage: subdivide
    algorithm: "SparseSubdivide"
    impl: "test"
    inputs: [y, coords]
    outputs: [sc, sf]
    graph:
      - {{ op: vsdk.sparse_subdivide_coords, inputs: [coords], outputs: [sc] }}
      - {{ op: vsdk.repeat_rows, inputs: [y], outputs: [sf], attrs: {{ times: 8 }} }}
"#,
        coords = coords.join(", "),
        n8 = 8 * n,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
    );
    let cpu = common::cpu();
    let doc = vips_sdk::document::Document::parse(Path::new("sparse.yaml"), &text).unwrap();
    let bytes = vips_sdk::generate::generate(&doc, &cpu, &[]).unwrap();
    Suite::new(
        doc,
        GoldenFile::from_bytes(Path::new("sparse.golden"), bytes).unwrap(),
    )
    .unwrap()
}

fn t(suite: &Suite, name: &str) -> T {
    let h = suite.tensor(name).unwrap();
    T::new(&h.spec.shape, h.to_f64_vec())
}

fn f32s(t: &T) -> HostTensor {
    t.host(DType::F32)
}

/// An engine's outputs of every stage, each computed in float64 from its
/// golden inputs and stored as float32, with `mistake` applied.
fn engine(suite: &Suite, voxels: &[[i32; 4]], mistake: &str) -> HashMap<String, HostTensor> {
    let (feats, w, b, y) = (
        t(suite, "feats"),
        t(suite, "w"),
        t(suite, "b"),
        t(suite, "y"),
    );
    // Offsets in torchsparse's order (x fastest), or spconv's read as if
    // they were; the weight with Cin and Cout swapped; neighbours at the
    // grid's low face (a coordinate 0) dropped.
    let conv = sparse_conv3d_with(
        voxels,
        &feats,
        C,
        Some(&b),
        |k, c, o| {
            let (kx, ky, kz) = (k / 9, k / 3 % 3, k % 3);
            match mistake {
                "offsets x fastest" => w.at(&[kx + 3 * ky + 9 * kz, c, o]),
                "weight transposed" => w.at(&[k, o, c]),
                _ => w.at(&[k, c, o]),
            }
        },
        |p, q| mistake != "boundary neighbour dropped" || q[1..].iter().all(|&x| x > 0) || p == q,
    );
    let mut out = HashMap::new();
    out.insert("y".to_string(), f32s(&conv));
    let inv = t(suite, "inv");
    let m = t(suite, "pc").shape[0];
    let mut sums = vec![0.0; m * C];
    let mut counts = vec![0.0; m];
    for (i, &pm) in inv.data.iter().enumerate() {
        counts[pm as usize] += 1.0;
        for c in 0..C {
            sums[pm as usize * C + c] += y.at(&[i, c]);
        }
    }
    let pm: Vec<f64> = sums
        .iter()
        .enumerate()
        .map(|(e, s)| {
            if mistake == "downsample by sum" {
                *s
            } else {
                s / counts[e / C]
            }
        })
        .collect();
    out.insert("pm".to_string(), f32s(&T::new(&[m, C], pm)));
    out.insert(
        "pc".to_string(),
        suite.tensor("pc").unwrap().as_ref().clone(),
    );
    out.insert(
        "inv".to_string(),
        suite.tensor("inv").unwrap().as_ref().clone(),
    );
    // Upsampled to the wrong parent: the next row of the coarse level.
    let coarse = t(suite, "pm");
    let up: Vec<f64> = inv
        .data
        .iter()
        .flat_map(|&pm| {
            let row = if mistake == "upsample to the wrong parent" {
                (pm as usize + 1) % m
            } else {
                pm as usize
            };
            coarse.data[row * C..(row + 1) * C].to_vec()
        })
        .collect();
    out.insert("up".to_string(), f32s(&T::new(&[voxels.len(), C], up)));
    out.insert(
        "sc".to_string(),
        suite.tensor("sc").unwrap().as_ref().clone(),
    );
    let sf: Vec<f64> = (0..8 * voxels.len())
        .flat_map(|r| y.data[r / 8 * C..(r / 8 + 1) * C].to_vec())
        .collect();
    out.insert("sf".to_string(), f32s(&T::new(&[8 * voxels.len(), C], sf)));
    out
}

fn failing(r: &runner::RunReport) -> Vec<String> {
    r.tiers
        .iter()
        .flat_map(|t| t.stages.iter().chain(&t.differential).chain(&t.contract))
        .filter(|s| s.status != Status::Pass)
        .map(|s| format!("{}: {:?}", s.stage, s.reason))
        .chain(r.tiers.iter().flat_map(|t| {
            t.end_to_end
                .iter()
                .filter(|e| !e.passed)
                .map(|e| format!("end to end {:?} {}: {:?}", t.tier, e.tensor, e.drift))
        }))
        .collect()
}

#[test]
fn the_reference_providers_pass_the_sparse_kernels_in_both_modes() {
    let (mut r, seed) = common::rng("sparse_providers");
    let voxels = shell(&mut r);
    let suite = sparse_suite(&voxels, r.gen_range(1..1u64 << 40));
    let (cpu, template, simt) = (common::cpu(), common::template_c(), common::simt());
    let every_tier = vec![Tier::Fp32, Tier::Fp16, Tier::Bf16];
    let runs = [
        ("cpu", &cpu, every_tier.clone()),
        ("template-c", &template, vec![Tier::Fp32]),
        ("simt", &simt, every_tier),
    ];
    for (name, dev, tiers) in &runs {
        for mode in [Mode::Isolated, Mode::Chained] {
            let opts = RunOptions {
                mode,
                tiers: tiers.clone(),
                ..common::suites::options()
            };
            let report = runner::run(&suite, dev, &cpu, &opts).unwrap();
            assert!(
                report.passed,
                "{name} {mode:?} (seed {seed}): {:#?}",
                failing(&report)
            );
            for t in &report.tiers {
                assert_eq!(t.stages.len(), 4);
                // The kernel contract ran every sparse kernel's cases too.
                for kernel in [
                    "vsdk.sparse_conv3d@1",
                    "vsdk.segment_mean@1",
                    "vsdk.sparse_downsample_index@1",
                ] {
                    let cases = t
                        .contract
                        .iter()
                        .filter(|c| c.stage.starts_with(kernel))
                        .count();
                    assert!(
                        cases >= 2,
                        "{name} {mode:?} {kernel}: {cases} contract cases"
                    );
                }
            }
        }
    }
}

#[test]
fn engines_with_a_sparse_port_mistake_fail_at_its_stage() {
    let (mut r, seed) = common::rng("sparse_mutants");
    let voxels = shell(&mut r);
    let suite = sparse_suite(&voxels, r.gen_range(1..1u64 << 40));
    let cpu = common::cpu();
    let opts = RunOptions {
        mode: Mode::Isolated,
        tiers: vec![Tier::Fp32],
        ..common::suites::options()
    };
    let correct =
        runner::check(&suite, &engine(&suite, &voxels, ""), "engine", &cpu, &opts).unwrap();
    assert!(correct.passed, "seed {seed}: {:#?}", failing(&correct));
    for (mistake, stage) in [
        ("offsets x fastest", "conv"),
        ("weight transposed", "conv"),
        ("boundary neighbour dropped", "conv"),
        ("downsample by sum", "pool"),
        ("upsample to the wrong parent", "unpool"),
    ] {
        let r = runner::check(
            &suite,
            &engine(&suite, &voxels, mistake),
            "engine",
            &cpu,
            &opts,
        )
        .unwrap();
        let failed: Vec<&str> = r.tiers[0]
            .stages
            .iter()
            .filter(|s| s.status != Status::Pass)
            .map(|s| s.stage.as_str())
            .collect();
        assert_eq!(
            failed,
            [stage],
            "{mistake} (seed {seed}): {:#?}",
            failing(&r)
        );
    }
}
