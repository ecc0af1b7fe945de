use super::Real;
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, Zip};
use rayon::prelude::*;

/// Normalises over axes `axis..` with biased variance, then `* weight + bias`.
/// Statistics are accumulated in f64.
pub fn layer_norm<T: Real>(
    x: &ArrayViewD<T>,
    weight: &ArrayViewD<T>,
    bias: &ArrayViewD<T>,
    axis: usize,
    eps: f64,
    mut out: ArrayViewMutD<T>,
) {
    let d: usize = x.shape()[axis..].iter().product();
    if d == 0 {
        return;
    }
    let x = x.as_standard_layout();
    let (weight, bias) = (weight.as_standard_layout(), bias.as_standard_layout());
    let (xs, ws, bs) = (
        x.as_slice().expect("compact"),
        weight.as_slice().expect("compact"),
        bias.as_slice().expect("compact"),
    );
    let out = out.as_slice_mut().expect("outputs are compact");
    out.par_chunks_mut(d)
        .zip(xs.par_chunks(d))
        .for_each(|(o, row)| T::layer_norm_row(row, ws, bs, eps, o));
}

/// One row of [`layer_norm`] as the float64 reference computes it.
pub fn layer_norm_row_plain<T: Real>(row: &[T], ws: &[T], bs: &[T], eps: f64, o: &mut [T]) {
    let d = row.len();
    let mean = row.iter().map(|v| v.wide()).sum::<f64>() / d as f64;
    let var = row.iter().map(|v| (v.wide() - mean).powi(2)).sum::<f64>() / d as f64;
    let rstd = 1.0 / (var + eps).sqrt();
    for i in 0..d {
        o[i] = T::lit((row[i].wide() - mean) * rstd * ws[i].wide() + bs[i].wide());
    }
}

/// Softmax of one contiguous row, in place: max-subtracted, sum in f64, as
/// the float64 reference computes it (and any row holding NaN or infinity).
pub fn softmax_row_plain<T: Real>(row: &mut [T]) {
    let max = row.iter().copied().fold(T::neg_infinity(), T::max);
    let mut sum = 0.0f64;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += v.wide();
    }
    let inv = T::lit(1.0 / sum);
    row.iter_mut().for_each(|v| *v = *v * inv);
}

pub fn softmax<T: Real>(x: &ArrayViewD<T>, axis: usize, mut out: ArrayViewMutD<T>) {
    Zip::from(out.lanes_mut(Axis(axis)))
        .and(x.lanes(Axis(axis)))
        .par_for_each(|mut o, xl| {
            o.assign(&xl);
            match o.as_slice_mut() {
                Some(s) => T::softmax_row(s),
                None => {
                    let mut tmp = o.to_vec();
                    T::softmax_row(&mut tmp);
                    o.iter_mut().zip(tmp).for_each(|(d, s)| *d = s);
                }
            }
        });
}
