//! Element-wise operators and casts: the values that break naive activations,
//! trigonometry without argument reduction, and rounding at the dtype boundaries.

use super::*;

pub(super) fn elementwise(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![5, 7, 9], vec![7, 9]], 2.0);
    // NumPy broadcasting by shape, and a scalar.
    let (a, b) = (c.normals(&[4, 1, 9], 2.0), c.normals(&[5, 9], 2.0));
    c.add(
        "numpy-broadcast",
        "shapes [4,1,9] and [5,9] broadcast to [4,5,9]",
        none.clone(),
        vec![input(&[4, 1, 9], a, d, None), input(&[5, 9], b, d, None)],
    );
    let n = (1 << 17) + 5;
    let (a, b) = (c.normals(&[n], 2.0), c.normals(&[], 2.0));
    c.add(
        "large",
        "131077 elements (past one block and one grid row) and a rank-0 scalar",
        none.clone(),
        vec![input(&[n], a, d, None), input(&[], b, d, None)],
    );
    // IEEE 754 specials, paired where the result stays finite or is a
    // defined special (no overflow of finite values, no subnormal divisor).
    let (max, tiny, _) = values::limits(d);
    let sp = specials(d);
    let n = 257;
    let mut a: Vec<f64> = (0..n).map(|_| c.rng.pick(&sp)).collect();
    let mut b: Vec<f64> = (0..n).map(|_| c.rng.pick(&sp)).collect();
    // Rounded to the dtype first: the pairs are judged as stored.
    let stored = |v: &[f64]| tensor(&[n], v.to_vec(), d).to_f64_vec();
    (a, b) = (stored(&a), stored(&b));
    let sub = |x: f64| x != 0.0 && x.abs() < tiny;
    for (x, y) in a.iter_mut().zip(b.iter_mut()) {
        let r = match c.op {
            Op::Add => *x + *y,
            Op::Sub => *x - *y,
            Op::Mul => *x * *y,
            _ => *x / *y,
        };
        let scaled = matches!(c.op, Op::Mul | Op::Div);
        if (r.is_finite() && r.abs() > max / 2.0)
            || (scaled && (sub(*x) || sub(*y)) && r.abs() >= tiny)
            || (c.op == Op::Div && sub(*y))
        {
            *y = 1.0;
        }
        if c.op == Op::Mul && (sub(*x) || sub(*y)) {
            *x = x.clamp(-1.0, 1.0);
        }
    }
    c.add(
        "specials",
        "±0, ±Inf, NaN, subnormals, the smallest normal and large values (IEEE 754: x/0 = ±Inf, 0/0 = NaN, NaN propagates)",
        none,
        vec![input(&[n], a, d, None), input(&[n], b, d, None)],
    );
}

pub(super) fn gelu(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![3, 5, 37]], 2.0);
    let n = (1 << 17) + 3;
    let v = c.normals(&[n], 3.0);
    c.add(
        "large",
        "131075 elements (past one block and one grid row)",
        none.clone(),
        vec![input(&[n], v, d, None)],
    );
    let (max, tiny, sub) = values::limits(d);
    let extremes = [
        0.0,
        -0.0,
        f64::NAN,
        sub,
        -sub,
        tiny,
        -tiny,
        -40.0,
        40.0,
        -9.0,
        9.0,
        max / 4.0,
        -max / 4.0,
    ];
    let v = c.with_specials(&[9, 33], 3.0, &extremes);
    c.add(
        "extremes",
        "±0, NaN, subnormals, ±9, ±40 and ±max/4 (erf saturates; x·x overflows)",
        none,
        vec![input(&[9, 33], v, d, None)],
    );
}

