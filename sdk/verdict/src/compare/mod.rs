//! Comparing an actual tensor with its golden value (DESIGN.md section 6):
//! `|a − e| ≤ atol + rtol·|e|` per element, NaN and ±Inf rules, and the
//! metrics a report needs, in one parallel pass with no temporary arrays.

use half::{bf16, f16};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use vips_data::{Element, HostTensor};
use vsdk_catalog::DType;

mod fast_f32;

pub use vips_data::tier::{NanPolicy, Tier};

/// When two values agree.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Tolerance {
    /// `|a − e| ≤ atol + rtol·|e|` (the NumPy / PyTorch rule).
    Close { rtol: f64, atol: f64 },
    /// Integers within `lsb` units (`|a − e| ≤ lsb`); for floats `lsb` must be
    /// 0 and the values equal.
    Exact { lsb: u64 },
}

impl Tolerance {
    fn bounds(self) -> (f64, f64) {
        match self {
            Tolerance::Close { rtol, atol } => (rtol, atol),
            Tolerance::Exact { lsb } => (0.0, lsb as f64),
        }
    }
}

/// How one tensor is judged.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Criteria {
    pub tolerance: Tolerance,
    pub nan: NanPolicy,
    /// Fraction of elements allowed to mismatch (0 = none).
    pub allowed_mismatch_fraction: f64,
}

/// The element that is furthest outside its tolerance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Worst {
    pub index: Vec<usize>,
    pub actual: f64,
    pub expected: f64,
}

/// Everything a report says about one comparison.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    pub elements: u64,
    pub mismatches: u64,
    pub mismatch_fraction: f64,
    /// Over pairs where both values are finite.
    pub max_abs_error: f64,
    /// `|a − e| / |e|` over finite pairs with `e ≠ 0`.
    pub max_rel_error: f64,
    /// `‖a − e‖₂ / ‖e‖₂` over finite pairs (0 when both norms are 0).
    pub rel_l2_error: f64,
    /// `a·e / (‖a‖ ‖e‖)` over finite pairs (1 when both are all zeros).
    pub cosine_similarity: f64,
    pub nan_actual: u64,
    /// The largest `|a − e| / (atol + rtol·|e|)`; a NaN or Inf mismatch
    /// counts as infinitely far. None when nothing was compared.
    pub worst: Option<Worst>,
    pub passed: bool,
}

/// Per-chunk accumulator, reduced pairwise.
#[derive(Debug, Clone, Copy)]
struct Acc {
    mismatches: u64,
    nan_actual: u64,
    max_abs: f64,
    max_rel: f64,
    worst_ratio: f64,
    worst_at: Option<usize>,
    d2: f64,
    e2: f64,
    a2: f64,
    ae: f64,
}

impl Acc {
    const EMPTY: Acc = Acc {
        mismatches: 0,
        nan_actual: 0,
        max_abs: 0.0,
        max_rel: 0.0,
        worst_ratio: -1.0,
        worst_at: None,
        d2: 0.0,
        e2: 0.0,
        a2: 0.0,
        ae: 0.0,
    };

    fn merge(self, o: Acc) -> Acc {
        let (worst_ratio, worst_at) = if o.worst_ratio > self.worst_ratio
            || (o.worst_ratio == self.worst_ratio
                && o.worst_at < self.worst_at
                && o.worst_at.is_some())
        {
            (o.worst_ratio, o.worst_at)
        } else {
            (self.worst_ratio, self.worst_at)
        };
        Acc {
            mismatches: self.mismatches + o.mismatches,
            nan_actual: self.nan_actual + o.nan_actual,
            max_abs: self.max_abs.max(o.max_abs),
            max_rel: self.max_rel.max(o.max_rel),
            worst_ratio,
            worst_at,
            d2: self.d2 + o.d2,
            e2: self.e2 + o.e2,
            a2: self.a2 + o.a2,
            ae: self.ae + o.ae,
        }
    }

    #[inline(always)]
    fn add(&mut self, i: usize, a: f64, e: f64, rtol: f64, atol: f64, nan: NanPolicy) {
        let d = (a - e).abs();
        let allowed = atol + rtol * e.abs();
        // `allowed` is infinite only when `e` is: then only an exact match passes.
        if d <= allowed && allowed < f64::INFINITY {
            // The common case: finite and within tolerance.
            self.finite(i, d, a, e, allowed);
            return;
        }
        if a.is_finite() && e.is_finite() {
            self.mismatches += 1;
            self.finite(i, d, a, e, allowed);
            return;
        }
        // NaN or Inf on either side.
        self.nan_actual += u64::from(a.is_nan());
        let matches = if a.is_nan() || e.is_nan() {
            nan == NanPolicy::Allow && a.is_nan() && e.is_nan()
        } else {
            a == e // ±Inf must match exactly
        };
        if !matches {
            self.mismatches += 1;
            self.worst(i, f64::INFINITY);
        }
    }

    #[inline(always)]
    fn finite(&mut self, i: usize, d: f64, a: f64, e: f64, allowed: f64) {
        self.max_abs = self.max_abs.max(d);
        // Compare ratios by cross-multiplying: no division per element.
        let ae = e.abs();
        if d > self.max_rel * ae && ae > 0.0 {
            self.max_rel = d / ae;
        }
        if d > self.worst_ratio * allowed || self.worst_at.is_none() {
            let ratio = if allowed > 0.0 {
                d / allowed
            } else if d > 0.0 {
                f64::INFINITY
            } else {
                0.0
            };
            self.worst(i, ratio);
        }
        self.d2 += d * d;
        self.e2 += e * e;
        self.a2 += a * a;
        self.ae += a * e;
    }

