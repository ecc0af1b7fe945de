//! Per-operator rules of the error model (docs/error-model.md, "Operators"):
//! the reference value (float64, on the reference provider), the *local
//! bound* (what a correct implementation may add computing the operator from
//! exact inputs) and the *propagation* of errors already in the inputs.
//!
//! Magnitude passes that a catalog kernel can compute (|a|·|w| for linear and
//! conv2d, broadcasting sums for elementwise operators, data movement of error
//! tensors) run on the reference provider; the rest is host code here.

mod attention;
mod elementwise;
mod linear;
mod normalization;
mod reduction;
mod resize;
#[cfg(test)]
mod tests;

use super::{Precision, TierParams};
use attention::*;
use elementwise::*;
use linear::*;
use normalization::*;
pub(super) use normalization::{layer_norm_rows, rms_norm_rows, RmsRow, Row};
use rayon::prelude::*;
use reduction::*;
use resize::*;
use vips_data::{Error, HostTensor};
use vips_execution::Device;
use vsdk_catalog::PilFilter;
use vsdk_catalog::{AttrValue, Attrs, DType, Node, Op, Pad, PadMode, Rotary, Sdpa, TensorSpec};

/// Runs catalog kernels on the reference provider, in float64.
pub(super) struct Reference<'a>(pub &'a Device);

impl Reference<'_> {
    pub fn exec(&self, op: Op, attrs: &Attrs, inputs: &[&HostTensor]) -> Result<HostTensor, Error> {
        let dev = self.0;
        let up = inputs
            .iter()
            .map(|t| dev.upload(t))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<_> = up.iter().collect();
        let out = dev.execute(op.name(), op.version(), attrs, &refs)?;
        dev.download(&out[0])
    }

    fn binary(&self, op: Op, a: &HostTensor, b: &HostTensor) -> Result<HostTensor, Error> {
        self.exec(op, &Attrs::new(), &[a, b])
    }

    /// `linear` or `conv2d` of non-negative values made from float64
    /// operands (magnitudes, squares, variances: what bounds and σ are made
    /// of), each operand read through its [`Mag`]. `linear` runs here through
    /// [`nonneg_gemm`] (float32 rounded up to an upper bound: half the work of
    /// float64, for a result only ever compared against), never on the
    /// reference provider's float32 kernels, whose summation is not ours to
    /// vouch for; `conv2d` runs on the reference in float64. The operands are
    /// narrowed in one pass, with no float64 copy of a weight.
    fn exec_nonneg(
        &self,
        op: Op,
        attrs: &Attrs,
        inputs: &[(&HostTensor, Mag)],
    ) -> Result<Vec<f64>, Error> {
        let ((x, mx), (w, mw)) = (inputs[0], inputs[1]);
        let (n, k) = match (op, &w.spec.shape[..]) {
            (Op::Linear, &[n, k]) if k > 0 && x.spec.numel() % k == 0 => (n, k),
            _ => {
                // Integer inputs (sparse coordinates, indices) say where, not how much.
                let mapped: Vec<HostTensor> = inputs
                    .iter()
                    .map(|&(t, m)| {
                        if t.spec.dtype.is_float() {
                            m.apply(t)
                        } else {
                            t.clone()
                        }
                    })
                    .collect();
                let refs: Vec<&HostTensor> = mapped.iter().collect();
                return Ok(self.exec(op, attrs, &refs)?.to_f64_vec());
            }
        };
        let m = x.spec.numel() / k;
        let mut out = nonneg_gemm(Narrowed::of(x, mx), Narrowed::of(w, mw), (m, k, n), true);
        if let Some(&(b, mb)) = inputs.get(2) {
            let b = b.f64_values();
            // One float64 addition more: rounded up by an ulp.
            for (i, o) in out.iter_mut().enumerate() {
                *o = (*o + mb.of(b[i % n])) * (1.0 + f64::EPSILON);
            }
        }
        Ok(out)
    }
}

/// How an operand of a non-negative product is read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Mag {
    Abs,
    Square,
    /// Already non-negative (a variance).
    Value,
}

impl Mag {
    fn of(self, v: f64) -> f64 {
        match self {
            Mag::Abs => v.abs(),
            Mag::Square => v * v,
            Mag::Value => v,
        }
    }

    fn apply(self, t: &HostTensor) -> HostTensor {
        match self {
            Mag::Abs => abs(t),
            Mag::Square => square(t),
            Mag::Value => t.clone(),
        }
    }
}

/// A float64 tensor.
pub(super) fn dense(shape: &[usize], v: Vec<f64>) -> HostTensor {
    HostTensor::from_vec(shape, v).expect("length matches the shape")
}

fn abs(t: &HostTensor) -> HostTensor {
    dense(
        &t.spec.shape,
        t.f64_values().iter().map(|v| v.abs()).collect(),
    )
}

fn zeros(shape: &[usize]) -> HostTensor {
    dense(shape, vec![0.0; shape.iter().product()])
}

