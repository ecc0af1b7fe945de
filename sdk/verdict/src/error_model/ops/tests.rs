use super::*;
use rand::{Rng, SeedableRng};
use vsdk_catalog::Unary;

/// The slopes that propagate errors through the element-wise functions
/// agree with central differences of the functions themselves, and
/// have their limits at ±∞.
#[test]
fn unary_slopes_are_the_derivatives() {
    let seed = rand::random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let gelu_tanh =
        |x: f64| 0.5 * x * (1.0 + (SQRT_2_OVER_PI * (x + 0.044_715 * x * x * x)).tanh());
    let fs: [(Unary, &dyn Fn(f64) -> f64); 4] = [
        (Unary::Silu, &|x: f64| x * sigmoid(x)),
        (Unary::GeluTanh, &gelu_tanh),
        (Unary::Sin, &f64::sin),
        (Unary::Cos, &f64::cos),
    ];
    for (node, f) in fs {
        for _ in 0..2000 {
            let x: f64 = rng.gen_range(-12.0..12.0);
            let h = 1e-5;
            let numeric = (f(x + h) - f(x - h)) / (2.0 * h);
            let slope = unary_slope(node, x);
            assert!(
                (slope - numeric).abs() <= 1e-6 * (1.0 + numeric.abs()),
                "{node:?} at {x}: {slope} vs {numeric}"
            );
        }
    }
    for node in [Unary::Silu, Unary::GeluTanh] {
        assert_eq!(unary_slope(node, f64::INFINITY), 1.0);
        assert_eq!(unary_slope(node, f64::NEG_INFINITY), 0.0);
        assert_eq!(unary_slope(node, 1e300), 1.0);
        assert_eq!(unary_slope(node, -1e300), 0.0);
    }
    assert!(sigmoid(-800.0) == 0.0 && sigmoid(800.0) == 1.0);
}

/// The secant rule: the slope squared times the variance where the function
/// is smooth on the window (central differences of the float64 definitions,
/// at random points), the right share of the window at a kink, and the
/// domain's edge respected.
#[test]
fn unary_propagation_is_the_slope_where_smooth_and_the_secant_at_kinks() {
    let seed = rand::random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let smooth = [
        (Unary::Sigmoid, -12.0..12.0),
        (Unary::Tanh, -5.0..5.0),
        (Unary::Exp, -30.0..30.0),
        (Unary::Sqrt, 0.01..100.0),
        (Unary::Rsqrt, 0.01..100.0),
        (Unary::HardSwish, -2.9..2.9),
        (Unary::HardSigmoid, -2.9..2.9),
        (Unary::Relu, 0.01..50.0),
        (
            Unary::Clamp {
                min: -1.0,
                max: 2.0,
            },
            -0.99..1.99,
        ),
    ];
    for (f, range) in smooth {
        for _ in 0..500 {
            let x: f64 = rng.gen_range(range.clone());
            // Windows small enough for the curvature (first order in w), large
            // enough for float64's cancellation in the differences.
            let v = (1e-6 * (1.0 + x.abs())).powi(2);
            let h = 1e-6 * (1.0 + x.abs());
            let fx = |x| f.value(x);
            let slope = (fx(x + h) - fx(x - h)) / (2.0 * h);
            let curvature = (fx(x + h) - 2.0 * fx(x) + fx(x - h)) / (h * h);
            for lambda in [None, Some(4.0)] {
                // The secant's slope is the slope up to the curvature over
                // half the window (and float64's noise).
                let w = lambda.unwrap_or(1.0) * v.sqrt();
                let got = unary_propagate(f, &[x], &[v], lambda)[0].sqrt() / v.sqrt();
                assert!(
                    (got - slope.abs()).abs()
                        <= 1.01 * curvature.abs() * w / 2.0 + 1e-5 * (1.0 + slope.abs()),
                    "{f:?} at {x}, λ {lambda:?}: slope {got} vs {slope}"
                );
            }
        }
    }
    // Half the window beyond relu's kink: a quarter of the variance.
    let v = 0.04;
    let got = unary_propagate(Unary::Relu, &[-0.1], &[v], Some(1.0))[0];
    assert!((got - 0.01).abs() < 1e-12, "{got}");
    // Far below the kink: nothing passes; an input as large as the window
    // below clamp's upper bound passes its share.
    assert_eq!(
        unary_propagate(Unary::Relu, &[-1.0], &[v], Some(1.0))[0],
        0.0
    );
    assert_eq!(unary_propagate(Unary::Relu, &[-1.3], &[v], None)[0], 0.0);
    let c = Unary::Clamp { min: 0.0, max: 6.0 };
    let got = unary_propagate(c, &[6.1], &[v], Some(1.0))[0];
    assert!((got - 0.01).abs() < 1e-12, "{got}");
    // sqrt at 0: the window is cut at 0 (√w, not NaN); rsqrt's is infinite.
    let got = unary_propagate(Unary::Sqrt, &[0.0], &[v], None)[0];
    assert!((got - 0.2).abs() < 1e-12, "{got}");
    assert_eq!(
        unary_propagate(Unary::Rsqrt, &[0.0], &[v], None)[0],
        f64::INFINITY
    );
    // Outside the domain, and at infinite inputs: nothing to propagate.
    assert_eq!(unary_propagate(Unary::Sqrt, &[-4.0], &[v], None)[0], 0.0);
    assert_eq!(
        unary_propagate(Unary::Exp, &[f64::INFINITY], &[v], None)[0],
        0.0
    );
}

