//! The error model (docs/error-model.md): the normalised-error verdict on
//! random data, NaN and bias rules, and the property the model exists for:
//! scaling a suite's inputs or weights by 10 changes no verdict.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use vips_sdk::compare::{NanPolicy, Tier};
use vips_sdk::error_model::{judge, Precision, Rules, Statistics};
use vips_sdk::golden::GoldenFile;
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{DType, Device, HostTensor, Provider};

/// The bias test at `bias` (z limit; ratio 0.1) or none; rms factor 3.
fn rules(bias: Option<f64>) -> Rules {
    Rules {
        nan: NanPolicy::Fail,
        allowed_over_fraction: 0.0,
        statistics: Statistics {
            rms_factor: 3.0,
            bias: bias.map(|z| (z, 0.1)),
        },
    }
}

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(rand::random())
}

/// Random references, bounds, and actual values `r + f·B` with `f` drawn
/// from `errors`.
fn sample(n: usize, errors: impl Fn(&mut ChaCha8Rng) -> f64) -> (HostTensor, Vec<f64>, Vec<f64>) {
    let mut g = rng();
    let reference: Vec<f64> = (0..n).map(|_| g.gen_range(-50.0..50.0)).collect();
    let bound: Vec<f64> = (0..n).map(|_| g.gen_range(1e-3..1e-1)).collect();
    let actual: Vec<f64> = reference
        .iter()
        .zip(&bound)
        .map(|(r, b)| r + errors(&mut g) * b)
        .collect();
    (
        HostTensor::from_vec(&[n / 10, 10], actual).unwrap(),
        reference,
        bound,
    )
}

#[test]
fn errors_within_their_bounds_pass_with_ordered_margins() {
    let (a, r, b) = sample(20_000, |g| g.gen_range(-0.9..0.9));
    let j = judge(&a, &r, &b, Some(&b), rules(Some(8.0)));
    assert!(j.passed, "{j:?}");
    assert_eq!(j.over_bound, 0);
    assert!(j.max_e > 0.8 && j.max_e <= 0.9 + 1e-9, "{j:?}");
    assert!(j.p50_e <= j.p90_e && j.p90_e <= j.p99_e && j.p99_e <= j.max_e);
    // Uniform on (−0.9, 0.9): median |e| 0.45, rms 0.9/√3.
    assert!(
        (j.p50_e - 0.45).abs() < 0.03 && (j.rms_e - 0.9 / 3f64.sqrt()).abs() < 0.03,
        "{j:?}"
    );
    assert!(j.bias_z.unwrap().abs() < 8.0);
}

/// The judgement is tallied in blocks over threads: the same on any number
/// of threads, and the worst element is the first of equal largest |e|, even
/// across blocks and past an element whose difference overflows.
#[test]
fn the_judgement_does_not_depend_on_the_thread_count() {
    let (a, mut r, mut b) = sample(50_000, |g| g.gen_range(-0.9..0.9));
    let mut actual = a.to_vec::<f64>().unwrap();
    let mut g = rng();
    // Two equal largest errors in different blocks (blocks are 16 Ki).
    let (first, second) = (g.gen_range(20_000..30_000), g.gen_range(40_000..50_000));
    for i in [first, second] {
        (r[i], b[i]) = (1.0, 0.5);
        actual[i] = 1.0 - 0.468_75; // e = −0.9375 exactly, above every random |e|
    }
    // A difference that overflows, inside an infinite bound, at a block start.
    (actual[16_384], r[16_384], b[16_384]) = (-1e308, 1e308, f64::INFINITY);
    let a = HostTensor::from_vec(&a.spec.shape, actual).unwrap();
    let on = |threads| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
            .install(|| judge(&a, &r, &b, Some(&b), rules(Some(8.0))))
    };
    let one = on(1);
    assert!(one.passed, "{one:?}");
    assert_eq!(one.max_e, 0.9375, "{one:?}");
    let worst = one.worst.as_ref().unwrap();
    assert_eq!(worst.index, vec![first / 10, first % 10], "{one:?}");
    for threads in [2, 3, 8] {
        assert_eq!(on(threads), one, "{threads} threads");
    }
}

