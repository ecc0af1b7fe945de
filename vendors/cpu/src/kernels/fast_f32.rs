//! The float32 hot loops (GELU, SiLU, softmax rows, layer-norm rows), written for
//! the auto-vectoriser and compiled for AVX-512, AVX2+FMA and the baseline,
//! chosen at run time (`multiversion`). f16 and bf16 compute through them.
//!
//! They compute in float64 lanes and round to float32 at the end, which
//! keeps them well inside the error model's per-operator bounds
//! (docs/error-model.md): GELU is off by at most |x|/2 · 2.3e-8 (the erf
//! approximation) plus one float32 rounding, and for x below about −4√2 it
//! gives −0 as the plain float32 definition does (1 + erf cancels); softmax
//! is within two float32 roundings of the float64 value (the exponential is
//! stored, then rescaled); layer norm rounds once. The float64 kernels, which
//! generate golden values, do not use this module: they keep `libm` and
//! sequential sums.

use super::elementwise::{Unary, SQRT_2_OVER_PI};
use multiversion::multiversion;

/// erf(z) ≈ z·P(z²)/Q(z²) on |z| < 4 (erf(±4) = ±(1 − 1.5e-8), and ±1 beyond).
/// A weighted least-squares fit made by tools/fit_erf.py, which also measures
/// the bound: |error| ≤ 2.3e-8 everywhere (0.2 ulp of 1.0 in float32).
/// All coefficients are positive, so the float64 evaluation cancels nothing.
const ERF_P: [f64; 6] = [
    1.128_378_980_364_683_5,
    0.196_100_610_364_692_37,
    0.053_448_499_895_448_59,
    0.003_997_442_908_539_421,
    0.000_287_929_382_535_759_3,
    1.976_336_164_388_748e-6,
];
const ERF_Q: [f64; 6] = [
    1.0,
    0.507_120_839_626_323_9,
    0.116_415_663_274_658_83,
    0.015_432_006_853_007_104,
    0.001_214_905_521_642_910_8,
    3.749_060_167_514_834e-5,
];
/// |z| at and beyond which erf is ±1 here.
const ERF_SATURATES: f64 = 4.0;

#[inline(always)]
fn horner<const N: usize>(c: &[f64; N], t: f64) -> f64 {
    let mut r = c[N - 1];
    for k in (0..N - 1).rev() {
        r = r.mul_add(t, c[k]);
    }
    r
}

/// erf in float64 to the bound of [`ERF_P`]; NaN stays NaN.
#[inline(always)]
pub fn erf_approx(z: f64) -> f64 {
    let t = z * z;
    let inner = z * horner(&ERF_P, t) / horner(&ERF_Q, t);
    // A select, not a branch: the loop stays vectorised.
    if z.abs() >= ERF_SATURATES {
        1f64.copysign(z)
    } else {
        inner
    }
}

/// Exact GELU, x/2·(1 + erf(x/√2)), of each element.
#[multiversion(targets("x86_64+avx512f+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn gelu(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let x = f64::from(v);
        *o = (0.5 * x * (1.0 + erf_approx(x * std::f64::consts::FRAC_1_SQRT_2))) as f32;
    }
}

/// `f` of each element (docs/operators.md). SiLU and the tanh GELU are
/// `x·σ(y)` (`y = x`, `y = 2a`), vectorised through [`exp_nonpositive`] of
/// `−|y|` (no overflow, no cancellation); the others take the float64
/// definitions (sin and cos the C library's, whose argument reduction is exact
/// at any magnitude), rounded once.
pub fn unary(f: Unary, x: &[f32], out: &mut [f32]) {
    match f {
        Unary::Silu => silu(x, out),
        Unary::GeluTanh => gelu_tanh(x, out),
        _ => {
            for (o, &v) in out.iter_mut().zip(x) {
                *o = f.value(f64::from(v)) as f32;
            }
        }
    }
}

/// `x·σ(y)` in float64 from `e = exp(−|y|)`: `x/(1 + e)` for `y ≥ 0`,
/// `x·e/(1 + e)` below (selects, not branches).
#[inline(always)]
fn times_sigmoid(x: f64, y: f64) -> f64 {
    let e = exp_nonpositive(-y.abs());
    let num = if y >= 0.0 { x } else { x * e };
    num / (1.0 + e)
}

#[multiversion(targets("x86_64+avx512f+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn silu(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let x = f64::from(v);
        *o = times_sigmoid(x, x) as f32;
    }
}

#[multiversion(targets("x86_64+avx512f+avx512dq+avx512vl", "x86_64+avx2+fma"))]
fn gelu_tanh(x: &[f32], out: &mut [f32]) {
    for (o, &v) in out.iter_mut().zip(x) {
        let x = f64::from(v);
        let two_a = 2.0 * SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
        *o = times_sigmoid(x, two_a) as f32;
    }
}

