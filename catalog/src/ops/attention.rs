//! Attention: scaled dot-product attention, softmax(scale · q kᵀ) v.

use super::{Check, Inferred};
use crate::{Attrs, DType, Node, Op, TensorSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct Sdpa {
    pub scale: f64,
}

pub(super) fn sdpa(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
    let rank = q.shape.len();
    if rank < 2 || k.shape.len() != rank || v.shape.len() != rank {
        return c.fail(format!(
            "q, k, v must share a rank >= 2, got {:?}, {:?}, {:?}",
            q.shape, k.shape, v.shape
        ));
    }
    let b = rank - 2;
    let ok = q.shape[..b] == k.shape[..b]
        && k.shape[..b] == v.shape[..b]
        && q.shape[b + 1] == k.shape[b + 1]
        && k.shape[b] == v.shape[b]
        && k.shape[b] > 0;
    if !ok {
        return c.fail(format!(
            "expected q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv] with Lk > 0, got {:?}, {:?}, {:?}",
            q.shape, k.shape, v.shape
        ));
    }
    let d = q.shape[b + 1];
    let scale = attrs
        .float(c.kernel, "scale")?
        .unwrap_or(1.0 / (d.max(1) as f64).sqrt());
    if !scale.is_finite() {
        return c.attr("scale", format!("must be finite, got {scale}"));
    }
    let mut shape = q.shape.clone();
    shape[b + 1] = v.shape[b + 1];
    Ok((Node::Sdpa(Sdpa { scale }), out(shape)))
}
