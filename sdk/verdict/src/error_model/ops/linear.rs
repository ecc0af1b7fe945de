//! Linear and convolution: the non-negative products (|a|·|w|, variances) the
//! bounds of dot products are made of, as float32 GEMMs rounded up or float64.

use super::*;

/// An operand of [`nonneg_gemm`]: its mapped values in float32 where they
/// fit, and the largest of them (infinite where one is not finite).
pub(super) struct Narrowed<'a> {
    source: &'a HostTensor,
    mag: Mag,
    f32: Vec<f32>,
    largest: f64,
}

impl<'a> Narrowed<'a> {
    pub(super) fn of(source: &'a HostTensor, mag: Mag) -> Self {
        const BLOCK: usize = 1 << 14;
        // Borrowed for float64 (what the error model's operands are).
        let wide = source.f64_values();
        let mut f32 = vec![0f32; wide.len()];
        let largest = f32
            .par_chunks_mut(BLOCK)
            .zip(wide.par_chunks(BLOCK))
            .map(|(d, s)| {
                largest_of(d.iter_mut().zip(s).map(|(d, &v)| {
                    let v = mag.of(v);
                    *d = v as f32;
                    v
                }))
            })
            .reduce(|| 0.0, f64::max);
        Narrowed {
            source,
            mag,
            f32,
            largest,
        }
    }

    /// The mapped values in float64 (where float32 could overflow).
    fn wide(&self) -> Vec<f64> {
        self.source
            .f64_values()
            .iter()
            .map(|&v| self.mag.of(v))
            .collect()
    }
}

/// [`largest`] of an iterator.
pub(super) fn largest_of(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |m: f64, v| {
        if v.is_finite() {
            m.max(v)
        } else {
            f64::INFINITY
        }
    })
}

/// The largest element of non-negative values; NaN or infinite: infinity.
pub(super) fn largest(x: &[f64]) -> f64 {
    largest_of(x.iter().copied())
}

/// A sum of `terms` products of non-negative float32 values (each factor
/// rounded to float32 first) is at most this factor below the exact one, in
/// any order of summation: `(terms + 4)·2⁻²³` covers the two input roundings,
/// the product's and the `terms − 1` additions' (γ_n for sums of
/// non-negative terms).
pub(super) fn round_up_factor(terms: usize) -> f64 {
    1.0 + (terms as f64 + 4.0) * f64::from(f32::EPSILON)
}

/// The absolute slack that covers what float32 loses below its normal range
/// (flushed or subnormal factors and products), or None where a factor, a
/// product or a sum could overflow float32 or the inputs are not finite:
/// then float64.
pub(super) fn nonneg_slack(max_a: f64, max_b: f64, terms: usize) -> Option<f64> {
    let n = terms.max(1) as f64;
    let fits = |v: f64| v.is_finite() && v < 1e36;
    (fits(max_a) && fits(max_b) && fits(max_a * max_b * n))
        .then(|| n * (1.0 + max_a + max_b) * f64::from(f32::MIN_POSITIVE))
}

/// `a [m, k] · b`, where `b` is `[k, n]`, or `[n, k]` read transposed.
pub(super) fn matmul(
    a: &[f64],
    b: &[f64],
    dims: (usize, usize, usize),
    b_transposed: bool,
) -> Vec<f64> {
    row_major_gemm(a, b, dims, b_transposed)
}

/// [`matmul`] of non-negative matrices, in float32 where nothing can
/// overflow, rounded up to an upper bound (as [`Reference::exec_nonneg`]).
pub(super) fn nonneg_matmul(
    a: &[f64],
    b: &[f64],
    dims: (usize, usize, usize),
    b_transposed: bool,
) -> Vec<f64> {
    let slack = nonneg_slack(largest(a), largest(b), dims.1);
    if slack.is_none() {
        return matmul(a, b, dims, b_transposed);
    }
    let narrow = |x: &[f64]| x.par_iter().map(|&v| v as f32).collect::<Vec<f32>>();
    rounded_up(
        row_major_gemm(&narrow(a), &narrow(b), dims, b_transposed),
        dims.1,
        slack,
    )
}