#[test]
fn one_element_past_its_bound_fails_and_is_named() {
    let (mut a, r, b) = sample(5_000, |g| g.gen_range(-0.5..0.5));
    let i = rng().gen_range(0..5_000);
    let bad = r[i] + 1.5 * b[i];
    a = HostTensor::from_vec(
        &a.spec.shape.clone(),
        a.to_f64_vec()
            .into_iter()
            .enumerate()
            .map(|(k, v)| if k == i { bad } else { v })
            .collect(),
    )
    .unwrap();
    let j = judge(&a, &r, &b, Some(&b), rules(None));
    assert!(!j.passed);
    assert_eq!(j.over_bound, 1);
    let w = j.worst.unwrap();
    assert_eq!(w.index, vec![i / 10, i % 10]);
    assert!((j.max_e - 1.5).abs() < 1e-9 && w.actual == bad && w.reference == r[i]);
    // The least tolerance that passes: the bound 1.5 times larger.
    assert!((j.tolerance_factor.unwrap() - 1.5).abs() < 1e-9);
    assert!(j
        .reason
        .unwrap()
        .contains("1 of 5000 elements outside their bound"));
    // A mismatch budget of one element in 5000 lets it through.
    let budget = Rules {
        allowed_over_fraction: 1.0 / 5000.0,
        ..rules(None)
    };
    assert!(judge(&a, &r, &b, Some(&b), budget).passed);
}

#[test]
fn errors_inside_every_bound_but_too_large_for_correct_rounding_fail_the_rms_test() {
    // |e| ≤ 0.9 everywhere, but σ is a tenth of the bound: rms t ≈ 5.2.
    let (a, r, b) = sample(20_000, |g| g.gen_range(-0.9..0.9));
    let sigma: Vec<f64> = b.iter().map(|b| b / 10.0).collect();
    let j = judge(&a, &r, &b, Some(&sigma), rules(Some(8.0)));
    assert_eq!(j.over_bound, 0);
    let rms = j.rms_t.unwrap();
    assert!((rms - 9.0 / 3f64.sqrt()).abs() < 0.2, "{j:?}");
    assert!(
        !j.passed && j.reason.as_ref().unwrap().contains("rms"),
        "{j:?}"
    );
    assert!(
        (j.tolerance_factor.unwrap() - rms / 3.0).abs() < 1e-9,
        "{j:?}"
    );
    // The same errors with σ at a third of the bound pass (rms t ≈ 1.6).
    let sigma: Vec<f64> = b.iter().map(|b| b / 3.0).collect();
    let j = judge(&a, &r, &b, Some(&sigma), rules(Some(8.0)));
    assert!(j.passed && j.tolerance_factor.is_none(), "{j:?}");
    // Elements whose σ is 0 are left to their bound.
    let sigma: Vec<f64> = b
        .iter()
        .enumerate()
        .map(|(i, b)| if i % 2 == 0 { 0.0 } else { b / 3.0 })
        .collect();
    let j = judge(&a, &r, &b, Some(&sigma), rules(Some(8.0)));
    // Only the other half is tested: rms t = 0.9·3/√3 ≈ 1.56 over it.
    assert!(
        j.passed && (j.rms_t.unwrap() - 0.9 * 3.0 / 3f64.sqrt()).abs() < 0.05,
        "{j:?}"
    );
    assert!(judge(&a, &r, &b, None, rules(Some(8.0))).rms_t.is_none());
}

