use super::matmul::{gemm, Dst, Mat};
use super::Real;
use ndarray::{ArrayViewD, ArrayViewMutD};
use rayon::prelude::*;
use vsdk_catalog::{Rotary, Sdpa};

/// `out = softmax(scale · q kᵀ + mask) v` over the last two axes, batched
/// over the rest; causal rows see keys up to their offset, query heads read
/// their group's key/value head.
pub fn sdpa<T: Real>(ins: &[ArrayViewD<T>], s: &Sdpa, mut out: ArrayViewMutD<T>) {
    let (q, k, v) = (&ins[0], &ins[1], &ins[2]);
    let scale = s.scale;
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
    // The mask broadcast to the logits [..., Lq, Lk], compact.
    let mask: Option<Vec<T>> = ins.get(3).map(|m| {
        let mut logits = q.shape().to_vec();
        logits[r - 1] = lk;
        m.broadcast(logits)
            .expect("the catalog checked the broadcast")
            .iter()
            .copied()
            .collect()
    });
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
                    // SAFETY: rows r0.. of q[b] are [rows, d], k[kv_batch(b)] is
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
                                ptr: ks[s.kv_batch(b) * lk * d..].as_ptr(),
                                rs: 1,
                                cs: d as isize,
                            },
                            T::lit(scale),
                            false,
                        )
                    };
                    for (i, row) in scores.chunks_mut(lk).enumerate() {
                        let at = (b * lq + r0 + i) * lk;
                        if let Some(m) = &mask {
                            row.iter_mut()
                                .zip(&m[at..at + lk])
                                .for_each(|(x, &m)| *x = *x + m);
                        }
                        if s.causal_offset.is_some() {
                            for (j, x) in row.iter_mut().enumerate() {
                                if !s.sees(r0 + i, j) {
                                    *x = T::neg_infinity();
                                }
                            }
                        }
                        T::softmax_row(row);
                    }
                    // SAFETY: scores [rows, lk] times v[kv_batch(b)] [lk, dv] into o
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
                                ptr: vs[s.kv_batch(b) * lk * dv..].as_ptr(),
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

/// Rotary position embedding: each row `l` of `x [..., L, D]` turns its
/// pairs by the angle whose cosine and sine are `cos[l, i]`, `sin[l, i]`
/// (float64 arithmetic, one rounding); features past the pairs pass.
pub fn rotary<T: Real>(ins: &[ArrayViewD<T>], r: &Rotary, mut out: ArrayViewMutD<T>) {
    let x = ins[0].as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let table = |t: &ArrayViewD<T>| -> Vec<f64> { t.iter().map(|v| v.wide()).collect() };
    let (cos, sin) = (table(&ins[1]), table(&ins[2]));
    let rank = x.ndim();
    let (l, d) = (x.shape()[rank - 2], x.shape()[rank - 1]);
    let half = r.dims / 2;
    let out = out.as_slice_mut().expect("outputs are compact");
    if d == 0 || l == 0 {
        return;
    }
    out.par_chunks_mut(d)
        .zip(xs.par_chunks(d))
        .enumerate()
        .for_each(|(row, (o, x))| {
            let at = (row % l) * half;
            o.copy_from_slice(x);
            for i in 0..half {
                let (a, b) = r.pair(i);
                let (c, s) = (cos[at + i], sin[at + i]);
                let (x1, x2) = (x[a].wide(), x[b].wide());
                o[a] = T::lit(x1 * c - x2 * s);
                o[b] = T::lit(x2 * c + x1 * s);
            }
        });
}
