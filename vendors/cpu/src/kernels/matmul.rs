//! Matrix products on the `gemm` crates (runtime-dispatched SIMD, rayon threads).

use super::Real;
use gemm_common::Parallelism;
use ndarray::{ArrayViewD, ArrayViewMutD, Axis};
use rayon::prelude::*;
use vsdk_catalog::Conv2d;

/// The signature of `gemm-f32`'s and `gemm-f64`'s kernels: m, n, k; dst, its
/// column and row strides, whether to read it; lhs and rhs with theirs; alpha
/// (on dst), beta (on the product); three conjugation flags; threads.
pub type GemmFn<T> = unsafe fn(
    usize,
    usize,
    usize,
    *mut T,
    isize,
    isize,
    bool,
    *const T,
    isize,
    isize,
    *const T,
    isize,
    isize,
    T,
    T,
    bool,
    bool,
    bool,
    Parallelism,
);

/// A strided matrix: base pointer, row stride, column stride (in elements).
#[derive(Clone, Copy)]
pub struct Mat<T> {
    pub ptr: *const T,
    pub rs: isize,
    pub cs: isize,
}

/// A compact-columns output matrix: base pointer and row stride.
#[derive(Clone, Copy)]
pub struct Dst<T> {
    pub ptr: *mut T,
    pub rs: isize,
}

/// `dst[m×n] = (accumulate ? dst : 0) + scale · a[m×k] · b[k×n]`.
///
/// # Safety
/// Every matrix is valid for its extent; `dst` is writable and overlaps neither input.
pub unsafe fn gemm<T: Real>(
    (m, n, k): (usize, usize, usize),
    dst: Dst<T>,
    accumulate: bool,
    a: Mat<T>,
    b: Mat<T>,
    scale: T,
    parallel: bool,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    // SAFETY: (i, j) is inside dst.
                    unsafe { *dst.ptr.offset(i as isize * dst.rs + j as isize) = T::zero() };
                }
            }
        }
        return;
    }
    let parallelism = if parallel {
        Parallelism::Rayon(rayon::current_num_threads())
    } else {
        Parallelism::None
    };
    // The kernels prefer a destination in column order: a row-major product
    // is computed as its transpose, dstᵀ = bᵀ·aᵀ (as `gemm`'s umbrella does).
    let transposed = |x: Mat<T>| Mat {
        ptr: x.ptr,
        rs: x.cs,
        cs: x.rs,
    };
    let (m, n, dst_cs, dst_rs, a, b) = if dst.rs > 1 {
        (n, m, dst.rs, 1, transposed(b), transposed(a))
    } else {
        (m, n, 1, dst.rs, a, b)
    };
    // SAFETY: forwarded; gemm computes dst = alpha·dst + beta·a·b, reading dst
    // only when `accumulate`.
    unsafe {
        T::gemm_fn()(
            m,
            n,
            k,
            dst.ptr,
            dst_cs,
            dst_rs,
            accumulate,
            a.ptr,
            a.cs,
            a.rs,
            b.ptr,
            b.cs,
            b.rs,
            T::one(),
            scale,
            false,
            false,
            false,
            parallelism,
        )
    }
}

/// `out[..., N] = x[..., K] · w[N, K]ᵀ + b[N]`.
pub fn linear<T: Real>(
    x: &ArrayViewD<T>,
    w: &ArrayViewD<T>,
    b: Option<&ArrayViewD<T>>,
    mut out: ArrayViewMutD<T>,
) {
    let k = x.shape()[x.ndim() - 1];
    let n = w.shape()[0];
    let m = x.len() / k.max(1);
    match b {
        Some(b) => out
            .lanes_mut(Axis(out.ndim() - 1))
            .into_iter()
            .for_each(|mut row| row.assign(b)),
        None => out.fill(T::zero()),
    }
    let x = x.as_standard_layout();
    let ws = w.strides();
    let (xp, wp, op) = (
        SendPtr(x.as_ptr()),
        SendPtr(w.as_ptr()),
        SendPtr(out.as_mut_ptr()),
    );
    // float32 and narrower: the output's columns (the weights' rows) split
    // over the threads, each a single-threaded product, so every thread packs
    // only its share of the weights (measured faster than gemm's threads).
    // float64, the reference: one product, whose summation order does not
    // depend on the number of threads (golden files are reproducible).
    let parts = if T::PLAIN {
        1
    } else {
        rayon::current_num_threads().min(n / MIN_COLUMNS).max(1)
    };
    if m == 0 || n == 0 {
        return;
    }
    (0..parts).into_par_iter().for_each(|p| {
        // Balanced bounds: 0 ≤ j0 ≤ j1 ≤ n for every part.
        let (j0, j1) = (p * n / parts, (p + 1) * n / parts);
        // SAFETY: x is compact [m, k]; rows j0..j1 of w ([n, k], its own
        // strides; j0 ≤ j1 ≤ n) are read as their transpose; columns j0..j1
        // of the compact [m, n] output, m and n non-zero, are written by this
        // part alone, distinct from both.
        unsafe {
            gemm(
                (m, j1 - j0, k),
                Dst {
                    ptr: op.get().add(j0),
                    rs: n as isize,
                },
                true,
                Mat {
                    ptr: xp.get(),
                    rs: k as isize,
                    cs: 1,
                },
                Mat {
                    ptr: wp.get().offset(j0 as isize * ws[0]),
                    rs: ws[1],
                    cs: ws[0],
                },
                T::one(),
                parts == 1,
            )
        }
    });
}