/// SiLU and the tanh GELU: GELU's cases, and where `exp` overflows float32
/// (±89, ±100) or `x³` does (±max/4): forms that divide ∞ by ∞ give NaN.
pub(super) fn activation(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![3, 5, 37]], 3.0);
    let n = (1 << 17) + 3;
    let v = c.normals(&[n], 4.0);
    c.add(
        "large",
        "131075 elements (past one block and one grid row)",
        none.clone(),
        vec![input(&[n], v, d, None)],
    );
    let (max, tiny, sub) = values::limits(d);
    let extremes = [
        0.0,
        -0.0,
        f64::NAN,
        sub,
        -sub,
        tiny,
        -tiny,
        -20.0,
        20.0,
        -89.0,
        89.0,
        -100.0,
        100.0,
        max / 4.0,
        -max / 4.0,
    ];
    let v = c.with_specials(&[9, 33], 4.0, &extremes);
    c.add(
        "extremes",
        "±0, NaN, subnormals, ±20, ±89, ±100 and ±max/4 (exp and x³ overflow float32)",
        none,
        vec![input(&[9, 33], v, d, None)],
    );
}

/// The activations of CNNs and LLM blocks, and exp, sqrt, rsqrt: views and a
/// large tensor, then each function's pitfall values (docs/operators.md):
/// NaN through a selection (`fmaxf(NaN, 0)` is 0), the kinks hit exactly
/// (0, ±3, 6, clamp's bounds, all-equal runs of them), `exp` overflowing and
/// going subnormal, `sqrt` and `rsqrt` at ±0, subnormals and negatives.
pub(super) fn unary(c: &mut Cases) {
    let d = c.dtype;
    let (max, tiny, sub) = values::limits(d);
    let positive = matches!(c.op, Op::Sqrt | Op::Rsqrt);
    let attr_sets: Vec<(&str, &str, Attrs)> =
        match c.op {
            Op::Clamp => vec![
            ("relu6", "clamp to [0, 6] (relu6)", bounds(Some(0.0), Some(6.0))),
            (
                "min-only",
                "clamp from below at −0.3 (not a float16 or bfloat16 number: the bound is rounded)",
                bounds(Some(-0.3), None),
            ),
            (
                "max-only",
                "clamp from above at 1.75",
                bounds(None, Some(1.75)),
            ),
        ],
            _ => vec![("", "", Attrs::new())],
        };
    for (tag, what, attrs) in attr_sets {
        let name = |v: &str| {
            if tag.is_empty() {
                v.to_string()
            } else {
                format!("{tag}-{v}")
            }
        };
        let about = |v: &str| {
            if what.is_empty() {
                v.to_string()
            } else {
                format!("{what}; {v}")
            }
        };
        // exp's results stay inside the dtype: an overflow to ∞ is right
        // in IEEE arithmetic but the float64 reference is finite, and the
        // catalog does not judge results beyond the dtype's range (as for
        // `vsdk.mul`); hardswish's x·relu6(x + 3) overflows at max/6 in
        // PyTorch's own form.
        // Random data for sqrt and rsqrt is positive (the extremes keep their
        // negatives and −0, whose NaN and −∞ are the cases' point); NaN stays.
        let exp = c.op == Op::Exp;
        let fit = move |v: &mut Vec<f64>, random: bool| {
            let top = 0.98 * max.ln();
            v.iter_mut().for_each(|x| {
                if positive && random {
                    *x = x.abs();
                }
                if exp && *x > top {
                    *x = top;
                }
            })
        };
        let shape = [3, 5, 37];
        for (variant, text, layout) in c.layouts(&shape) {
            let mut v = c.normals(&shape, 3.0);
            fit(&mut v, true);
            c.add(
                &name(variant),
                &about(text),
                attrs.clone(),
                vec![input(&shape, v, d, Some(layout))],
            );
        }
        let n = (1 << 17) + 3;
        let mut v = c.normals(&[n], 4.0);
        fit(&mut v, true);
        c.add(
            &name("large"),
            &about("131075 elements (past one block and one grid row)"),
            attrs.clone(),
            vec![input(&[n], v, d, None)],
        );
        let mut extremes = vec![0.0, -0.0, f64::NAN, sub, -sub, tiny, -tiny];
        let pitfalls: &[f64] = match c.op {
            // The kinks, exactly, and NaN (above).
            Op::Relu => &[1.0, -1.0],
            Op::Clamp => &[0.0, 6.0, -0.3, 1.75, 6.5, -0.5],
            Op::HardSwish | Op::HardSigmoid => &[-3.0, 3.0, -1.5, 2.999, -2.999, 6.0],
            // Subnormal results (exp(−100) is below float32's smallest
            // normal, exp(−104) among its subnormals) and flushes to 0.
            Op::Exp => &[-88.0, -100.0, -104.0, -110.0],
            // Where exp(±x) or exp(±2x) overflow float32: ∞/∞ forms give NaN.
            Op::Sigmoid | Op::Tanh => &[20.0, -20.0, 45.0, -45.0, 89.0, -89.0, 100.0, -100.0],
            // Roots of negatives are NaN; rsqrt(±0) is ±∞.
            _ => &[-1.0, -4.0, 4.0, 1e-3],
        };
        extremes.extend_from_slice(pitfalls);
        match c.op {
            // The largest results the dtype holds (e^88 in float32).
            Op::Exp => extremes.extend([max.ln() - 0.7, 0.9 * max.ln()]),
            Op::HardSwish => extremes.extend([max / 8.0, -max / 8.0]),
            _ => extremes.extend([max / 4.0, -max / 4.0]),
        }
        let mut v = c.with_specials(&[9, 33], 3.0, &extremes);
        fit(&mut v, false);
        c.add(
            &name("extremes"),
            &about("±0, NaN, subnormals, the kinks and the overflow points of docs/operators.md"),
            attrs.clone(),
            vec![input(&[9, 33], v, d, None)],
        );
        // All-equal runs at a kink: a kernel that picks the wrong side of a
        // tie (relu(−0), clamp at its bound) still gives the value.
        let at: f64 = match c.op {
            Op::Clamp => 6.0,
            Op::HardSwish | Op::HardSigmoid => -3.0,
            _ => 0.0,
        };
        c.add(
            &name("all-at-the-kink"),
            &about("every element at the function's kink or bound"),
            attrs,
            vec![input(&[4, 33], vec![at; 4 * 33], d, None)],
        );
    }
}

