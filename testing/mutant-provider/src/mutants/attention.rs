//! Attention: another scale, a streaming softmax, a softmax summed in
//! bfloat16 or without its maximum.

use super::{named, read, resolved, write, Rewrite};
use half::bf16;
use vsdk_catalog::{Node, Op};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{KernelCall, ProviderError};

/// `attention_scale`: scale 1/sqrt(384), whatever the call says.
pub(super) fn attention_scale(keep: &mut Rewrite, _inputs: &[vsdk_tensor_t]) -> bool {
    keep.attrs.retain(|a| !named(a, c"scale"));
    keep.attrs.push(vsdk_attr_t {
        name: c"scale".as_ptr(),
        kind: VSDK_ATTR_FLOAT,
        reserved: 0,
        value: vsdk_attr_value_t {
            f: 1.0 / 384f64.sqrt(),
        },
    });
    true
}

/// An attention call's operands in float32, its sizes (batch, queries, key
/// width, keys, value width) and its scale.
struct Attention {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    sizes: [usize; 5],
    scale: f32,
}

impl Attention {
    fn read(call: &KernelCall) -> Result<Attention, ProviderError> {
        let qs = &call.inputs[0].shape;
        let r = qs.len();
        let scale = match resolved(call, Op::Sdpa)? {
            Node::Sdpa(s) => s.scale as f32,
            _ => unreachable!("sdpa"),
        };
        Ok(Attention {
            q: read(&call.inputs[0])?,
            k: read(&call.inputs[1])?,
            v: read(&call.inputs[2])?,
            sizes: [
                qs[..r - 2].iter().product(),
                qs[r - 2],
                qs[r - 1],
                call.inputs[1].shape[r - 2],
                call.inputs[2].shape[r - 1],
            ],
            scale,
        })
    }
}

/// Attention with a streaming softmax (FlashAttention's recurrence): one pass
/// over the keys, rescaling the running sum and output at each new maximum.
pub(super) fn sdpa_online(call: &KernelCall) -> Result<(), ProviderError> {
    let Attention {
        q,
        k,
        v,
        sizes: [batch, lq, d, lk, dv],
        scale,
    } = Attention::read(call)?;
    let mut out = vec![0.0f32; batch * lq * dv];
    for b in 0..batch {
        for i in 0..lq {
            let qi = &q[(b * lq + i) * d..][..d];
            let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
            let acc = &mut out[(b * lq + i) * dv..][..dv];
            for j in 0..lk {
                let kj = &k[(b * lk + j) * d..][..d];
                let s = scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>();
                let m_new = m.max(s);
                let corr = (m - m_new).exp();
                let p = (s - m_new).exp();
                l = l * corr + p;
                let vj = &v[(b * lk + j) * dv..][..dv];
                for (a, vv) in acc.iter_mut().zip(vj) {
                    *a = *a * corr + p * vv;
                }
                m = m_new;
            }
            acc.iter_mut().for_each(|a| *a /= l);
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// Attention in float32 whose softmax weights come from `weights`: a row's
/// logits in, its exponentials and their sum out (the mutants differ there).
fn attention_with(
    call: &KernelCall,
    weights: impl Fn(&[f32]) -> (Vec<f32>, f32),
) -> Result<(), ProviderError> {
    let Attention {
        q,
        k,
        v,
        sizes: [batch, lq, d, lk, dv],
        scale,
    } = Attention::read(call)?;
    let mut out = vec![0.0f32; batch * lq * dv];
    for b in 0..batch {
        for i in 0..lq {
            let qi = &q[(b * lq + i) * d..][..d];
            let s: Vec<f32> = (0..lk)
                .map(|j| {
                    let kj = &k[(b * lk + j) * d..][..d];
                    scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>()
                })
                .collect();
            let (e, z) = weights(&s);
            let acc = &mut out[(b * lq + i) * dv..][..dv];
            for (j, ej) in e.iter().enumerate() {
                let vj = &v[(b * lk + j) * dv..][..dv];
                for (a, vv) in acc.iter_mut().zip(vj) {
                    *a += ej / z * vv;
                }
            }
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// Attention whose softmax adds its exponentials in bfloat16 (each partial
/// sum rounded to 8 bits), the rest in float32.
pub(super) fn sdpa_bf16_sum(call: &KernelCall) -> Result<(), ProviderError> {
    attention_with(call, |s| {
        let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = s.iter().map(|x| (x - m).exp()).collect();
        let z = e
            .iter()
            .fold(bf16::ZERO, |a, &x| bf16::from_f32(a.to_f32() + x))
            .to_f32();
        (e, z)
    })
}

/// Attention whose softmax exponentiates the logits as they are, without
/// subtracting the row's maximum: `exp` overflows to Inf past 88.7 in
/// float32, and Inf/Inf is NaN.
pub(super) fn sdpa_no_max(call: &KernelCall) -> Result<(), ProviderError> {
    attention_with(call, |s| {
        let e: Vec<f32> = s.iter().map(|x| x.exp()).collect();
        let z = e.iter().sum();
        (e, z)
    })
}
