//! The error model over a stage's graph: the stage's reference and bound
//! (local bounds propagated node by node), and the check of every node of a
//! decomposed run against the reference fed that node's own inputs.

use super::coverage;
use super::ops::{self, Call, Reference};
use super::raster::{self, PixelCounts};
use super::{judge, Judgement, Precision, Rules, Statistics, TierParams};
use crate::compare::{NanPolicy, Tier};
use crate::error_map::ErrorMap;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use vips_data::document::Stage;
use vips_data::{Error, HostTensor};
use vips_execution::Device;
use vsdk_catalog::{DType, Op, TensorSpec};

/// A stage's outputs as the reference computes them from the stage's inputs,
/// and how far a correct implementation may be from each element.
pub struct StageReference {
    /// float64 for float outputs.
    pub values: HashMap<String, HostTensor>,
    pub bounds: HashMap<String, Vec<f64>>,
    /// The standard deviation of a correct implementation's error: each
    /// operator's rounding model propagated like the bound, without λ.
    pub sigmas: HashMap<String, Vec<f64>>,
    /// What the stage's data cannot show (`coverage`).
    pub coverage: Vec<String>,
    /// The tensors whose error includes a dot product's (downstream of a
    /// `linear`, `conv2d` or `sdpa`) and no error shared along a broadcast:
    /// their mean is tested too.
    pub summed: HashSet<String>,
    /// The seconds each node of the graph took (value, bound, σ and their
    /// propagation), in graph order; empty for a reference read back from
    /// the cache (`--timings` sums them by operator family).
    pub node_seconds: Vec<f64>,
}

