use super::*;
use rand::{Rng, SeedableRng};

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
    let fs: [(Node, &dyn Fn(f64) -> f64); 4] = [
        (Node::Silu, &|x: f64| x * sigmoid(x)),
        (Node::GeluTanh, &gelu_tanh),
        (Node::Sin, &f64::sin),
        (Node::Cos, &f64::cos),
    ];
    for (node, f) in fs {
        for _ in 0..2000 {
            let x: f64 = rng.gen_range(-12.0..12.0);
            let h = 1e-5;
            let numeric = (f(x + h) - f(x - h)) / (2.0 * h);
            let slope = unary_slope(&node, x);
            assert!(
                (slope - numeric).abs() <= 1e-6 * (1.0 + numeric.abs()),
                "{node:?} at {x}: {slope} vs {numeric}"
            );
        }
    }
    for node in [Node::Silu, Node::GeluTanh] {
        assert_eq!(unary_slope(&node, f64::INFINITY), 1.0);
        assert_eq!(unary_slope(&node, f64::NEG_INFINITY), 0.0);
        assert_eq!(unary_slope(&node, 1e300), 1.0);
        assert_eq!(unary_slope(&node, -1e300), 0.0);
    }
    assert!(sigmoid(-800.0) == 0.0 && sigmoid(800.0) == 1.0);
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
    let whole = sdpa_in_blocks(&inputs, 0.3, None, p, usize::MAX);
    let whole_prop = sdpa_in_blocks(&inputs, 0.3, Some(&vars), p, usize::MAX).2;
    let whole_sigma = sdpa_sigma_in_blocks(&inputs, 0.3, p, usize::MAX);
    // One row, a few rows, and blocks that do not divide the rows.
    for block in [1, 5 * lk, 8 * lk + 3] {
        let blocked = sdpa_in_blocks(&inputs, 0.3, None, p, block);
        close(&blocked.0, &whole.0, "fixed");
        close(&blocked.1, &whole.1, "scaled");
        close(
            &sdpa_in_blocks(&inputs, 0.3, Some(&vars), p, block).2,
            &whole_prop,
            "propagated",
        );
        close(
            &sdpa_sigma_in_blocks(&inputs, 0.3, p, block),
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
