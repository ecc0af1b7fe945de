//! Resizes. `pil_u8` reproduces Pillow's `Image.resize(..., BICUBIC)` and
//! `Image.resize(..., LANCZOS)` bit for bit (fixed-point, two passes with uint8 clipping);
//! `bicubic` is PyTorch's `F.interpolate(mode="bicubic", align_corners=False)`
//! with antialias off (A = -0.75, clamped borders) or on (A = -0.5 filter
//! stretched by the scale, renormalised; an axis of unchanged length copied).

use super::Real;
use ndarray::{Array4, ArrayView2, ArrayViewD, ArrayViewMutD, Ix4, Zip};
use rayon::prelude::*;
use vsdk_catalog::taps::{
    axis_taps, pil_coeffs, pil_premultiply, pil_unpremultiply, PIL_PRECISION_BITS as PRECISION_BITS,
};
use vsdk_catalog::{Bilinear, Nearest, PilResize, Resize};

/// PyTorch-style bicubic resize of [N, C, H, W]: horizontal pass, then vertical.
pub fn bicubic<T: Real>(x: &ArrayViewD<T>, r: &Resize, out: ArrayViewMutD<T>) {
    let x = x
        .view()
        .into_dimensionality::<Ix4>()
        .expect("rank 4 checked by the catalog");
    let mut out = out
        .into_dimensionality::<Ix4>()
        .expect("rank 4 checked by the catalog");
    let (n, c, h, _) = x.dim();
    let to_t = |taps: Vec<Vec<(usize, f64)>>| -> Vec<Vec<(usize, T)>> {
        taps.into_iter()
            .map(|t| t.into_iter().map(|(i, w)| (i, T::lit(w))).collect())
            .collect()
    };
    let tx = to_t(axis_taps(x.dim().3, r.out_w, r.scale_w, r.antialias));
    let ty = to_t(axis_taps(h, r.out_h, r.scale_h, r.antialias));
    let mut tmp = Array4::<T>::zeros((n, c, h, r.out_w));
    Zip::indexed(&mut tmp).par_for_each(|(a, b, y, ox), v| {
        *v = tx[ox]
            .iter()
            .fold(T::zero(), |s, &(i, w)| s + w * x[[a, b, y, i]]);
    });
    Zip::indexed(&mut out).par_for_each(|(a, b, oy, ox), v| {
        *v = ty[oy]
            .iter()
            .fold(T::zero(), |s, &(i, w)| s + w * tmp[[a, b, i, ox]]);
    });
}

fn clip8(acc: i64) -> u8 {
    (acc >> PRECISION_BITS).clamp(0, 255) as u8
}

/// Pillow's rounding offset, where every accumulation starts.
const ROUND: i64 = 1 << (PRECISION_BITS - 1);

/// `vsdk.resize_bilinear`: each output from its two taps per axis
/// (`Bilinear::taps`), in f64: the rows' blends, then the blend of those.
pub fn bilinear<T: Real>(x: &ArrayViewD<T>, b: &Bilinear, out: ArrayViewMutD<T>) {
    let (ih, iw) = (x.shape()[2], x.shape()[3]);
    let rows: Vec<_> = (0..b.out_h)
        .map(|i| b.taps(i, ih, b.out_h, b.scale_h))
        .collect();
    let cols: Vec<_> = (0..b.out_w)
        .map(|j| b.taps(j, iw, b.out_w, b.scale_w))
        .collect();
    per_pixel(x, out, &rows, &cols, |x, &(r0, r1, ly), &(c0, c1, lx)| {
        let row = |r: usize| lerp(x[[r, c0]].wide(), x[[r, c1]].wide(), lx);
        T::lit(lerp(row(r0), row(r1), ly))
    });
}

/// `(1 − λ)·a + λ·b`, where a tap of weight 0 is not read (an infinite
/// neighbour gives no NaN; docs/operators.md).
fn lerp(a: f64, b: f64, l: f64) -> f64 {
    if l == 0.0 {
        a
    } else {
        (1.0 - l) * a + l * b
    }
}

/// `vsdk.resize_nearest`: each output pixel one input pixel (`Nearest::source`).
pub fn nearest<T: Real>(x: &ArrayViewD<T>, n: &Nearest, out: ArrayViewMutD<T>) {
    let (ih, iw) = (x.shape()[2], x.shape()[3]);
    let rows: Vec<usize> = (0..n.out_h)
        .map(|i| n.source(i, ih, n.out_h, n.scale_h))
        .collect();
    let cols: Vec<usize> = (0..n.out_w)
        .map(|j| n.source(j, iw, n.out_w, n.scale_w))
        .collect();
    per_pixel(x, out, &rows, &cols, |x, &r, &c| x[[r, c]]);
}