    #[inline(always)]
    fn worst(&mut self, i: usize, ratio: f64) {
        if ratio > self.worst_ratio || self.worst_at.is_none() {
            self.worst_ratio = ratio;
            self.worst_at = Some(i);
        }
    }
}

/// Why two tensors cannot be compared at all.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CompareError {
    #[error("shape {actual:?} does not match the expected {expected:?}")]
    Shape {
        actual: Vec<usize>,
        expected: Vec<usize>,
    },
    #[error("the exact tier compares floats only bit-for-bit (lsb 0), got lsb {0}")]
    FloatLsb(u64),
}

/// Elements per parallel task.
const CHUNK: usize = 1 << 16;

fn run<A: Element + Send + Sync, E: Element + Send + Sync>(
    actual: &[u8],
    expected: &[u8],
    c: &Criteria,
) -> Acc {
    let (sa, se) = (A::DTYPE.size_bytes(), E::DTYPE.size_bytes());
    let (rtol, atol) = c.tolerance.bounds();
    let nan = c.nan;
    actual
        .par_chunks(CHUNK * sa)
        .zip(expected.par_chunks(CHUNK * se))
        .enumerate()
        .map(|(k, (ca, ce))| {
            let mut acc = Acc::EMPTY;
            for (j, (xa, xe)) in ca.chunks_exact(sa).zip(ce.chunks_exact(se)).enumerate() {
                acc.add(
                    k * CHUNK + j,
                    A::read_le(xa).to_f64(),
                    E::read_le(xe).to_f64(),
                    rtol,
                    atol,
                    nan,
                );
            }
            acc
        })
        .reduce(|| Acc::EMPTY, Acc::merge)
}

macro_rules! dispatch {
    ($a:expr, $e:expr, $ab:expr, $eb:expr, $c:expr; $($ta:ty),*) => {{
        fn with_expected<A: Element + Send + Sync>(e: DType, ab: &[u8], eb: &[u8], c: &Criteria) -> Acc {
            match e {
                $(<$ta as Element>::DTYPE => run::<A, $ta>(ab, eb, c),)*
            }
        }
        match $a {
            $(<$ta as Element>::DTYPE => with_expected::<$ta>($e, $ab, $eb, $c),)*
        }
    }};
}

/// Compares `actual` with `expected` element by element (any dtypes; values
/// are compared as f64).
pub fn compare(
    actual: &HostTensor,
    expected: &HostTensor,
    c: &Criteria,
) -> Result<Metrics, CompareError> {
    if actual.spec.shape != expected.spec.shape {
        return Err(CompareError::Shape {
            actual: actual.spec.shape.clone(),
            expected: expected.spec.shape.clone(),
        });
    }
    if let Tolerance::Exact { lsb } = c.tolerance {
        if lsb > 0 && (actual.spec.dtype.is_float() || expected.spec.dtype.is_float()) {
            return Err(CompareError::FloatLsb(lsb));
        }
    }
    let (ab, eb) = (&actual.bytes[..], &expected.bytes[..]);
    let fast = match (actual.spec.dtype, expected.spec.dtype) {
        (DType::F32, DType::F32) => fast_f32::run(ab, eb, c),
        _ => None,
    };
    let acc = fast.unwrap_or_else(|| dispatch!(actual.spec.dtype, expected.spec.dtype, ab, eb, c; f32, f64, f16, bf16, u8, i32, i64));
    let elements = actual.spec.numel() as u64;
    let mismatch_fraction = if elements == 0 {
        0.0
    } else {
        acc.mismatches as f64 / elements as f64
    };
    let ratio = |num: f64, den: f64, both_zero: f64| {
        if den > 0.0 {
            num / den
        } else if num == 0.0 {
            both_zero
        } else {
            f64::INFINITY
        }
    };
    let worst = acc.worst_at.map(|i| Worst {
        index: unravel(i, &actual.spec.shape),
        actual: read(actual, i),
        expected: read(expected, i),
    });
    Ok(Metrics {
        elements,
        mismatches: acc.mismatches,
        mismatch_fraction,
        max_abs_error: acc.max_abs,
        max_rel_error: acc.max_rel,
        rel_l2_error: ratio(acc.d2.sqrt(), acc.e2.sqrt(), 0.0),
        cosine_similarity: ratio(acc.ae, (acc.a2 * acc.e2).sqrt(), 1.0),
        nan_actual: acc.nan_actual,
        worst,
        passed: mismatch_fraction <= c.allowed_mismatch_fraction,
    })
}

pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = flat % shape[d];
        flat /= shape[d];
    }
    idx
}

fn read(t: &HostTensor, i: usize) -> f64 {
    fn at<T: Element>(b: &[u8]) -> f64 {
        T::read_le(b).to_f64()
    }
    let s = t.spec.dtype.size_bytes();
    let b = &t.bytes[i * s..(i + 1) * s];
    match t.spec.dtype {
        DType::F32 => at::<f32>(b),
        DType::F64 => at::<f64>(b),
        DType::F16 => at::<f16>(b),
        DType::BF16 => at::<bf16>(b),
        DType::U8 => at::<u8>(b),
        DType::I32 => at::<i32>(b),
        DType::I64 => at::<i64>(b),
    }
}

/// [`compare`] and the canonical SHA-256 of `actual` (what a report records
/// as the output's identity), the hash on one thread while the comparison
/// runs on the others.
pub fn compare_and_hash(
    actual: &HostTensor,
    expected: &HostTensor,
    c: &Criteria,
) -> Result<(Metrics, [u8; 32]), CompareError> {
    let (hash, metrics) = rayon::join(
        || vips_data::golden::canonical_sha256(actual),
        || compare(actual, expected, c),
    );
    Ok((metrics?, hash))
}