/// One operator evaluated on the reference.
pub(super) struct Evaluated {
    /// float64 for float outputs, the integer dtype otherwise.
    pub value: HostTensor,
    /// The local bound per element is `fixed + λ·scaled`: roundings bounded
    /// outright plus accumulations bounded with confidence λ.
    fixed: Vec<f64>,
    scaled: Vec<f64>,
    /// The standard deviation of a correct implementation's error, per
    /// element (`rounding model` below): the statistical criteria's unit.
    /// All zero for exact operators.
    pub sigma: Vec<f64>,
    /// The mean of the error is tested too (`accumulates`).
    pub accumulates: bool,
}

impl Evaluated {
    /// The local bound at confidence `lambda`.
    pub fn local(&self, lambda: f64) -> Vec<f64> {
        self.fixed
            .iter()
            .zip(&self.scaled)
            .map(|(a, c)| a + lambda * c)
            .collect()
    }
}

/// Splits a bound that is affine in λ into its two parts.
fn affine(f: impl Fn(f64) -> Vec<f64>) -> (Vec<f64>, Vec<f64>) {
    let (a, b) = (f(0.0), f(1.0));
    let c = b.iter().zip(a.iter()).map(|(b, a)| b - a).collect();
    (a, c)
}

/// Everything an operator rule needs about one call.
pub(super) struct Call<'a> {
    pub op: Op,
    /// Attributes as the reference runs them (casts to floats go to float64).
    pub attrs: &'a Attrs,
    /// The resolved node (shapes and attributes checked by the catalog).
    pub node: &'a Node,
    /// Exact inputs: float64 for floats.
    pub inputs: &'a [&'a HostTensor],
    /// The precision of the output at the tier (None: integer output).
    pub precision: Option<Precision>,
    pub params: &'a TierParams,
    /// An input is a stage input in another dtype than the tier's (a
    /// float32 capture given to `check` at bf16): even data movement rounds
    /// it to the tier. (For a concat of such an input with a computed one,
    /// the computed elements get the same allowance, slightly loose.)
    pub off_tier_inputs: bool,
}

/// The terms of each output of a `linear`, `conv2d` or `matmul`: one per
/// weight of an output (`K`, or `C/g·kH·kW`), plus one with a bias.
fn terms(c: &Call) -> usize {
    if *c.node == Node::Matmul {
        return c.inputs[0].spec.shape.last().copied().unwrap_or(0);
    }
    let w = &c.inputs[1].spec.shape;
    w[1..].iter().product::<usize>() + usize::from(c.inputs.len() == 3)
}

/// `λ·√n`: the probabilistic growth factor of a sum of `n` terms.
fn growth(lambda: f64, n: usize) -> f64 {
    lambda * (n.max(1) as f64).sqrt()
}

/// `u·|v| + c·u_acc·m + tiny` per element: the output rounding plus a
/// multiple of the accumulation roundoff times a magnitude.
fn rounding(p: Precision, value: &[f64], c: f64, magnitude: &[f64]) -> Vec<f64> {
    value
        .iter()
        .zip(magnitude)
        .map(|(&v, &m)| p.u * v.abs() + c * p.u_acc * m + p.tiny)
        .collect()
}

