//! The error model (docs/error-model.md): how far a correct implementation
//! may be from the float64 reference, per element, derived from the
//! computation itself rather than from one data set.
//!
//! Every float operator has a *local bound*: the rounding error a correct
//! implementation makes when computing it from exact inputs at the tier's
//! precision (`ops`). A stage's bound *propagates* those local bounds through
//! its graph with the absolute value of each operator's first derivative
//! (`graph`). The verdict on a tensor compares `e = (actual − reference) /
//! bound` per element (`judge`): `|e| ≤ 1` everywhere, and for dot-product
//! operators no systematic bias (the mean of `e` both significant and large
//! next to its spread).
//!
//! Everything scales with the data: bounds are built from magnitudes of the
//! tensors involved (|x|, |w|·|x|, ...), so multiplying a suite's inputs or
//! weights by 10 multiplies reference and bound alike.

mod coverage;
mod graph;
mod ops;
pub mod raster;

pub use crate::element::{element_error, WorstElement};
pub use graph::{
    check_nodes, node_reference, stage_reference, Expected, NodeCheck, NodeReference,
    StageReference, Unkept,
};
pub use raster::PixelCounts;
pub use vips_data::tier::{EndToEnd, TierParams};

use crate::compare::NanPolicy;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use vips_data::HostTensor;
use vips_verify_core::tally::{Tally, Verdict, BLOCK};
use vsdk_catalog::DType;

/// The arithmetic a tier implies for one tensor's dtype.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precision {
    /// Unit roundoff of the tensor's dtype (half an ulp, relative): 2^-24 for
    /// float32, 2^-11 for float16, 2^-8 for bfloat16.
    pub u: f64,
    /// Unit roundoff of accumulations (sums, dot products, statistics), which
    /// run in float32 or wider at every tier (as TOSA's profiles and every
    /// tensor-core GEMM do): `min(u, 2^-24)`.
    pub u_acc: f64,
    /// The dtype's smallest normal number: results below it may be flushed.
    pub tiny: f64,
    /// The dtype itself.
    pub dtype: DType,
}

impl Precision {
    /// None for integer dtypes (they are compared exactly, or within `lsb`).
    pub fn of(dtype: DType) -> Option<Precision> {
        let (u, tiny) = match dtype {
            DType::F64 => (2f64.powi(-53), f64::MIN_POSITIVE),
            DType::F32 => (2f64.powi(-24), f64::from(f32::MIN_POSITIVE)),
            DType::F16 => (2f64.powi(-11), 2f64.powi(-14)),
            DType::BF16 => (2f64.powi(-8), f64::from(f32::MIN_POSITIVE)),
            _ => return None,
        };
        Some(Precision {
            u,
            u_acc: u.min(2f64.powi(-24)),
            tiny,
            dtype,
        })
    }

    /// Whether `v` is stored in the dtype without rounding.
    pub fn holds(&self, v: f64) -> bool {
        use vsdk_catalog::rounding::{bf16_from_f64, f16_from_f64};
        match self.dtype {
            DType::F32 => f64::from(v as f32) == v || v.is_nan(),
            DType::F16 => f16_from_f64(v).to_f64() == v || v.is_nan(),
            DType::BF16 => bf16_from_f64(v).to_f64() == v || v.is_nan(),
            _ => true,
        }
    }
}

