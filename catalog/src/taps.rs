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

/// `sin(πx) / (πx)`, as Pillow computes it (`x · π` first, then the C
/// library's `sin`).
fn sinc(x: f64) -> f64 {
    if x == 0.0 {
        1.0
    } else {
        let x = x * std::f64::consts::PI;
        x.sin() / x
    }
}

/// Pillow's Lanczos filter, a = 3: `sinc(x) · sinc(x / 3)` on `-3 <= x < 3`.
fn lanczos3(x: f64) -> f64 {
    if (-3.0..3.0).contains(&x) {
        sinc(x) * sinc(x / 3.0)
    } else {
        0.0
    }
}

/// The resampling filters of Pillow's `Image.resize` that the catalog's
/// `vsdk.resize_pil_*` operators reproduce; the rest of the algorithm
/// (taps, fixed point, passes, alpha) is shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PilFilter {
    /// `Image.BICUBIC`: the cubic filter with a = -0.5, support 2.
    Bicubic,
    /// `Image.LANCZOS`: the windowed sinc with a = 3, support 3.
    Lanczos,
}

impl PilFilter {
    /// Half the filter's width in source pixels at scale 1.
    pub fn support(self) -> f64 {
        match self {
            PilFilter::Bicubic => 2.0,
            PilFilter::Lanczos => 3.0,
        }
    }

    /// The filter's value at `x` (source pixels at scale 1).
    pub fn weight(self, x: f64) -> f64 {
        match self {
            PilFilter::Bicubic => cubic_a_half(x),
            PilFilter::Lanczos => lanczos3(x),
        }
    }
}

/// Pillow/PyTorch-antialias weights: a window of `2·support` source pixels
/// around `center = scale·(i + 0.5)`, clipped to the image and renormalised.
/// Returns, per output pixel, the first source index and the weights. The
/// filter's argument is multiplied by `1 / filterscale` (Pillow's
/// `precompute_coeffs` and PyTorch's `_compute_weights_aa` both do), and the
/// weights are summed from the first tap on, so every double is Pillow's.
pub fn antialias_weights(
    in_size: usize,
    out_size: usize,
    scale: f64,
    filter: PilFilter,
) -> (Vec<usize>, Vec<Vec<f64>>) {
    let filterscale = scale.max(1.0);
    let support = filter.support() * filterscale;
    let inv_filterscale = 1.0 / filterscale;
    let mut firsts = Vec::with_capacity(out_size);
    let mut all = Vec::with_capacity(out_size);
    for i in 0..out_size {
        let center = (i as f64 + 0.5) * scale;
        // `as` truncates toward zero, like the C casts this mirrors.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize;
        let mut w: Vec<f64> = (xmin..xmax.max(xmin))
            .map(|x| filter.weight((x as f64 - center + 0.5) * inv_filterscale))
            .collect();
        let total = w.iter().fold(0.0, |s, &v| s + v);
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
        let (firsts, weights) = antialias_weights(in_size, out_size, scale, PilFilter::Bicubic);
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
pub fn pil_coeffs(
    in_size: usize,
    out_size: usize,
    filter: PilFilter,
) -> (Vec<usize>, Vec<Vec<i32>>) {
    let (firsts, weights) =
        antialias_weights(in_size, out_size, in_size as f64 / out_size as f64, filter);
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

/// Pillow's premultiplication of a colour value by its alpha (`rgbA2rgba`
/// and `lA2la` in Convert.c, `MULDIV255`): `round(v · a / 255)` computed as
/// `t = v·a + 128; ((t >> 8) + t) >> 8`.
pub fn pil_premultiply(v: u8, a: u8) -> u8 {
    let t = u32::from(v) * u32::from(a) + 128;
    (((t >> 8) + t) >> 8) as u8
}

/// Pillow's inverse (`rgba2rgbA`, `la2lA`): unchanged where alpha is 0 or
/// 255, else `min(255 · v / a, 255)` with the division truncated.
pub fn pil_unpremultiply(v: u8, a: u8) -> u8 {
    if a == 0 || a == 255 {
        v
    } else {
        (255 * u32::from(v) / u32::from(a)).min(255) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_length_has_identity_coefficients() {
        for filter in [PilFilter::Bicubic, PilFilter::Lanczos] {
            for n in [1, 2, 5, 17, 518] {
                let (first, k) = pil_coeffs(n, n, filter);
                for (i, (f, k)) in first.iter().zip(&k).enumerate() {
                    for (j, &v) in k.iter().enumerate() {
                        let want = if f + j == i {
                            1 << PIL_PRECISION_BITS
                        } else {
                            0
                        };
                        assert_eq!(v, want, "{filter:?} n={n} i={i} tap {}", f + j);
                    }
                }
            }
        }
    }

    #[test]
    fn lanczos_has_pillows_shape() {
        assert_eq!(lanczos3(0.0), 1.0);
        // The window is [-3, 3): -3 is inside (and ~0), 3 outside.
        assert_eq!(lanczos3(3.0), 0.0);
        assert!(lanczos3(-3.0).abs() < 1e-15);
        assert!(lanczos3(1.5) < 0.0 && lanczos3(2.5) > 0.0);
        // Downscaling by 2 widens the window to 12 source pixels.
        let (_, k) = pil_coeffs(40, 20, PilFilter::Lanczos);
        assert_eq!(k[10].len(), 12);
        let (_, k) = pil_coeffs(40, 20, PilFilter::Bicubic);
        assert_eq!(k[10].len(), 8);
    }

    #[test]
    fn alpha_conversions_are_pillows() {
        for a in 0..=255u8 {
            for v in 0..=255u8 {
                let p = pil_premultiply(v, a);
                assert_eq!(u32::from(p), (u32::from(v) * u32::from(a) + 127) / 255);
                assert!(p <= a);
            }
        }
        assert_eq!(pil_unpremultiply(100, 0), 100);
        assert_eq!(pil_unpremultiply(100, 255), 100);
        assert_eq!(pil_unpremultiply(100, 200), 127);
        assert_eq!(pil_unpremultiply(250, 200), 255);
    }
}
