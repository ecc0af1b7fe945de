//! The float32-against-float32 comparison, the one every suite runs most: the
//! same arithmetic as `Acc::add` (in f64), laid out in lanes so the compiler
//! vectorises it, with AVX2 chosen at run time where the CPU has it. Blocks
//! holding a NaN or an infinity take the scalar path.

use super::{Acc, Criteria, NanPolicy, CHUNK};
use rayon::prelude::*;

const L: usize = 16;

#[derive(Clone, Copy)]
struct Lanes {
    // Offsets and counts within one chunk (< 2^32 elements) fit in u32,
    // halving the width of their lanes.
    mismatches: [u32; L],
    max_abs: [f64; L],
    // Ratios only rank elements and report a maximum: float32 is enough, and
    // keeps the pass within memory bandwidth. Pass/fail is decided in f64.
    max_rel: [f32; L],
    worst_ratio: [f32; L],
    worst_at: [u32; L],
    d2: [f64; L],
    e2: [f64; L],
    ae: [f64; L],
}

impl Lanes {
    const EMPTY: Lanes = Lanes {
        mismatches: [0; L],
        max_abs: [0.0; L],
        max_rel: [0.0; L],
        worst_ratio: [-1.0; L],
        worst_at: [u32::MAX; L],
        d2: [0.0; L],
        e2: [0.0; L],
        ae: [0.0; L],
    };

    /// One block of finite values.
    #[inline(always)]
    fn block(&mut self, base: u32, a: &[f32; L], e: &[f32; L], rtol: f64, atol: f64) {
        for k in 0..L {
            let (x, y) = (f64::from(a[k]), f64::from(e[k]));
            let d = (x - y).abs();
            let ey = y.abs();
            let allowed = atol + rtol * ey;
            self.mismatches[k] += u32::from(d > allowed);
            self.max_abs[k] = self.max_abs[k].max(d);
            let (d32, e32) = ((a[k] - e[k]).abs(), e[k].abs());
            let rel = if e32 > 0.0 { d32 / e32 } else { 0.0 };
            self.max_rel[k] = self.max_rel[k].max(rel);
            // allowed = 0 (exact tier, e = 0) ranks any difference above
            // every finite ratio.
            let ratio = d32 / (allowed as f32).max(f32::MIN_POSITIVE);
            let better = ratio > self.worst_ratio[k];
            self.worst_ratio[k] = if better { ratio } else { self.worst_ratio[k] };
            self.worst_at[k] = if better {
                base + k as u32
            } else {
                self.worst_at[k]
            };
            self.d2[k] += d * d;
            self.e2[k] += y * y;
            self.ae[k] += x * y;
        }
    }

    /// `first` is the flat index of the chunk's first element.
    fn into_acc(self, first: usize) -> Acc {
        (0..L)
            .map(|k| Acc {
                mismatches: self.mismatches[k].into(),
                nan_actual: 0,
                max_abs: self.max_abs[k],
                max_rel: self.max_rel[k].into(),
                worst_ratio: self.worst_ratio[k].into(),
                worst_at: (self.worst_at[k] != u32::MAX).then(|| first + self.worst_at[k] as usize),
                d2: self.d2[k],
                e2: self.e2[k],
                // ‖a‖² = ‖d‖² + 2 a·e − ‖e‖² (d = a − e): one sum fewer per element.
                a2: self.d2[k] + 2.0 * self.ae[k] - self.e2[k],
                ae: self.ae[k],
            })
            .fold(Acc::EMPTY, Acc::merge)
    }
}

#[inline(always)]
fn chunk(first: usize, a: &[f32], e: &[f32], rtol: f64, atol: f64, nan: NanPolicy) -> Acc {
    let mut lanes = Lanes::EMPTY;
    let mut scalar = Acc::EMPTY;
    let blocks = a.len() / L;
    for (b, (ab, eb)) in a.chunks_exact(L).zip(e.chunks_exact(L)).enumerate() {
        let (ab, eb): (&[f32; L], &[f32; L]) =
            (ab.try_into().expect("L"), eb.try_into().expect("L"));
        let mut finite = true;
        for k in 0..L {
            finite &= ab[k].is_finite() & eb[k].is_finite();
        }
        if finite {
            lanes.block((b * L) as u32, ab, eb, rtol, atol);
        } else {
            for k in 0..L {
                scalar.add(
                    first + b * L + k,
                    ab[k].into(),
                    eb[k].into(),
                    rtol,
                    atol,
                    nan,
                );
            }
        }
    }
    for i in blocks * L..a.len() {
        scalar.add(first + i, a[i].into(), e[i].into(), rtol, atol, nan);
    }
    lanes.into_acc(first).merge(scalar)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
fn chunk_avx512(first: usize, a: &[f32], e: &[f32], rtol: f64, atol: f64, nan: NanPolicy) -> Acc {
    chunk(first, a, e, rtol, atol, nan)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn chunk_avx2(first: usize, a: &[f32], e: &[f32], rtol: f64, atol: f64, nan: NanPolicy) -> Acc {
    chunk(first, a, e, rtol, atol, nan)
}

fn chunk_best(first: usize, a: &[f32], e: &[f32], rtol: f64, atol: f64, nan: NanPolicy) -> Acc {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq")
        && std::arch::is_x86_feature_detected!("avx512vl")
    {
        // SAFETY: the CPU supports the features `chunk_avx512` is compiled for.
        return unsafe { chunk_avx512(first, a, e, rtol, atol, nan) };
    }
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
        // SAFETY: the CPU supports the features `chunk_avx2` is compiled for.
        return unsafe { chunk_avx2(first, a, e, rtol, atol, nan) };
    }
    chunk(first, a, e, rtol, atol, nan)
}

/// None when the bytes are not 4-aligned (the caller takes the generic path).
pub(super) fn run(actual: &[u8], expected: &[u8], c: &Criteria) -> Option<Acc> {
    let a: &[f32] = bytemuck::try_cast_slice(actual).ok()?;
    let e: &[f32] = bytemuck::try_cast_slice(expected).ok()?;
    let (rtol, atol) = c.tolerance.bounds();
    let nan = c.nan;
    Some(
        a.par_chunks(CHUNK)
            .zip(e.par_chunks(CHUNK))
            .enumerate()
            .map(|(k, (ca, ce))| chunk_best(k * CHUNK, ca, ce, rtol, atol, nan))
            .reduce(|| Acc::EMPTY, Acc::merge),
    )
}