/// What the error model says about one tensor: its margin (how close to
/// failing) and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub elements: u64,
    /// Elements outside their bound (`|e| > 1`), NaN and Inf mismatches included.
    pub over_bound: u64,
    /// The largest `|e|`: below 1 passes; the margin is `1 − max_e`.
    #[serde(with = "vips_data::json_float")]
    pub max_e: f64,
    /// Percentiles of `|e|`.
    #[serde(with = "vips_data::json_float")]
    pub p50_e: f64,
    #[serde(with = "vips_data::json_float")]
    pub p90_e: f64,
    #[serde(with = "vips_data::json_float")]
    pub p99_e: f64,
    /// `√(mean e²)`.
    #[serde(with = "vips_data::json_float")]
    pub rms_e: f64,
    /// The statistical criterion: `√(mean t²)` with `t = (a − r) / σ`, the
    /// error in units of a correct implementation's (None where not tested:
    /// integer and data-movement tensors, whose bound is exact).
    #[serde(default, with = "vips_data::json_float::option")]
    pub rms_t: Option<f64>,
    /// `Σt / √(Σt²)`: a z-score of the mean error (None where not tested:
    /// only errors made of many roundings, see `Statistics::bias`).
    #[serde(with = "vips_data::json_float::option")]
    pub bias_z: Option<f64>,
    /// `mean t / rms t` (None where not tested).
    #[serde(with = "vips_data::json_float::option")]
    pub bias_ratio: Option<f64>,
    /// Largest `|actual − reference|` over finite pairs.
    #[serde(with = "vips_data::json_float")]
    pub max_abs_error: f64,
    /// `‖a − r‖₂ / ‖r‖₂` against the float64 reference, over finite pairs.
    #[serde(default, with = "vips_data::json_float")]
    pub rel_l2_error: f64,
    pub worst: Option<WorstElement>,
    pub passed: bool,
    /// A failure: the least factor by which the bound and σ would have to
    /// grow for the element and rms criteria to pass; absent for a bias,
    /// which fails at any bound; `"inf"` where no factor would do (a NaN).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "vips_data::json_float::option"
    )]
    pub tolerance_factor: Option<f64>,
    /// Why it failed, in words.
    pub reason: Option<String>,
}

/// The statistical criteria of a float tensor (docs/error-model.md, section 3).
#[derive(Debug, Clone, Copy)]
pub struct Statistics {
    /// Largest allowed `√(mean t²)`.
    pub rms_factor: f64,
    /// A bias fails when both `|Σt| / √(Σt²)` and `|mean t| / rms t`
    /// exceed these; None: the mean is not tested (see `ops::accumulates`).
    pub bias: Option<(f64, f64)>,
}

impl Statistics {
    /// The criteria at `params`, the mean tested when `bias`.
    pub fn of(params: &TierParams, bias: bool) -> Statistics {
        Statistics {
            rms_factor: params.rms_factor,
            bias: bias.then_some((params.bias_z, params.bias_ratio)),
        }
    }
}

/// How a tensor is judged.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    pub nan: NanPolicy,
    /// Fraction of elements allowed outside their bound.
    pub allowed_over_fraction: f64,
    /// The statistical criteria, where the tensor has a σ.
    pub statistics: Statistics,
}

impl Rules {
    /// How `stage`'s outputs are judged at `params`, the mean tested when
    /// `summed` (the runner's isolated and chained judgement, and a pack's).
    pub fn of_stage(
        stage: &vips_data::document::Stage,
        params: &TierParams,
        summed: bool,
    ) -> Rules {
        Rules {
            nan: stage.nan,
            allowed_over_fraction: stage.mismatch_fraction,
            statistics: Statistics::of(params, summed),
        }
    }

    /// These rules for a tensor of `elements` (the allowed fraction as a
    /// count), in the form `vips_verify_core` (and a device) applies them.
    pub fn for_elements(&self, elements: u64) -> vips_verify_core::Rules {
        vips_verify_core::Rules {
            nan: self.nan.into(),
            allowed_over: (self.allowed_over_fraction * elements as f64).floor() as u64,
            rms_factor: self.statistics.rms_factor,
            bias: self.statistics.bias,
        }
    }
}

/// The tally of one block of elements starting at `at`, their |e| written
/// to `e` (the arithmetic is `vips_verify_core`'s, which a device running a
/// replay pack shares: the same sums in the same order).
fn tally_block(
    (a, reference, bound): (&[f64], &[f64], &[f64]),
    sigma: Option<&[f64]>,
    at: usize,
    nan: NanPolicy,
    e: &mut [f64],
) -> Tally {
    let nan = nan.into();
    let mut t = Tally::default();
    for (i, (((&x, &r), &b), m_out)) in a.iter().zip(reference).zip(bound).zip(e).enumerate() {
        *m_out = t.push((at + i) as u64, (x, r, b), sigma.map(|s| s[i]), nan);
    }
    t
}

