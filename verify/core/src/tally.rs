//! The verdict's arithmetic, shared by the host and the device
//! (docs/error-model.md, section 3): the normalised error of an element, the
//! sums a judgement keeps, in blocks of [`BLOCK`] elements combined in order
//! (so the host may tally blocks on several threads and still get the
//! device's bits), and the verdict from them.

use crate::format::{Nan, Rules};

/// Elements per block of a judgement.
pub const BLOCK: usize = 1 << 14;
/// The largest |e| values a streaming judgement keeps: enough to know the
/// least tolerance when up to `TOP - 1` elements are allowed past their bound.
pub const TOP: usize = 33;

/// The normalised error `e = (actual − reference) / bound` of one element:
/// 0 inside an infinite bound, ±∞ past a zero one, and ∞ where a NaN or ±Inf
/// differs from the reference (a NaN matches a NaN only under
/// [`Nan::Allow`]). Never NaN, whose comparisons would pin the worst.
pub fn element_error(actual: f64, reference: f64, bound: f64, nan: Nan) -> f64 {
    if actual.is_finite() && reference.is_finite() {
        let d = actual - reference;
        if d == 0.0 || bound == f64::INFINITY {
            0.0
        } else if bound > 0.0 {
            d / bound
        } else {
            f64::INFINITY.copysign(d)
        }
    } else {
        let same = if actual.is_nan() || reference.is_nan() {
            actual.is_nan() && reference.is_nan() && nan == Nan::Allow
        } else {
            actual == reference
        };
        if same {
            0.0
        } else {
            f64::INFINITY
        }
    }
}

/// What the error model says about one output: the host's `Judgement`
/// without the percentiles (they need every |e| at once) and the words.
/// `#[repr(C)]`: it is also `vsdk_verdict` (include/vips_sdk/verify.h).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub elements: u64,
    /// Elements outside their bound (`|e| > 1`), NaN and Inf mismatches included.
    pub over_bound: u64,
    /// The largest `|e|`: below 1 passes; the margin is `1 − max_e`.
    pub max_e: f64,
    /// The first element of the largest |e| (flat index; `u64::MAX`: none).
    pub worst_index: u64,
    /// The first NaN or Inf that differs from the reference (`u64::MAX`: none).
    pub nonfinite_index: u64,
    /// `√(mean e²)`.
    pub rms_e: f64,
    /// `√(mean t²)`, `t = (a − r) / σ` (NaN: not tested).
    pub rms_t: f64,
    /// `Σt / √(Σt²)` and `mean t / rms t` (NaN: not tested).
    pub bias_z: f64,
    pub bias_ratio: f64,
    /// Largest `|a − r|` and `‖a − r‖ / ‖r‖` over finite pairs.
    pub max_abs_error: f64,
    pub rel_l2_error: f64,
    /// On a failure, the least factor on the bound and σ that would pass
    /// (NaN: passed, or a bias, which no factor passes; ∞: a NaN).
    pub tolerance_factor: f64,
    /// Which criteria failed: [`Verdict::ELEMENTS`], [`Verdict::RMS`], [`Verdict::BIAS`].
    pub failed: u32,
    /// 1 passed, 0 failed.
    pub passed: u32,
    /// SHA-256 of the output's bytes (the device's, as fed).
    pub sha256: [u8; 32],
}

impl Verdict {
    pub const ELEMENTS: u32 = 1;
    pub const RMS: u32 = 2;
    pub const BIAS: u32 = 4;
}

/// What a judgement counts over a block of elements.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Tally {
    pub over: u64,
    pub sumsq_e: f64,
    /// Σt, Σt² and their count over finite pairs with σ > 0.
    pub sum_t: f64,
    pub sumsq_t: f64,
    pub count_t: u64,
    /// ‖a − r‖² and ‖r‖² over finite pairs.
    pub sumsq_d: f64,
    pub sumsq_r: f64,
    pub max_abs: f64,
    /// The first element of the largest |e|, and that |e|.
    pub worst: Option<(u64, f64)>,
    /// The first non-finite mismatch.
    pub nonfinite: Option<u64>,
}

impl Tally {
    /// Counts element `index` and returns its |e|.
    #[inline]
    pub fn push(
        &mut self,
        index: u64,
        (x, r, b): (f64, f64, f64),
        sigma: Option<f64>,
        nan: Nan,
    ) -> f64 {
        let ei = element_error(x, r, b, nan);
        if x.is_finite() && r.is_finite() {
            let d = x - r;
            self.max_abs = self.max_abs.max(d.abs());
            // (A difference may overflow: it is left to the bound.)
            if (d * d).is_finite() && (r * r).is_finite() {
                self.sumsq_d += d * d;
                self.sumsq_r += r * r;
            }
            if let Some(s) = sigma.filter(|&s| s > 0.0) {
                let ti = d / s;
                if ti.is_finite() {
                    self.sum_t += ti;
                    self.sumsq_t += ti * ti;
                    self.count_t += 1;
                }
            }
        } else if ei != 0.0 {
            self.nonfinite.get_or_insert(index);
        }
        let m = ei.abs();
        if m > 1.0 {
            self.over += 1;
        }
        if self.worst.is_none_or(|(_, w)| m > w) {
            self.worst = Some((index, m));
        }
        if m.is_finite() {
            self.sumsq_e += ei * ei;
        }
        m
    }

