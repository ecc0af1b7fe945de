//! Data movement: operators that only move elements (crop, pad, concat,
//! reshape, permute), exact at every tier (pad's constant is rounded to the
//! dtype once, to nearest).

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

/// How `vsdk.pad` fills the positions outside its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    /// The constant `value`.
    Constant,
    /// Mirrored about the edge element, which is not repeated (`d c b | a b c d | c b a`).
    Reflect,
    /// The edge element repeated (`a a a | a b c d | d d d`).
    Replicate,
    /// The other end of the axis (`b c d | a b c d | a b c`).
    Circular,
}

impl PadMode {
    pub const ALL: [PadMode; 4] = [
        PadMode::Constant,
        PadMode::Reflect,
        PadMode::Replicate,
        PadMode::Circular,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PadMode::Constant => "constant",
            PadMode::Reflect => "reflect",
            PadMode::Replicate => "replicate",
            PadMode::Circular => "circular",
        }
    }
}

/// `begin[d]` elements before and `end[d]` after every axis `d`.
#[derive(Debug, Clone, PartialEq)]
pub struct Pad {
    pub begin: Vec<usize>,
    pub end: Vec<usize>,
    pub mode: PadMode,
    /// The constant of [`PadMode::Constant`] (0 where not given), exact in
    /// an integer dtype, rounded to nearest (ties to even) in a float one.
    pub value: f64,
}

impl Pad {
    /// The input index that output index `i` of axis `d` reads, where the
    /// input's extent on that axis is `n`; None where it is the constant.
    /// (The catalog checked that every mode's index lands inside.)
    pub fn source(&self, d: usize, i: usize, n: usize) -> Option<usize> {
        let j = i as i64 - self.begin[d] as i64;
        let n = n as i64;
        let inside = if (0..n).contains(&j) {
            j
        } else {
            match self.mode {
                PadMode::Constant => return None,
                PadMode::Reflect if j < 0 => -j,
                PadMode::Reflect => 2 * (n - 1) - j,
                PadMode::Replicate => j.clamp(0, n - 1),
                PadMode::Circular => j.rem_euclid(n),
            }
        };
        Some(inside as usize)
    }

    /// The constant in `dtype`'s encoding, in the low bytes (little-endian
    /// order of significance) of the result.
    pub fn fill_bits(&self, dtype: DType) -> u64 {
        let v = self.value;
        match dtype {
            DType::F64 => v.to_bits(),
            DType::F32 => u64::from((v as f32).to_bits()),
            DType::F16 => u64::from(crate::rounding::f16_from_f64(v).to_bits()),
            DType::BF16 => u64::from(crate::rounding::bf16_from_f64(v).to_bits()),
            DType::U8 => v as u8 as u64,
            DType::I32 => u64::from(v as i32 as u32),
            DType::I64 => v as i64 as u64,
        }
    }
}