/// Computes the stage's reference and per-element bound from `inputs`, the
/// tensors exactly as the provider received them (already in the tier's dtypes).
pub fn stage_reference(
    stage: &Stage,
    tier: Tier,
    inputs: &HashMap<String, HostTensor>,
    reference: &Device,
    params: &TierParams,
) -> Result<StageReference, Error> {
    let r = Reference(reference);
    // float64 values: the stage's inputs widened when first read.
    let mut values: HashMap<String, HostTensor> = HashMap::new();
    // The tier's specs: a captured input may be wider than the tier (an
    // engine that fed a float32 value on at bf16); its values are used as given.
    let mut specs: HashMap<String, TensorSpec> = inputs
        .iter()
        .map(|(k, v)| (k.clone(), vips_data::tier::tier_spec(&v.spec, tier)))
        .collect();
    // The variance E² of each tensor's error at confidence 1 (absent: exact),
    // and the variance σ² of a correct implementation's.
    let mut vars: HashMap<String, HostTensor> = HashMap::new();
    let mut svars: HashMap<String, HostTensor> = HashMap::new();
    let mut coverage = Vec::new();
    let mut summed = HashSet::new();
    // Tensors whose error includes one shared along a broadcast: an inexact
    // operand broadcast by an element-wise operator (TRELLIS's modulation, a
    // per-channel shift, scale and gate computed in the stage, one rounding
    // for every token) gives every element along the broadcast axes the
    // same error. The test of the mean counts errors as independent, so it
    // is not applied downstream of one; each dot product's mean is still
    // tested at its own node.
    let mut shared: HashSet<String> = HashSet::new();
    // The last node that reads each tensor: its float64 value and variance
    // are dropped after it (a block's weights and intermediates in float64
    // are several times the float32 tensors), except the stage's outputs.
    let last_read = stage.last_reads();
    let mut node_seconds = Vec::with_capacity(stage.graph.len());
    for (i, node) in stage.graph.iter().enumerate() {
        let started = std::time::Instant::now();
        let in_specs: Vec<TensorSpec> = node.inputs.iter().map(|n| specs[n].clone()).collect();
        let tier_attrs = node.attrs_at(tier.float_dtype());
        let (resolved, out_spec) = ops::output_spec(node.op, &tier_attrs, &in_specs)?;
        let ref_attrs = node.attrs_at(Some(DType::F64));
        for n in &node.inputs {
            if let (false, Some(t)) = (values.contains_key(n), inputs.get(n)) {
                values.insert(n.clone(), ops::wide(t));
            }
        }
        let ins: Vec<&HostTensor> = node.inputs.iter().map(|n| &values[n]).collect();
        let off_tier_inputs = node.inputs.iter().any(|n| {
            inputs
                .get(n)
                .is_some_and(|t| vips_data::tier::tier_spec(&t.spec, tier).dtype != t.spec.dtype)
        });
        let call = Call {
            op: node.op,
            attrs: &ref_attrs,
            node: &resolved,
            inputs: &ins,
            precision: Precision::of(out_spec.dtype),
            params,
            off_tier_inputs,
        };
        let ev = ops::evaluate(&r, &call)?;
        if ev.accumulates || node.inputs.iter().any(|n| summed.contains(n)) {
            summed.insert(node.output.clone());
        }
        // A batch norm's per-channel scale is computed once per channel (a
        // group norm's statistics once per group, and commonly folded into
        // a scale per channel): its rounding is shared by the channel's
        // elements, as a broadcast's is;
        // so is the 1/6 of the hard functions, rounded once (ONNX's float32
        // `alpha`, a kernel's `x·(1/6)`): half an ulp of the same sign for
        // every element of one sign.
        let broadcast_error = matches!(
            node.op,
            Op::BatchNorm | Op::GroupNorm | Op::HardSigmoid | Op::HardSwish
        ) || matches!(node.op, Op::Add | Op::Sub | Op::Mul | Op::Div)
            && node
                .inputs
                .iter()
                .any(|n| vars.contains_key(n) && specs[n].numel() < out_spec.numel());
        if broadcast_error || node.inputs.iter().any(|n| shared.contains(n)) {
            shared.insert(node.output.clone());
        }
        coverage.extend(
            coverage::invisible_pitfalls(&resolved, &ins, &ev, params)
                .into_iter()
                .map(|w| format!("node {i} (`{}` -> `{}`): {w}", node.op.name(), node.output)),
        );
        // The node's own error adds as one more independent term, at
        // confidence 1: the stage's bound applies λ once, to the whole sum
        // (Hoeffding: a sum of independent errors bounded by B_k exceeds
        // λ·√(Σ B_k²) with probability below 2·exp(−λ²/2)).
        for (all, own, lambda) in [
            (&mut vars, ev.local(1.0), Some(params.lambda)),
            (&mut svars, ev.sigma.clone(), None),
        ] {
            let in_vars: Vec<Option<&HostTensor>> =
                node.inputs.iter().map(|n| all.get(n)).collect();
            let propagated = ops::propagate(&r, &call, &in_vars, &ev.value, lambda)?;
            let own = own.into_iter().map(|b| b * b);
            let total: Vec<f64> = match propagated {
                Some(p) => p.f64_values().iter().zip(own).map(|(a, b)| a + b).collect(),
                None => own.collect(),
            };
            if total.iter().any(|&e| e > 0.0) {
                all.insert(node.output.clone(), ops::dense(&ev.value.spec.shape, total));
            }
        }
        specs.insert(node.output.clone(), out_spec);
        if last_read.contains_key(node.output.as_str()) || stage.outputs.contains(&node.output) {
            values.insert(node.output.clone(), ev.value);
        } else {
            // Read by no node and not an output of the stage.
            vars.remove(&node.output);
            svars.remove(&node.output);
        }
        for n in &node.inputs {
            if last_read[n.as_str()] == i && !stage.outputs.contains(n) {
                values.remove(n);
                vars.remove(n);
                svars.remove(n);
            }
        }
        node_seconds.push(started.elapsed().as_secs_f64());
    }
    summed.retain(|n| !shared.contains(n));
    let mut out = StageReference {
        values: HashMap::new(),
        bounds: HashMap::new(),
        sigmas: HashMap::new(),
        coverage,
        summed,
        node_seconds,
    };
    for name in &stage.outputs {
        let v = values
            .remove(name)
            .or_else(|| inputs.get(name).map(ops::wide))
            .ok_or_else(|| Error::Tensor(format!("stage output `{name}` was not produced")))?;
        // λ applies to sums of float rounding errors; integer outputs are
        // exact up to `lsb` (plus what inexact inputs carried in).
        let confidence = if v.spec.dtype.is_float() {
            params.lambda
        } else {
            1.0
        };
        let b = vars.get(name).map_or_else(
            || vec![0.0; v.spec.numel()],
            |v| {
                v.f64_values()
                    .iter()
                    .map(|v| confidence * v.sqrt())
                    .collect()
            },
        );
        let sigma = svars.get(name).map_or_else(
            || vec![0.0; v.spec.numel()],
            |v| v.f64_values().iter().map(|v| v.sqrt()).collect(),
        );
        if let Some(max) = specs.get(name).and_then(|s| largest_finite(s.dtype)) {
            out.coverage
                .extend(coverage::degenerate_output(name, &v, max));
        }
        out.bounds.insert(name.clone(), b);
        out.sigmas.insert(name.clone(), sigma);
        out.values.insert(name.clone(), v);
    }
    Ok(out)
}