#[test]
fn the_least_tolerance_is_the_order_statistic_the_mismatch_budget_allows() {
    // |e| of 3, 2, 1.5 past the bound and the rest inside, in random order;
    // a budget of one element: the bound must grow by the second largest.
    let mut g = rng();
    let n = 1000;
    let mut e: Vec<f64> = (0..n).map(|_| g.gen_range(-0.9..0.9)).collect();
    let at: Vec<usize> = rand::seq::index::sample(&mut g, n, 3).into_vec();
    for (&i, v) in at.iter().zip([3.0, -2.0, 1.5]) {
        e[i] = v;
    }
    let reference: Vec<f64> = (0..n).map(|_| g.gen_range(-5.0..5.0)).collect();
    let bound = vec![0.01; n];
    let actual = HostTensor::from_vec(
        &[n],
        reference
            .iter()
            .zip(&e)
            .map(|(r, e)| r + e * 0.01)
            .collect::<Vec<_>>(),
    )
    .unwrap();
    let budget = |allowed: f64| Rules {
        allowed_over_fraction: allowed,
        ..rules(None)
    };
    let k = |allowed| judge(&actual, &reference, &bound, None, budget(allowed)).tolerance_factor;
    assert!((k(0.0).unwrap() - 3.0).abs() < 1e-9);
    assert!((k(1.0 / n as f64).unwrap() - 2.0).abs() < 1e-9);
    assert!((k(2.0 / n as f64).unwrap() - 1.5).abs() < 1e-9);
    assert_eq!(k(3.0 / n as f64), None, "three allowed: passes");
    // A NaN fails at any factor; the relative L2 error is against the reference.
    let mut with_nan = actual.to_f64_vec();
    with_nan[at[0]] = f64::NAN;
    let nan = HostTensor::from_vec(&[n], with_nan).unwrap();
    let j = judge(&nan, &reference, &bound, None, rules(None));
    assert_eq!(j.tolerance_factor, Some(f64::INFINITY), "{j:?}");
    let j = judge(&actual, &reference, &bound, None, rules(None));
    let (d2, r2) = e.iter().zip(&reference).fold((0.0, 0.0), |(d, s), (e, r)| {
        (d + (e * 0.01f64).powi(2), s + r * r)
    });
    assert!(
        (j.rel_l2_error / (d2 / r2).sqrt() - 1.0).abs() < 1e-6,
        "{j:?}"
    );
}

#[test]
fn a_bias_inside_every_bound_fails_the_bias_test_only() {
    // Every element 0.05 of its bound high, plus noise: |e| < 1 everywhere.
    let (a, r, b) = sample(50_000, |g| 0.05 + g.gen_range(-0.3..0.3));
    let j = judge(&a, &r, &b, Some(&b), rules(Some(8.0)));
    assert_eq!(j.over_bound, 0);
    assert!(
        j.bias_z.unwrap() > 8.0 && j.bias_ratio.unwrap() > 0.1,
        "{j:?}"
    );
    assert!(!j.passed && j.reason.unwrap().contains("systematic bias"));
    // Without the bias test (not a dot product) it passes.
    assert!(judge(&a, &r, &b, Some(&b), rules(None)).passed);
    // A bias significant on a large tensor (z ≈ 19) but small next to the
    // spread (0.02 of the rms) passes: slightly correlated rounding errors do that.
    let (a, r, b) = sample(1_000_000, |g| 0.01 + g.gen_range(-0.9..0.9));
    let j = judge(&a, &r, &b, Some(&b), rules(Some(8.0)));
    assert!(
        j.bias_z.unwrap() > 8.0 && j.bias_ratio.unwrap() < 0.1,
        "{j:?}"
    );
    assert!(j.passed, "{j:?}");
}

#[test]
fn nan_and_inf_follow_the_reference() {
    let r = vec![1.0, f64::NAN, f64::INFINITY, -2.0];
    let b = vec![1e-3; 4];
    let t = |v: Vec<f64>| HostTensor::from_vec(&[4], v).unwrap();
    let same = t(vec![1.0, f64::NAN, f64::INFINITY, -2.0]);
    let allow = Rules {
        nan: NanPolicy::Allow,
        ..rules(None)
    };
    assert!(judge(&same, &r, &b, Some(&b), allow).passed);
    // NaN where the reference is NaN still fails when the stage says `nan: fail`.
    assert!(!judge(&same, &r, &b, Some(&b), rules(None)).passed);
    for bad in [
        vec![1.0, 0.0, f64::INFINITY, -2.0],
        vec![f64::NAN, f64::NAN, f64::INFINITY, -2.0],
        vec![1.0, f64::NAN, f64::MAX, -2.0],
        vec![1.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY],
    ] {
        let j = judge(&t(bad.clone()), &r, &b, Some(&b), allow);
        assert!(!j.passed && j.max_e.is_infinite(), "{bad:?}: {j:?}");
    }
}

#[test]
fn tier_precisions() {
    let p = |d| Precision::of(d).unwrap();
    assert_eq!(p(DType::F32).u, 2f64.powi(-24));
    assert_eq!(p(DType::F16).u, 2f64.powi(-11));
    assert_eq!(p(DType::BF16).u, 2f64.powi(-8));
    // Accumulations are float32 or wider at every tier.
    for d in [DType::F32, DType::F16, DType::BF16] {
        assert_eq!(p(d).u_acc, 2f64.powi(-24));
    }
    assert!(Precision::of(DType::U8).is_none());
}

