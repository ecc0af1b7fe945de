//! The vectorised float32 row kernels against float64 and their error-model bounds.

use rand::Rng;
use vsdk_catalog::Unary;
use vsdk_provider_cpu::kernels::fast_f32::{erf_approx, gelu, layer_norm_row, softmax_row, unary};

/// Random inputs across the interesting ranges: small, around the
/// erf knee, deep in the tails, and a few specials.
fn inputs(n: usize) -> Vec<f32> {
    let mut r = crate::rng("fast_f32");
    let mut v: Vec<f32> = (0..n)
        .map(|i| match i % 4 {
            0 => r.gen_range(-1e-3..1e-3),
            1 => r.gen_range(-4.0..4.0),
            2 => r.gen_range(-12.0..12.0),
            _ => r.gen_range(-1e4..1e4),
        })
        .collect();
    v.extend([0.0, -0.0, 4.0 * std::f32::consts::SQRT_2, f32::MIN_POSITIVE]);
    v
}

#[test]
fn erf_is_within_its_documented_bound() {
    let mut r = crate::rng("fast_f32");
    for _ in 0..200_000 {
        let z: f64 = r.gen_range(-6.0..6.0);
        let err = (erf_approx(z) - libm::erf(z)).abs();
        assert!(err <= 2.3e-8, "erf({z}): error {err}");
    }
    assert!(erf_approx(f64::NAN).is_nan());
    assert_eq!(erf_approx(f64::INFINITY), 1.0);
    assert_eq!(erf_approx(f64::NEG_INFINITY), -1.0);
}

#[test]
fn gelu_is_within_the_error_models_bound() {
    // docs/error-model.md: u·|v| + 4·u_acc·(|v| + |x|) + tiny, u = u_acc = 2⁻²⁴.
    let x = inputs(100_003);
    let mut out = vec![0f32; x.len()];
    gelu(&x, &mut out);
    let u = 2f64.powi(-24);
    for (&xi, &o) in x.iter().zip(&out) {
        let xf = f64::from(xi);
        let exact = 0.5 * xf * (1.0 + libm::erf(xf * std::f64::consts::FRAC_1_SQRT_2));
        let bound = u * exact.abs() + 4.0 * u * (exact.abs() + xf.abs()) + 1e-38;
        let err = (f64::from(o) - exact).abs();
        assert!(
            err <= bound,
            "gelu({xi}) = {o}, exact {exact}: {err} > {bound}"
        );
    }
    let mut special = [0f32; 3];
    gelu(&[f32::NAN, f32::INFINITY, f32::NEG_INFINITY], &mut special);
    assert!(special[0].is_nan() && special[1] == f32::INFINITY && special[2].is_nan());
}

