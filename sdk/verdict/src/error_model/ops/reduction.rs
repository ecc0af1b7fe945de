//! Reductions: max pooling selects (its error is the selected input's, at
//! most the window's largest); average pools, sums and means add `n` terms
//! and divide by `d` (a sum: `d = 1`), with the rules of a dot product of
//! ones. The windows are the catalog's.

use super::*;
use vsdk_catalog::{PoolKind, Reduce};

/// Each output's `(n, d)`: the terms summed and the divisor.
struct Counts {
    /// One period of the output (a pool's plane; a reduction's single entry).
    period: Vec<(usize, f64)>,
}

impl Counts {
    fn of(c: &Call) -> Counts {
        let period = match c.node {
            _ if c.inputs[0].spec.numel() == 0 => vec![(1, 1.0)],
            Node::Pool2d(p) => {
                let (oh, ow) = (p.axes[0].output(), p.axes[1].output());
                (0..oh * ow)
                    .map(|e| {
                        let (r, col) = (e / ow, e % ow);
                        (p.terms(r, col), p.divisor(r, col) as f64)
                    })
                    .collect()
            }
            Node::Reduce(Reduce { mean, .. }) => {
                let n = reduce_terms(c);
                vec![(n, if *mean { n as f64 } else { 1.0 })]
            }
            _ => vec![(1, 1.0)],
        };
        Counts { period }
    }

    fn at(&self, e: usize) -> (usize, f64) {
        self.period[e % self.period.len()]
    }
}

fn reduce_terms(c: &Call) -> usize {
    match c.node {
        Node::Reduce(r) => r.terms(&c.inputs[0].spec.shape),
        _ => 1,
    }
}

/// A max pool: a selection.
pub(super) fn selects(node: &Node) -> bool {
    matches!(
        node,
        Node::Pool2d(p) if p.kind == PoolKind::Max
    )
}

/// The local bound of a sum of `n` terms (at most `A·d` in magnitude, `A`
/// the operator applied to `|x|`) divided by `d`: the sum's roundings, the
/// division, the stored result.
pub(super) fn reduction_local(
    r: &Reference,
    c: &Call,
    v: &[f64],
    p: Precision,
) -> Result<(Vec<f64>, Vec<f64>), Error> {
    let a = r.exec(c.op, c.attrs, &[&abs(c.inputs[0])])?.to_f64_vec();
    let counts = Counts::of(c);
    Ok(affine(|lambda| {
        v.iter()
            .zip(&a)
            .enumerate()
            .map(|(e, (&v, &a))| {
                let (n, d) = counts.at(e);
                let divides = if d == 1.0 { 0.0 } else { 1.0 };
                p.u * v.abs() + (growth(lambda, n) + divides) * p.u_acc * a + p.tiny
            })
            .collect()
    }))
}

/// The variance of a correct sum-then-divide: the sum of `n` terms (total
/// `d·v`, squares `d·Q` with `Q` the operator applied to `x²`), divided.
pub(super) fn reduction_variance(
    r: &Reference,
    c: &Call,
    v: &[f64],
    p: Precision,
    stored: impl Fn(f64) -> f64,
) -> Result<Vec<f64>, Error> {
    let q = r.exec(c.op, c.attrs, &[&square(c.inputs[0])])?.to_f64_vec();
    let counts = Counts::of(c);
    let ua = p.u_acc;
    Ok(v.iter()
        .zip(&q)
        .enumerate()
        .map(|(e, (&v, &q))| {
            let (n, d) = counts.at(e);
            let sum = sum_var(n, d * v, d * q) / (d * d);
            let divided = if d == 1.0 { 0.0 } else { rounding_var(ua, v) };
            stored(v) + ua * ua / 3.0 * sum + divided
        })
        .collect())
}

/// Input errors through the reduction: a selection's is at most the
/// window's largest (max is 1-Lipschitz in the largest difference, ties and
/// near-ties included: whichever element a provider selects is within its
/// error of the reference's); a sum's adds, `Σ V / d²`.
pub(super) fn reduction_propagate(
    r: &Reference,
    c: &Call,
    var: &HostTensor,
) -> Result<HostTensor, Error> {
    let pooled = r.exec(c.op, c.attrs, &[var])?;
    if selects(c.node) {
        return Ok(pooled);
    }
    let counts = Counts::of(c);
    let v = pooled
        .to_f64_vec()
        .iter()
        .enumerate()
        .map(|(e, &m)| m / counts.at(e).1)
        .collect();
    Ok(dense(&pooled.spec.shape, v))
}
