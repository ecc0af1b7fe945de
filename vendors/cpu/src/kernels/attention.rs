use super::matmul::{gemm, Dst, Mat};
use super::norm::softmax_row;
use super::Real;
use ndarray::{ArrayViewD, ArrayViewMutD};
use rayon::prelude::*;

/// `out = softmax(scale · q kᵀ) v` over the last two axes, batched over the rest.
pub fn sdpa<T: Real>(
    q: &ArrayViewD<T>,
    k: &ArrayViewD<T>,
    v: &ArrayViewD<T>,
    scale: f64,
    mut out: ArrayViewMutD<T>,
) {
    let r = q.ndim();
    let (lq, d, lk, dv) = (
        q.shape()[r - 2],
        q.shape()[r - 1],
        k.shape()[r - 2],
        v.shape()[r - 1],
    );
    let (q, k, v) = (
        q.as_standard_layout(),
        k.as_standard_layout(),
        v.as_standard_layout(),
    );
    let (qs, ks, vs) = (
        q.as_slice().expect("compact"),
        k.as_slice().expect("compact"),
        v.as_slice().expect("compact"),
    );
    let out = out.as_slice_mut().expect("outputs are compact");
    let per_batch = lq * dv;
    if per_batch == 0 {
        return;
    }
    out.par_chunks_mut(per_batch)
        .enumerate()
        .for_each(|(b, o)| {
            let mut scores = vec![T::zero(); lq * lk];
            // SAFETY: q[b] is [lq, d], k[b] is [lk, d] read as its transpose,
            // scores is [lq, lk]; all compact and distinct.
            unsafe {
                gemm(
                    (lq, lk, d),
                    Dst {
                        ptr: scores.as_mut_ptr(),
                        rs: lk as isize,
                    },
                    false,
                    Mat {
                        ptr: qs[b * lq * d..].as_ptr(),
                        rs: d as isize,
                        cs: 1,
                    },
                    Mat {
                        ptr: ks[b * lk * d..].as_ptr(),
                        rs: 1,
                        cs: d as isize,
                    },
                    T::lit(scale),
                    false,
                )
            };
            scores.chunks_mut(lk).for_each(softmax_row);
            // SAFETY: scores [lq, lk] times v[b] [lk, dv] into o [lq, dv], distinct.
            unsafe {
                gemm(
                    (lq, dv, lk),
                    Dst {
                        ptr: o.as_mut_ptr(),
                        rs: dv as isize,
                    },
                    false,
                    Mat {
                        ptr: scores.as_ptr(),
                        rs: lk as isize,
                        cs: 1,
                    },
                    Mat {
                        ptr: vs[b * lk * dv..].as_ptr(),
                        rs: dv as isize,
                        cs: 1,
                    },
                    T::one(),
                    false,
                )
            };
        });
}
