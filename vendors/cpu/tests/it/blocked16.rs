//! Element-wise operators on 16-bit floats a block at a time: the same bits as
//! widening whole tensors, computing in float32 and rounding once.

use half::{bf16, f16};
use ndarray::{ArrayD, IxDyn};
use rand::Rng;
use vsdk_catalog::{Node, Unary};
use vsdk_provider_cpu::kernels::blocked16::run;
use vsdk_provider_cpu::kernels::narrow::Narrow;
use vsdk_provider_cpu::kernels::Real;

const RELU6: Unary = Unary::Clamp { min: 0.0, max: 6.0 };

fn random<N: Narrow>(r: &mut impl Rng, shape: &[usize], from: fn(f32) -> N) -> ArrayD<N> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| from(r.gen_range(-4.0..4.0)))
}

/// Blocked results equal widening whole tensors with ndarray's
/// broadcasting, computing in float32 and rounding once, bit for bit.
fn same_bits<N: Narrow + PartialEq + std::fmt::Debug>(from: fn(f32) -> N) {
    let mut r = crate::rng("blocked16");
    let wide = |t: &ArrayD<N>| t.mapv(|v| v.widen());
    // The node, its operands' shapes and the output's.
    type Case = (Node, &'static [usize], &'static [usize], &'static [usize]);
    let cases: [Case; 19] = [
        (Node::Add, &[257, 384], &[384], &[257, 384]),
        (Node::Mul, &[1, 257, 384], &[1, 1, 384], &[1, 257, 384]),
        (Node::Sub, &[3, 50, 7], &[3, 50, 7], &[3, 50, 7]),
        (Node::Div, &[100_000], &[100_000], &[100_000]),
        (Node::Add, &[5], &[2, 3, 5], &[2, 3, 5]),
        (Node::Gelu, &[257, 1536], &[], &[257, 1536]),
        (
            Node::Unary(Unary::GeluTanh),
            &[3, 20_000],
            &[],
            &[3, 20_000],
        ),
        (Node::Unary(Unary::Silu), &[7, 5], &[], &[7, 5]),
        (Node::Unary(Unary::Sin), &[40_000], &[], &[40_000]),
        (Node::Unary(Unary::Cos), &[2, 3, 999], &[], &[2, 3, 999]),
        (Node::Unary(Unary::Relu), &[3, 1000], &[], &[3, 1000]),
        (Node::Unary(RELU6), &[17, 33], &[], &[17, 33]),
        (Node::Unary(Unary::Sigmoid), &[20_001], &[], &[20_001]),
        (Node::Unary(Unary::Tanh), &[9, 99], &[], &[9, 99]),
        (Node::Unary(Unary::Exp), &[5, 5, 5], &[], &[5, 5, 5]),
        (Node::Unary(Unary::Sqrt), &[1000], &[], &[1000]),
        (Node::Unary(Unary::Rsqrt), &[2, 500], &[], &[2, 500]),
        (Node::Unary(Unary::HardSwish), &[4, 4096], &[], &[4, 4096]),
        (Node::Unary(Unary::HardSigmoid), &[64], &[], &[64]),
    ];
    for (node, sa, sb, so) in cases {
        let a = random(&mut r, sa, from);
        let b = random(&mut r, sb, from);
        let expected: ArrayD<f32> = match node {
            Node::Add => &wide(&a) + &wide(&b),
            Node::Sub => &wide(&a) - &wide(&b),
            Node::Mul => &wide(&a) * &wide(&b),
            Node::Div => &wide(&a) / &wide(&b),
            _ => {
                let x = wide(&a);
                let mut y = x.clone();
                let (xs, ys) = (x.as_slice().unwrap(), y.as_slice_mut().unwrap());
                match node {
                    Node::Unary(f) => f32::unary(f, xs, ys),
                    _ => f32::gelu(xs, ys),
                }
                y
            }
        };
        let ins = if sb.is_empty() {
            vec![a.view()]
        } else {
            vec![a.view(), b.view()]
        };
        let mut out = ArrayD::from_elem(IxDyn(so), from(f32::NAN));
        assert!(
            run(&node, &ins, &mut out.view_mut()).is_some(),
            "{node:?} {sa:?} {sb:?}"
        );
        // Bits: sqrt and rsqrt of negative inputs are NaN.
        let bits = |t: &ArrayD<N>| t.mapv(|v| v.widen().to_bits());
        let expected = expected.mapv(from);
        assert_eq!(bits(&out), bits(&expected), "{node:?} {sa:?} {sb:?}");
    }
    // A column broadcast does not repeat whole: the general path's.
    let a = random(&mut r, &[257, 1], from);
    let b = random(&mut r, &[257, 384], from);
    let mut out = ArrayD::from_elem(IxDyn(&[257, 384]), from(0.0));
    assert!(run(&Node::Add, &[a.view(), b.view()], &mut out.view_mut()).is_none());
}

#[test]
fn bfloat16_blocks_give_the_same_bits() {
    same_bits(bf16::from_f32);
}

#[test]
fn float16_blocks_give_the_same_bits() {
    same_bits(f16::from_f32);
}