/// SiLU, the tanh GELU, sin and cos within their error-model bounds
/// (docs/error-model.md) at float32 against float64 formulas written
/// independently of the kernels (the literal definitions, which are
/// accurate in float64 where they are evaluated here).
#[test]
fn unary_functions_are_within_the_error_models_bounds() {
    const U: f64 = 1.0 / 16_777_216.0;
    const TINY: f64 = 1.175_494_350_822_287_5e-38;
    let mut x = inputs(100_003);
    // Where exp(−x) overflows float32, and arguments of TRELLIS's embeddings.
    x.extend([
        -88.0f32, -89.0, -90.0, -100.0, 88.0, 1000.0, -999.5, 12345.6,
    ]);
    let c = (2.0 / std::f64::consts::PI).sqrt();
    type Case = (Unary, fn(f64, f64) -> f64, fn(f64, f64) -> f64);
    let cases: [Case; 4] = [
        (
            Unary::Silu,
            |x, _| x / (1.0 + (-x).exp()),
            |_, v| U * v.abs() + 4.0 * U * v.abs() + 32.0 * TINY,
        ),
        (
            Unary::GeluTanh,
            |x, c| 0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh()),
            |x, v| U * v.abs() + 4.0 * U * (v.abs() + x.abs()) + TINY,
        ),
        (
            Unary::Sin,
            |x, _| x.sin(),
            |_, v| U * v.abs() + 4.0 * U * v.abs() + TINY,
        ),
        (
            Unary::Cos,
            |x, _| x.cos(),
            |_, v| U * v.abs() + 4.0 * U * v.abs() + TINY,
        ),
    ];
    for (f, exact, bound) in cases {
        let mut out = vec![0f32; x.len()];
        unary(f, &x, &mut out);
        for (&xi, &o) in x.iter().zip(&out) {
            let xf = f64::from(xi);
            let want = exact(xf, c);
            // The literal tanh form cancels in float64 too, far below
            // float32's resolution of the bound.
            let err = (f64::from(o) - want).abs();
            let b = bound(xf, want);
            assert!(err <= b, "{f:?}({xi}) = {o}, exact {want}: {err} > {b}");
        }
        let mut special = [0f32; 1];
        unary(f, &[f32::NAN], &mut special);
        assert!(special[0].is_nan(), "{f:?}(NaN)");
    }
    // Large arguments and the tails: no NaN, the right limits.
    let mut big = [0f32; 4];
    unary(Unary::Silu, &[f32::MAX, -f32::MAX, 1e30, -1e30], &mut big);
    assert_eq!(big, [f32::MAX, -0.0, 1e30, -0.0]);
    unary(
        Unary::GeluTanh,
        &[f32::MAX, -f32::MAX, 1e30, -1e30],
        &mut big,
    );
    assert_eq!(big, [f32::MAX, -0.0, 1e30, -0.0]);
    let mut s = [0f32; 2];
    unary(Unary::Sin, &[1e30, f32::MAX], &mut s);
    let wide = [f64::from(1e30f32), f64::from(f32::MAX)];
    assert_eq!(s, [wide[0].sin() as f32, wide[1].sin() as f32]);
}

#[test]
fn softmax_rows_match_float64_to_an_ulp() {
    let mut r = crate::rng("fast_f32");
    for n in [1usize, 7, 16, 257, 1000] {
        let row: Vec<f32> = (0..n).map(|_| r.gen_range(-30.0..30.0)).collect();
        let mut fast = row.clone();
        softmax_row(&mut fast);
        let m = row
            .iter()
            .fold(f64::NEG_INFINITY, |m, &v| m.max(f64::from(v)));
        let e: Vec<f64> = row.iter().map(|&v| (f64::from(v) - m).exp()).collect();
        let s: f64 = e.iter().sum();
        for (k, (&f, &ek)) in fast.iter().zip(&e).enumerate() {
            let exact = ek / s;
            // One float32 rounding of the exponential and one of the result.
            let bound = 2.0 * 2f64.powi(-24) * exact * 1.000_001 + 1e-45;
            assert!(
                (f64::from(f) - exact).abs() <= bound,
                "n={n} k={k}: {f} vs {exact}"
            );
        }
    }
    let mut inf = [1.0, f32::INFINITY, 0.0];
    softmax_row(&mut inf);
    assert!(inf[1].is_nan(), "softmax with +inf follows exp(inf - inf)");
    let mut low = [-1e30f32, 0.0, -800.0];
    softmax_row(&mut low);
    assert_eq!(low, [0.0, 1.0, 0.0]);
}

#[test]
fn layer_norm_rows_match_float64() {
    let mut r = crate::rng("fast_f32");
    for d in [1usize, 15, 384, 1000] {
        let shift: f32 = r.gen_range(-100.0..100.0);
        let row: Vec<f32> = (0..d).map(|_| shift + r.gen_range(-3.0..3.0)).collect();
        let w: Vec<f32> = (0..d).map(|_| r.gen_range(-2.0..2.0)).collect();
        let b: Vec<f32> = (0..d).map(|_| r.gen_range(-1.0..1.0)).collect();
        let mut out = vec![0f32; d];
        layer_norm_row(&row, &w, &b, 1e-6, &mut out);
        let xs: Vec<f64> = row.iter().map(|&v| f64::from(v)).collect();
        let mean = xs.iter().sum::<f64>() / d as f64;
        let var = xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / d as f64;
        for i in 0..d {
            let exact = (xs[i] - mean) / (var + 1e-6).sqrt() * f64::from(w[i]) + f64::from(b[i]);
            let err = (f64::from(out[i]) - exact).abs();
            assert!(
                err <= 1e-6 * (1.0 + exact.abs()),
                "d={d} i={i}: {} vs {exact}",
                out[i]
            );
        }
    }
}
