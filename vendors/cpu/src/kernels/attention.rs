use super::matmul::{gemm, Dst, Mat};
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
    if lk == 0 {
        // Softmax over no keys weighs nothing.
        out.fill(T::zero());
        return;
    }
    // Work items are blocks of query rows of one batch (head), so that heads
    // and rows spread over the threads; each thread reuses one score buffer.
    out.par_chunks_mut(per_batch)
        .enumerate()
        .for_each(|(b, ob)| {
            ob.par_chunks_mut(ROWS * dv)
                .enumerate()
                .for_each_init(Vec::new, |scores, (blk, o)| {
                    let r0 = blk * ROWS;
                    let rows = o.len() / dv;
                    scores.resize(rows * lk, T::zero());
                    // SAFETY: rows r0.. of q[b] are [rows, d], k[b] is
                    // [lk, d] read as its transpose, scores is [rows, lk]; all
                    // compact and distinct.
                    unsafe {
                        gemm(
                            (rows, lk, d),
                            Dst {
                                ptr: scores.as_mut_ptr(),
                                rs: lk as isize,
                            },
                            false,
                            Mat {
                                ptr: qs[(b * lq + r0) * d..].as_ptr(),
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
                    scores.chunks_mut(lk).for_each(T::softmax_row);
                    // SAFETY: scores [rows, lk] times v[b] [lk, dv] into o
                    // [rows, dv], distinct.
                    unsafe {
                        gemm(
                            (rows, dv, lk),
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
        });
}

/// Query rows per work item.
const ROWS: usize = 64;
