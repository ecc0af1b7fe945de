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