/// Output pixel `(i, j)` of every `[H, W]` plane of `[N, C, H, W]` as
/// `pixel(input plane, rows[i], cols[j])`, the images in parallel.
fn per_pixel<T: Real, R: Sync, C: Sync>(
    x: &ArrayViewD<T>,
    out: ArrayViewMutD<T>,
    rows: &[R],
    cols: &[C],
    pixel: impl Fn(&ArrayView2<T>, &R, &C) -> T + Sync,
) {
    let x = x
        .view()
        .into_dimensionality::<Ix4>()
        .expect("rank 4 checked");
    let mut out = out.into_dimensionality::<Ix4>().expect("rank 4 checked");
    Zip::from(out.outer_iter_mut())
        .and(x.outer_iter())
        .par_for_each(|mut o, x| {
            for (mut o, x) in o.outer_iter_mut().zip(x.outer_iter()) {
                for (i, r) in rows.iter().enumerate() {
                    for (j, c) in cols.iter().enumerate() {
                        o[[i, j]] = pixel(&x, r, c);
                    }
                }
            }
        });
}

/// Pillow `Image.resize(size, filter)` on [H, W, C] uint8 (`r.filter`:
/// BICUBIC or LANCZOS): one 1-D pass per axis, each rounded and clipped to
/// uint8; the horizontal pass first (every Pillow before 13), or the vertical
/// one (`vertical_first`). With `alpha` (Pillow's LA and RGBA), the colour
/// channels are premultiplied by the last channel before the passes and
/// divided by the resized alpha after them. An unchanged size is a copy.
/// The sums are exact integers, so their order (rows in parallel, a row's
/// columns in lanes) does not change a bit.
pub fn pil_u8(x: ArrayViewD<u8>, mut out: ArrayViewMutD<u8>, r: &PilResize) {
    let (h, w, c) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    let (oh, ow) = (r.out_h, r.out_w);
    let dst = out.as_slice_mut().expect("outputs are compact");
    if r.is_copy(h, w) {
        dst.iter_mut().zip(x.iter()).for_each(|(d, &s)| *d = s);
        return;
    }
    let mut x = x.as_standard_layout().into_owned();
    let src = x.as_slice_mut().expect("standard layout");
    if r.alpha {
        for px in src.chunks_exact_mut(c) {
            let (colour, a) = px.split_at_mut(c - 1);
            colour
                .iter_mut()
                .for_each(|v| *v = pil_premultiply(*v, a[0]));
        }
    }
    // Pillow skips a pass whose size does not change; its taps would be the identity anyway.
    let (fx, kx) = pil_coeffs(w, ow, r.filter);
    let (fy, ky) = pil_coeffs(h, oh, r.filter);
    if r.vertical_first {
        let mut tmp = vec![0u8; oh * w * c];
        vertical(src, w * c, (&fy, &ky), &mut tmp);
        horizontal(&tmp, (w, c), (&fx, &kx), dst);
    } else {
        let mut tmp = vec![0u8; h * ow * c];
        horizontal(src, (w, c), (&fx, &kx), &mut tmp);
        vertical(&tmp, ow * c, (&fy, &ky), dst);
    }
    if r.alpha {
        for px in dst.chunks_exact_mut(c) {
            let (colour, a) = px.split_at_mut(c - 1);
            colour
                .iter_mut()
                .for_each(|v| *v = pil_unpremultiply(*v, a[0]));
        }
    }
}

/// Each output row from its input row: `(w, c)` of the input, taps per
/// output column.
fn horizontal(
    src: &[u8],
    (w, c): (usize, usize),
    (first, k): (&[usize], &[Vec<i32>]),
    dst: &mut [u8],
) {
    let ow = first.len();
    if ow * c == 0 || w * c == 0 {
        return;
    }
    dst.par_chunks_mut(ow * c)
        .zip(src.par_chunks(w * c))
        .for_each(|(drow, srow)| {
            for (ox, (&f, taps)) in first.iter().zip(k).enumerate() {
                for ch in 0..c {
                    let acc = taps.iter().enumerate().fold(ROUND, |acc, (j, &kk)| {
                        acc + i64::from(srow[(f + j) * c + ch]) * i64::from(kk)
                    });
                    drow[ox * c + ch] = clip8(acc);
                }
            }
        });
}

/// Each output row from a window of input rows (`row` elements each), the
/// row's elements accumulated in lanes.
fn vertical(src: &[u8], row: usize, (first, k): (&[usize], &[Vec<i32>]), dst: &mut [u8]) {
    if row == 0 {
        return;
    }
    dst.par_chunks_mut(row).enumerate().for_each_init(
        Vec::new,
        |acc: &mut Vec<i64>, (oy, drow)| {
            acc.clear();
            acc.resize(row, ROUND);
            for (j, &kk) in k[oy].iter().enumerate() {
                let srow = &src[(first[oy] + j) * row..][..row];
                for (a, &v) in acc.iter_mut().zip(srow) {
                    *a += i64::from(v) * i64::from(kk);
                }
            }
            for (d, &a) in drow.iter_mut().zip(acc.iter()) {
                *d = clip8(a);
            }
        },
    );
}
