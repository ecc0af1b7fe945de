//! Normalisation: layer norm, RMS norm and softmax over an axis; inference
//! batch norm with running statistics per channel; group norm.

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

pub(super) fn batch_norm(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    if x.shape.len() < 2 {
        return c.fail(format!(
            "input must be [N, C, ...] (rank >= 2), got shape {:?}",
            x.shape
        ));
    }
    let eps = attrs.float(c.kernel, "eps")?.unwrap_or(1e-5);
    // eps > 0 keeps a channel of variance 0 defined.
    if !(eps > 0.0 && eps.is_finite()) {
        return c.attr("eps", format!("expected a finite value > 0, got {eps}"));
    }
    let ch = x.shape[1];
    for (i, name) in [(1, "mean"), (2, "var"), (3, "weight"), (4, "bias")] {
        if inputs[i].shape != [ch] {
            return c.fail(format!(
                "{name} must have shape [{ch}] (one per channel), got {:?}",
                inputs[i].shape
            ));
        }
    }
    Ok((
        Node::BatchNorm { eps },
        vec![TensorSpec {
            dtype,
            shape: x.shape.clone(),
        }],
    ))
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

/// `vsdk.group_norm`: inputs x `[N, C, ...]`, weight `[C]`, bias `[C]`.
pub(super) fn group_norm(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    if x.shape.len() < 2 {
        return c.fail(format!(
            "input must be [N, C, ...] (rank >= 2), got {:?}",
            x.shape
        ));
    }
    let channels = x.shape[1];
    let Some(groups) = attrs.int(c.kernel, "groups")? else {
        return c.attr("groups", "is required");
    };
    if groups < 1 || channels as i64 % groups != 0 {
        return c.attr(
            "groups",
            format!("{groups} does not divide the {channels} channels into equal groups"),
        );
    }
    let eps = attrs.float(c.kernel, "eps")?.unwrap_or(1e-5);
    if !(eps >= 0.0 && eps.is_finite()) {
        return c.attr("eps", format!("expected a finite value >= 0, got {eps}"));
    }
    for (i, name) in [(1, "weight"), (2, "bias")] {
        if inputs[i].shape != [channels] {
            return c.fail(format!(
                "{name} must have shape [{channels}] (the channels), got {:?}",
                inputs[i].shape
            ));
        }
    }
    let node = Node::GroupNorm {
        groups: groups as usize,
        eps,
    };
    Ok((
        node,
        vec![TensorSpec {
            dtype,
            shape: x.shape.clone(),
        }],
    ))
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

    #[test]
    fn batch_norm_takes_per_channel_statistics_and_a_positive_eps() {
        let x = TensorSpec::new(DType::F32, &[2, 3, 5, 7]);
        let c3 = TensorSpec::new(DType::F32, &[3]);
        let five = |x: &TensorSpec, p: &TensorSpec| {
            vec![x.clone(), p.clone(), p.clone(), p.clone(), p.clone()]
        };
        let eps = Attrs::new().with("eps", AttrValue::Float(1e-3));
        let (n, out) = Node::infer(Op::BatchNorm, &eps, &five(&x, &c3)).unwrap();
        assert_eq!((n, out), (Node::BatchNorm { eps: 1e-3 }, vec![x.clone()]));
        let (n, _) = Node::infer(Op::BatchNorm, &Attrs::new(), &five(&x, &c3)).unwrap();
        assert_eq!(n, Node::BatchNorm { eps: 1e-5 });
        // Rank 2 ([N, C]) is a batch norm too; rank 1 is not.
        let x2 = TensorSpec::new(DType::F32, &[4, 3]);
        assert!(Node::infer(Op::BatchNorm, &Attrs::new(), &five(&x2, &c3)).is_ok());
        let x1 = TensorSpec::new(DType::F32, &[3]);
        let err = Node::infer(Op::BatchNorm, &Attrs::new(), &five(&x1, &c3)).unwrap_err();
        assert!(err.to_string().contains("[N, C, ...]"), "{err}");
        let c4 = TensorSpec::new(DType::F32, &[4]);
        let mut wrong = five(&x, &c3);
        wrong[2] = c4;
        let err = Node::infer(Op::BatchNorm, &Attrs::new(), &wrong).unwrap_err();
        assert!(err.to_string().contains("var must have shape [3]"), "{err}");
        for bad in [0.0, -1e-5, f64::INFINITY] {
            let a = Attrs::new().with("eps", AttrValue::Float(bad));
            assert!(
                Node::infer(Op::BatchNorm, &a, &five(&x, &c3)).is_err(),
                "{bad}"
            );
        }
        assert!(Node::infer(Op::BatchNorm, &Attrs::new(), &five(&x, &c3)[..4]).is_err());
    }

    #[test]
    fn group_norm_groups_divide_the_channels() {
        let gn = |groups: i64, c: usize, wc: usize| {
            let attrs = Attrs::new().with("groups", AttrValue::Int(groups));
            let f = |s: &[usize]| TensorSpec::new(DType::F32, s);
            Node::infer(
                Op::GroupNorm,
                &attrs,
                &[f(&[2, c, 3, 3]), f(&[wc]), f(&[wc])],
            )
        };
        let (node, out) = gn(4, 12, 12).unwrap();
        assert_eq!(out[0].shape, vec![2, 12, 3, 3]);
        assert_eq!(
            node,
            Node::GroupNorm {
                groups: 4,
                eps: 1e-5
            }
        );
        assert!(gn(5, 12, 12)
            .unwrap_err()
            .to_string()
            .contains("equal groups"));
        assert!(gn(0, 12, 12).is_err());
        assert!(
            gn(4, 12, 4).unwrap_err().to_string().contains("[12]"),
            "per channel, not per group"
        );
    }
}
