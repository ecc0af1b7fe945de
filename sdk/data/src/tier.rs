//! The precision tiers a stage is certified at, what each does to a tensor,
//! and the error model's parameters per tier (a document's `tolerances`).

use crate::HostTensor;
use serde::{Deserialize, Serialize};
use vsdk_catalog::{DType, TensorSpec};

/// The precision tiers a stage is certified at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Fp32,
    Fp16,
    Bf16,
    Exact,
}

impl Tier {
    pub const ALL: [Tier; 4] = [Tier::Fp32, Tier::Fp16, Tier::Bf16, Tier::Exact];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Fp32 => "fp32",
            Tier::Fp16 => "fp16",
            Tier::Bf16 => "bf16",
            Tier::Exact => "exact",
        }
    }

    pub fn from_name(s: &str) -> Option<Tier> {
        Tier::ALL.into_iter().find(|t| t.name() == s)
    }

    /// A tier named by a user, or what the names are.
    pub fn parse(s: &str) -> Result<Tier, String> {
        Tier::from_name(s).ok_or_else(|| format!("tier `{s}`: expected fp32, fp16, bf16 or exact"))
    }

    /// The dtype float tensors are computed in at this tier (None: keep the
    /// document's dtypes).
    pub fn float_dtype(self) -> Option<DType> {
        match self {
            Tier::Fp32 => Some(DType::F32),
            Tier::Fp16 => Some(DType::F16),
            Tier::Bf16 => Some(DType::BF16),
            Tier::Exact => None,
        }
    }
}

/// What to do with NaN.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NanPolicy {
    /// Any NaN in the actual tensor is a mismatch.
    #[default]
    Fail,
    /// NaN matches NaN at the same position (and only there).
    Allow,
}

impl From<NanPolicy> for vips_verify_core::Nan {
    fn from(p: NanPolicy) -> Self {
        match p {
            NanPolicy::Fail => vips_verify_core::Nan::Fail,
            NanPolicy::Allow => vips_verify_core::Nan::Allow,
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

/// Whether taking `t` to the tier's dtype changes a value (a float32
/// capture judged at bf16).
pub fn rounds(t: &HostTensor, tier: Tier) -> bool {
    let r = to_tier(t, tier);
    r.spec.dtype != t.spec.dtype && r.cast(t.spec.dtype).bytes != t.bytes
}

/// Float tensors take the tier's dtype; integer tensors stay as they are.
pub fn to_tier(t: &HostTensor, tier: Tier) -> HostTensor {
    match tier.float_dtype() {
        Some(d) if t.spec.dtype.is_float() => t.cast(d),
        _ => t.clone(),
    }
}

pub fn tier_spec(s: &TensorSpec, tier: Tier) -> TensorSpec {
    match tier.float_dtype() {
        Some(d) if s.dtype.is_float() => TensorSpec::new(d, &s.shape),
        _ => s.clone(),
    }
}
