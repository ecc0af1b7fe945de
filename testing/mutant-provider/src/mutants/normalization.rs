//! Normalisation: LayerNorm with another eps, order, or variance, RMSNorm
//! with eps under the root or without γ, softmax without its maximum.

use super::{named, read, resolved, write, Rewrite};
use vsdk_catalog::{Node, Op};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{KernelCall, ProviderError};

/// `layer_norm_eps`: eps 1e-5, whatever the call says.
pub(super) fn layer_norm_eps(keep: &mut Rewrite, _inputs: &[vsdk_tensor_t]) -> bool {
    keep.attrs.retain(|a| !named(a, c"eps"));
    keep.attrs.push(vsdk_attr_t {
        name: c"eps".as_ptr(),
        kind: VSDK_ATTR_FLOAT,
        reserved: 0,
        value: vsdk_attr_value_t { f: 1e-5 },
    });
    true
}

/// Softmax over the last axis without subtracting the maximum (as above).
pub(super) fn softmax_no_max(call: &KernelCall) -> Result<(), ProviderError> {
    let x = read(&call.inputs[0])?;
    let d = *call.inputs[0].shape.last().unwrap_or(&1);
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let e: Vec<f32> = row.iter().map(|v| v.exp()).collect();
        let z: f32 = e.iter().sum();
        out.extend(e.iter().map(|v| v / z));
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// LayerNorm with the one-pass variance `E[x²] − μ²` in float32: it cancels
/// catastrophically when the mean is large next to the spread.
pub(super) fn layer_norm_one_pass(call: &KernelCall) -> Result<(), ProviderError> {
    let (x, g, b) = (
        read(&call.inputs[0])?,
        read(&call.inputs[1])?,
        read(&call.inputs[2])?,
    );
    let (axis, eps) = match resolved(call, Op::LayerNorm)? {
        Node::LayerNorm { axis, eps } => (axis, eps as f32),
        _ => unreachable!("layer_norm"),
    };
    let d: usize = call.inputs[0].shape[axis..].iter().product();
    let mut out = vec![0.0f32; x.len()];
    for (row, o) in x.chunks(d.max(1)).zip(out.chunks_mut(d.max(1))) {
        let (s1, s2) = row
            .iter()
            .fold((0.0f32, 0.0f32), |(a, b), &v| (a + v, b + v * v));
        let mu = s1 / d as f32;
        let var = (s2 / d as f32 - mu * mu).max(0.0);
        let s = (var + eps).sqrt();
        for (j, (o, v)) in o.iter_mut().zip(row).enumerate() {
            *o = (v - mu) / s * g[j] + b[j];
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// How a mutant `vsdk.rms_norm` goes wrong.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum RmsBug {
    /// `x·γ/√(mean(x²) + 1e-2)`: the LLaMA/T5 form, eps added under the
    /// root, with an eps large enough to show on rows of unit scale.
    EpsAdded,
    /// `x/max(‖x‖, eps)·√d`, γ never read.
    NoGamma,
}

/// `vsdk.rms_norm` in float32 with one of [`RmsBug`].
pub(super) fn rms_norm(call: &KernelCall, bug: RmsBug) -> Result<(), ProviderError> {
    let (x, g) = (read(&call.inputs[0])?, read(&call.inputs[1])?);
    let eps = match resolved(call, Op::RmsNorm)? {
        Node::RmsNorm { eps } => eps as f32,
        _ => unreachable!("rms_norm"),
    };
    let d = call.inputs[0].shape.last().copied().unwrap_or(1).max(1);
    let mut out = vec![0.0f32; x.len()];
    for (r, (row, o)) in x.chunks(d).zip(out.chunks_mut(d)).enumerate() {
        let q = row.iter().map(|v| v * v).sum::<f32>();
        let scale = match bug {
            RmsBug::EpsAdded => 1.0 / (q / d as f32 + 1e-2).sqrt(),
            RmsBug::NoGamma => (d as f32).sqrt() / q.sqrt().max(eps),
        };
        let at = (r * d) % g.len().max(1);
        for (j, (o, v)) in o.iter_mut().zip(row).enumerate() {
            *o = match bug {
                RmsBug::EpsAdded => v * scale * g[at + j],
                RmsBug::NoGamma => v * scale,
            };
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// LayerNorm dividing the squared deviations by N − 1 (Bessel's correction,
/// `torch.var`'s default) instead of N.
pub(super) fn layer_norm_unbiased(call: &KernelCall) -> Result<(), ProviderError> {
    layer_norm_f32(call, true)
}

/// LayerNorm in float32 with plain loops: the mean and the centred variance
/// summed one element after the other (the largest error of the orders a
/// correct kernel uses), `(x − μ)/s·γ + β`.
pub(super) fn layer_norm_sequential(call: &KernelCall) -> Result<(), ProviderError> {
    layer_norm_f32(call, false)
}

/// LayerNorm in float32 as above; with `unbiased`, dividing by N − 1.
fn layer_norm_f32(call: &KernelCall, unbiased: bool) -> Result<(), ProviderError> {
    let (x, g, b) = (
        read(&call.inputs[0])?,
        read(&call.inputs[1])?,
        read(&call.inputs[2])?,
    );
    let (axis, eps) = match resolved(call, Op::LayerNorm)? {
        Node::LayerNorm { axis, eps } => (axis, eps as f32),
        _ => unreachable!("layer_norm"),
    };
    let d: usize = call.inputs[0].shape[axis..].iter().product();
    let mut out = vec![0.0f32; x.len()];
    for (row, o) in x.chunks(d.max(1)).zip(out.chunks_mut(d.max(1))) {
        let mu = row.iter().sum::<f32>() / d as f32;
        let n = if unbiased { d as f32 - 1.0 } else { d as f32 };
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / n;
        let s = (var + eps).sqrt();
        for (j, (o, v)) in o.iter_mut().zip(row).enumerate() {
            *o = (v - mu) / s * g[j] + b[j];
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}
