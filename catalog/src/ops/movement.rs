//! Data movement: operators that only move elements (crop, concat, reshape,
//! permute), exact at every tier.

use super::{Check, Inferred};
use crate::{Attrs, CatalogError, DType, Node, Op, TensorSpec};

/// A window of every axis, every `steps[d]`-th element from `offsets[d]`
/// (`sizes[d]` of them): a slice with a step.
#[derive(Debug, Clone, PartialEq)]
pub struct Crop {
    pub offsets: Vec<usize>,
    pub sizes: Vec<usize>,
    /// At least 1 (1 where not given).
    pub steps: Vec<usize>,
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
    let ones = vec![1; rank];
    let steps = attrs.ints(c.kernel, "steps")?.unwrap_or(&ones);
    if offsets.len() != rank || sizes.len() != rank || steps.len() != rank {
        let name = if steps.len() != rank {
            "steps"
        } else {
            "offsets"
        };
        return c.attr(
            name,
            format!("`offsets`, `sizes` and `steps` need {rank} values each (the input's rank)"),
        );
    }
    if let Some(d) = (0..rank).find(|&d| steps[d] < 1) {
        return c.attr(
            "steps",
            format!("axis {d}: step {} (steps are at least 1)", steps[d]),
        );
    }
    for d in 0..rank {
        let (o, s, k) = (offsets[d], sizes[d], steps[d]);
        // The last element read: o + (s − 1)·k, which must lie inside.
        let last = (o >= 0 && s >= 1)
            .then(|| (s - 1).checked_mul(k).and_then(|span| o.checked_add(span)))
            .flatten();
        let inside = match (s, last) {
            (0, _) => (0..=x.shape[d] as i64).contains(&o),
            (_, Some(last)) => last < x.shape[d] as i64,
            (_, None) => false,
        };
        if !inside {
            let step = if k == 1 {
                String::new()
            } else {
                format!(" by {k}")
            };
            return c.fail(format!(
                "axis {d}: {s} element(s) from {o}{step} reach outside the input's extent {}",
                x.shape[d]
            ));
        }
    }
    let to_usize = |v: &[i64]| v.iter().map(|&v| v as usize).collect::<Vec<usize>>();
    let crop = Crop {
        offsets: to_usize(offsets),
        sizes: to_usize(sizes),
        steps: to_usize(steps),
    };
    let shape = crop.sizes.clone();
    Ok((Node::Crop(crop), out(shape)))
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

    /// A stepped window may end on the axis's last element and not past
    /// it; steps are at least 1; an empty window may start at the end.
    #[test]
    fn crop_steps_reach_the_last_element_and_no_further() {
        let crop = |o: &[i64], s: &[i64], k: Option<&[i64]>| {
            let mut a = Attrs::new()
                .with("offsets", AttrValue::Ints(o.to_vec()))
                .with("sizes", AttrValue::Ints(s.to_vec()));
            if let Some(k) = k {
                a = a.with("steps", AttrValue::Ints(k.to_vec()));
            }
            Node::infer(Op::Crop, &a, &[f32s(&[8, 5])])
        };
        let (node, out) = crop(&[1, 0], &[3, 5], Some(&[3, 1])).unwrap();
        assert_eq!(out[0].shape, vec![3, 5]);
        let Node::Crop(c) = node else {
            panic!("{node:?}")
        };
        assert_eq!(c.steps, vec![3, 1]);
        let (Node::Crop(c), _) = crop(&[0, 0], &[8, 5], None).unwrap() else {
            panic!("a crop")
        };
        assert_eq!(c.steps, vec![1, 1], "steps default to 1");
        assert!(crop(&[8, 5], &[0, 0], Some(&[2, 2])).is_ok());
        for (o, s, k, says) in [
            (&[2, 0][..], &[3, 5][..], &[3, 1][..], "reach outside"),
            (&[0, 0], &[2, 5], &[0, 1], "at least 1"),
            (&[0, 0], &[2, 5], &[-2, 1], "at least 1"),
            (&[0, 0], &[2, 5], &[1], "need 2 values"),
            (&[0, 0], &[2, 5], &[1], "steps"),
            (&[0, 0], &[2, 2], &[i64::MAX, 1], "reach outside"),
            (&[9, 0], &[0, 5], &[1, 1], "reach outside"),
            (&[0, 0], &[i64::MIN, 5], &[1, 1], "reach outside"),
            (&[-1, 0], &[1, 5], &[1, 1], "reach outside"),
        ] {
            let e = crop(o, s, Some(k)).unwrap_err().to_string();
            assert!(e.contains(says), "{o:?} {s:?} {k:?}: {e}");
        }
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
