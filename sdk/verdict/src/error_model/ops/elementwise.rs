//! Element-wise operators: the functions of one input (their local bounds,
//! σ and propagation) and the activations' constants and slopes.

use super::*;
use vsdk_catalog::Unary;

/// `silu`'s absolute term, in units of the tier's `tiny` (see `evaluate`).
pub(super) const SILU_TINY: f64 = 32.0;

pub(super) use vsdk_catalog::SQRT_2_OVER_PI;

/// The logistic function without overflow: `exp` of a non-positive number only.
pub(super) fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The first derivative of GELU's tanh form, SiLU, sin or cos at `x` (its
/// limit at ±∞, where the formula would give ∞·0).
pub(super) fn unary_slope(f: Unary, x: f64) -> f64 {
    let d = match f {
        // silu' = s·(1 + x·(1 − s)), s = σ(x)
        Unary::Silu => {
            let s = sigmoid(x);
            s * (1.0 + x * (1.0 - s))
        }
        // gelu_tanh' = (1 + t)/2 + x/2·(1 − t²)·a', t = tanh(a), a as in the catalog
        Unary::GeluTanh => {
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
        Unary::Sin => x.cos(),
        Unary::Cos => -x.sin(),
        _ => f64::NAN,
    };
    match (d.is_nan(), x) {
        (true, f64::INFINITY) if matches!(f, Unary::Silu | Unary::GeluTanh) => 1.0,
        (true, f64::NEG_INFINITY) if matches!(f, Unary::Silu | Unary::GeluTanh) => 0.0,
        _ => d,
    }
}

/// Where an implementation's form may cancel: the hard functions computed as
/// `x/6 + 1/2` (PyTorch's is `relu6(x + 3)/6`) lose up to an ulp of ½ (times
/// `|x|` for hardswish) inside `(−3, 3)`.
fn hard_cancellation(f: Unary, x: f64) -> f64 {
    let inside = x.abs() < 3.0;
    match f {
        Unary::HardSigmoid if inside => 0.5,
        Unary::HardSwish if inside => 0.5 * x.abs(),
        _ => 0.0,
    }
}

/// The local bound of an element-wise function of one input at exact inputs
/// `x` with float64 results `v` (all rounding, nothing accumulates).
pub(super) fn unary_local(f: Unary, x: &[f64], v: &[f64], p: Precision) -> Vec<f64> {
    let m: Vec<f64> = match f {
        // GELU's tanh form: a few ulps of 1 + tanh, times |x| / 2, plus the
        // final products; x/2·(1 + tanh) cancels for negative x.
        Unary::GeluTanh => v.iter().zip(x).map(|(v, x)| v.abs() + x.abs()).collect(),
        Unary::HardSwish | Unary::HardSigmoid => v
            .iter()
            .zip(x)
            .map(|(v, &x)| v.abs() + hard_cancellation(f, x))
            .collect(),
        _ => v.iter().map(|v| v.abs()).collect(),
    };
    match f {
        // Selections: the input itself, or a bound stored at the tier.
        Unary::Relu | Unary::Clamp { .. } => v
            .iter()
            .map(|&v| {
                if p.holds(v) {
                    0.0
                } else {
                    p.u * v.abs() + p.tiny
                }
            })
            .collect(),
        // x / (1 + exp(−x)) cancels nothing: a few ulps of the result. The
        // absolute term is 32·tiny: that common form gives −0 where exp(−x)
        // overflows float32 (x < −88.7) while the exact result is up to
        // 22·tiny (docs/operators.md).
        Unary::Silu => rounding(p, v, 4.0, &m)
            .into_iter()
            .map(|b| b + SILU_TINY * p.tiny)
            .collect(),
        // Correctly rounded (IEEE 754), or within an ulp.
        Unary::Sqrt => rounding(p, v, 1.0, &m),
        // exp to 2 ulps (CUDA's expf), passed on undamped by e/(1 + e) or
        // 1/(1 + exp(−x)), then the sum and the quotient; likewise tanhf,
        // expf, and rsqrtf (2 ulps) or 1/sqrtf.
        Unary::Sigmoid | Unary::Tanh | Unary::Exp | Unary::Rsqrt => rounding(p, v, 6.0, &m),
        // A few ulps of the result: accurate sinf/cosf over the whole range
        // (an argument reduction that loses |x|·u does not), the hard
        // functions' three roundings.
        _ => rounding(p, v, 4.0, &m),
    }
}

/// The variance of a correct implementation's error (`stored`: the output's
/// own rounding at the tier).
pub(super) fn unary_variance(
    f: Unary,
    x: &[f64],
    v: &[f64],
    p: Precision,
    stored: impl Fn(f64) -> f64,
) -> Vec<f64> {
    let ua = p.u_acc;
    v.iter()
        .zip(x)
        .map(|(&v, &x)| match f {
            // tanh to about an ulp of 1 + tanh, times |x|/2, and the products.
            Unary::GeluTanh => stored(v) + rounding_var(ua, 2.0 * v.abs() + x.abs()),
            // exp (an ulp, damped by e/(1 + e)), the sum and the quotient,
            // and the flush of the absolute term.
            Unary::Silu => {
                let t = SILU_TINY * p.tiny;
                stored(v) + 2.0 * rounding_var(ua, v) + t * t / 3.0
            }
            Unary::Relu | Unary::Clamp { .. } if p.holds(v) => 0.0,
            Unary::Relu | Unary::Clamp { .. } => rounding_var(p.u, v) + p.tiny * p.tiny / 3.0,
            Unary::Sqrt => stored(v),
            Unary::HardSwish | Unary::HardSigmoid => {
                stored(v) + rounding_var(ua, v.abs() + hard_cancellation(f, x))
            }
            // An ulp or so of the result.
            _ => stored(v) + rounding_var(ua, v),
        })
        .collect()
}

/// Propagates input error variances `vx` through `f` at `x`. GELU's tanh
/// form, SiLU, sin and cos use the slope (sin and cos also the second-order
/// term, E[(f''·δ²/2)²] = ¾·f''²·V² for a normal δ: their arguments carry
/// absolute errors of u·|x| radians, tenths of a radian at 16 bits for |x| in
/// the hundreds, where the slope alone vanishes at the extrema).
///
/// The bound (`lambda` given) uses the secant over the window the error may
/// reach, `w = λ·√V`: `V' = (Δ/λ)²`, `Δ` the larger change of `f` at `x ± w`.
/// That is `f'²·V` where `f` is smooth on the window, and stays right where it
/// is not: a kink of relu, clamp or the hard functions inside the window,
/// `exp` growing faster than its slope, `sqrt` and `rsqrt` near 0 (the window
/// is cut at 0, their domain's edge). σ (`lambda` None) is the secant over
/// `±√V` for the smooth functions, and for the piecewise ones (relu, clamp,
/// the hard functions) the error's mean square for a normal input error
/// ([`kinked_second_moment`]): a secant over `±σ` vanishes once a kink into
/// a flat piece is a σ away, while one error in six still crosses it, and
/// such an element's `t` was a hundred (a flaky rms criterion).
pub(super) fn unary_propagate(f: Unary, x: &[f64], vx: &[f64], lambda: Option<f64>) -> Vec<f64> {
    let k = lambda.unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let kinked = matches!(
        f,
        Unary::Relu | Unary::Clamp { .. } | Unary::HardSigmoid | Unary::HardSwish
    );
    x.iter()
        .zip(vx)
        .map(|(&x, &v)| match f {
            Unary::GeluTanh | Unary::Silu | Unary::Sin | Unary::Cos => {
                let curvature = match f {
                    Unary::Sin => x.sin(),
                    Unary::Cos => x.cos(),
                    _ => 0.0,
                };
                unary_slope(f, x).powi(2) * v + 0.75 * (curvature * v).powi(2)
            }
            _ if v == 0.0 || !x.is_finite() => 0.0,
            _ if kinked && lambda.is_none() => kinked_second_moment(f, x, v),
            _ => {
                let w = k * v.sqrt();
                let lo = match f {
                    Unary::Sqrt | Unary::Rsqrt => (x - w).max(0.0),
                    _ => x - w,
                };
                let y = f.value(x);
                let d = (f.value(x + w) - y).abs().max((f.value(lo) - y).abs());
                // Outside the domain (a negative input to sqrt) the result is
                // NaN whatever the error.
                if d.is_nan() {
                    0.0
                } else {
                    (d / k).powi(2)
                }
            }
        })
        .collect()
}

/// The points where a piecewise function's slope jumps (clamp's missing
/// bound is ±∞).
fn kinks(f: Unary) -> [f64; 2] {
    match f {
        Unary::Relu => [0.0, 0.0],
        Unary::Clamp { min, max } => [min, max],
        _ => [-3.0, 3.0],
    }
}

/// Steps of the rule below: ±`REACH` σ in steps of σ/4.
const REACH: f64 = 6.0;
const STEPS: usize = 49;

/// The normal density at the rule's points, normalised to sum 1.
fn normal_weights() -> &'static [f64; STEPS] {
    static W: std::sync::OnceLock<[f64; STEPS]> = std::sync::OnceLock::new();
    W.get_or_init(|| {
        let mut w = [0.0; STEPS];
        for (i, w) in w.iter_mut().enumerate() {
            let z = point(i);
            *w = (-0.5 * z * z).exp();
        }
        let total: f64 = w.iter().sum();
        w.map(|w| w / total)
    })
}