/// [`nonneg_matmul`] of narrowed operands (float64 from their source where
/// float32 could overflow).
pub(super) fn nonneg_gemm(
    a: Narrowed,
    b: Narrowed,
    dims: (usize, usize, usize),
    b_transposed: bool,
) -> Vec<f64> {
    let slack = nonneg_slack(a.largest, b.largest, dims.1);
    if slack.is_none() {
        return matmul(&a.wide(), &b.wide(), dims, b_transposed);
    }
    rounded_up(
        row_major_gemm(&a.f32, &b.f32, dims, b_transposed),
        dims.1,
        slack,
    )
}

/// A float32 sum of `terms` non-negative products, widened and rounded up
/// to an upper bound of the exact one.
pub(super) fn rounded_up(out: Vec<f32>, terms: usize, slack: Option<f64>) -> Vec<f64> {
    let (up, slack) = (round_up_factor(terms), slack.unwrap_or(0.0));
    out.into_par_iter()
        .map(|x| f64::from(x) * up + slack)
        .collect()
}

/// The signature of `gemm-f32`'s and `gemm-f64`'s kernels: m, n, k; dst, its
/// column and row strides, whether to read it; lhs and rhs with theirs; alpha
/// (on dst), beta (on the product); three conjugation flags; threads.
type GemmFn<T> = unsafe fn(
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
    gemm_common::Parallelism,
);

/// The float types the reference multiplies in, with `gemm`'s kernel for each
/// (chosen for the machine's instruction set).
pub(super) trait GemmScalar: Copy + 'static {
    const ZERO: Self;
    const ONE: Self;
    fn gemm_fn() -> GemmFn<Self>;
}

impl GemmScalar for f32 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn gemm_fn() -> GemmFn<Self> {
        gemm_f32::gemm::f32::get_gemm_fn()
    }
}

impl GemmScalar for f64 {
    const ZERO: Self = 0.0;
    const ONE: Self = 1.0;
    fn gemm_fn() -> GemmFn<Self> {
        gemm_f64::gemm::f64::get_gemm_fn()
    }
}

/// `a [m, k] · b` in `T`.
pub(super) fn row_major_gemm<T: GemmScalar>(
    a: &[T],
    b: &[T],
    (m, k, n): (usize, usize, usize),
    b_transposed: bool,
) -> Vec<T> {
    let mut out = vec![T::ZERO; m * n];
    if m == 0 || n == 0 || k == 0 {
        return out;
    }
    assert!(
        a.len() >= m * k && b.len() >= k * n,
        "operands smaller than {m}x{k}x{n}"
    );
    let (b_rs, b_cs) = if b_transposed {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    // The kernels prefer a destination in column order: with more than one
    // column, outᵀ [n, m] = bᵀ · aᵀ is computed instead (as `gemm`'s umbrella does).
    let (rows, cols, out_cs, out_rs, lhs, lhs_cs, lhs_rs, rhs, rhs_cs, rhs_rs) = if n > 1 {
        (
            n,
            m,
            n as isize,
            1,
            b.as_ptr(),
            b_rs,
            b_cs,
            a.as_ptr(),
            k as isize,
            1,
        )
    } else {
        (
            m,
            n,
            1,
            n as isize,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            b_cs,
            b_rs,
        )
    };
    // SAFETY: `a` holds m·k and `b` k·n elements (asserted) at the given
    // strides, `out` m·n; no overlap.
    unsafe {
        T::gemm_fn()(
            rows,
            cols,
            k,
            out.as_mut_ptr(),
            out_cs,
            out_rs,
            false,
            lhs,
            lhs_cs,
            lhs_rs,
            rhs,
            rhs_cs,
            rhs_rs,
            T::ZERO,
            T::ONE,
            false,
            false,
            false,
            gemm_common::Parallelism::Rayon(0),
        );
    }
    out
}