pub(super) fn pad(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let rank = x.shape.len();
    let Some(pads) = attrs.ints(c.kernel, "pads")? else {
        return c.attr("pads", "is required");
    };
    if pads.len() != 2 * rank {
        return c.attr(
            "pads",
            format!(
                "{} values, need {} (the input's rank {rank}: every axis's start, then every axis's end)",
                pads.len(),
                2 * rank
            ),
        );
    }
    if let Some(p) = pads.iter().find(|&&p| p < 0) {
        return c.attr(
            "pads",
            format!("{p}: pads are at least 0 (a negative pad is a vsdk.crop)"),
        );
    }
    let name = attrs.string(c.kernel, "mode")?.unwrap_or("constant");
    let Some(&mode) = PadMode::ALL.iter().find(|m| m.name() == name) else {
        return c.attr(
            "mode",
            format!("`{name}`: one of constant, reflect, replicate, circular"),
        );
    };
    let value = attrs.float(c.kernel, "value")?.unwrap_or(0.0);
    if value.is_nan() {
        return c.attr("value", "NaN is not a pad value");
    }
    if mode != PadMode::Constant && attrs.get("value").is_some() {
        return c.attr(
            "value",
            format!(
                "only `constant` padding has a value (mode is `{}`)",
                mode.name()
            ),
        );
    }
    if !dtype.is_float() {
        let (lo, hi) = match dtype {
            DType::U8 => (0.0, 255.0),
            DType::I32 => (i32::MIN as f64, i32::MAX as f64),
            _ => (i64::MIN as f64, i64::MAX as f64),
        };
        if value.fract() != 0.0 || !(lo..hi + 1.0).contains(&value) {
            return c.attr(
                "value",
                format!("{value} is not a {dtype} value (a constant is exact in an integer dtype)"),
            );
        }
    }
    let (begin, end): (Vec<usize>, Vec<usize>) = (
        pads[..rank].iter().map(|&p| p as usize).collect(),
        pads[rank..].iter().map(|&p| p as usize).collect(),
    );
    let mut shape = Vec::with_capacity(rank);
    for d in 0..rank {
        let n = x.shape[d];
        let (b, e) = (begin[d], end[d]);
        // Each pad is filled from one pass over the axis (as PyTorch and
        // ONNX Runtime require): reflect mirrors at most n − 1 elements,
        // circular wraps at most n, replicate needs an element to repeat.
        let most = match mode {
            PadMode::Constant => usize::MAX,
            PadMode::Reflect => n.saturating_sub(1),
            PadMode::Circular => n,
            PadMode::Replicate if n == 0 => 0,
            PadMode::Replicate => usize::MAX,
        };
        if b.max(e) > most {
            return c.fail(format!(
                "axis {d}: `{}` padding of {} before and {} after an extent of {n} (at most {most})",
                mode.name(),
                b,
                e
            ));
        }
        let Some(size) = n.checked_add(b).and_then(|s| s.checked_add(e)) else {
            return c.fail(format!("axis {d}: the padded size overflows"));
        };
        shape.push(size);
    }
    let node = Node::Pad(Pad {
        begin,
        end,
        mode,
        value,
    });
    Ok((node, vec![TensorSpec { dtype, shape }]))
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

    /// Each mode's source index on a 4-element axis padded by 3 and 2 (the
    /// pictures in docs/operators.md), and the extents each mode can fill.
    #[test]
    fn pad_sources_and_limits() {
        let pad = |mode: &str, pads: &[i64], n: usize| {
            let a = Attrs::new()
                .with("pads", AttrValue::Ints(pads.to_vec()))
                .with("mode", AttrValue::Str(mode.into()));
            Node::infer(Op::Pad, &a, &[f32s(&[n])])
        };
        for (mode, want) in [
            (
                "constant",
                [
                    None,
                    None,
                    None,
                    Some(0),
                    Some(1),
                    Some(2),
                    Some(3),
                    None,
                    None,
                ],
            ),
            (
                "reflect",
                [
                    Some(3),
                    Some(2),
                    Some(1),
                    Some(0),
                    Some(1),
                    Some(2),
                    Some(3),
                    Some(2),
                    Some(1),
                ],
            ),
            (
                "replicate",
                [
                    Some(0),
                    Some(0),
                    Some(0),
                    Some(0),
                    Some(1),
                    Some(2),
                    Some(3),
                    Some(3),
                    Some(3),
                ],
            ),
            (
                "circular",
                [
                    Some(1),
                    Some(2),
                    Some(3),
                    Some(0),
                    Some(1),
                    Some(2),
                    Some(3),
                    Some(0),
                    Some(1),
                ],
            ),
        ] {
            let (node, out) = pad(mode, &[3, 2], 4).unwrap();
            assert_eq!(out[0].shape, vec![9]);
            let Node::Pad(p) = node else {
                panic!("{node:?}")
            };
            let got: Vec<Option<usize>> = (0..9).map(|i| p.source(0, i, 4)).collect();
            assert_eq!(got, want, "{mode}");
        }
        assert!(pad("reflect", &[4, 0], 4)
            .unwrap_err()
            .to_string()
            .contains("at most 3"));
        assert!(pad("circular", &[0, 5], 4).is_err());
        assert!(pad("circular", &[4, 4], 4).is_ok());
        assert!(pad("replicate", &[1, 0], 0).is_err());
        assert!(pad("constant", &[2, 2], 0).is_ok());
        assert!(pad("constant", &[-1, 0], 4)
            .unwrap_err()
            .to_string()
            .contains("crop"));
        assert!(pad("constant", &[1], 4)
            .unwrap_err()
            .to_string()
            .contains("need 2"));
        assert!(pad("wrap", &[1, 1], 4)
            .unwrap_err()
            .to_string()
            .contains("one of"));
        let huge = pad("constant", &[i64::MAX, i64::MAX], 4).unwrap_err();
        assert!(huge.to_string().contains("overflows"), "{huge}");
        let int_value = |dtype: DType, v: f64| {
            let a = Attrs::new()
                .with("pads", AttrValue::Ints(vec![1, 1]))
                .with("value", AttrValue::Float(v));
            Node::infer(Op::Pad, &a, &[TensorSpec::new(dtype, &[3])])
        };
        assert!(int_value(DType::U8, 255.0).is_ok());
        assert!(int_value(DType::U8, 256.0).is_err());
        assert!(int_value(DType::I32, 0.5).is_err());
        let reflect_with_value = Attrs::new()
            .with("pads", AttrValue::Ints(vec![1, 1]))
            .with("mode", AttrValue::Str("reflect".into()))
            .with("value", AttrValue::Float(5.0));
        for dtype in [DType::I32, DType::F32] {
            let e = Node::infer(
                Op::Pad,
                &reflect_with_value,
                &[TensorSpec::new(dtype, &[3])],
            );
            assert!(
                e.unwrap_err().to_string().contains("only `constant`"),
                "{dtype}"
            );
        }
        assert!(int_value(DType::F32, f64::NAN).is_err());
        let (Node::Pad(p), _) = int_value(DType::BF16, 1.0 / 3.0).unwrap() else {
            panic!("a pad")
        };
        assert_eq!(
            p.fill_bits(DType::BF16),
            0x3eab,
            "1/3 to nearest in bfloat16"
        );
        assert_eq!(p.fill_bits(DType::F32), u64::from((1.0f32 / 3.0).to_bits()));
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