/// Output columns per thread below which a product is not split.
const MIN_COLUMNS: usize = 64;

/// A pointer shared by the parts of one product, which touch disjoint elements.
#[derive(Clone, Copy)]
pub(super) struct SendPtr<P>(pub(super) P);

impl<P: Copy> SendPtr<P> {
    /// Through a method, so that closures capture the wrapper, not the field.
    pub(super) fn get(self) -> P {
        self.0
    }
}
// SAFETY: the parts of a product only read the inputs and write disjoint
// output columns; the pointers outlive the parallel section.
unsafe impl<T> Send for SendPtr<*const T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<*const T> {}
// SAFETY: as above.
unsafe impl<T> Send for SendPtr<*mut T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<*mut T> {}

/// `vsdk.matmul`: `a [..., M, K] @ b [..., K, N]`, the batch axes
/// broadcast; each batch's product is [`linear`] with `b`'s transpose as
/// the weight (a view: no copy).
pub fn matmul<T: Real>(a: &ArrayViewD<T>, b: &ArrayViewD<T>, mut out: ArrayViewMutD<T>) {
    let batch = out.shape()[..out.ndim() - 2].to_vec();
    let (a, b) = (batched(a, &batch), batched(b, &batch));
    for f in 0..batch.iter().product() {
        // The batch index of flat batch f, row-major.
        let mut index = vec![0; batch.len()];
        let mut rest = f;
        for d in (0..batch.len()).rev() {
            index[d] = rest % batch[d];
            rest /= batch[d];
        }
        let (mut ab, mut bb, mut o) = (a.view(), b.view(), out.view_mut());
        for &i in &index {
            ab = ab.index_axis_move(Axis(0), i);
            bb = bb.index_axis_move(Axis(0), i);
            o = o.index_axis_move(Axis(0), i);
        }
        linear(&ab, &bb.reversed_axes(), None, o);
    }
}

/// `t [..., R, C]` broadcast to `batch + [R, C]` (stride 0 where it repeats).
fn batched<'a, T>(t: &'a ArrayViewD<'_, T>, batch: &[usize]) -> ArrayViewD<'a, T> {
    let mut shape = batch.to_vec();
    shape.extend_from_slice(&t.shape()[t.ndim() - 2..]);
    t.broadcast(shape)
        .expect("the catalog checked the batch axes broadcast")
}

/// NCHW convolution by im2col + GEMM per image and group.
pub fn conv2d<T: Real>(
    x: &ArrayViewD<T>,
    w: &ArrayViewD<T>,
    b: Option<&ArrayViewD<T>>,
    c: &Conv2d,
    mut out: ArrayViewMutD<T>,
) {
    let x = x.as_standard_layout();
    let w = w.as_standard_layout();
    let (batch, cin, h, wd) = (x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]);
    let (cout, kh, kw) = (w.shape()[0], w.shape()[2], w.shape()[3]);
    let (oh, ow) = (out.shape()[2], out.shape()[3]);
    let (cg, og) = (cin / c.groups, cout / c.groups);
    let (kc, p) = (cg * kh * kw, oh * ow);
    match b {
        Some(b) => {
            for (o, mut plane) in out.axis_iter_mut(Axis(1)).enumerate() {
                plane.fill(b[[o]]);
            }
        }
        None => out.fill(T::zero()),
    }
    let xs = x.as_slice().expect("standard layout");
    let out_ptr = out.as_mut_ptr();
    let mut cols = vec![T::zero(); kc * p];
    for n in 0..batch {
        for g in 0..c.groups {
            cols.par_chunks_mut(p).enumerate().for_each(|(row, col)| {
                let (ci, i, j) = (row / (kh * kw), (row / kw) % kh, row % kw);
                let plane = &xs[((n * cin) + g * cg + ci) * h * wd..][..h * wd];
                for oy in 0..oh {
                    let y = (oy * c.strides[0] + i * c.dilations[0]) as isize - c.pads[0] as isize;
                    for ox in 0..ow {
                        let xx =
                            (ox * c.strides[1] + j * c.dilations[1]) as isize - c.pads[1] as isize;
                        let inside = (0..h as isize).contains(&y) && (0..wd as isize).contains(&xx);
                        col[oy * ow + ox] = if inside {
                            plane[y as usize * wd + xx as usize]
                        } else {
                            T::zero()
                        };
                    }
                }
            });
            // SAFETY: weights of group g are a compact [og, kc] block; cols is
            // [kc, p]; the output block [og, p] of image n, group g is inside
            // the compact output and distinct from both.
            unsafe {
                gemm(
                    (og, p, kc),
                    Dst {
                        ptr: out_ptr.add((n * cout + g * og) * p),
                        rs: p as isize,
                    },
                    true,
                    Mat {
                        ptr: w.as_ptr().add(g * og * kc),
                        rs: kc as isize,
                        cs: 1,
                    },
                    Mat {
                        ptr: cols.as_ptr(),
                        rs: p as isize,
                        cs: 1,
                    },
                    T::one(),
                    true,
                )
            }
        }
    }
}
