use super::Real;
use ndarray::{ArrayViewD, ArrayViewMutD, Zip};

/// `out = f(a, b)` with NumPy broadcasting (the catalog checked the shapes).
pub fn binary<T: Real>(
    a: &ArrayViewD<T>,
    b: &ArrayViewD<T>,
    mut out: ArrayViewMutD<T>,
    f: impl Fn(T, T) -> T + Sync + Send,
) {
    Zip::from(&mut out)
        .and_broadcast(a)
        .and_broadcast(b)
        .par_for_each(|o, &x, &y| *o = f(x, y));
}

/// Exact GELU: x/2 * (1 + erf(x / sqrt 2)).
pub fn gelu<T: Real>(x: &ArrayViewD<T>, mut out: ArrayViewMutD<T>) {
    let half = T::lit(0.5);
    let inv_sqrt2 = T::lit(std::f64::consts::FRAC_1_SQRT_2);
    Zip::from(&mut out)
        .and(x)
        .par_for_each(|o, &v| *o = half * v * (T::one() + (v * inv_sqrt2).erf()));
}
