//! Element-wise operators on float16 and bfloat16 a block at a time: each
//! block of the output is widened, computed and narrowed while it is in
//! cache, in one parallel pass, where the general path (`via_f32`) makes
//! three passes over whole float32 copies. The arithmetic is the same
//! float32 operation per element, rounded once, so the bits are too.

use super::elementwise::repeated;
use super::narrow::Narrow;
use super::{scratch, Real};
use ndarray::{ArrayViewD, ArrayViewMutD};
use rayon::prelude::*;
use vsdk_catalog::Node;

/// Output elements per block (64 KiB of float32), rounded to whole periods
/// of the repeated operands.
const BLOCK: usize = 1 << 14;

/// Runs `node` when it is element-wise and each operand is compact with the
/// output's shape, or repeats whole along it (a bias, a scale); `None` leaves
/// the call to the general path.
pub fn run<N: Narrow>(
    node: &Node,
    ins: &[ArrayViewD<N>],
    out: &mut ArrayViewMutD<N>,
) -> Option<()> {
    fn zip2(f: impl Fn(f32, f32) -> f32) -> impl Fn(&[&[f32]], &mut [f32]) {
        move |a, r| {
            for ((r, &x), &y) in r.iter_mut().zip(a[0]).zip(a[1]) {
                *r = f(x, y);
            }
        }
    }
    match node {
        Node::Add => blocks(ins, out, zip2(|x, y| x + y)),
        Node::Sub => blocks(ins, out, zip2(|x, y| x - y)),
        Node::Mul => blocks(ins, out, zip2(|x, y| x * y)),
        Node::Div => blocks(ins, out, zip2(|x, y| x / y)),
        Node::Gelu => blocks(ins, out, |a: &[&[f32]], r: &mut [f32]| f32::gelu(a[0], r)),
        &Node::Unary(f) => blocks(ins, out, move |a: &[&[f32]], r: &mut [f32]| {
            f32::unary(f, a[0], r)
        }),
        _ => None,
    }
}

/// An operand: the output's worth of elements, widened a block at a time,
/// or one period widened once and repeated to a block's length.
enum Operand<'a, N> {
    Full(&'a [N]),
    Tiled(Vec<f32>),
}

fn blocks<N: Narrow>(
    ins: &[ArrayViewD<N>],
    out: &mut ArrayViewMutD<N>,
    compute: impl Fn(&[&[f32]], &mut [f32]) + Sync,
) -> Option<()> {
    let shape = out.shape().to_vec();
    let o = out.as_slice_mut()?;
    let n = o.len();
    if n == 0 {
        return Some(());
    }
    // Per operand: None for the output's shape, or its repeating period.
    let repeats: Vec<Option<&[N]>> = ins
        .iter()
        .map(|t| match t.shape() == shape {
            true => Some(None),
            false => repeated(t, &shape).map(Some),
        })
        .collect::<Option<_>>()?;
    // Blocks start at multiples of every repeated operand's length.
    let period = repeats.iter().flatten().map(|r| r.len()).max().unwrap_or(1);
    let divides = |p: usize| p > 0 && period.is_multiple_of(p);
    if !n.is_multiple_of(period) || !repeats.iter().flatten().all(|r| divides(r.len())) {
        return None;
    }
    let block = ((BLOCK / period).max(1) * period).min(n);
    let operands: Vec<Operand<N>> = ins
        .iter()
        .zip(&repeats)
        .map(|(t, r)| match r {
            None => t.as_slice().map(Operand::Full),
            Some(r) => {
                let mut tiled = vec![0f32; block];
                for chunk in tiled.chunks_mut(r.len()) {
                    N::widen_slice(&r[..chunk.len()], chunk);
                }
                Some(Operand::Tiled(tiled))
            }
        })
        .collect::<Option<_>>()?;
    o.par_chunks_mut(block).enumerate().for_each(|(b, o)| {
        let (at, len) = (b * block, o.len());
        let mut wide: Vec<Vec<f32>> = Vec::with_capacity(operands.len() + 1);
        for op in &operands {
            if let Operand::Full(s) = op {
                let mut w = scratch::take(len);
                N::widen_slice(&s[at..at + len], &mut w[..len]);
                wide.push(w);
            }
        }
        let mut result = scratch::take(len);
        let mut full = wide.iter();
        let args: Vec<&[f32]> = operands
            .iter()
            .map(|op| match op {
                Operand::Full(_) => &full.next().expect("widened above")[..len],
                Operand::Tiled(t) => &t[..len],
            })
            .collect();
        compute(&args, &mut result[..len]);
        N::narrow_slice(&result[..len], o);
        wide.into_iter().chain([result]).for_each(scratch::give);
    });
    Some(())
}

#[cfg(test)]
mod tests {
    use super::super::elementwise::Unary;
    use super::*;
    use half::{bf16, f16};
    use ndarray::{ArrayD, IxDyn};
    use rand::{Rng, SeedableRng};

    const RELU6: Unary = Unary::Clamp { min: 0.0, max: 6.0 };

    fn random<N: Narrow>(r: &mut impl Rng, shape: &[usize], from: fn(f32) -> N) -> ArrayD<N> {
        ArrayD::from_shape_fn(IxDyn(shape), |_| from(r.gen_range(-4.0..4.0)))
    }

    /// Blocked results equal widening whole tensors with ndarray's
    /// broadcasting, computing in float32 and rounding once, bit for bit.
    fn same_bits<N: Narrow + PartialEq + std::fmt::Debug>(from: fn(f32) -> N) {
        let seed = rand::random();
        eprintln!("blocked16 test seed: {seed}");
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
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
}
