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

pub use graph::{
    check_nodes, node_reference, stage_reference, Expected, NodeCheck, NodeReference,
    StageReference, Unkept,
};
pub use raster::PixelCounts;

use crate::compare::{NanPolicy, Tier};
use crate::{DType, HostTensor};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use vips_verify_core::tally::{Tally, Verdict, BLOCK};

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

/// The end-to-end criterion of chained mode: the component's final outputs,
/// computed by the provider from its own earlier outputs, against the golden
/// values. Both measures are scale-free.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EndToEnd {
    /// Largest `‖a − g‖₂ / ‖g‖₂`.
    pub rel_l2: f64,
    /// Smallest cosine similarity.
    pub cosine: f64,
}

/// The parameters of the error model at one tier (a document's `tolerances`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TierParams {
    /// Confidence factor λ of the probabilistic accumulation bound
    /// `λ·√n·u` (Higham & Mary 2019): it fails a correct sum of `n` terms with
    /// probability below `2n·exp(−λ²/2)`.
    pub lambda: f64,
    /// Dot-product operators: the largest allowed `|Σe| / √(Σe²)`, a z-score
    /// of the mean normalised error. Unbiased rounding keeps it near N(0, 1).
    pub bias_z: f64,
    /// ... and the largest allowed `|mean e| / rms e`, the bias's size next
    /// to the spread: errors that are slightly correlated (a large input
    /// shared by a row of outputs) make a tiny bias significant on a large
    /// tensor without making it large.
    pub bias_ratio: f64,
    /// The statistical limit: the largest allowed rms of `t = (a − r) / σ`,
    /// the error in units of the standard deviation σ a correct
    /// implementation's error has (each operator's rounding model, propagated
    /// like the bound). Element bounds are worst cases; this is the typical case.
    pub rms_factor: f64,
    /// Integer outputs may differ from the reference by this many units.
    pub lsb: u64,
    /// Rasterizers may snap vertices to this many sub-pixel bits (nvdiffrast's
    /// CUDA rasterizer: 4): centres that close to an edge are ambiguous, and
    /// (u, v, z/w) may move by what that snapping moves them
    /// (docs/error-model.md, "Discrete outputs").
    pub subpixel_bits: u32,
    pub end_to_end: EndToEnd,
}

impl TierParams {
    /// The SDK's defaults (docs/error-model.md, "Parameters").
    pub fn default_for(tier: Tier) -> TierParams {
        let end_to_end = match tier {
            Tier::Fp32 | Tier::Exact => EndToEnd {
                rel_l2: 1e-4,
                cosine: 0.999_999,
            },
            Tier::Fp16 => EndToEnd {
                rel_l2: 2e-2,
                cosine: 0.9998,
            },
            Tier::Bf16 => EndToEnd {
                rel_l2: 1e-1,
                cosine: 0.995,
            },
        };
        TierParams {
            lambda: 6.0,
            bias_z: 8.0,
            bias_ratio: 0.1,
            rms_factor: 2.5,
            lsb: 0,
            subpixel_bits: 4,
            end_to_end,
        }
    }
}

/// The element whose normalised error is largest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstElement {
    pub index: Vec<usize>,
    #[serde(with = "crate::json_float")]
    pub actual: f64,
    #[serde(with = "crate::json_float")]
    pub reference: f64,
    /// The allowed error there.
    #[serde(with = "crate::json_float")]
    pub bound: f64,
}

/// What the error model says about one tensor: its margin (how close to
/// failing) and the verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judgement {
    pub elements: u64,
    /// Elements outside their bound (`|e| > 1`), NaN and Inf mismatches included.
    pub over_bound: u64,
    /// The largest `|e|`: below 1 passes; the margin is `1 − max_e`.
    #[serde(with = "crate::json_float")]
    pub max_e: f64,
    /// Percentiles of `|e|`.
    #[serde(with = "crate::json_float")]
    pub p50_e: f64,
    #[serde(with = "crate::json_float")]
    pub p90_e: f64,
    #[serde(with = "crate::json_float")]
    pub p99_e: f64,
    /// `√(mean e²)`.
    #[serde(with = "crate::json_float")]
    pub rms_e: f64,
    /// The statistical criterion: `√(mean t²)` with `t = (a − r) / σ`, the
    /// error in units of a correct implementation's (None where not tested:
    /// integer and data-movement tensors, whose bound is exact).
    #[serde(default, with = "crate::json_float::option")]
    pub rms_t: Option<f64>,
    /// `Σt / √(Σt²)`: a z-score of the mean error (None where not tested:
    /// only errors made of many roundings, see `Statistics::bias`).
    #[serde(with = "crate::json_float::option")]
    pub bias_z: Option<f64>,
    /// `mean t / rms t` (None where not tested).
    #[serde(with = "crate::json_float::option")]
    pub bias_ratio: Option<f64>,
    /// Largest `|actual − reference|` over finite pairs.
    #[serde(with = "crate::json_float")]
    pub max_abs_error: f64,
    /// `‖a − r‖₂ / ‖r‖₂` against the float64 reference, over finite pairs.
    #[serde(default, with = "crate::json_float")]
    pub rel_l2_error: f64,
    pub worst: Option<WorstElement>,
    pub passed: bool,
    /// A failure: the least factor by which the bound and σ would have to
    /// grow for the element and rms criteria to pass; absent for a bias,
    /// which fails at any bound; `"inf"` where no factor would do (a NaN).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "crate::json_float::option"
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
    pub fn of_stage(stage: &crate::document::Stage, params: &TierParams, summed: bool) -> Rules {
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

/// The normalised error `e = (actual − reference) / bound` of one element:
/// 0 inside an infinite bound, ±∞ past a zero one, and ∞ where a NaN or ±Inf
/// differs from the reference (a NaN matches a NaN only under
/// `NanPolicy::Allow`). Never NaN, whose comparisons would pin the worst.
pub fn element_error(actual: f64, reference: f64, bound: f64, nan: NanPolicy) -> f64 {
    vips_verify_core::element_error(actual, reference, bound, nan.into())
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
