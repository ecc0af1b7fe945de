//! Element-wise operators: one output element from the input elements at its
//! index (cast, the four binary operators with broadcasting, the activations).

use super::{Check, Inferred};
use crate::shape::broadcast_shapes;
use crate::{Attrs, DType, Node, Op, TensorSpec};

pub(super) fn cast(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    _dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let Some(name) = attrs.string(c.kernel, "dtype")? else {
        return c.attr("dtype", "is required");
    };
    let Some(to) = DType::from_name(name) else {
        return c.attr("dtype", format!("unknown dtype `{name}`"));
    };
    Ok((
        Node::Cast(to),
        vec![TensorSpec {
            dtype: to,
            shape: x.shape.clone(),
        }],
    ))
}

pub(super) fn binary(
    op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let Some(shape) = broadcast_shapes(&x.shape, &inputs[1].shape) else {
        return c.fail(format!(
            "shapes {:?} and {:?} do not broadcast",
            x.shape, inputs[1].shape
        ));
    };
    let node = match op {
        Op::Add => Node::Add,
        Op::Sub => Node::Sub,
        Op::Mul => Node::Mul,
        _ => Node::Div,
    };
    Ok((node, out(shape)))
}

/// The activations and other functions of one input: the shape is kept.
pub(super) fn unary(
    op: Op,
    _c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let node = match op {
        Op::Gelu => Node::Gelu,
        Op::GeluTanh => Node::GeluTanh,
        Op::Silu => Node::Silu,
        Op::Sin => Node::Sin,
        _ => Node::Cos,
    };
    Ok((node, out(x.shape.clone())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    #[test]
    fn unary_activations_keep_the_shape_and_take_no_attributes() {
        for (op, name, node) in [
            (Op::Gelu, "vsdk.gelu", Node::Gelu),
            (Op::GeluTanh, "vsdk.gelu_tanh", Node::GeluTanh),
            (Op::Silu, "vsdk.silu", Node::Silu),
            (Op::Sin, "vsdk.sin", Node::Sin),
            (Op::Cos, "vsdk.cos", Node::Cos),
        ] {
            assert_eq!(Op::lookup(name, 1).unwrap(), op);
            assert_eq!(
                op.dtypes(),
                &[DType::F16, DType::BF16, DType::F32, DType::F64]
            );
            for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
                let x = TensorSpec::new(dtype, &[2, 0, 5]);
                let (n, out) = Node::infer(op, &Attrs::new(), std::slice::from_ref(&x)).unwrap();
                assert_eq!((n, out), (node.clone(), vec![x]));
            }
            let i32s = TensorSpec::new(DType::I32, &[3]);
            assert!(Node::infer(op, &Attrs::new(), &[i32s]).is_err(), "{name}");
            let two = [f32s(&[3]), f32s(&[3])];
            assert!(Node::infer(op, &Attrs::new(), &two).is_err(), "{name}");
            let attr = Attrs::new().with("approximate", AttrValue::Str("tanh".into()));
            let err = Node::infer(op, &attr, &[f32s(&[3])]).unwrap_err();
            assert!(err.to_string().contains("`approximate`"), "{err}");
        }
    }
}
