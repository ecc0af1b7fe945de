//! Data movement: operators that only move elements (crop, concat, reshape,
//! permute), exact at every tier.

use super::{Check, Inferred};
use crate::{Attrs, CatalogError, DType, Node, Op, TensorSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct Crop {
    pub offsets: Vec<usize>,
    pub sizes: Vec<usize>,
}

pub(super) fn crop(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let rank = x.shape.len();
    let (Some(offsets), Some(sizes)) = (
        attrs.ints(c.kernel, "offsets")?,
        attrs.ints(c.kernel, "sizes")?,
    ) else {
        return c.attr("offsets", "`offsets` and `sizes` are required");
    };
    if offsets.len() != rank || sizes.len() != rank {
        return c.attr(
            "offsets",
            format!("`offsets` and `sizes` need {rank} values each (the input's rank)"),
        );
    }
    for d in 0..rank {
        let (o, s) = (offsets[d], sizes[d]);
        let end = o.checked_add(s).filter(|_| o >= 0 && s >= 0);
        if end.is_none_or(|e| e as u64 > x.shape[d] as u64) {
            return c.fail(format!(
                "axis {d}: window [{o}, {o}+{s}) is outside the input's extent {}",
                x.shape[d]
            ));
        }
    }
    let sizes: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
    let crop = Crop {
        offsets: offsets.iter().map(|&o| o as usize).collect(),
        sizes: sizes.clone(),
    };
    Ok((Node::Crop(crop), out(sizes)))
}

pub(super) fn concat(
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
        return c.fail("cannot concatenate scalars");
    }
    let axis = c.axis("axis", attrs.int(c.kernel, "axis")?.unwrap_or(0), rank)?;
    let mut shape = x.shape.clone();
    for (i, t) in inputs.iter().enumerate().skip(1) {
        let agrees =
            t.shape.len() == rank && (0..rank).all(|d| d == axis || t.shape[d] == x.shape[d]);
        if !agrees {
            return c.fail(format!(
                "input {i} has shape {:?}, input 0 has {:?}: they must agree except on axis {axis}",
                t.shape, x.shape
            ));
        }
        let Some(sum) = shape[axis].checked_add(t.shape[axis]) else {
            return c.fail(format!("the size of axis {axis} overflows"));
        };
        shape[axis] = sum;
    }
    Ok((Node::Concat { axis }, out(shape)))
}

pub(super) fn reshape(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let Some(target) = attrs.ints(c.kernel, "shape")? else {
        return c.attr("shape", "is required");
    };
    let shape = reshape_target(c, target, x.numel())?;
    Ok((Node::Reshape, out(shape)))
}

pub(super) fn permute(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let Some(perm) = attrs.ints(c.kernel, "perm")? else {
        return c.attr("perm", "is required");
    };
    let rank = x.shape.len();
    let mut seen = vec![false; rank];
    let valid = perm.len() == rank
        && perm.iter().all(|&p| {
            (0..rank as i64).contains(&p) && !std::mem::replace(&mut seen[p as usize], true)
        });
    if !valid {
        return c.attr(
            "perm",
            format!("{perm:?} is not a permutation of 0..{rank}"),
        );
    }
    let perm: Vec<usize> = perm.iter().map(|&p| p as usize).collect();
    let shape = perm.iter().map(|&p| x.shape[p]).collect();
    Ok((Node::Permute { perm }, out(shape)))
}

fn reshape_target(c: &Check, target: &[i64], numel: usize) -> Result<Vec<usize>, CatalogError> {
    let inferred: Vec<usize> = (0..target.len()).filter(|&i| target[i] == -1).collect();
    if inferred.len() > 1 || target.iter().any(|&d| d < -1) {
        return c.attr(
            "shape",
            format!("{target:?}: dimensions are >= 0, with at most one -1"),
        );
    }
    let known: Vec<usize> = target
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .collect();
    let Some(known) = crate::checked_numel(&known) else {
        return c.attr(
            "shape",
            format!("{target:?}: the element count overflows (the input has {numel})"),
        );
    };
    let mut shape: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(&i) = inferred.first() {
        if known == 0 || !numel.is_multiple_of(known) {
            return c.attr("shape", format!("{target:?} cannot hold {numel} elements"));
        }
        shape[i] = numel / known;
    }
    if crate::checked_numel(&shape) != Some(numel) {
        return c.attr(
            "shape",
            format!("{target:?} holds a different number of elements than the input ({numel})"),
        );
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    #[test]
    fn reshape_infers_one_dimension() {
        let attrs = Attrs::new().with("shape", AttrValue::Ints(vec![-1, 384]));
        let (_, out) = Node::infer(Op::Reshape, &attrs, &[f32s(&[1, 384, 16, 16])]).unwrap();
        assert_eq!(out[0].shape, vec![256, 384]);
        let bad = Attrs::new().with("shape", AttrValue::Ints(vec![-1, 5]));
        assert!(Node::infer(Op::Reshape, &bad, &[f32s(&[4, 4])]).is_err());
    }
}