/// A float dtype's largest finite value (None: integers).
fn largest_finite(d: DType) -> Option<f64> {
    match d {
        DType::F16 => Some(65504.0),
        DType::BF16 => Some(3.389_531_389_251_535_5e38),
        DType::F32 => Some(f64::from(f32::MAX)),
        DType::F64 => Some(f64::MAX),
        _ => None,
    }
}

/// One node of a decomposed run, judged by its own error: its output against
/// the reference computed from the very inputs the provider's node received.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeCheck {
    pub node: usize,
    pub op: String,
    pub output: String,
    pub judgement: Judgement,
    /// A failing operator: where in its output the error lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_map: Option<ErrorMap>,
    /// The check's seconds: the node's float64 reference from the
    /// provider's own inputs, its bound and σ, the judgement (summed into
    /// the stage's `timings.families`, not written with the check).
    #[serde(skip)]
    pub seconds: f64,
}

/// What [`check_nodes`] does with a node output missing from `values`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unkept {
    /// A decomposed run keeps every intermediate: a missing one is an error.
    Error,
    /// An engine captured only some (`check`'s `NODE@STAGE`): a missing
    /// output is the reference's value from that node's inputs, rounded to
    /// the tier as a correct implementation stores it, and is not judged; the
    /// next captured node is then judged from inputs that are the engine's
    /// where it captured them and correct ones elsewhere.
    Reference,
}

/// Checks every node of a stage computed node by node, in graph order: each
/// output in `values` (the stage's inputs and the node outputs as the
/// provider, or an engine, produced them) against the reference fed that
/// node's own inputs. `rules`: the stage's NaN policy and allowed fraction
/// over the bound.
pub fn check_nodes(
    stage: &Stage,
    tier: Tier,
    values: &HashMap<String, HostTensor>,
    reference: &Device,
    params: &TierParams,
    (nan, allowed_over_fraction): (NanPolicy, f64),
    unkept: Unkept,
) -> Result<Vec<NodeCheck>, Error> {
    let mut checks = Vec::with_capacity(stage.graph.len());
    let mut filled: HashMap<String, HostTensor> = HashMap::new();
    for (i, node) in stage.graph.iter().enumerate() {
        let started = std::time::Instant::now();
        let got = |n: &String| {
            values
                .get(n)
                .or_else(|| filled.get(n))
                .ok_or_else(|| Error::Tensor(format!("node input `{n}` was not kept")))
        };
        let own: Vec<&HostTensor> = node.inputs.iter().map(got).collect::<Result<_, _>>()?;
        let widened = widest_float(&own);
        let own: Vec<&HostTensor> = widened.iter().map(|t| t.as_ref()).collect();
        let Some(actual) = values.get(&node.output) else {
            if unkept == Unkept::Error {
                return Err(Error::Tensor(format!(
                    "node output `{}` was not kept",
                    node.output
                )));
            }
            // Only the value: its bound and σ would not be used.
            let specs: Vec<TensorSpec> = own.iter().map(|t| t.spec.clone()).collect();
            let (_, spec) = ops::output_spec(node.op, &node.attrs_at(tier.float_dtype()), &specs)?;
            let wide: Vec<HostTensor> = own.iter().map(|t| ops::wide(t)).collect();
            let value = Reference(reference).exec(
                node.op,
                &node.attrs_at(Some(DType::F64)),
                &wide.iter().collect::<Vec<_>>(),
            )?;
            filled.insert(node.output.clone(), value.cast(spec.dtype));
            continue;
        };
        let ev = node_reference(
            node,
            tier.float_dtype(),
            &own,
            actual.spec.dtype,
            reference,
            params,
        )?;
        if ev.value.spec.shape != actual.spec.shape {
            return Err(Error::Tensor(format!(
                "node {i} ({}): the implementation's output has shape {:?}, the reference {:?}",
                node.op.name(),
                actual.spec.shape,
                ev.value.spec.shape
            )));
        }
        let rules = Rules {
            nan,
            allowed_over_fraction,
            statistics: Statistics::of(params, ev.accumulates),
        };
        let x = Expected::of(
            node,
            &own,
            actual,
            (&ev.value, &ev.bound, &ev.sigma),
            params,
        )?;
        let judgement = judge(actual, &x.values, &x.bound, Some(&x.sigma), rules);
        let error_map = (!judgement.passed).then(|| {
            ErrorMap::of_stage_tensor(
                &node.output,
                actual,
                &x.values,
                &x.bound,
                stage,
                values,
                nan,
            )
        });
        checks.push(NodeCheck {
            node: i,
            op: format!("{}@{}", node.op.name(), node.op.version()),
            output: node.output.clone(),
            judgement,
            error_map,
            seconds: started.elapsed().as_secs_f64(),
        });
    }
    Ok(checks)
}