fn device(path_or_name: &str) -> Device {
    Provider::open_by_name(path_or_name)
        .unwrap()
        .device(0)
        .unwrap()
}

/// A two-stage component (linear, GELU, LayerNorm, linear; attention) with
/// inputs of scale `xs` and weights of scale `ws`.
fn scaled_suite(xs: f64, ws: f64, seed: u64, cpu: &Device) -> Suite {
    let text = format!(
        r#"vips: 1
component: {{ id: scaled, version: 0.1.0, title: "scale test" }}
tensors:
  x:  {{ dtype: float32, shape: [24, 64], source: {{ seeded: {{ seed: {s0}, normal: [0.0, {x}] }} }} }}
  w1: {{ dtype: float32, shape: [48, 64], source: {{ seeded: {{ seed: {s1}, normal: [0.0, {w1}] }} }} }}
  b1: {{ dtype: float32, shape: [48], source: {{ seeded: {{ seed: {s2}, uniform: [-{b1}, {b1}] }} }} }}
  g:  {{ dtype: float32, shape: [48], source: {{ seeded: {{ seed: {s3}, uniform: [{g0}, {g1}] }} }} }}
  be: {{ dtype: float32, shape: [48], source: {{ seeded: {{ seed: {s4}, uniform: [-{b1}, {b1}] }} }} }}
  w2: {{ dtype: float32, shape: [32, 48], source: {{ seeded: {{ seed: {s5}, normal: [0.0, {w2}] }} }} }}
  q:  {{ dtype: float32, shape: [2, 20, 16], source: {{ seeded: {{ seed: {s6}, normal: [0.0, 0.5] }} }} }}
  k:  {{ dtype: float32, shape: [2, 20, 16], source: {{ seeded: {{ seed: {s7}, normal: [0.0, 0.5] }} }} }}
  v:  {{ dtype: float32, shape: [2, 20, 8], source: {{ seeded: {{ seed: {s8}, normal: [0.0, {x}] }} }} }}
  y:  {{ dtype: float32, shape: [24, 32], source: golden }}
  o:  {{ dtype: float32, shape: [2, 20, 8], source: golden }}
stages:
  - stage: mlp
    algorithm: "y = LayerNorm(GELU(x·w1ᵀ + b1))·w2ᵀ"
    impl: "test"
    inputs: [x, w1, b1, g, be, w2]
    outputs: [y]
    graph:
      - {{ op: vsdk.linear, inputs: [x, w1, b1], outputs: [h] }}
      - {{ op: vsdk.gelu, inputs: [h], outputs: [a] }}
      - {{ op: vsdk.layer_norm, inputs: [a, g, be], outputs: [n], attrs: {{ eps: 1.0e-6 }} }}
      - {{ op: vsdk.linear, inputs: [n, w2], outputs: [y] }}
  - stage: attention
    algorithm: "softmax(q·kᵀ/4)·v"
    impl: "test"
    inputs: [q, k, v]
    outputs: [o]
    graph:
      - {{ op: vsdk.sdpa, inputs: [q, k, v], outputs: [o] }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
        s3 = seed + 3,
        s4 = seed + 4,
        s5 = seed + 5,
        s6 = seed + 6,
        s7 = seed + 7,
        s8 = seed + 8,
        x = xs,
        w1 = 0.15 * ws,
        b1 = 0.1 * ws,
        g0 = 0.7 * ws,
        g1 = 1.3 * ws,
        w2 = 0.2 * ws,
    );
    let doc = vips_sdk::document::Document::parse(Path::new("scaled.yaml"), &text).unwrap();
    let bytes = vips_sdk::generate::generate(&doc, cpu, &[]).unwrap();
    Suite::new(
        doc,
        GoldenFile::from_bytes(Path::new("scaled.golden"), bytes).unwrap(),
    )
    .unwrap()
}

/// Per (provider, tier, stage): passed?
fn verdicts(suite: &Suite, devices: &[&Device], cpu: &Device) -> Vec<bool> {
    let mut out = Vec::new();
    for d in devices {
        for mode in [Mode::Isolated, Mode::Chained] {
            let opts = RunOptions {
                mode,
                tiers: vec![Tier::Fp32],
                ..crate::common::suites::options()
            };
            let r = runner::run(suite, d, cpu, &opts).unwrap();
            out.extend(r.tiers[0].stages.iter().map(|s| s.status == Status::Pass));
        }
    }
    out
}

#[test]
fn scaling_inputs_or_weights_by_ten_changes_no_verdict() {
    let cpu = device("cpu");
    let template = device(vsdk_template_c::LIBRARY_PATH);
    let tanh = device(vsdk_broken_providers::MUTANT_GELU_TANH);
    let devices = [&cpu, &template, &tanh];
    let seed = rand::random::<u32>() as u64;
    let base = verdicts(&scaled_suite(1.0, 1.0, seed, &cpu), &devices, &cpu);
    // The CPU provider and the template pass everything; GELU by tanh fails
    // the MLP stage and passes attention, in both modes.
    assert_eq!(
        base,
        vec![true, true, true, true, true, true, true, true, false, true, false, true],
        "seed {seed}"
    );
    for (xs, ws) in [(10.0, 1.0), (1.0, 10.0), (10.0, 10.0)] {
        let scaled = verdicts(&scaled_suite(xs, ws, seed, &cpu), &devices, &cpu);
        assert_eq!(scaled, base, "inputs x{xs}, weights x{ws}, seed {seed}");
    }
    // And at fp16/bf16 the correct implementations pass at every scale.
    for (xs, ws) in [(1.0, 1.0), (10.0, 10.0)] {
        let s = scaled_suite(xs, ws, seed, &cpu);
        let opts = RunOptions {
            tiers: vec![Tier::Fp16, Tier::Bf16],
            ..crate::common::suites::options()
        };
        let r = runner::run(&s, &cpu, &cpu, &opts).unwrap();
        assert!(r.passed, "x{xs} w{ws} seed {seed}: {:#?}", r.tiers);
    }
}

/// TRELLIS's q/k normalisation: `x [2, 16, 3, 32]` with γ `[3, 32]`, and
/// the same after a projection (the norm propagates the GEMM's error),
/// fresh seeds.
fn rms_norm_suite(seed: u64, cpu: &Device) -> Suite {
    let text = format!(
        r#"vips: 1
component: {{ id: rmsnorm, version: 0.1.0, title: "rms_norm test" }}
tensors:
  x: {{ dtype: float32, shape: [2, 16, 3, 32], source: {{ seeded: {{ seed: {s0}, normal: [0.0, 2.0] }} }} }}
  g: {{ dtype: float32, shape: [3, 32], source: {{ seeded: {{ seed: {s1}, uniform: [0.5, 1.5] }} }} }}
  y: {{ dtype: float32, shape: [2, 16, 3, 32], source: golden }}
  h: {{ dtype: float32, shape: [16, 24], source: {{ seeded: {{ seed: {s2}, normal: [0.0, 1.0] }} }} }}
  w: {{ dtype: float32, shape: [96, 24], source: {{ seeded: {{ seed: {s3}, normal: [0.0, 0.2] }} }} }}
  q: {{ dtype: float32, shape: [16, 3, 32], source: golden }}
stages:
  - stage: qk_norm
    algorithm: "F.normalize(x, dim=-1)·γ·√d"
    impl: "test"
    inputs: [x, g]
    outputs: [y]
    graph:
      - {{ op: vsdk.rms_norm, inputs: [x, g], outputs: [y] }}
  - stage: proj_norm
    algorithm: "q = RMSNorm(h·wᵀ) per head (the norm's input carries the GEMM's error)"
    impl: "test"
    inputs: [h, w, g]
    outputs: [q]
    graph:
      - {{ op: vsdk.linear, inputs: [h, w], outputs: [p] }}
      - {{ op: vsdk.reshape, inputs: [p], outputs: [p3], attrs: {{ shape: [16, 3, 32] }} }}
      - {{ op: vsdk.rms_norm, inputs: [p3, g], outputs: [q], attrs: {{ eps: 1.0e-6 }} }}
"#,
        s0 = seed,
        s1 = seed + 1,
        s2 = seed + 2,
        s3 = seed + 3,
    );
    let doc = vips_sdk::document::Document::parse(Path::new("rmsnorm.yaml"), &text).unwrap();
    let bytes = vips_sdk::generate::generate(&doc, cpu, &[]).unwrap();
    Suite::new(
        doc,
        GoldenFile::from_bytes(Path::new("rmsnorm.golden"), bytes).unwrap(),
    )
    .unwrap()
}

/// The rms_norm suite on `dev` at `tiers`, with the kernel contract (random
/// rows, views, rows of every scale, an all-zero row): (passed, the failing
/// records' names and reasons, the contract cases run).
fn rms_norm_run(dev: &Device, cpu: &Device, tiers: Vec<Tier>) -> (bool, Vec<String>, usize) {
    let seed = rand::random::<u32>() as u64;
    let suite = rms_norm_suite(seed, cpu);
    let opts = RunOptions {
        tiers,
        ..crate::common::suites::options()
    };
    let r = runner::run(&suite, dev, cpu, &opts).unwrap();
    let mut failing = Vec::new();
    let mut cases = 0;
    for t in &r.tiers {
        cases += t
            .contract
            .iter()
            .filter(|c| c.stage.starts_with("vsdk.rms_norm@1"))
            .count();
        for s in t.stages.iter().chain(&t.differential).chain(&t.contract) {
            if s.status != Status::Pass {
                failing.push(format!(
                    "{:?} {}: {:?} (seed {seed})",
                    t.tier, s.stage, s.reason
                ));
            }
        }
    }
    (r.passed, failing, cases)
}

#[test]
fn rms_norm_passes_on_every_correct_provider_with_its_contract() {
    let cpu = device("cpu");
    let template = device(vsdk_template_c::LIBRARY_PATH);
    let simt = device("simt");
    let all = vec![Tier::Fp32, Tier::Fp16, Tier::Bf16];
    for (name, dev, tiers) in [
        ("cpu", &cpu, all.clone()),
        // The C template computes float32 only.
        ("template-c", &template, vec![Tier::Fp32]),
        ("simt", &simt, all.clone()),
    ] {
        let (passed, failing, cases) = rms_norm_run(dev, &cpu, tiers.clone());
        assert!(passed && failing.is_empty(), "{name}: {failing:#?}");
        // Three views, rows of every scale with a zero row, long rows: per tier.
        assert!(cases >= 5 * tiers.len(), "{name}: {cases} contract cases");
    }
}

/// Set in the child process that loads one mutant (a mutant reads its
/// variables once per process).
const RMS_MUTANT: &str = "VSDK_TEST_RMS_MUTANT";

/// The mutant provider over the CPU provider, built beside this test.
fn mutant_library() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").join(format!(
        "{}vsdk_mutant_provider{}",
        std::env::consts::DLL_PREFIX,
        std::env::consts::DLL_SUFFIX
    ))
}