/// σ through a kink is the error's mean square for a normal input error:
/// against a Monte Carlo estimate for inputs on either side of each kink of
/// the piecewise functions, from on it to 3σ away (where the secant over ±σ
/// gave nothing while one error in six to one in a thousand crosses).
#[test]
fn sigma_through_a_kink_is_the_mean_square_of_a_normal_error() {
    let seed = rand::random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // Box–Muller: standard normal draws without another dependency.
    let mut normal = || {
        let (u1, u2): (f64, f64) = (rng.gen_range(f64::EPSILON..1.0), rng.gen());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    };
    let draws: Vec<f64> = (0..1_000_000).map(|_| normal()).collect();
    let clamp = Unary::Clamp {
        min: -1.0,
        max: 2.0,
    };
    for (f, kinks) in [
        (Unary::Relu, &[0.0][..]),
        (clamp, &[-1.0, 2.0]),
        (Unary::HardSigmoid, &[-3.0, 3.0]),
        (Unary::HardSwish, &[-3.0, 3.0]),
    ] {
        for &kink in kinks {
            // Kinks on and between the rule's points (steps of σ/4), and
            // far away (the linear shortcut).
            for offset in [
                -9.0, -3.0, -2.0, -1.7, -1.0, -0.5, -0.3, 0.0, 0.3, 0.5, 1.0, 1.7, 2.0, 3.0, 9.0,
            ] {
                let s = 0.05;
                let x = kink + offset * s;
                let y = f.value(x);
                let mc = draws
                    .iter()
                    .map(|z| (f.value(x + z * s) - y).powi(2))
                    .sum::<f64>()
                    / draws.len() as f64;
                let got = unary_propagate(f, &[x], &[s * s], None)[0];
                // Five times Monte Carlo's own spread (a million draws): under
                // a percent near the kink and on a smooth piece, 2 % at 1.7σ,
                // 6 % at 3σ (a thousandth of the draws cross).
                let tol = match offset.abs() {
                    o if o >= 9.0 => 0.01,
                    o if o >= 3.0 => 0.35,
                    o if o >= 1.5 => 0.1,
                    _ => 0.04,
                };
                assert!(
                    (got - mc).abs() <= tol * mc + 1e-15,
                    "{f:?} at the kink {kink} {offset:+}σ: {got:e} vs Monte Carlo {mc:e}"
                );
            }
        }
    }
}