/// An engine may feed a node float inputs of two types (its float32 activation
/// beside a bf16 parameter at the bf16 tier, captured as `x@stage`): the
/// catalog's operators take one dtype, so the narrower ones are widened, which
/// keeps every value as fed.
fn widest_float<'a>(inputs: &[&'a HostTensor]) -> Vec<Cow<'a, HostTensor>> {
    let floats = inputs.iter().map(|t| t.spec.dtype).filter(|d| d.is_float());
    // float16 beside bfloat16: neither holds the other, float32 holds both.
    let widest = floats.clone().max_by_key(|d| d.size_bytes()).map(|w| {
        match floats
            .clone()
            .any(|d| d != w && d.size_bytes() == w.size_bytes())
        {
            true => DType::F32,
            false => w,
        }
    });
    match widest {
        Some(w) if floats.clone().any(|d| d != w) => inputs
            .iter()
            .map(|t| match t.spec.dtype {
                d if d.is_float() && d != w => Cow::Owned(t.cast(w)),
                _ => Cow::Borrowed(*t),
            })
            .collect(),
        _ => inputs.iter().map(|t| Cow::Borrowed(*t)).collect(),
    }
}

/// One operator's reference from the very inputs an implementation received
/// (`inputs`, in their own dtypes), and how far a correct implementation
/// whose output has dtype `out` may be from it.
pub struct NodeReference {
    /// float64 for float outputs.
    pub value: HostTensor,
    /// The local bound at the tier's confidence λ.
    pub bound: Vec<f64>,
    pub sigma: Vec<f64>,
    /// A dot product or sum: its mean is tested too.
    pub accumulates: bool,
}

/// [`NodeReference`] of `node`, whose floats the implementation computes in
/// `float` (the tier's dtype; a cast's float target follows it).
pub fn node_reference(
    node: &vips_data::document::GraphNode,
    float: Option<DType>,
    inputs: &[&HostTensor],
    out: DType,
    reference: &Device,
    params: &TierParams,
) -> Result<NodeReference, Error> {
    let in_specs: Vec<TensorSpec> = inputs.iter().map(|t| t.spec.clone()).collect();
    let (resolved, _) = ops::output_spec(node.op, &node.attrs_at(float), &in_specs)?;
    let wide: Vec<HostTensor> = inputs.iter().map(|t| ops::wide(t)).collect();
    let ins: Vec<&HostTensor> = wide.iter().collect();
    let ref_attrs = node.attrs_at(Some(DType::F64));
    let call = Call {
        op: node.op,
        attrs: &ref_attrs,
        node: &resolved,
        inputs: &ins,
        precision: Precision::of(out),
        params,
        off_tier_inputs: false,
    };
    let ev = ops::evaluate(&Reference(reference), &call)?;
    Ok(NodeReference {
        bound: ev.local(params.lambda),
        value: ev.value,
        sigma: ev.sigma,
        accumulates: ev.accumulates,
    })
}

/// What one output is compared with: the reference within its bound, or,
/// for a rasterizer's output, what the implementation's own choice of
/// triangles makes correct (`raster::resolve`), with its pixel counts.
pub struct Expected<'a> {
    pub values: Cow<'a, [f64]>,
    pub bound: Cow<'a, [f64]>,
    pub sigma: Cow<'a, [f64]>,
    pub pixels: Option<PixelCounts>,
}