#[test]
fn rms_norm_mutants_fail() {
    let exe = std::env::current_exe().expect("test program path");
    let deps = exe.parent().expect("in a directory");
    for mutation in ["rms_norm_eps_added", "rms_norm_no_gamma"] {
        let out = std::process::Command::new(&exe)
            .args([
                "--exact",
                "error_model::rms_norm_mutant_in_child",
                "--ignored",
                "--nocapture",
            ])
            .env(RMS_MUTANT, mutation)
            .env("VSDK_MUTATION", mutation)
            .env(
                "VSDK_MUTANT_TARGET",
                deps.join(vips_sdk::library_file_name("cpu")),
            )
            .output()
            .expect("run the child");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success() && text.contains("1 passed"),
            "{mutation}: {text}"
        );
    }
}

/// Run by [`rms_norm_mutants_fail`] in a child process, one mutation each:
/// the mutant must fail a stage or a contract case at every tier it runs.
#[test]
#[ignore = "run by rms_norm_mutants_fail with a mutation set"]
fn rms_norm_mutant_in_child() {
    let mutation = std::env::var(RMS_MUTANT).expect("run by rms_norm_mutants_fail");
    let cpu = device("cpu");
    let mutant = device(mutant_library().to_str().expect("a UTF-8 path"));
    for tier in [Tier::Fp32, Tier::Fp16, Tier::Bf16] {
        let (passed, failing, _) = rms_norm_run(&mutant, &cpu, vec![tier]);
        assert!(!passed, "{mutation} passed at {tier:?}");
        assert!(
            failing
                .iter()
                .any(|f| f.contains("rms_norm") || f.contains("qk_norm")),
            "{mutation} at {tier:?}: {failing:#?}"
        );
        eprintln!("{mutation} at {tier:?} fails: {}", failing.join("; "));
    }
}

