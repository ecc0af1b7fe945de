//! The comparison against straightforward recomputation of every metric, on
//! fresh random data with errors, NaNs and infinities planted at random places.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vips_sdk::compare::*;
use vips_sdk::HostTensor;

fn rng() -> (ChaCha8Rng, u64) {
    let seed = rand::random();
    eprintln!("seed {seed}");
    (ChaCha8Rng::seed_from_u64(seed), seed)
}

fn close(rtol: f64, atol: f64) -> Criteria {
    Criteria {
        tolerance: Tolerance::Close { rtol, atol },
        nan: NanPolicy::Fail,
        allowed_mismatch_fraction: 0.0,
    }
}

/// Data spanning several chunks of the parallel pass, with a few planted errors.
fn planted(r: &mut ChaCha8Rng, n: usize) -> (Vec<f32>, Vec<f32>, Vec<usize>) {
    let e: Vec<f32> = (0..n).map(|_| r.gen_range(-4.0f32..4.0)).collect();
    let mut a: Vec<f32> = e
        .iter()
        .map(|&v| v + v * r.gen_range(-1e-7f32..1e-7))
        .collect();
    let mut bad: Vec<usize> = (0..5).map(|_| r.gen_range(0..n)).collect();
    bad.sort();
    bad.dedup();
    for &i in &bad {
        a[i] += r.gen_range(0.01f32..0.5);
    }
    (a, e, bad)
}

#[test]
fn metrics_match_a_direct_computation() {
    let (mut r, seed) = rng();
    let shape = [3, 71, 997]; // 212 361 elements: four chunks, the last partial
    let n = shape.iter().product();
    let (a, e, bad) = planted(&mut r, n);
    let (rtol, atol) = (1e-5, 1e-6);
    let m = compare(
        &HostTensor::from_vec(&shape, a.clone()).unwrap(),
        &HostTensor::from_vec(&shape, e.clone()).unwrap(),
        &close(rtol, atol),
    )
    .unwrap();
    let (a64, e64): (Vec<f64>, Vec<f64>) = (
        a.iter().map(|&v| v.into()).collect(),
        e.iter().map(|&v| v.into()).collect(),
    );
    let diffs: Vec<f64> = a64.iter().zip(&e64).map(|(x, y)| (x - y).abs()).collect();
    let mismatched: Vec<usize> = (0..n)
        .filter(|&i| diffs[i] > atol + rtol * e64[i].abs())
        .collect();
    assert_eq!(mismatched, bad, "seed {seed}");
    assert_eq!(m.mismatches, bad.len() as u64);
    assert_eq!(m.mismatch_fraction, bad.len() as f64 / n as f64);
    assert!(!m.passed);
    assert_eq!(m.max_abs_error, diffs.iter().cloned().fold(0.0, f64::max));
    let max_rel = (0..n)
        .filter(|&i| e64[i] != 0.0)
        .map(|i| diffs[i] / e64[i].abs())
        .fold(0.0, f64::max);
    // Ranking ratios (and so this maximum) are computed in float32.
    assert!(
        (m.max_rel_error - max_rel).abs() <= 1e-6 * max_rel,
        "{} vs {max_rel}",
        m.max_rel_error
    );
    let worst = (0..n).max_by(|&i, &j| {
        let (ri, rj) = (
            diffs[i] / (atol + rtol * e64[i].abs()),
            diffs[j] / (atol + rtol * e64[j].abs()),
        );
        ri.partial_cmp(&rj).unwrap()
    });
    let w = m.worst.as_ref().unwrap();
    let flat = (w.index[0] * shape[1] + w.index[1]) * shape[2] + w.index[2];
    assert_eq!(Some(flat), worst, "seed {seed}");
    assert_eq!((w.actual, w.expected), (a64[flat], e64[flat]));
    let d2: f64 = diffs.iter().map(|d| d * d).sum();
    let e2: f64 = e64.iter().map(|v| v * v).sum();
    let a2: f64 = a64.iter().map(|v| v * v).sum();
    let ae: f64 = a64.iter().zip(&e64).map(|(x, y)| x * y).sum();
    assert!((m.rel_l2_error - (d2 / e2).sqrt()).abs() < 1e-9 * (d2 / e2).sqrt());
    assert!((m.cosine_similarity - ae / (a2 * e2).sqrt()).abs() < 1e-12);
    // The same data passes with a loose enough tolerance or mismatch budget.
    let loose = compare(
        &HostTensor::from_vec(&shape, a.clone()).unwrap(),
        &HostTensor::from_vec(&shape, e.clone()).unwrap(),
        &Criteria {
            allowed_mismatch_fraction: 1e-4,
            ..close(rtol, atol)
        },
    )
    .unwrap();
    assert!(loose.passed, "{} mismatches of {n}", loose.mismatches);
}