/// Judges `actual` against the float64 `reference` with per-element `bound`
/// and, for float tensors, `sigma`, the standard deviation of a correct
/// implementation's error (all the same length, row-major over `shape`).
/// Elements whose σ is 0 (exact, or flushed) are left to their bound.
pub fn judge(
    actual: &HostTensor,
    reference: &[f64],
    bound: &[f64],
    sigma: Option<&[f64]>,
    rules: Rules,
) -> Judgement {
    let a = actual.f64_values();
    assert_eq!(a.len(), reference.len(), "a reference per element");
    assert_eq!(a.len(), bound.len(), "a bound per element");
    assert!(
        sigma.is_none_or(|s| s.len() == a.len()),
        "a sigma per element"
    );
    let mut e = vec![0.0; a.len()];
    // Blocks of a fixed size, tallied in parallel and combined in order: the
    // sums do not depend on the number of threads (and are a device's).
    let tally = e
        .par_chunks_mut(BLOCK)
        .enumerate()
        .map(|(blk, e)| {
            let at = blk * BLOCK;
            let end = at + e.len();
            tally_block(
                (&a[at..end], &reference[at..end], &bound[at..end]),
                sigma.map(|s| &s[at..end]),
                at,
                rules.nan,
                e,
            )
        })
        .collect::<Vec<_>>()
        .into_iter()
        .fold(Tally::default(), Tally::then);
    let n = e.len();
    // Percentiles, largest first: a selection leaves the values at or below
    // it in front, so the next one searches only those.
    let rank = |p: f64| ((n.saturating_sub(1) as f64) * p).round() as usize;
    let mut pct = |upto: usize, k: usize| -> f64 {
        if n == 0 {
            return 0.0;
        }
        *e[..=upto].select_nth_unstable_by(k, f64::total_cmp).1
    };
    let stats = rules.statistics;
    let core_rules = rules.for_elements(n as u64);
    let allowed = core_rules.allowed_over;
    // The |e| the bound must reach for `allowed` elements at most to lie past it.
    let needed_e = if tally.over > allowed {
        pct(n - 1, n - 1 - allowed as usize)
    } else {
        0.0
    };
    let p99 = pct(n.saturating_sub(1), rank(0.99));
    let p90 = pct(rank(0.99), rank(0.9));
    let p50 = pct(rank(0.9), rank(0.5));
    let v = tally.verdict(n as u64, &core_rules, needed_e);
    let tested = |x: f64| (!x.is_nan()).then_some(x);
    let (rms_t, bias_z, bias_ratio) = (tested(v.rms_t), tested(v.bias_z), tested(v.bias_ratio));
    let mut reason: Option<String> = None;
    if v.failed & Verdict::ELEMENTS != 0 {
        reason = Some(match tally.nonfinite {
            Some(i) => format!(
                "{} of {n} elements outside their bound (a NaN or Inf where the reference has {} at flat index {i})",
                v.over_bound, reference[i as usize]
            ),
            None => format!(
                "{} of {n} elements outside their bound (largest |e| {:.3})",
                v.over_bound, v.max_e
            ),
        });
    }
    if let Some(r) = rms_t.filter(|_| v.failed & Verdict::RMS != 0) {
        reason.get_or_insert_with(|| {
            format!(
                "the error's rms is {r:.2} times what a correct implementation shows (limit {})",
                stats.rms_factor
            )
        });
    }
    if let (Some(z), Some(ratio), Some((z_limit, ratio_limit))) = (bias_z, bias_ratio, stats.bias) {
        if v.failed & Verdict::BIAS != 0 {
            let bias = format!(
                "systematic bias: the mean error is {z:.1} standard deviations from 0 (limit {z_limit}) and {:.2} of the errors' rms (limit {ratio_limit})",
                ratio.abs(),
            );
            reason = Some(match reason {
                Some(r) => format!("{r}; and {bias}"),
                None => bias,
            });
        }
    }
    let worst = tally.worst.map(|(i, _)| {
        let i = i as usize;
        WorstElement {
            index: crate::compare::unravel(i, &actual.spec.shape),
            actual: a[i],
            reference: reference[i],
            bound: bound[i],
        }
    });
    Judgement {
        elements: v.elements,
        over_bound: v.over_bound,
        max_e: v.max_e,
        p50_e: p50,
        p90_e: p90,
        p99_e: p99,
        rms_e: v.rms_e,
        rms_t,
        bias_z,
        bias_ratio,
        max_abs_error: v.max_abs_error,
        rel_l2_error: v.rel_l2_error,
        worst,
        passed: v.passed == 1,
        tolerance_factor: tested(v.tolerance_factor),
        reason,
    }
}