pub(super) fn evaluate(r: &Reference, c: &Call) -> Result<Evaluated, Error> {
    let value = r.exec(c.op, c.attrs, c.inputs)?;
    let Some(p) = c.precision else {
        // Integer outputs: exact, within `lsb`.
        let n = value.spec.numel();
        return Ok(Evaluated {
            value,
            fixed: vec![c.params.lsb as f64; n],
            scaled: vec![0.0; n],
            sigma: vec![0.0; n],
            accumulates: false,
        });
    };
    let v = value.f64_values();
    let exact = |b: Vec<f64>| {
        let n = b.len();
        (b, vec![0.0; n])
    };
    let (fixed, scaled) = match c.node {
        Node::Linear | Node::Conv2d(_) | Node::Matmul => {
            let mags: Vec<(&HostTensor, Mag)> = c.inputs.iter().map(|&t| (t, Mag::Abs)).collect();
            let bnd = r.exec_nonneg(c.op, c.attrs, &mags)?;
            let n = terms(c);
            affine(|lambda| {
                let g = growth(lambda, n);
                v.iter()
                    .zip(bnd.iter())
                    .map(|(&v, &b)| p.u * v.abs() + g * p.u_acc * b + p.tiny)
                    .collect()
            })
        }
        Node::ResizeBicubic(rz) => {
            let x = &c.inputs[0];
            let (ih, iw) = (x.spec.shape[2], x.spec.shape[3]);
            let taps = |scale: f64| {
                if rz.antialias {
                    (4.0 * scale.max(1.0)).ceil() as usize + 1
                } else {
                    4
                }
            };
            // Coordinates and weights computed in float32 (as PyTorch does)
            // move each tap by up to about u·in: the `4·in` term.
            let bnd = plane_max(x, &value.spec.shape, 2.0)?;
            let n = taps(rz.scale_h) * taps(rz.scale_w);
            affine(|lambda| rounding(p, &v, growth(lambda, n) + 4.0 * ih.max(iw) as f64, &bnd))
        }
        Node::ResizeBilinear(_) => {
            // Two taps per axis, non-negative weights summing to 1; float32
            // coordinates (PyTorch's, or ONNX Runtime's division by out/in)
            // move a sample by about u·in on each axis, and the value by up
            // to |x[i1] − x[i0]| ≤ 2·max|x| per unit: the `4·in` term on
            // twice the plane's largest magnitude.
            let x = &c.inputs[0];
            let longest = x.spec.shape[2].max(x.spec.shape[3]) as f64;
            let bnd = plane_max(x, &value.spec.shape, 2.0)?;
            affine(|lambda| rounding(p, &v, growth(lambda, 4) + 4.0 * longest, &bnd))
        }
        Node::Add | Node::Sub => {
            let bnd = r
                .binary(Op::Add, &abs(c.inputs[0]), &abs(c.inputs[1]))?
                .to_f64_vec();
            exact(rounding(p, &v, 1.0, &bnd))
        }
        Node::Mul => exact(rounding(
            p,
            &v,
            1.0,
            &v.iter().map(|x| x.abs()).collect::<Vec<_>>(),
        )),
        Node::Div => exact(rounding(
            p,
            &v,
            2.0,
            &v.iter().map(|x| x.abs()).collect::<Vec<_>>(),
        )),
        Node::Cast(_) => exact(rounding(p, &v, 0.0, &v)),
        Node::SparseConv3d => {
            let mags: Vec<(&HostTensor, Mag)> = c.inputs.iter().map(|&t| (t, Mag::Abs)).collect();
            let bnd = r.exec_nonneg(c.op, c.attrs, &mags)?;
            let (n, cout) = (sparse_terms(c), c.inputs[2].spec.shape[2].max(1));
            affine(|lambda| {
                v.iter()
                    .zip(bnd.iter())
                    .enumerate()
                    .map(|(e, (&v, &b))| {
                        p.u * v.abs() + growth(lambda, n[e / cout]) * p.u_acc * b + p.tiny
                    })
                    .collect()
            })
        }
        Node::SegmentMean { .. } => {
            // The sum of n rows (λ√n roundings of at most Σ|x|), divided once.
            let mean_abs = r
                .exec(c.op, c.attrs, &[&abs(c.inputs[0]), c.inputs[1]])?
                .to_f64_vec();
            let (n, cols) = (segment_sizes(c)?, c.inputs[0].spec.shape[1].max(1));
            affine(|lambda| {
                v.iter()
                    .zip(&mean_abs)
                    .enumerate()
                    .map(|(e, (&v, &m))| {
                        p.u * v.abs() + (growth(lambda, n[e / cols]) + 1.0) * p.u_acc * m + p.tiny
                    })
                    .collect()
            })
        }
        Node::Gelu => {
            // erf is an approximation everywhere: a few ulps of 1 + erf,
            // times |x| / 2, plus the final products.
            let x = c.inputs[0].f64_values();
            let m: Vec<f64> = v
                .iter()
                .zip(x.iter())
                .map(|(v, x)| v.abs() + x.abs())
                .collect();
            exact(rounding(p, &v, 4.0, &m))
        }
        Node::Unary(f) => exact(unary_local(*f, &c.inputs[0].f64_values(), &v, p)),
        Node::Softmax { axis } => {
            let x = c.inputs[0].f64_values();
            affine(|lambda| softmax_local(&x, &v, &value.spec.shape, *axis, p, lambda))
        }
        Node::LayerNorm { axis, eps } => {
            affine(|lambda| layer_norm_local(c.inputs, *axis, *eps, p, lambda))
        }
        Node::RmsNorm { eps } => affine(|lambda| rms_norm_local(c.inputs, *eps, p, lambda)),
        Node::BatchNorm { eps } => exact(batch_norm_local(c.inputs, *eps, &v, p)),
        Node::GroupNorm { groups, eps } => {
            let rows = GroupRows::of(c.inputs, *groups);
            affine(|lambda| layer_norm_local(&rows.inputs(), 2, *eps, p, lambda))
        }
        Node::Sdpa(s) => {
            let (fixed, scaled, _) = sdpa(c.inputs, s, None, p);
            (fixed, scaled)
        }
        Node::Rotary(r) => {
            let moved = moved_local(c, &v, p);
            let turned = rotary_local(c.inputs, r, &v, p);
            exact(turned.iter().zip(moved).map(|(t, m)| t.max(m)).collect())
        }
        // Data movement and selections: exact, except where an input wider
        // than the tier (a float32 capture `check` was given at bf16) must
        // be stored at the tier's precision.
        Node::Crop(_)
        | Node::Reshape
        | Node::Permute { .. }
        | Node::Concat { .. }
        | Node::GatherRows
        | Node::RepeatRows { .. }
        | Node::ResizeNearest(_) => exact(moved_local(c, &v, p)),
        Node::Pad(pad) => exact(padded_local(c, pad, &value.spec.shape, &v, p, |v| {
            p.u * v.abs() + p.tiny
        })),
        Node::Pool2d(_) if selects(c.node) => exact(moved_local(c, &v, p)),
        Node::Pool2d(_) | Node::Reduce(_) => reduction_local(r, c, &v, p)?,
        Node::ResizePil(_) => exact(vec![c.params.lsb as f64; v.len()]),
        // Integer outputs returned above.
        Node::SparseDownsampleCoords { .. }
        | Node::SparseDownsampleIndex { .. }
        | Node::SparseSubdivideCoords => exact(vec![0.0; v.len()]),
        // Judged by the verdict on discrete outputs (`raster::resolve`, through
        // `graph::Expected`) wherever it is judged; no node of its stage reads
        // it (a document rule), so it propagates nothing.
        Node::Rasterize { .. } => exact(vec![0.0; v.len()]),
        Node::Interpolate => exact(super::raster::interpolate_local(c.inputs, &v, p).0),
    };
    let sigma = sigma(r, c, &value, &v, p, &fixed, &scaled)?;
    Ok(Evaluated {
        value,
        fixed,
        scaled,
        sigma,
        accumulates: accumulates(c.op),
    })
}

