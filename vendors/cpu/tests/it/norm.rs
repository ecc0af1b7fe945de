//! The float64 RMS norm against the normalise-then-scale formula.

use ndarray::{ArrayD, IxDyn};
use rand::Rng;
use vsdk_provider_cpu::kernels::norm::rms_norm;

/// The float64 kernel against `F.normalize(x) · γ · √d` written out
/// independently: the norm by a scaled (overflow-free) hypot fold, the
/// normalisation first, then the products. Rows of every scale, one all
/// zero (the eps branch gives 0) and one below eps.
#[test]
fn rms_norm_f64_matches_normalize_formula() {
    let mut r = crate::rng("rms_norm");
    let (b, heads, d) = (7usize, 3usize, 1 + r.gen_range(1..70usize));
    let eps = 1e-12;
    let mut x: Vec<f64> = Vec::with_capacity(b * heads * d);
    for row in 0..b * heads {
        let scale = match row % 7 {
            0 => 0.0,
            1 => 1e-14 / d as f64,
            2 => 1e150,
            3 => 1e-150,
            _ => 10f64.powf(r.gen_range(-3.0..3.0)),
        };
        x.extend((0..d).map(|_| scale * r.gen_range(-1.0..1.0)));
    }
    let gamma: Vec<f64> = (0..heads * d).map(|_| r.gen_range(-2.0..2.0)).collect();
    let xa = ArrayD::from_shape_vec(IxDyn(&[b, heads, d]), x.clone()).unwrap();
    let ga = ArrayD::from_shape_vec(IxDyn(&[heads, d]), gamma.clone()).unwrap();
    let mut out = ArrayD::<f64>::zeros(IxDyn(&[b, heads, d]));
    rms_norm(&xa.view(), &ga.view(), eps, out.view_mut());
    for (row, (xr, yr)) in x
        .chunks(d)
        .zip(out.as_slice().unwrap().chunks(d))
        .enumerate()
    {
        let norm = xr.iter().fold(0.0f64, |n, v| n.hypot(*v));
        for j in 0..d {
            let want = xr[j] / norm.max(eps) * gamma[(row % heads) * d + j] * (d as f64).sqrt();
            let err = (yr[j] - want).abs();
            assert!(
                err <= 1e-13 * want.abs().max(1e-300),
                "row {row} (d {d}) j {j}: {} vs {want}",
                yr[j]
            );
        }
        if row % 7 == 0 {
            assert!(yr.iter().all(|&y| y == 0.0), "a zero row gives 0");
        }
    }
}