fn bounds(min: Option<f64>, max: Option<f64>) -> Attrs {
    let mut a = Attrs::new();
    if let Some(m) = min {
        a = a.with("min", AttrValue::Float(m));
    }
    if let Some(m) = max {
        a = a.with("max", AttrValue::Float(m));
    }
    a
}

/// sin and cos: small arguments, arguments up to ±1000 (TRELLIS's
/// embeddings) and far beyond, where only an accurate argument reduction
/// keeps the result (docs/operators.md).
pub(super) fn trig(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    layout_cases(c, &none, &[vec![3, 5, 37]], 3.0);
    let n = (1 << 17) + 3;
    let v: Vec<f64> = (0..n).map(|_| 2000.0 * c.rng.unit() - 1000.0).collect();
    c.add(
        "large-arguments",
        "131075 arguments uniform in [−1000, 1000] (a one-word float32 2π or __sinf fails here)",
        none.clone(),
        vec![input(&[n], v, d, None)],
    );
    let (max, tiny, sub) = values::limits(d);
    let extremes = [
        0.0,
        -0.0,
        f64::NAN,
        sub,
        -sub,
        tiny,
        -tiny,
        std::f64::consts::PI,
        -std::f64::consts::FRAC_PI_2,
        1e4,
        -3.0e4,
        max / 4.0,
        -max / 4.0,
    ];
    let v = c.with_specials(&[9, 33], 300.0, &extremes);
    c.add(
        "extremes",
        "±0, NaN, subnormals, π, −π/2, 1e4, −3e4 and ±max/4 (argument reduction over the whole range)",
        none,
        vec![input(&[9, 33], v, d, None)],
    );
}