/// Operators whose error is a sum of many roundings (dot products): their
/// errors average out, so a mean away from 0 is a biased kernel (one that
/// rounds up, or accumulates too narrowly). An elementwise operator's error is
/// a fixed function of its input value, and on data with few distinct values
/// (an 8-bit image divided by 255) a correctly rounded result has a mean error
/// of 0.85 of its rms: their mean is not tested.
fn accumulates(op: Op) -> bool {
    matches!(
        op,
        Op::Linear | Op::Conv2d | Op::Matmul | Op::Sdpa | Op::SparseConv3d
    )
}

/// The terms of each output row of a `sparse_conv3d`: `Cin` per active
/// voxel of its 3x3x3 neighbourhood (itself included), plus one with a bias.
fn sparse_terms(c: &Call) -> Vec<usize> {
    let coords: Vec<[i64; 4]> = c.inputs[1]
        .to_f64_vec()
        .chunks_exact(4)
        .map(|v| [v[0] as i64, v[1] as i64, v[2] as i64, v[3] as i64])
        .collect();
    let active: std::collections::HashSet<[i64; 4]> = coords.iter().copied().collect();
    let cin = c.inputs[0].spec.shape[1];
    let bias = usize::from(c.inputs.len() == 4);
    coords
        .iter()
        .map(|v| {
            let near = vsdk_catalog::SPARSE_OFFSETS
                .iter()
                .filter(|d| {
                    active.contains(&[
                        v[0],
                        v[1] + d[0] as i64,
                        v[2] + d[1] as i64,
                        v[3] + d[2] as i64,
                    ])
                })
                .count();
            near * cin + bias
        })
        .collect()
}

/// The rows of each segment of a `segment_mean` (the index was checked by
/// the reference that ran it).
fn segment_sizes(c: &Call) -> Result<Vec<usize>, Error> {
    let Node::SegmentMean { segments } = c.node else {
        return Err(Error::Tensor("segment sizes of another operator".into()));
    };
    let mut n = vec![0; *segments];
    for i in c.inputs[1].to_f64_vec() {
        if let Some(count) = n.get_mut(i as usize) {
            *count += 1;
        }
    }
    Ok(n)
}

/// The variance of one rounding to nearest of `x` at unit roundoff `u`: the
/// error is uniform on ±half an ulp, and half an ulp is at most `u·|x|`.
fn rounding_var(u: f64, x: f64) -> f64 {
    u * u * x * x / 3.0
}

/// The error variance, in units of `u²/3`, of a sum of `n` terms computed one
/// after the other (the order a blocked GEMM or a loop follows; pairwise and
/// tree orders have smaller partial sums): each addition rounds its partial
/// sum `s_k`, so the variance is `Σ s_k²·u²/3`. For terms in no particular
/// order with total `v` and squares summing to `q`, the partial sums drift
/// towards `v` with a random walk about that line: `E Σ s_k² ≈ n·(v²/3 +
/// q/6)`. Each term's own rounding (a product) adds `q`.
fn sum_var(n: usize, v: f64, q: f64) -> f64 {
    let n = n.max(1) as f64;
    n * (v * v / 3.0 + q / 6.0) + q
}

