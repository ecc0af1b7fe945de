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

/// An element-wise function of one input besides GELU (docs/operators.md,
/// "Element-wise functions of one input").
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Unary {
    GeluTanh,
    Silu,
    Sin,
    Cos,
    Relu,
    /// Bounds as given (∓∞ where absent); `min <= max`, neither NaN.
    Clamp {
        min: f64,
        max: f64,
    },
    Sigmoid,
    Tanh,
    Exp,
    Sqrt,
    Rsqrt,
    HardSwish,
    HardSigmoid,
}

/// √(2/π), the tanh GELU's scale.
pub const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// `x / (1 + exp(−y))`, computed so that `exp` never overflows: for `y < 0`
/// it is `x·e / (1 + e)` with `e = exp(y)`. SiLU is `y = x`, the tanh GELU
/// `y = 2a` (`x/2·(1 + tanh(a)) = x·σ(2a)`, without `1 + tanh`'s cancellation),
/// sigmoid `x = 1`.
fn times_sigmoid(x: f64, y: f64) -> f64 {
    if y >= 0.0 {
        x / (1.0 + (-y).exp())
    } else {
        let e = y.exp();
        x * e / (1.0 + e)
    }
}

impl Unary {
    /// `f(x)` in float64: docs/operators.md's definitions, in the forms the
    /// reference computes (the CPU provider's float64 kernels, whose results
    /// golden files hold, and the error model's propagation).
    pub fn value(self, x: f64) -> f64 {
        let relu6 = |y: f64| y.clamp(0.0, 6.0);
        match self {
            Unary::Silu => times_sigmoid(x, x),
            Unary::GeluTanh => times_sigmoid(x, 2.0 * SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)),
            Unary::Sin => x.sin(),
            Unary::Cos => x.cos(),
            // NaN passes through; −0 and +0 both give +0.
            Unary::Relu if x > 0.0 || x.is_nan() => x,
            Unary::Relu => 0.0,
            Unary::Clamp { min, max } => x.clamp(min, max),
            Unary::Sigmoid => times_sigmoid(1.0, x),
            Unary::Tanh => x.tanh(),
            Unary::Exp => x.exp(),
            Unary::Sqrt => x.sqrt(),
            Unary::Rsqrt => 1.0 / x.sqrt(),
            // PyTorch's forms: x·relu6(x + 3)/6 and relu6(x + 3)/6.
            Unary::HardSwish => x * relu6(x + 3.0) / 6.0,
            Unary::HardSigmoid => relu6(x + 3.0) / 6.0,
        }
    }

    /// Piecewise-linear functions: exact but for their products (hardswish's
    /// `x·(x + 3)/6`), with kinks where an input error may cross a corner.
    pub fn is_piecewise_linear(self) -> bool {
        matches!(
            self,
            Unary::Relu | Unary::Clamp { .. } | Unary::HardSwish | Unary::HardSigmoid
        )
    }
}

/// The activations and other functions of one input: the shape is kept.
pub(super) fn unary(
    op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let f = match op {
        Op::Gelu => return Ok((Node::Gelu, out(x.shape.clone()))),
        Op::GeluTanh => Unary::GeluTanh,
        Op::Silu => Unary::Silu,
        Op::Sin => Unary::Sin,
        Op::Cos => Unary::Cos,
        Op::Relu => Unary::Relu,
        Op::Clamp => {
            let min = attrs.float(c.kernel, "min")?;
            let max = attrs.float(c.kernel, "max")?;
            if min.is_none() && max.is_none() {
                return c.attr("min", "one of `min` and `max` is required");
            }
            let (min, max) = (
                min.unwrap_or(f64::NEG_INFINITY),
                max.unwrap_or(f64::INFINITY),
            );
            if min.is_nan() || max.is_nan() {
                return c.attr("min", "the bounds must not be NaN");
            }
            if min > max {
                return c.attr("max", format!("max {max} is below min {min}"));
            }
            Unary::Clamp { min, max }
        }
        Op::Sigmoid => Unary::Sigmoid,
        Op::Tanh => Unary::Tanh,
        Op::Exp => Unary::Exp,
        Op::Sqrt => Unary::Sqrt,
        Op::Rsqrt => Unary::Rsqrt,
        Op::HardSwish => Unary::HardSwish,
        Op::HardSigmoid => Unary::HardSigmoid,
        _ => return c.fail("not an element-wise function of one input"),
    };
    Ok((Node::Unary(f), out(x.shape.clone())))
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
            (Op::GeluTanh, "vsdk.gelu_tanh", Node::Unary(Unary::GeluTanh)),
            (Op::Silu, "vsdk.silu", Node::Unary(Unary::Silu)),
            (Op::Sin, "vsdk.sin", Node::Unary(Unary::Sin)),
            (Op::Cos, "vsdk.cos", Node::Unary(Unary::Cos)),
            (Op::Relu, "vsdk.relu", Node::Unary(Unary::Relu)),
            (Op::Sigmoid, "vsdk.sigmoid", Node::Unary(Unary::Sigmoid)),
            (Op::Tanh, "vsdk.tanh", Node::Unary(Unary::Tanh)),
            (Op::Exp, "vsdk.exp", Node::Unary(Unary::Exp)),
            (Op::Sqrt, "vsdk.sqrt", Node::Unary(Unary::Sqrt)),
            (Op::Rsqrt, "vsdk.rsqrt", Node::Unary(Unary::Rsqrt)),
            (
                Op::HardSwish,
                "vsdk.hardswish",
                Node::Unary(Unary::HardSwish),
            ),
            (
                Op::HardSigmoid,
                "vsdk.hardsigmoid",
                Node::Unary(Unary::HardSigmoid),
            ),
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

    #[test]
    fn clamp_takes_one_or_both_bounds_in_order() {
        let x = [f32s(&[4, 3])];
        let call = |attrs: Attrs| Node::infer(Op::Clamp, &attrs, &x).map(|(n, _)| n);
        let relu6 = Attrs::new()
            .with("min", AttrValue::Int(0))
            .with("max", AttrValue::Float(6.0));
        assert_eq!(
            call(relu6).unwrap(),
            Node::Unary(Unary::Clamp { min: 0.0, max: 6.0 })
        );
        let above = Attrs::new().with("min", AttrValue::Float(-1.5));
        assert_eq!(
            call(above).unwrap(),
            Node::Unary(Unary::Clamp {
                min: -1.5,
                max: f64::INFINITY
            })
        );
        let err = call(Attrs::new()).unwrap_err().to_string();
        assert!(err.contains("one of `min` and `max` is required"), "{err}");
        let crossed = Attrs::new()
            .with("min", AttrValue::Float(2.0))
            .with("max", AttrValue::Float(1.0));
        let err = call(crossed).unwrap_err().to_string();
        assert!(err.contains("max 1 is below min 2"), "{err}");
        let nan = Attrs::new().with("max", AttrValue::Float(f64::NAN));
        assert!(call(nan).unwrap_err().to_string().contains("NaN"));
        let typed = Attrs::new().with("min", AttrValue::Str("0".into()));
        assert!(call(typed).is_err());
    }
}
