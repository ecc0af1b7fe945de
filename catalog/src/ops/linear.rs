//! Linear layers and convolution: matrix products with weights and a bias.

use super::{Check, Inferred};
use crate::{Attrs, DType, Node, Op, TensorSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct Conv2d {
    pub strides: [usize; 2],
    /// top, left, bottom, right
    pub pads: [usize; 4],
    pub dilations: [usize; 2],
    pub groups: usize,
}

pub(super) fn linear(
    _op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let w = &inputs[1];
    c.rank("weight [N, K]", w, 2)?;
    let Some(&k) = x.shape.last() else {
        return c.fail("input must have rank >= 1");
    };
    if w.shape[1] != k {
        return c.fail(format!(
            "input {:?} has K = {k} but weight is {:?} (expected [N, {k}])",
            x.shape, w.shape
        ));
    }
    if let Some(b) = inputs.get(2) {
        if b.shape != [w.shape[0]] {
            return c.fail(format!(
                "bias must have shape [{}], got {:?}",
                w.shape[0], b.shape
            ));
        }
    }
    let mut shape = x.shape.clone();
    *shape.last_mut().expect("rank >= 1 checked") = w.shape[0];
    Ok((Node::Linear, out(shape)))
}

/// `vsdk.matmul`: `a [..., M, K] @ b [..., K, N]`, batch axes broadcast.
pub(super) fn matmul(
    _op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let (a, b) = (&inputs[0], &inputs[1]);
    if a.shape.len() < 2 || b.shape.len() < 2 {
        return c.fail(format!(
            "inputs must have rank >= 2 ([..., M, K] and [..., K, N]), got {:?} and {:?}",
            a.shape, b.shape
        ));
    }
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (m, k, k2, n) = (
        a.shape[ra - 2],
        a.shape[ra - 1],
        b.shape[rb - 2],
        b.shape[rb - 1],
    );
    if k != k2 {
        return c.fail(format!(
            "a {:?} has K = {k} but b {:?} has {k2} rows",
            a.shape, b.shape
        ));
    }
    let Some(mut shape) = crate::broadcast_shapes(&a.shape[..ra - 2], &b.shape[..rb - 2]) else {
        return c.fail(format!(
            "the batch axes of {:?} and {:?} do not broadcast",
            a.shape, b.shape
        ));
    };
    shape.extend([m, n]);
    Ok((Node::Matmul, vec![TensorSpec { dtype, shape }]))
}

pub(super) fn conv2d(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    c.rank("input [N, C, H, W]", x, 4)?;
    let w = &inputs[1];
    c.rank("weight [O, C/groups, kH, kW]", w, 4)?;
    let strides = c.pair(attrs, "strides", 1, 1)?;
    let dilations = c.pair(attrs, "dilations", 1, 1)?;
    let pads = match attrs.ints(c.kernel, "pads")? {
        None => [0; 4],
        Some(&[t, l, b, r]) if t >= 0 && l >= 0 && b >= 0 && r >= 0 => {
            [t as usize, l as usize, b as usize, r as usize]
        }
        Some(v) => {
            return c.attr(
                "pads",
                format!("expected [top, left, bottom, right] >= 0, got {v:?}"),
            )
        }
    };
    let groups = match attrs.int(c.kernel, "groups")? {
        None => 1,
        Some(g) if g >= 1 => g as usize,
        Some(g) => return c.attr("groups", format!("expected >= 1, got {g}")),
    };
    let (cin, cout) = (x.shape[1], w.shape[0]);
    if !cin.is_multiple_of(groups)
        || !cout.is_multiple_of(groups)
        || w.shape[1].checked_mul(groups) != Some(cin)
    {
        return c.fail(format!(
            "input channels {cin}, weight {:?} and groups {groups} do not agree",
            w.shape
        ));
    }
    if let Some(b) = inputs.get(2) {
        if b.shape != [cout] {
            return c.fail(format!("bias must have shape [{cout}], got {:?}", b.shape));
        }
    }
    let mut spatial = [0usize; 2];
    for a in 0..2 {
        let padded = x.shape[2 + a]
            .checked_add(pads[a])
            .and_then(|p| p.checked_add(pads[a + 2]));
        let span = dilations[a]
            .checked_mul(w.shape[2 + a].max(1) - 1)
            .and_then(|s| s.checked_add(1));
        let (Some(padded), Some(span)) = (padded, span) else {
            return c.fail(format!(
                "axis {a}: padding {pads:?} or dilation {dilations:?} overflows"
            ));
        };
        if w.shape[2 + a] == 0 || padded < span {
            return c.fail(format!(
                "kernel {:?} (dilated span {span}) does not fit the padded input {:?}",
                &w.shape[2..],
                &x.shape[2..]
            ));
        }
        spatial[a] = (padded - span) / strides[a] + 1;
    }
    let conv = Conv2d {
        strides,
        pads,
        dilations,
        groups,
    };
    Ok((
        Node::Conv2d(conv),
        out(vec![x.shape[0], cout, spatial[0], spatial[1]]),
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
    fn patch_embedding_conv_shape() {
        let attrs = Attrs::new().with("strides", AttrValue::Ints(vec![14, 14]));
        let inputs = [
            f32s(&[1, 3, 224, 224]),
            f32s(&[384, 3, 14, 14]),
            f32s(&[384]),
        ];
        let (_, out) = Node::infer(Op::Conv2d, &attrs, &inputs).unwrap();
        assert_eq!(out[0].shape, vec![1, 384, 16, 16]);
    }

    #[test]
    fn matmul_broadcasts_batch_axes() {
        let mm =
            |a: &[usize], b: &[usize]| Node::infer(Op::Matmul, &Attrs::new(), &[f32s(a), f32s(b)]);
        assert_eq!(
            mm(&[3, 1, 5, 7], &[4, 7, 6]).unwrap().1[0].shape,
            vec![3, 4, 5, 6]
        );
        assert_eq!(mm(&[5, 7], &[7, 6]).unwrap().1[0].shape, vec![5, 6]);
        assert!(mm(&[5, 7], &[6, 7])
            .unwrap_err()
            .to_string()
            .contains("K = 7"));
        assert!(mm(&[2, 5, 7], &[3, 7, 6])
            .unwrap_err()
            .to_string()
            .contains("broadcast"));
        assert!(mm(&[7], &[7, 6])
            .unwrap_err()
            .to_string()
            .contains("rank >= 2"));
    }
}