/// The standard deviation of a correct implementation's error, per element
/// (docs/error-model.md, "The rounding model"): each rounding an independent
/// error uniform on ±half an ulp, sums in sequence. Where the operator is
/// exact it is 0. (The per-operator rules return variances.)
fn sigma(
    r: &Reference,
    c: &Call,
    value: &HostTensor,
    v: &[f64],
    p: Precision,
    fixed: &[f64],
    scaled: &[f64],
) -> Result<Vec<f64>, Error> {
    let (u, ua) = (p.u, p.u_acc);
    // A result computed in float32 and stored narrower is rounded twice.
    let stored = |v: f64| {
        rounding_var(u, v) + if u > ua { rounding_var(ua, v) } else { 0.0 } + p.tiny * p.tiny / 3.0
    };
    let var: Vec<f64> = match c.node {
        Node::Linear | Node::Conv2d(_) | Node::Matmul => {
            let squares: Vec<(&HostTensor, Mag)> =
                c.inputs.iter().map(|&t| (t, Mag::Square)).collect();
            let q = r.exec_nonneg(c.op, c.attrs, &squares)?;
            let n = terms(c);
            v.iter()
                .zip(q.iter())
                .map(|(&v, &q)| stored(v) + ua * ua / 3.0 * sum_var(n, v, q))
                .collect()
        }
        Node::SparseConv3d => {
            let squares: Vec<(&HostTensor, Mag)> =
                c.inputs.iter().map(|&t| (t, Mag::Square)).collect();
            let q = r.exec_nonneg(c.op, c.attrs, &squares)?;
            let (n, cout) = (sparse_terms(c), c.inputs[2].spec.shape[2].max(1));
            v.iter()
                .zip(q.iter())
                .enumerate()
                .map(|(e, (&v, &q))| stored(v) + ua * ua / 3.0 * sum_var(n[e / cout], v, q))
                .collect()
        }
        Node::SegmentMean { .. } => {
            // The sum (of n·v, squares n·mean(x²)), then one division.
            let mean_sq = r
                .exec(c.op, c.attrs, &[&square(c.inputs[0]), c.inputs[1]])?
                .to_f64_vec();
            let (n, cols) = (segment_sizes(c)?, c.inputs[0].spec.shape[1].max(1));
            v.iter()
                .zip(&mean_sq)
                .enumerate()
                .map(|(e, (&v, &m2))| {
                    let k = n[e / cols].max(1) as f64;
                    let sum = sum_var(n[e / cols], k * v, k * m2) / (k * k);
                    stored(v) + ua * ua / 3.0 * sum + rounding_var(ua, v)
                })
                .collect()
        }
        Node::Add | Node::Sub | Node::Mul | Node::Cast(_) => v.iter().map(|&v| stored(v)).collect(),
        Node::Div => v.iter().map(|&v| stored(v) + rounding_var(ua, v)).collect(),
        Node::Gelu => {
            // erf to about an ulp of 1 + erf, times |x|/2, and the products.
            let x = c.inputs[0].f64_values();
            v.iter()
                .zip(x.iter())
                .map(|(&v, &x)| stored(v) + rounding_var(ua, 2.0 * v.abs() + x.abs()))
                .collect()
        }
        Node::Unary(f) => unary_variance(*f, &c.inputs[0].f64_values(), v, p, stored),
        Node::Softmax { axis } => {
            let x = c.inputs[0].f64_values();
            softmax_sigma(&x, v, &value.spec.shape, *axis, p)
        }
        Node::LayerNorm { axis, eps } => layer_norm_sigma(c.inputs, *axis, *eps, p),
        Node::RmsNorm { eps } => rms_norm_sigma(c.inputs, *eps, p),
        Node::BatchNorm { eps } => batch_norm_sigma(c.inputs, *eps, v, stored, p),
        Node::GroupNorm { groups, eps } => {
            layer_norm_sigma(&GroupRows::of(c.inputs, *groups).inputs(), 2, *eps, p)
        }
        Node::Sdpa(s) => sdpa_sigma(c.inputs, s, p),
        Node::Rotary(r) => {
            let moved = moved_variance(c, v, p);
            let turned = rotary_variance(c.inputs, r, v, p, stored);
            turned.iter().zip(moved).map(|(t, m)| t.max(m)).collect()
        }
        // Coordinates and taps computed in float32 make the resize's error
        // depend on the implementation's arithmetic more than on rounding:
        // the local bound at λ = 1 stands in for a standard deviation.
        Node::ResizeBicubic(_) | Node::ResizeBilinear(_) => fixed
            .iter()
            .zip(scaled)
            .map(|(f, s)| (f + s).powi(2) / 3.0)
            .collect(),
        Node::Crop(_)
        | Node::Reshape
        | Node::Permute { .. }
        | Node::Concat { .. }
        | Node::GatherRows
        | Node::RepeatRows { .. }
        | Node::ResizeNearest(_) => moved_variance(c, v, p),
        Node::Pad(pad) => padded_local(c, pad, &value.spec.shape, v, p, |v| {
            rounding_var(p.u, v) + p.tiny * p.tiny / 3.0
        }),
        Node::Pool2d(_) if selects(c.node) => moved_variance(c, v, p),
        Node::Pool2d(_) | Node::Reduce(_) => reduction_variance(r, c, v, p, stored)?,
        // Left to the bound: snapping, not rounding, moves (u, v, z/w).
        Node::ResizePil(_)
        | Node::SparseDownsampleCoords { .. }
        | Node::SparseDownsampleIndex { .. }
        | Node::SparseSubdivideCoords
        | Node::Rasterize { .. } => vec![0.0; v.len()],
        Node::Interpolate => super::raster::interpolate_local(c.inputs, v, p)
            .1
            .into_iter()
            .map(|s| s * s)
            .collect(),
    };
    Ok(var.into_iter().map(f64::sqrt).collect())
}