    /// This block's tally followed by the next one's.
    pub fn then(self, next: Tally) -> Tally {
        Tally {
            over: self.over + next.over,
            sumsq_e: self.sumsq_e + next.sumsq_e,
            sum_t: self.sum_t + next.sum_t,
            sumsq_t: self.sumsq_t + next.sumsq_t,
            count_t: self.count_t + next.count_t,
            sumsq_d: self.sumsq_d + next.sumsq_d,
            sumsq_r: self.sumsq_r + next.sumsq_r,
            max_abs: self.max_abs.max(next.max_abs),
            worst: match (self.worst, next.worst) {
                (Some((_, w)), Some((j, m))) if m > w => Some((j, m)),
                (None, n) => n,
                (s, _) => s,
            },
            nonfinite: self.nonfinite.or(next.nonfinite),
        }
    }

    /// The verdict over `n` elements. `needed_e`: the |e| the bound must
    /// reach for at most `rules.allowed_over` elements to lie past it (used
    /// only when more do).
    pub fn verdict(&self, n: u64, rules: &Rules, needed_e: f64) -> Verdict {
        let max_e = self.worst.map_or(0.0, |(_, m)| m);
        let tested = self.count_t > 0;
        let rms_t = tested.then(|| libm_sqrt(self.sumsq_t / self.count_t as f64));
        let bias_z = (tested && rules.bias.is_some()).then(|| {
            if self.sumsq_t > 0.0 {
                self.sum_t / libm_sqrt(self.sumsq_t)
            } else {
                0.0
            }
        });
        // z / √n = mean / rms.
        let bias_ratio = bias_z.map(|z| z / libm_sqrt(self.count_t as f64));
        let mut failed = 0u32;
        let mut factor: Option<f64> = None;
        if self.over > rules.allowed_over {
            failed |= Verdict::ELEMENTS;
            factor = Some(needed_e);
        }
        if let Some(r) = rms_t.filter(|&r| r > rules.rms_factor) {
            failed |= Verdict::RMS;
            let f = r / rules.rms_factor;
            factor = Some(factor.map_or(f, |g| g.max(f)));
        }
        if let (Some(z), Some(ratio), Some((z_limit, ratio_limit))) =
            (bias_z, bias_ratio, rules.bias)
        {
            if z.abs() > z_limit && ratio.abs() > ratio_limit {
                failed |= Verdict::BIAS;
                // No bound passes a bias: z and r do not change with σ's scale.
                factor = None;
            }
        }
        Verdict {
            elements: n,
            over_bound: self.over,
            max_e,
            worst_index: self.worst.map_or(u64::MAX, |(i, _)| i),
            nonfinite_index: self.nonfinite.unwrap_or(u64::MAX),
            rms_e: if n > 0 {
                libm_sqrt(self.sumsq_e / n as f64)
            } else {
                0.0
            },
            rms_t: rms_t.unwrap_or(f64::NAN),
            bias_z: bias_z.unwrap_or(f64::NAN),
            bias_ratio: bias_ratio.unwrap_or(f64::NAN),
            max_abs_error: self.max_abs,
            rel_l2_error: if self.sumsq_r > 0.0 {
                libm_sqrt(self.sumsq_d / self.sumsq_r)
            } else if self.sumsq_d > 0.0 {
                f64::INFINITY
            } else {
                0.0
            },
            tolerance_factor: match factor {
                Some(f) if f.is_finite() => f.max(1.0),
                Some(f) => f,
                None => f64::NAN,
            },
            failed,
            passed: u32::from(failed == 0),
            sha256: [0; 32],
        }
    }
}

/// `f64::sqrt` is not in `core` (unstable there); libm's is IEEE 754's
/// correctly rounded square root (the `sqrtsd` instruction on x86-64), the
/// same bits as std's.
#[inline]
fn libm_sqrt(x: f64) -> f64 {
    libm::sqrt(x)
}

/// The [`TOP`] largest |e| values seen, largest first: the order statistic
/// the least tolerance needs, in fixed memory.
#[derive(Debug, Clone, Copy)]
pub struct TopErrors {
    kept: [f64; TOP],
    len: usize,
}

impl Default for TopErrors {
    fn default() -> Self {
        TopErrors::new()
    }
}

impl TopErrors {
    pub const fn new() -> TopErrors {
        TopErrors {
            kept: [0.0; TOP],
            len: 0,
        }
    }

    #[inline]
    pub fn insert(&mut self, m: f64) {
        if self.len == TOP && m <= self.kept[TOP - 1] {
            return;
        }
        let mut i = self.len.min(TOP - 1);
        while i > 0 && self.kept[i - 1] < m {
            self.kept[i] = self.kept[i - 1];
            i -= 1;
        }
        self.kept[i] = m;
        self.len = (self.len + 1).min(TOP);
    }

    /// The `k`-th largest (0: the largest); 0 past what was seen.
    pub fn nth_largest(&self, k: usize) -> f64 {
        if k < self.len {
            self.kept[k]
        } else {
            0.0
        }
    }
}