pub(super) fn cast(c: &mut Cases) {
    let from = c.dtype;
    let n = 96;
    for to in DType::ALL {
        let about = match (from.is_float(), to.is_float()) {
            (true, false) => "float to integer: ties to even (2.5 → 2), saturation (−3 → 0, 300 → 255 for uint8), NaN → 0, ±Inf saturate",
            (true, true) => "float to float: ties to even (values on midpoints of the target), overflow to ±Inf, subnormals, NaN",
            (false, _) => "integer conversion: saturation at the target's range",
        };
        let values = if from.is_float() {
            float_cast_values(&mut c.rng, to, n)
        } else {
            int_cast_values(&mut c.rng, from, n)
        };
        let attrs = Attrs::new().with("dtype", AttrValue::Str(to.name().into()));
        let x = match values {
            CastValues::F64(v) => input(&[n], v, from, None),
            // Through int64: every value of `from` exactly.
            CastValues::I64(v) => Input {
                t: HostTensor::from_vec(&[n], v).expect("n values").cast(from),
                layout: None,
            },
        };
        c.add(&format!("to-{}", to.name()), about, attrs, vec![x]);
    }
    // One strided case: casts read views like any kernel.
    let v = float_cast_values(&mut c.rng, DType::I32, n);
    let x = match v {
        CastValues::F64(v) if from.is_float() => v,
        _ => (0..n).map(|_| (c.rng.below(512) as f64) - 256.0).collect(),
    };
    let attrs = Attrs::new().with("dtype", AttrValue::Str(DType::I32.name().into()));
    c.add(
        "to-int32 padded",
        "a strided input (every other element)",
        attrs,
        vec![input(
            &[n / 2],
            x[..n / 2].to_vec(),
            from,
            Some(padded(&[n / 2], 1, 3)),
        )],
    );
}

pub(super) enum CastValues {
    F64(Vec<f64>),
    I64(Vec<i64>),
}

/// Ties, saturation and NaN for an integer target; midpoints, overflow and
/// subnormals of a 16-bit target.
pub(super) fn float_cast_values(rng: &mut Rng, to: DType, n: usize) -> CastValues {
    use vsdk_catalog::rounding::{bf16_from_f64, f16_from_f64};
    let mut v = vec![
        0.5,
        1.5,
        2.5,
        3.5,
        -0.5,
        -1.5,
        -2.5,
        254.5,
        255.5,
        256.0,
        300.0,
        -3.0,
        -0.0,
        1e10,
        -1e10,
        3e9,
        -3e9,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        65504.0,
        65519.0,
        65520.0,
        1e5,
        -1e5,
        2f64.powi(-25),
        3.0 * 2f64.powi(-25),
        1e-6,
        2f64.powi(-140),
    ];
    while v.len() < n {
        let x = match rng.below(3) {
            // Midpoint between a 16-bit value and the next.
            0 if to == DType::BF16 => {
                let a = bf16_from_f64(rng.normal() * 100.0);
                let b = half::bf16::from_bits(a.to_bits() + 1);
                (a.to_f64() + b.to_f64()) / 2.0
            }
            0 => {
                let a = f16_from_f64(rng.normal() * 100.0);
                let b = half::f16::from_bits(a.to_bits() + 1);
                (a.to_f64() + b.to_f64()) / 2.0
            }
            1 => (rng.below(600) as f64) / 2.0 - 150.0,
            _ => rng.normal() * 1000.0,
        };
        v.push(x);
    }
    v.truncate(n);
    CastValues::F64(v)
}

pub(super) fn int_cast_values(rng: &mut Rng, from: DType, n: usize) -> CastValues {
    let (lo, hi): (i64, i64) = match from {
        DType::U8 => (0, 255),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN, i64::MAX),
    };
    let mut v = vec![
        lo,
        hi,
        0,
        -1,
        1,
        255,
        256,
        -129,
        65504,
        65505,
        (1 << 53) + 1,
        -(1 << 24) - 1,
    ];
    while v.len() < n {
        v.push(match rng.below(2) {
            0 => rng.below(600) as i64 - 300,
            _ => (rng.normal() * 1e6) as i64,
        });
    }
    v.truncate(n);
    CastValues::I64(v.into_iter().map(|x| x.clamp(lo, hi)).collect())
}
