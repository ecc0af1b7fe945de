//! The resize operators' filter taps, computed on the host in float64: part of
//! the operators' definitions (docs/operators.md), shared by every provider
//! written in Rust so that the CPU reference and the GPU kernels weigh the
//! same source pixels by the same numbers.

/// Pillow's and PyTorch-antialias's cubic filter, A = -0.5, support 2.
fn cubic_a_half(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Pillow/PyTorch-antialias weights: a window of `2·support` source pixels
/// around `center = scale·(i + 0.5)`, clipped to the image and renormalised.
/// Returns, per output pixel, the first source index and the weights.
pub fn antialias_weights(
    in_size: usize,
    out_size: usize,
    scale: f64,
) -> (Vec<usize>, Vec<Vec<f64>>) {
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    let mut firsts = Vec::with_capacity(out_size);
    let mut all = Vec::with_capacity(out_size);
    for i in 0..out_size {
        let center = (i as f64 + 0.5) * scale;
        // `as` truncates toward zero, like the C casts this mirrors.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let mut w: Vec<f64> = (xmin..xmax.max(xmin))
            .map(|x| cubic_a_half((x as f64 - center + 0.5) / filterscale))
            .collect();
        let total: f64 = w.iter().sum();
        if total != 0.0 {
            w.iter_mut().for_each(|v| *v /= total);
        }
        firsts.push(xmin);
        all.push(w);
    }
    (firsts, all)
}

/// PyTorch's non-antialiased bicubic taps (A = -0.75, borders clamped).
fn cubic_taps(in_size: usize, out_size: usize, scale: f64) -> (Vec<[usize; 4]>, Vec<[f64; 4]>) {
    const A: f64 = -0.75;
    let near = |x: f64| ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0;
    let far = |x: f64| ((A * x - 5.0 * A) * x + 8.0 * A) * x - 4.0 * A;
    let last = in_size as i64 - 1;
    (0..out_size)
        .map(|i| {
            let real = scale * (i as f64 + 0.5) - 0.5;
            let i0 = (real.floor() as i64).min(last);
            let t = (real - i0 as f64).clamp(0.0, 1.0);
            let idx = [0, 1, 2, 3].map(|j| (i0 - 1 + j).clamp(0, last) as usize);
            (idx, [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)])
        })
        .unzip()
}

/// One axis of a separable resize: (source index, weight) lists per output.
///
/// With antialias, an axis whose length does not change is copied unchanged,
/// whatever `scale` says: PyTorch's CPU kernel skips that pass, so with
/// `scale_factor` and `floor(in·s) == in` the taps of `1/s` are never used.
pub fn axis_taps(
    in_size: usize,
    out_size: usize,
    scale: f64,
    antialias: bool,
) -> Vec<Vec<(usize, f64)>> {
    if antialias && in_size == out_size {
        (0..out_size).map(|i| vec![(i, 1.0)]).collect()
    } else if antialias {
        let (firsts, weights) = antialias_weights(in_size, out_size, scale);
        firsts
            .into_iter()
            .zip(weights)
            .map(|(f, w)| w.into_iter().enumerate().map(|(j, w)| (f + j, w)).collect())
            .collect()
    } else {
        let (idx, w) = cubic_taps(in_size, out_size, scale);
        idx.into_iter()
            .zip(w)
            .map(|(i, w)| i.into_iter().zip(w).collect())
            .collect()
    }
}

/// Pillow's fixed-point precision for 8-bit images.
pub const PIL_PRECISION_BITS: u32 = 32 - 8 - 2;

/// Pillow's coefficients for one axis, in fixed point (`normalize_coeffs_8bpc`).
pub fn pil_coeffs(in_size: usize, out_size: usize) -> (Vec<usize>, Vec<Vec<i32>>) {
    let (firsts, weights) = antialias_weights(in_size, out_size, in_size as f64 / out_size as f64);
    let fixed = weights
        .into_iter()
        .map(|w| {
            w.into_iter()
                .map(|k| {
                    let scaled = k * f64::from(1u32 << PIL_PRECISION_BITS);
                    (if k < 0.0 { scaled - 0.5 } else { scaled + 0.5 }) as i32
                })
                .collect()
        })
        .collect();
    (firsts, fixed)
}