/// Attention's rules a block of query rows at a time give what they give
/// over the whole matrix (up to the upper rounding of float32 products,
/// which depends on each block's largest operand).
#[test]
fn attention_in_query_blocks_is_attention_whole() {
    let seed = rand::random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (heads, lq, lk, d) = (2, 37, 23, 8);
    let mut draw = |shape: &[usize], s: f64| {
        let n = shape.iter().product();
        let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-s..s)).collect();
        HostTensor::from_vec(shape, v).unwrap()
    };
    let (q, k, v) = (
        draw(&[1, heads, lq, d], 3.0),
        draw(&[1, heads, lk, d], 3.0),
        draw(&[1, heads, lk, d], 2.0),
    );
    let vars = [
        draw(&[1, heads, lq, d], 1e-12),
        draw(&[1, heads, lk, d], 1e-12),
        draw(&[1, heads, lk, d], 1e-12),
    ]
    .map(|t| {
        HostTensor::from_vec(
            &t.spec.shape,
            t.f64_values().iter().map(|x| x.abs()).collect::<Vec<_>>(),
        )
        .unwrap()
    });
    let p = Precision::of(DType::F32).unwrap();
    let inputs = [&q, &k, &v];
    let close = |a: &[f64], b: &[f64], what: &str| {
        assert_eq!(a.len(), heads * lq * d, "{what}");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= 1e-6 * x.abs().max(y.abs()),
                "{what} {i}: {x} vs {y}"
            );
        }
    };
    let node = vsdk_catalog::Sdpa {
        scale: 0.3,
        causal_offset: None,
        heads: (1, 1),
        mask: false,
    };
    let whole = sdpa_in_blocks(&inputs, &node, None, p, usize::MAX);
    let whole_prop = sdpa_in_blocks(&inputs, &node, Some(&vars), p, usize::MAX).2;
    let whole_sigma = sdpa_sigma_in_blocks(&inputs, &node, p, usize::MAX);
    // One row, a few rows, and blocks that do not divide the rows.
    for block in [1, 5 * lk, 8 * lk + 3] {
        let blocked = sdpa_in_blocks(&inputs, &node, None, p, block);
        close(&blocked.0, &whole.0, "fixed");
        close(&blocked.1, &whole.1, "scaled");
        close(
            &sdpa_in_blocks(&inputs, &node, Some(&vars), p, block).2,
            &whole_prop,
            "propagated",
        );
        close(
            &sdpa_sigma_in_blocks(&inputs, &node, p, block),
            &whole_sigma,
            "sigma",
        );
    }
}

/// The float32 product of non-negative matrices never falls below the
/// exact one (float64 stands in for it: its error is 2⁻²⁹ of float32's),
/// and exceeds it by little; values float32 cannot hold take float64.
#[test]
fn nonneg_matmul_is_an_upper_bound() {
    let seed = rand::random();
    eprintln!("seed {seed}");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for (m, k, n) in [(3, 1, 2), (17, 64, 9), (5, 4099, 7)] {
        for scale in [1e-30, 1e-3, 1.0, 1e12] {
            let mut draw = |len: usize| -> Vec<f64> {
                (0..len).map(|_| rng.gen::<f64>().powi(4) * scale).collect()
            };
            let (a, b) = (draw(m * k), draw(k * n));
            for transposed in [false, true] {
                let exact = matmul(&a, &b, (m, k, n), transposed);
                let bound = nonneg_matmul(&a, &b, (m, k, n), transposed);
                for (e, u) in exact.iter().zip(bound.iter()) {
                    assert!(u >= e, "{m}x{k}x{n} at {scale}: {u} < {e}");
                    assert!(
                        *u <= e * (1.0 + 1e-3) + 1e-30,
                        "{m}x{k}x{n} at {scale}: {u} far above {e}"
                    );
                }
            }
        }
    }
    // Past float32's range: float64, exactly.
    let big = vec![1e30; 4];
    assert_eq!(
        nonneg_matmul(&big, &big, (2, 2, 2), false),
        matmul(&big, &big, (2, 2, 2), false)
    );
    assert!(nonneg_slack(1.0, f64::INFINITY, 4).is_none());
    // One factor past float32 (squares of |x| > 1.8e19), the other 0:
    // float32 would give inf · 0 = NaN.
    let (huge, zero) = (vec![1e39; 4], vec![0.0; 4]);
    assert_eq!(nonneg_matmul(&huge, &zero, (2, 2, 2), false), vec![0.0; 4]);
}
