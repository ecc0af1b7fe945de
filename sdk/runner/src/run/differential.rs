//! The differential round: every stage again on inputs nobody could have
//! recorded (the suite's inputs perturbed from the run-time seed), judged by
//! the error model against the reference computed from those inputs. A
//! provider that replays stored outputs (found by input content or by
//! address) fails it, and one whose outputs do not change although every
//! input did is named for what it does.

use super::stage::StageContext;
use super::{StageResult, Status};
use crate::suite::SuiteError;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use vips_data::HostTensor;
use vips_execution::execution::SplitMix;
use vsdk_catalog::DType;

/// What the replay check keeps of a main-round stage's outputs: each one's
/// SHA-256 (the outputs themselves would be held for the whole tier: a
/// full-size suite's block outputs add up to hundreds of MB).
pub(super) type Digests = HashMap<String, [u8; 32]>;

pub(super) fn digests(outputs: &HashMap<String, HostTensor>) -> Digests {
    outputs
        .iter()
        .map(|(name, t)| (name.clone(), Sha256::digest(t.bytes.as_slice()).into()))
        .collect()
}

/// Scales every float element by a factor in [0.75, 1.25] (magnitudes, and
/// so the error model's bounds, stay those of the suite; an element that
/// would pass the dtype's largest finite value, an fp16 mask of -65504 say,
/// is kept); shifts uint8 pixels by up to ±16. Other integer tensors
/// (indices) are left alone.
pub fn perturb(t: &HostTensor, seed: u64) -> HostTensor {
    let mut rng = SplitMix(seed);
    match t.spec.dtype {
        d if d.is_float() => {
            let largest = match d {
                DType::F16 => 65504.0,
                DType::BF16 => 3.389_531_389_251_535e38,
                DType::F32 => f64::from(f32::MAX),
                _ => f64::MAX,
            };
            let v: Vec<f64> = t
                .to_f64_vec()
                .into_iter()
                .map(|x| {
                    let y = x * (0.75 + 0.5 * rng.unit());
                    if y.abs() <= largest {
                        y
                    } else {
                        x
                    }
                })
                .collect();
            HostTensor::from_vec(&t.spec.shape, v)
                .expect("same shape as the tensor")
                .cast(d)
        }
        DType::U8 => {
            let bytes = t
                .bytes
                .iter()
                .map(|&b| (i32::from(b) + (rng.next_u64() % 33) as i32 - 16).clamp(0, 255) as u8)
                .collect();
            HostTensor::from_bytes(t.spec.clone(), bytes).expect("same size as the tensor")
        }
        _ => t.clone(),
    }
}

/// A rasterizer's output read by `vsdk.interpolate` (`[B, H, W, 4]`, ids in
/// the last channel): each texel's (u, v, z/w) scaled by one factor in
/// [0.75, 1] (u + v stays at most 1: still barycentrics), its id kept.
fn perturb_raster(t: &HostTensor, seed: u64) -> HostTensor {
    let mut rng = SplitMix(seed);
    let mut v = t.to_f64_vec();
    for px in v.chunks_exact_mut(4) {
        let s = 0.75 + 0.25 * rng.unit();
        for x in &mut px[..3] {
            *x *= s;
        }
    }
    HostTensor::from_vec(&t.spec.shape, v)
        .expect("same shape as the tensor")
        .cast(t.spec.dtype)
}

/// Whether the stage reads `name` as a rasterizer's output.
fn is_raster(stage: &vips_data::document::Stage, name: &str) -> bool {
    stage.graph.iter().any(|n| {
        n.op == vsdk_catalog::Op::Interpolate && n.inputs.get(1).is_some_and(|i| i == name)
    })
}

/// Runs `ctx`'s stage on perturbed copies of its suite inputs (`golden`
/// gives each in the tier's dtype) and checks its outputs changed from
/// `main` (the digests of the main round's outputs of the stage).
pub(super) fn round(
    ctx: &StageContext,
    main: Option<&Digests>,
    golden: impl Fn(&str) -> Result<HostTensor, SuiteError>,
) -> Result<StageResult, SuiteError> {
    let mut inputs = HashMap::new();
    let mut changed = false;
    for (k, name) in ctx.stage.inputs.iter().enumerate() {
        let t = golden(name)?;
        let seed = SplitMix::derive(ctx.seed, &[k as u64]);
        let p = if is_raster(ctx.stage, name) {
            perturb_raster(&t, seed)
        } else {
            perturb(&t, seed)
        };
        changed |= p.bytes != t.bytes;
        inputs.insert(name.clone(), p);
    }
    let (mut result, outputs) = ctx.run(&inputs)?;
    let outputs = digests(&outputs);
    let same: Vec<&str> = ctx
        .stage
        .outputs
        .iter()
        .filter(|o| {
            matches!((main.and_then(|m| m.get(*o)), outputs.get(*o)),
                (Some(a), Some(b)) if a == b)
        })
        .map(String::as_str)
        .collect();
    // Only a failing stage is accused: an output that is right for the new
    // inputs may legitimately equal the old one (it ignores the input that
    // changed, saturates, or is all zeros).
    if changed && !same.is_empty() && result.status == Status::Fail {
        result.status = Status::Fail;
        result.reason = Some(format!(
            "replayed: `{}` is bit-identical to the main round's output although the inputs changed: the provider returns stored results instead of computing them",
            same.join("`, `")
        ));
    }
    Ok(result)
}