/// exp(x) in float64 for x ≤ 0 (softmax arguments): x = n·ln 2 + r with
/// |r| ≤ ln 2 / 2, exp(r) by its Taylor series to degree 7 (truncation below
/// 7.3e-9 relative, 0.06 ulp of float32), scaled by 2ⁿ through the exponent
/// bits. Arguments below −700 give 0 (float32 flushes far earlier).
#[inline(always)]
fn exp_nonpositive(x: f64) -> f64 {
    const LN2_HI: f64 = 0.693_147_180_369_123_8;
    const LN2_LO: f64 = 1.908_214_929_270_587_7e-10;
    let xc = x.max(-700.0);
    let n = (xc * std::f64::consts::LOG2_E).round_ties_even();
    let r = (-n).mul_add(LN2_LO, (-n).mul_add(LN2_HI, xc));
    let mut p: f64 = 1.0 / 5040.0;
    for c in [720.0, 120.0, 24.0, 6.0, 2.0, 1.0, 1.0] {
        p = p.mul_add(r, 1.0 / c);
    }
    // 2ⁿ without a float-to-integer conversion (which `as` saturates, and
    // which does not vectorise): n + 1023 lands in the low mantissa bits of
    // 2⁵² + n + 1023, and the shift moves them into the exponent field.
    let scale = f64::from_bits((n + (1023.0 + TWO_52)).to_bits() << 52);
    if x < -700.0 {
        0.0
    } else {
        p * scale
    }
}

const TWO_52: f64 = 4_503_599_627_370_496.0;

const LANES: usize = 16;

/// Softmax of one contiguous row, in place: max-subtracted, exponentials and
/// their sum in float64, one rounding per element.
#[multiversion(targets("x86_64+avx512f+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn softmax_row(row: &mut [f32]) {
    // Lanes of independent maxima and sums: no loop-carried chain.
    let mut maxes = [f32::NEG_INFINITY; LANES];
    let mut nans = [0u32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for k in 0..LANES {
            maxes[k] = maxes[k].max(c[k]);
            nans[k] |= u32::from(c[k].is_nan());
        }
    }
    let rest = chunks.remainder();
    let max = rest
        .iter()
        .chain(&maxes)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let nan = nans.iter().any(|&n| n != 0) || rest.iter().any(|v| v.is_nan());
    if nan || !max.is_finite() {
        // NaN or infinite rows: the plain definition decides.
        return super::norm::softmax_row_plain(row);
    }
    let m = f64::from(max);
    let mut sums = [0f64; LANES];
    let mut chunks = row.chunks_exact_mut(LANES);
    for c in &mut chunks {
        for k in 0..LANES {
            let e = exp_nonpositive(f64::from(c[k]) - m);
            sums[k] += e;
            c[k] = e as f32;
        }
    }
    let mut sum: f64 = sums.iter().sum();
    for v in chunks.into_remainder() {
        let e = exp_nonpositive(f64::from(*v) - m);
        sum += e;
        *v = e as f32;
    }
    // Rescaling the rounded exponentials adds at most one float32 rounding
    // relative to dividing the float64 ones.
    let inv = 1.0 / sum;
    for v in row.iter_mut() {
        *v = (f64::from(*v) * inv) as f32;
    }
}

/// Sum of a row in float64, in lanes.
#[inline(always)]
fn sum_wide(row: &[f32], f: impl Fn(f64) -> f64) -> f64 {
    let mut acc = [0f64; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for c in &mut chunks {
        for k in 0..LANES {
            acc[k] += f(f64::from(c[k]));
        }
    }
    chunks
        .remainder()
        .iter()
        .fold(acc.iter().sum::<f64>(), |s, &v| s + f(f64::from(v)))
}

/// One row of layer norm: centred two-pass statistics in float64, then
/// `(x − μ)/√(σ² + eps)·w + b` in float64, rounded once.
#[multiversion(targets("x86_64+avx512f+avx512dq+avx512vl", "x86_64+avx2+fma"))]
pub fn layer_norm_row(row: &[f32], w: &[f32], b: &[f32], eps: f64, out: &mut [f32]) {
    let d = row.len() as f64;
    let mean = sum_wide(row, |v| v) / d;
    let var = sum_wide(row, |v| (v - mean) * (v - mean)) / d;
    let rstd = 1.0 / (var + eps).sqrt();
    for (((o, &x), &w), &b) in out.iter_mut().zip(row).zip(w).zip(b) {
        *o = ((f64::from(x) - mean) * rstd).mul_add(f64::from(w), f64::from(b)) as f32;
    }
}
