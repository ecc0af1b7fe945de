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

/// `x / max(‖x‖₂, eps) · √d · γ` over the last axis (`d` long), γ of a
/// trailing shape of x's, repeating over the rows. The sum of squares and
/// the scale are in f64 at every dtype, rounded once at the output.
pub fn rms_norm<T: Real>(
    x: &ArrayViewD<T>,
    gamma: &ArrayViewD<T>,
    eps: f64,
    mut out: ArrayViewMutD<T>,
) {
    let d = x.shape().last().copied().unwrap_or(1);
    if d == 0 || x.is_empty() {
        return;
    }
    let x = x.as_standard_layout();
    let gamma = gamma.as_standard_layout();
    let (xs, gs) = (
        x.as_slice().expect("compact"),
        gamma.as_slice().expect("compact"),
    );
    let out = out.as_slice_mut().expect("outputs are compact");
    // γ holds whole rows (a trailing shape ending in d): row r starts at
    // (r·d) mod |γ|.
    let rows_of_gamma = (gs.len() / d).max(1);
    out.par_chunks_mut(d)
        .zip(xs.par_chunks(d))
        .enumerate()
        .for_each(|(r, (o, row))| {
            let g = &gs[(r % rows_of_gamma) * d..][..d];
            rms_norm_row(row, g, eps, o)
        });
}

/// One row of [`rms_norm`].
pub fn rms_norm_row<T: Real>(row: &[T], g: &[T], eps: f64, o: &mut [T]) {
    let q = row.iter().map(|v| v.wide() * v.wide()).sum::<f64>();
    let scale = (row.len() as f64).sqrt() / q.sqrt().max(eps);
    for ((o, x), g) in o.iter_mut().zip(row).zip(g) {
        *o = T::lit(x.wide() * scale * g.wide());
    }
}

/// Inference batch norm over axis 1: `(x − mean[c]) / √(var[c] + eps) ·
/// weight[c] + bias[c]`, in float64 per element (the reference's form, the
/// statistics unfolded).
pub fn batch_norm<T: Real>(ins: &[ArrayViewD<T>], eps: f64, mut out: ArrayViewMutD<T>) {
    let x = ins[0].as_standard_layout();
    let xs = x.as_slice().expect("compact");
    let shape = x.shape();
    let (ch, inner) = (shape[1], shape[2..].iter().product::<usize>());
    if ch == 0 || inner == 0 || xs.is_empty() {
        return;
    }
    let per = |i: usize| -> Vec<f64> { ins[i].iter().map(|v| v.wide()).collect() };
    let (mean, var, w, b) = (per(1), per(2), per(3), per(4));
    let out = out.as_slice_mut().expect("outputs are compact");
    out.par_chunks_mut(inner)
        .zip(xs.par_chunks(inner))
        .enumerate()
        .for_each(|(r, (o, plane))| {
            let c = r % ch;
            let s = (var[c] + eps).sqrt();
            for (o, x) in o.iter_mut().zip(plane) {
                *o = T::lit((x.wide() - mean[c]) / s * w[c] + b[c]);
            }
        });
}

/// Group norm: each sample's groups of `C / groups` channels (contiguous in
/// the compact input) normalised by their own mean and biased variance (two
/// passes in f64), then each channel's weight and bias.
pub fn group_norm<T: Real>(
    ins: &[ArrayViewD<T>],
    groups: usize,
    eps: f64,
    mut out: ArrayViewMutD<T>,
) {
    let x = ins[0].as_standard_layout();
    let xs = x.as_slice().expect("compact");
    let shape = x.shape();
    let (ch, inner) = (shape[1], shape[2..].iter().product::<usize>());
    let len = ch / groups.max(1) * inner;
    if len == 0 || xs.is_empty() {
        return;
    }
    let per = |i: usize| -> Vec<f64> { ins[i].iter().map(|v| v.wide()).collect() };
    let (w, b) = (per(1), per(2));
    let out = out.as_slice_mut().expect("outputs are compact");
    out.par_chunks_mut(len)
        .zip(xs.par_chunks(len))
        .enumerate()
        .for_each(|(r, (o, group))| {
            let n = len as f64;
            let mean = group.iter().map(|v| v.wide()).sum::<f64>() / n;
            let var = group.iter().map(|v| (v.wide() - mean).powi(2)).sum::<f64>() / n;
            let s = (var + eps).sqrt();
            let first = (r % groups) * (ch / groups);
            for (e, (o, x)) in o.iter_mut().zip(group).enumerate() {
                let c = first + e / inner;
                *o = T::lit((x.wide() - mean) / s * w[c] + b[c]);
            }
        });
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