impl<'a> Expected<'a> {
    /// The reference within its bound, as given.
    fn plain((value, bound, sigma): (&'a HostTensor, &'a [f64], &'a [f64])) -> Expected<'a> {
        Expected {
            values: value.f64_values(),
            bound: Cow::Borrowed(bound),
            sigma: Cow::Borrowed(sigma),
            pixels: None,
        }
    }

    /// `actual`, the output of `node` computed from `inputs`, against the
    /// reference's `value`, `bound` and `sigma` for it.
    pub fn of(
        node: &vips_data::document::GraphNode,
        inputs: &[&HostTensor],
        actual: &HostTensor,
        (value, bound, sigma): (&'a HostTensor, &'a [f64], &'a [f64]),
        params: &TierParams,
    ) -> Result<Expected<'a>, Error> {
        if node.op != Op::Rasterize {
            return Ok(Expected::plain((value, bound, sigma)));
        }
        let precision = Precision::of(actual.spec.dtype).ok_or_else(|| {
            Error::Tensor(format!(
                "`{}` is {}, not a float",
                node.output, actual.spec.dtype
            ))
        })?;
        let wide: Vec<HostTensor> = inputs.iter().map(|t| ops::wide(t)).collect();
        let r = raster::resolve(
            &wide.iter().collect::<Vec<_>>(),
            actual,
            &value.f64_values(),
            params.subpixel_bits,
            precision,
        )?;
        let n = r.bound.len();
        Ok(Expected {
            values: Cow::Owned(r.expected),
            bound: Cow::Owned(r.bound),
            sigma: Cow::Owned(vec![0.0; n]),
            pixels: Some(r.pixels),
        })
    }

    /// As [`Expected::of`] for the stage output `name`, whose producing
    /// node's inputs are in `values` (a rasterizer reads the stage's inputs:
    /// a document rule).
    pub fn of_output(
        stage: &Stage,
        name: &str,
        values: &HashMap<String, HostTensor>,
        reference: &'a StageReference,
        params: &TierParams,
    ) -> Result<Expected<'a>, Error> {
        let refs = (
            &reference.values[name],
            reference.bounds[name].as_slice(),
            reference.sigmas[name].as_slice(),
        );
        let node = stage.graph.iter().rev().find(|n| n.output == name);
        match node {
            Some(node) if node.op == Op::Rasterize => {
                let inputs = node
                    .inputs
                    .iter()
                    .map(|n| {
                        values.get(n).ok_or_else(|| {
                            Error::Tensor(format!("`{name}`: its input `{n}` was not kept"))
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Expected::of(node, &inputs, &values[name], refs, params)
            }
            _ => Ok(Expected::plain(refs)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random(n: usize, seed: u64) -> Vec<f32> {
        // SplitMix64, so each run of the test sees other values than the last.
        let mut z = seed;
        (0..n)
            .map(|_| {
                z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
                let mut x = z;
                x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
                ((x ^ (x >> 31)) >> 11) as f32 / (1u64 << 53) as f32 * 8.0 - 4.0
            })
            .collect()
    }

    #[test]
    fn mixed_float_inputs_are_widened_keeping_every_value_as_fed() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(7, |d| d.as_nanos() as u64);
        let wide = HostTensor::from_vec(&[3, 5], random(15, seed)).expect("15 values");
        let narrow = HostTensor::from_vec(&[3, 5], random(15, seed ^ 1))
            .expect("15 values")
            .cast(DType::BF16);
        let half = narrow.cast(DType::F16);
        let out = widest_float(&[&narrow, &wide]);
        assert!(out.iter().all(|t| t.spec.dtype == DType::F32));
        assert_eq!(out[0].to_f64_vec(), narrow.to_f64_vec(), "seed {seed}");
        assert_eq!(out[1].to_f64_vec(), wide.to_f64_vec(), "seed {seed}");
        // float16 beside bfloat16: float32 holds both.
        let out = widest_float(&[&narrow, &half]);
        assert!(out.iter().all(|t| t.spec.dtype == DType::F32));
        assert_eq!(out[1].to_f64_vec(), half.to_f64_vec(), "seed {seed}");
        // One dtype: nothing is converted.
        let out = widest_float(&[&narrow, &narrow]);
        assert!(out.iter().all(|t| matches!(t, Cow::Borrowed(_))));
    }
}
