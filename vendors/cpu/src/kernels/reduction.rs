//! Reductions: 2-D pools over the catalog's windows, sums and means over
//! axes. Sums run in float64 whatever the tier (one rounding, at the output).

use super::Real;
use ndarray::{ArrayViewD, ArrayViewMutD};
use rayon::prelude::*;
use vsdk_catalog::{Pool2d, PoolKind, Reduce};

/// Max or average pooling of `[N, C, H, W]`, a task per plane.
pub fn pool2d<T: Real>(x: &ArrayViewD<T>, p: &Pool2d, mut out: ArrayViewMutD<T>) {
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let (h, w) = (x.shape()[2], x.shape()[3]);
    let (oh, ow) = (p.axes[0].output(), p.axes[1].output());
    let out = out.as_slice_mut().expect("outputs are compact");
    if h * w == 0 || oh * ow == 0 {
        return;
    }
    out.par_chunks_mut(oh * ow)
        .zip(xs.par_chunks(h * w))
        .for_each(|(o, plane)| {
            for r in 0..oh {
                let rows = p.axes[0].window(r);
                for c in 0..ow {
                    let cols = p.axes[1].window(c);
                    let taps = rows
                        .indices()
                        .flat_map(|i| cols.indices().map(move |j| plane[i * w + j]));
                    o[r * ow + c] = match p.kind {
                        // NaN wins, as in PyTorch (`max` alone would skip it).
                        PoolKind::Max => {
                            taps.fold(
                                T::neg_infinity(),
                                |m, v| if v > m || v.is_nan() { v } else { m },
                            )
                        }
                        PoolKind::Avg { .. } => {
                            let s: f64 = taps.map(|v| v.wide()).sum();
                            T::lit(s / p.divisor(r, c) as f64)
                        }
                    };
                }
            }
        });
}

/// A sum or mean over `r.axes`: the reduced axes moved last, a task per row.
pub fn reduce<T: Real>(x: &ArrayViewD<T>, r: &Reduce, mut out: ArrayViewMutD<T>) {
    let rank = x.ndim();
    let order: Vec<usize> = (0..rank)
        .filter(|a| !r.axes.contains(a))
        .chain(r.axes.iter().copied())
        .collect();
    let moved = x.view().permuted_axes(order);
    let moved = moved.as_standard_layout();
    let xs = moved.as_slice().expect("standard layout");
    let n = r.terms(x.shape());
    let out = out.as_slice_mut().expect("outputs are compact");
    if n == 0 {
        out.fill(T::zero());
        return;
    }
    out.par_iter_mut()
        .zip(xs.par_chunks(n))
        .for_each(|(o, row)| {
            let s: f64 = row.iter().map(|v| v.wide()).sum();
            *o = T::lit(if r.mean { s / n as f64 } else { s });
        });
}