/// Propagates the errors already in the inputs to the output, to first
/// order. Errors travel as *variances* `E²` (None: exact): through a linear
/// map `y = Σ_j J_ij·x_j` independent errors add as `Σ_j J_ij²·E_j²` (root
/// sum of squares), where summing `|J_ij|·E_j` would assume every rounding
/// error of every earlier operator points the same way and grows the bound by
/// `√n` per layer.
/// `lambda`: the stage's confidence factor when `vars` are the bound's
/// variances, None for σ's (a rounding step is part of the bound, not of a
/// correct implementation's spread).
pub(super) fn propagate(
    r: &Reference,
    c: &Call,
    vars: &[Option<&HostTensor>],
    value: &HostTensor,
    lambda: Option<f64>,
) -> Result<Option<HostTensor>, Error> {
    if vars.iter().all(Option::is_none) {
        return Ok(None);
    }
    let out_shape = &value.spec.shape;
    let var = |i: usize| -> HostTensor {
        vars.get(i)
            .copied()
            .flatten()
            .cloned()
            .unwrap_or_else(|| zeros(&c.inputs[i].spec.shape))
    };
    let sum = |a: HostTensor, b: HostTensor| r.binary(Op::Add, &a, &b);
    let v = match c.node {
        Node::Linear | Node::Conv2d(_) | Node::Matmul => {
            // V_x·w² + x²·V_w + V_b: both passes are the operator itself.
            let (x, w) = (c.inputs[0], c.inputs[1]);
            let nonneg = |a, b| -> Result<HostTensor, Error> {
                Ok(dense(out_shape, r.exec_nonneg(c.op, c.attrs, &[a, b])?))
            };
            let mut total: Option<HostTensor> = None;
            if let Some(vx) = vars[0] {
                total = Some(nonneg((vx, Mag::Value), (w, Mag::Square))?);
            }
            if let Some(vw) = vars.get(1).copied().flatten() {
                let t = nonneg((x, Mag::Square), (vw, Mag::Value))?;
                total = Some(match total {
                    Some(s) => sum(s, t)?,
                    None => t,
                });
            }
            let mut total = total.unwrap_or_else(|| zeros(out_shape));
            if let Some(vb) = vars.get(2).copied().flatten() {
                let vb = match c.node {
                    // conv2d's bias is per output channel: [O] -> [O, 1, 1].
                    Node::Conv2d(_) => dense(&[vb.spec.numel(), 1, 1], vb.to_f64_vec()),
                    _ => vb.clone(),
                };
                total = sum(total, vb)?;
            }
            total
        }
        Node::SparseConv3d => {
            // V_x·w² + x²·V_w + V_b, each pass the operator itself.
            let (x, coords, w) = (c.inputs[0], c.inputs[1], c.inputs[2]);
            let conv = |a: &HostTensor, b: &HostTensor| r.exec(c.op, c.attrs, &[a, coords, b]);
            let mut total = zeros(out_shape);
            if let Some(vx) = vars[0] {
                total = sum(total, conv(vx, &square(w))?)?;
            }
            if let Some(vw) = vars.get(2).copied().flatten() {
                total = sum(total, conv(&square(x), vw)?)?;
            }
            if let Some(vb) = vars.get(3).copied().flatten() {
                total = sum(total, vb.clone())?;
            }
            total
        }
        // V_x averaged over n rows: Σ V / n² = mean(V) / n.
        Node::SegmentMean { .. } => {
            let mean = r.exec(c.op, c.attrs, &[&var(0), c.inputs[1]])?.to_f64_vec();
            let (n, cols) = (segment_sizes(c)?, c.inputs[0].spec.shape[1].max(1));
            let v = mean
                .iter()
                .enumerate()
                .map(|(e, &m)| m / n[e / cols].max(1) as f64)
                .collect();
            dense(out_shape, v)
        }
        Node::GatherRows => r.exec(c.op, c.attrs, &[&var(0), c.inputs[1]])?,
        Node::Pool2d(_) | Node::Reduce(_) => reduction_propagate(r, c, &var(0))?,
        // Selections carry their element's variance; bilinear's weights are
        // non-negative and sum to 1, so Σw²·V ≤ Σw·V: the resize of V.
        Node::RepeatRows { .. } | Node::ResizeNearest(_) | Node::ResizeBilinear(_) => {
            r.exec(c.op, c.attrs, &[&var(0)])?
        }
        // Integer outputs carry no float error.
        Node::SparseDownsampleCoords { .. }
        | Node::SparseDownsampleIndex { .. }
        | Node::SparseSubdivideCoords => return Ok(None),
        // Its inputs are the stage's (a document rule): golden, exact.
        Node::Rasterize { .. } => return Ok(None),
        Node::Interpolate => dense(
            out_shape,
            super::raster::interpolate_propagate(
                c.inputs,
                vars[0],
                vars.get(1).copied().flatten(),
                value.spec.numel(),
            ),
        ),
        Node::Add | Node::Sub => sum(var(0), var(1))?,
        Node::Mul => sum(
            r.binary(Op::Mul, &var(0), &square(c.inputs[1]))?,
            r.binary(Op::Mul, &square(c.inputs[0]), &var(1))?,
        )?,
        Node::Div => {
            // V_a / b² + a²·V_b / b⁴
            let b2 = square(c.inputs[1]);
            let b4 = r.binary(Op::Mul, &b2, &b2)?;
            sum(
                r.binary(Op::Div, &var(0), &b2)?,
                r.binary(
                    Op::Div,
                    &r.binary(Op::Mul, &square(c.inputs[0]), &var(1))?,
                    &b4,
                )?,
            )?
        }
        // An integer result has no σ: its statistics are not tested.
        Node::Cast(to)
            if !to.is_float() && c.inputs[0].spec.dtype.is_float() && lambda.is_none() =>
        {
            zeros(out_shape)
        }
        Node::Cast(to) if !to.is_float() && c.inputs[0].spec.dtype.is_float() => {
            // Rounding to an integer is a step: far from a rounding point the
            // result is exact whatever the input's error, but where the
            // input's bound (at the stage's λ) reaches one, either neighbour
            // is right. (A perturbed `(m - 127.3) / 254.1` lands next to a
            // half now and then; an exact `m - 127` never does.)
            let x = c.inputs[0].f64_values();
            let b: Vec<f64> = var(0)
                .to_f64_vec()
                .iter()
                .map(|v| lambda.unwrap_or(1.0) * v.sqrt() * (1.0 + 1e-9))
                .collect();
            let shifted = |sign: f64| {
                let moved = x.iter().zip(&b).map(|(x, b)| x + sign * b).collect();
                dense(&c.inputs[0].spec.shape, moved).cast(*to).to_f64_vec()
            };
            let (lo, hi) = (shifted(-1.0), shifted(1.0));
            let r = value.to_f64_vec();
            let steps = r
                .iter()
                .zip(lo.iter().zip(&hi))
                .map(|(r, (lo, hi))| (r - lo).abs().max((hi - r).abs()).powi(2))
                .collect();
            dense(out_shape, steps)
        }
        Node::Crop(_) | Node::Reshape | Node::Permute { .. } | Node::Cast(_) => {
            let attrs = if matches!(c.node, Node::Cast(_)) {
                Attrs::new().with("dtype", vsdk_catalog::AttrValue::Str("float64".into()))
            } else {
                c.attrs.clone()
            };
            r.exec(c.op, &attrs, &[&var(0)])?
        }
        // The constant carries no error from the input: padded with 0.
        Node::Pad(pad) => {
            let mut attrs = c.attrs.clone();
            attrs.0.retain(|(n, _)| n != "value");
            if pad.mode == PadMode::Constant {
                attrs = attrs.with("value", AttrValue::Float(0.0));
            }
            r.exec(c.op, &attrs, &[&var(0)])?
        }
        Node::Concat { .. } => {
            let all: Vec<HostTensor> = (0..c.inputs.len()).map(var).collect();
            let refs: Vec<&HostTensor> = all.iter().collect();
            r.exec(c.op, c.attrs, &refs)?
        }
        Node::Gelu => {
            // d/dx x·Φ(x) = Φ(x) + x·φ(x)
            let x = c.inputs[0].f64_values();
            let y = value.f64_values();
            let vx = var(0).to_f64_vec();
            let d = x
                .iter()
                .zip(y.iter())
                .zip(vx.iter())
                .map(|((&x, &y), &v)| {
                    let cdf = if x == 0.0 { 0.5 } else { y / x };
                    let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
                    (cdf + x * pdf).powi(2) * v
                })
                .collect();
            dense(out_shape, d)
        }
        Node::Unary(f) => dense(
            out_shape,
            unary_propagate(*f, &c.inputs[0].f64_values(), &var(0).to_f64_vec(), lambda),
        ),
        Node::Softmax { axis } => dense(
            out_shape,
            softmax_propagate(&value.f64_values(), &var(0).f64_values(), out_shape, *axis),
        ),
        Node::LayerNorm { axis, eps } => {
            let vars: Vec<HostTensor> = (0..3).map(var).collect();
            dense(
                out_shape,
                layer_norm_propagate(c.inputs, *axis, *eps, &vars),
            )
        }
        Node::RmsNorm { eps } => {
            let vars: Vec<HostTensor> = (0..2).map(var).collect();
            dense(out_shape, rms_norm_propagate(c.inputs, *eps, &vars))
        }
        Node::BatchNorm { eps } => {
            let vars: Vec<HostTensor> = (0..5).map(var).collect();
            dense(out_shape, batch_norm_propagate(c.inputs, *eps, &vars))
        }
        Node::GroupNorm { groups, eps } => {
            let rows = GroupRows::of(c.inputs, *groups);
            let vars: Vec<HostTensor> = (0..3).map(var).collect();
            let vars = GroupRows::of(&vars.iter().collect::<Vec<_>>(), *groups);
            dense(
                out_shape,
                layer_norm_propagate(&rows.inputs(), 2, *eps, &vars.owned()),
            )
        }
        Node::Rotary(r) => {
            let vars: Vec<HostTensor> = (0..3).map(var).collect();
            dense(out_shape, rotary_propagate(c.inputs, r, &vars))
        }
        Node::Sdpa(s) => {
            let vars: Vec<HostTensor> = (0..c.inputs.len()).map(var).collect();
            let p = c.precision.expect("float");
            dense(out_shape, sdpa(c.inputs, s, Some(&vars), p).2)
        }
        // Σ w² ≤ max|w|·Σ|w| ≤ 1.89 in 2-D: at most twice the plane's largest variance.
        Node::ResizeBicubic(_) => dense(out_shape, plane_max(&var(0), out_shape, 2.0)?),
        Node::ResizePil(r) => {
            // An integer output of inexact inputs: the largest input error
            // times a bound on Σ|w| over both passes (at most 1.27² = 1.61
            // for the cubic filter, 1.57² = 2.47 for Lanczos), rounded up to
            // whole units. With alpha, dividing by a small resized alpha can
            // turn any input error into any value.
            let m = var(0)
                .f64_values()
                .iter()
                .copied()
                .fold(0.0, f64::max)
                .sqrt();
            let gain = match r.filter {
                PilFilter::Bicubic => 2.0,
                PilFilter::Lanczos => 3.0,
            };
            let e = if r.alpha && m > 0.0 {
                255.0
            } else {
                (gain * m).ceil()
            };
            dense(out_shape, vec![e * e; value.spec.numel()])
        }
    };
    Ok(Some(v))
}