fn point(i: usize) -> f64 {
    (i as f64 - (STEPS / 2) as f64) * (2.0 * REACH / (STEPS - 1) as f64)
}

/// `E[(f(x + ε) − f(x))²]` for `ε ~ N(0, v)`, by the trapezoid rule on
/// `±6σ` in steps of σ/4 (weights the normal density, normalised: exact for
/// a linear piece to float64's rounding; a kink costs O(step²) of its share).
/// With no kink within 6σ, `f` is a polynomial of degree 2 at most there
/// (hardswish's middle piece): `f′²·v + ¾·f″²·v²` exactly, from the
/// differences over ±σ.
fn kinked_second_moment(f: Unary, x: f64, v: f64) -> f64 {
    if !v.is_finite() {
        return v;
    }
    let (s, y) = (v.sqrt(), f.value(x));
    if kinks(f).iter().all(|k| (k - x).abs() > REACH * s) {
        let (up, down) = (f.value(x + s), f.value(x - s));
        let slope = (up - down) / (2.0 * s);
        let curvature = (up - 2.0 * y + down) / v;
        return slope * slope * v + 0.75 * (curvature * v).powi(2);
    }
    normal_weights()
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let d = f.value(x + point(i) * s) - y;
            w * d * d
        })
        .sum()
}

pub(super) fn square(t: &HostTensor) -> HostTensor {
    dense(
        &t.spec.shape,
        t.f64_values().iter().map(|x| x * x).collect(),
    )
}