#[test]
fn nan_and_inf_rules() {
    let (mut r, seed) = rng();
    let mut e: Vec<f32> = (0..1000).map(|_| r.gen_range(-1.0f32..1.0)).collect();
    let mut a = e.clone();
    let i = r.gen_range(0..250);
    e[i] = f32::NAN;
    a[i] = f32::NAN;
    let j = r.gen_range(250..500);
    e[j] = f32::INFINITY;
    a[j] = f32::INFINITY;
    let t = |v: &Vec<f32>| HostTensor::from_vec(&[1000], v.clone()).unwrap();
    let fail = compare(&t(&a), &t(&e), &close(1e-6, 1e-6)).unwrap();
    assert_eq!(
        (fail.mismatches, fail.nan_actual),
        (1, 1),
        "NaN fails by default (seed {seed})"
    );
    assert_eq!(fail.worst.as_ref().unwrap().index, vec![i]);
    let allow = Criteria {
        nan: NanPolicy::Allow,
        ..close(1e-6, 1e-6)
    };
    assert!(
        compare(&t(&a), &t(&e), &allow).unwrap().passed,
        "NaN = NaN and Inf = Inf pass when allowed"
    );
    a[j] = f32::NEG_INFINITY;
    let k = r.gen_range(500..1000);
    a[k] = f32::NAN; // NaN against a number fails even when NaN is allowed
    let m = compare(&t(&a), &t(&e), &allow).unwrap();
    assert_eq!(m.mismatches, 2);
    assert!(m.max_abs_error.is_finite() && m.cosine_similarity.is_finite());
}

#[test]
fn mixed_dtypes_and_the_exact_tier() {
    let (mut r, seed) = rng();
    let img: Vec<u8> = (0..300).map(|_| r.gen()).collect();
    let mut off = img.clone();
    let i = r.gen_range(0..300);
    off[i] = off[i].wrapping_add(if off[i] == 255 { 255 } else { 1 }); // ±1 LSB
    let t = |v: &Vec<u8>| HostTensor::from_vec(&[10, 30], v.clone()).unwrap();
    let exact = |lsb| Criteria {
        tolerance: Tolerance::Exact { lsb },
        nan: NanPolicy::Fail,
        allowed_mismatch_fraction: 0.0,
    };
    let m = compare(&t(&off), &t(&img), &exact(0)).unwrap();
    assert_eq!(
        (m.mismatches, m.worst.unwrap().index),
        (1, vec![i / 30, i % 30]),
        "seed {seed}"
    );
    assert!(compare(&t(&off), &t(&img), &exact(1)).unwrap().passed);
    // A float16 result against a float32 golden value.
    let e: Vec<f32> = (0..64).map(|_| r.gen_range(-2.0f32..2.0)).collect();
    let a: Vec<half::f16> = e.iter().map(|&v| half::f16::from_f32(v)).collect();
    let (ha, he) = (
        HostTensor::from_vec(&[64], a).unwrap(),
        HostTensor::from_vec(&[64], e).unwrap(),
    );
    assert!(compare(&ha, &he, &close(1e-3, 1e-5)).unwrap().passed);
    assert!(!compare(&ha, &he, &close(1e-6, 1e-7)).unwrap().passed);
    let e = compare(
        &ha,
        &HostTensor::from_vec(&[8, 8], vec![0f32; 64]).unwrap(),
        &close(1e-3, 0.0),
    )
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "shape [64] does not match the expected [8, 8]"
    );
}