/// A moved or selected element's local bound: 0, or one rounding where an
/// input is wider than the tier.
fn moved_local(c: &Call, v: &[f64], p: Precision) -> Vec<f64> {
    v.iter()
        .map(|&v| {
            if !c.off_tier_inputs || p.holds(v) {
                0.0
            } else {
                p.u * v.abs() + p.tiny
            }
        })
        .collect()
}

/// A pad's local bound (or variance: `rounded`) over its output of
/// `shape`: moved elements as [`moved_local`], the constant exact where the
/// tier holds it and one rounding (`rounded` of the value) where it does not.
fn padded_local(
    c: &Call,
    pad: &Pad,
    shape: &[usize],
    v: &[f64],
    p: Precision,
    rounded: impl Fn(f64) -> f64,
) -> Vec<f64> {
    // A moved element rounds only where its input was off the tier.
    let moved = |v: f64| {
        if !c.off_tier_inputs || p.holds(v) {
            0.0
        } else {
            rounded(v)
        }
    };
    if pad.mode != PadMode::Constant || p.holds(pad.value) {
        return v.iter().map(|&v| moved(v)).collect();
    }
    let n = &c.inputs[0].spec.shape;
    let mut index = vec![0usize; shape.len()];
    let mut out = Vec::with_capacity(v.len());
    for &v in v {
        let filled = (0..shape.len()).any(|d| pad.source(d, index[d], n[d]).is_none());
        out.push(if filled { rounded(v) } else { moved(v) });
        for d in (0..shape.len()).rev() {
            index[d] += 1;
            if index[d] < shape[d] {
                break;
            }
            index[d] = 0;
        }
    }
    out
}

/// [`moved_local`]'s rounding as a variance.
fn moved_variance(c: &Call, v: &[f64], p: Precision) -> Vec<f64> {
    v.iter()
        .map(|&v| {
            if !c.off_tier_inputs || p.holds(v) {
                0.0
            } else {
                rounding_var(p.u, v) + p.tiny * p.tiny / 3.0
            }
        })
        .collect()
}

/// The spec of a node's output when computed at the tier (for its precision).
pub(super) fn output_spec(
    op: Op,
    attrs: &Attrs,
    inputs: &[TensorSpec],
) -> Result<(Node, TensorSpec), Error> {
    let (node, outs) =
        Node::infer(op, attrs, inputs).map_err(|e| Error::Tensor(format!("{}: {e}", op.name())))?;
    Ok((node, outs.into_iter().next().expect("one output")))
}

/// Float tensors as float64 (how the reference computes).
pub(super) fn wide(t: &HostTensor) -> HostTensor {
    if t.spec.dtype.is_float() && t.spec.dtype != DType::F64 {
        t.cast(DType::F64)
    } else {
        t.clone()
    }
}
