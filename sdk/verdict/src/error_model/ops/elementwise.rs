//! Element-wise operators: the activations' constants and slopes.

use super::*;

/// `silu`'s absolute term, in units of the tier's `tiny` (see `evaluate`).
pub(super) const SILU_TINY: f64 = 32.0;

/// √(2/π), `gelu_tanh`'s scale.
pub(super) const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// The logistic function without overflow: `exp` of a non-positive number only.
pub(super) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The first derivative of an element-wise function of one input at `x`
/// (its limit at ±∞, where the formula would give ∞·0).
pub(super) fn unary_slope(node: &Node, x: f64) -> f64 {
    let d = match node {
        // silu' = s·(1 + x·(1 − s)), s = σ(x)
        Node::Silu => {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        }
        // gelu_tanh' = (1 + t)/2 + x/2·(1 − t²)·a', t = tanh(a), a as in the catalog
        Node::GeluTanh => {
            let a = SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x);
            let t = a.tanh();
            let sech2 = 1.0 - t * t;
            let da = SQRT_2_OVER_PI * (1.0 + 3.0 * 0.044_715 * x * x);
            let tail = if sech2 == 0.0 {
                0.0
            } else {
                0.5 * x * sech2 * da
            };
            0.5 * (1.0 + t) + tail
        }
        Node::Sin => x.cos(),
        Node::Cos => -x.sin(),
        _ => f64::NAN,
    };
    match (d.is_nan(), x) {
        (true, f64::INFINITY) if matches!(node, Node::Silu | Node::GeluTanh) => 1.0,
        (true, f64::NEG_INFINITY) if matches!(node, Node::Silu | Node::GeluTanh) => 0.0,
        _ => d,
    }
}

pub(super) fn square(t: &HostTensor) -> HostTensor {
    dense(
        &t.spec.shape,
        t.f64_values().iter().map(|x| x * x).collect(),
    )
}
