//! Normalisation over an axis: layer norm, RMS norm, softmax.

use super::{Check, Inferred};
use crate::{Attrs, DType, Node, Op, TensorSpec};

pub(super) fn layer_norm(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let rank = x.shape.len();
    if rank == 0 {
        return c.fail("input must have rank >= 1");
    }
    let axis = c.axis("axis", attrs.int(c.kernel, "axis")?.unwrap_or(-1), rank)?;
    let eps = attrs.float(c.kernel, "eps")?.unwrap_or(1e-5);
    if !(eps >= 0.0 && eps.is_finite()) {
        return c.attr("eps", format!("expected a finite value >= 0, got {eps}"));
    }
    let normalized = &x.shape[axis..];
    for (i, name) in [(1, "weight"), (2, "bias")] {
        if inputs[i].shape != normalized {
            return c.fail(format!(
                "{name} must have the normalized shape {normalized:?}, got {:?}",
                inputs[i].shape
            ));
        }
    }
    Ok((Node::LayerNorm { axis, eps }, out(x.shape.clone())))
}

pub(super) fn rms_norm(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let rank = x.shape.len();
    if rank == 0 {
        return c.fail("input must have rank >= 1");
    }
    let eps = attrs.float(c.kernel, "eps")?.unwrap_or(1e-12);
    // eps > 0 keeps an all-zero row defined (0 / eps = 0).
    if !(eps > 0.0 && eps.is_finite()) {
        return c.attr("eps", format!("expected a finite value > 0, got {eps}"));
    }
    let g = &inputs[1].shape;
    if g.is_empty() || g.len() > rank || g[..] != x.shape[rank - g.len()..] {
        return c.fail(format!(
            "gamma must have a trailing shape of the input {:?} (at least its last axis), got {g:?}",
            x.shape
        ));
    }
    Ok((Node::RmsNorm { eps }, out(x.shape.clone())))
}

pub(super) fn softmax(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let rank = x.shape.len();
    if rank == 0 {
        return c.fail("input must have rank >= 1");
    }
    let axis = c.axis("axis", attrs.int(c.kernel, "axis")?.unwrap_or(-1), rank)?;
    Ok((Node::Softmax { axis }, out(x.shape.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    #[test]
    fn rms_norm_takes_gamma_of_a_trailing_shape() {
        let x = f32s(&[2, 5, 4, 8]);
        for g in [&[8][..], &[4, 8], &[5, 4, 8], &[2, 5, 4, 8]] {
            let (node, out) = Node::infer(Op::RmsNorm, &Attrs::new(), &[x.clone(), f32s(g)])
                .unwrap_or_else(|e| panic!("{g:?}: {e}"));
            assert_eq!(node, Node::RmsNorm { eps: 1e-12 });
            assert_eq!(out[0], x);
        }
        for g in [&[][..], &[4], &[5, 8], &[1, 8], &[3, 2, 5, 4, 8]] {
            let err = Node::infer(Op::RmsNorm, &Attrs::new(), &[x.clone(), f32s(g)]).unwrap_err();
            assert!(err.to_string().contains("gamma"), "{g:?}: {err}");
        }
        for eps in [0.0, -1e-6, f64::INFINITY] {
            let attrs = Attrs::new().with("eps", AttrValue::Float(eps));
            assert!(Node::infer(Op::RmsNorm, &attrs, &[x.clone(), f32s(&[8])]).is_err());
        }
        let attrs = Attrs::new().with("eps", AttrValue::Float(1e-6));
        let (node, _) = Node::infer(Op::RmsNorm, &attrs, &[x.clone(), f32s(&[8])]).unwrap();
        assert_eq!(node, Node::RmsNorm { eps: 1e-6 });
        assert!(Node::infer(Op::RmsNorm, &Attrs::new(), &[f32s(&[]), f32s(&[])]).is_err());
    }
}