/// `cast(a / b)` to uint8 with a / b within float32 rounding of a half for
/// most elements and far from one for the rest: rounding to an integer is a
/// step, so where the input's bound reaches a rounding point either
/// neighbour is right, and elsewhere the result is exact. (The differential
/// round of TRELLIS's premultiplication, `(m - 127.3) / 254.1`, found the
/// first case: the input's tiny bound carried through the cast failed a
/// float32 division that rounded to the other side.)
#[test]
fn an_integer_cast_next_to_a_rounding_point_may_round_either_way() {
    let text = r#"vips: 1
component: { id: cast-step, version: 0.1.0, title: "cast step" }
tensors:
  a: { dtype: float32, shape: [4096], source: golden }
  b: { dtype: float32, shape: [4096], source: golden }
  q: { dtype: uint8, shape: [4096], source: golden }
stages:
  - stage: quantise
    algorithm: "q = round(a / b)"
    impl: "test"
    inputs: [a, b]
    outputs: [q]
    graph:
      - { op: vsdk.div, inputs: [a, b], outputs: [s] }
      - { op: vsdk.cast, inputs: [s], outputs: [q], attrs: { dtype: uint8 } }
"#;
    let doc = vips_sdk::document::Document::parse(Path::new("cast.yaml"), text).unwrap();
    let mut g = rng();
    let n = 4096;
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let d = g.gen_range(200.0f32..300.0);
        let k = f64::from(g.gen_range(0u8..250));
        // Even elements at a half (as float32 holds it), odd ones at a quarter.
        let target = if i % 2 == 0 { k + 0.5 } else { k + 0.25 };
        a.push((target * f64::from(d)) as f32);
        b.push(d);
    }
    let inputs = std::collections::HashMap::from([
        (
            "a".to_string(),
            HostTensor::from_vec(&[n], a.clone()).unwrap(),
        ),
        (
            "b".to_string(),
            HostTensor::from_vec(&[n], b.clone()).unwrap(),
        ),
    ]);
    let params = vips_sdk::error_model::TierParams::default_for(Tier::Fp32);
    let sr = vips_sdk::error_model::stage_reference(
        &doc.stages[0],
        Tier::Fp32,
        &inputs,
        &device("cpu"),
        &params,
    )
    .unwrap();
    let (reference, bound) = (sr.values["q"].to_f64_vec(), &sr.bounds["q"]);
    let mut flipped = 0;
    for i in 0..n {
        let float32 = f64::from(a[i] / b[i]).round_ties_even();
        let e =
            vips_sdk::error_model::element_error(float32, reference[i], bound[i], NanPolicy::Fail);
        assert!(
            e.abs() <= 1.0,
            "element {i}: float32 gives {float32}, reference {}, bound {}",
            reference[i],
            bound[i]
        );
        if i % 2 == 1 {
            assert_eq!(bound[i], 0.0, "element {i}, far from a half, is exact");
        } else {
            assert!(
                bound[i] <= 1.0,
                "element {i}: one step at most, not {}",
                bound[i]
            );
        }
        flipped += usize::from(float32 != reference[i]);
    }
    // The case the rule exists for does occur among 2048 halves.
    assert!(flipped > 0, "no float32 division rounded to the other side");
    // And the whole verdict (bounds and statistics) passes the float32
    // result: an integer's statistics are not tested.
    let float32: Vec<u8> = (0..n)
        .map(|i| f64::from(a[i] / b[i]).round_ties_even() as u8)
        .collect();
    let j = judge(
        &HostTensor::from_vec(&[n], float32).unwrap(),
        &reference,
        bound,
        Some(&sr.sigmas["q"]),
        Rules {
            nan: NanPolicy::Fail,
            allowed_over_fraction: 0.0,
            statistics: Statistics::of(&params, true),
        },
    );
    assert!(j.passed, "{j:?}");
}
