//! Per-operator rules of the error model (docs/error-model.md, "Operators"):
//! the reference value (float64, on the reference provider), the *local
//! bound* (what a correct implementation may add computing the operator from
//! exact inputs) and the *propagation* of errors already in the inputs.
//!
//! Magnitude passes that a catalog kernel can compute (|a|·|w| for linear and
//! conv2d, broadcasting sums for elementwise operators, data movement of error
//! tensors) run on the reference provider; the rest is host code here.

use super::{Precision, TierParams};
use rayon::prelude::*;
use vips_data::{Error, HostTensor};
use vips_execution::Device;
use vsdk_catalog::PilFilter;
use vsdk_catalog::{Attrs, DType, Node, Op, TensorSpec};

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

/// An operand of [`nonneg_gemm`]: its mapped values in float32 where they
/// fit, and the largest of them (infinite where one is not finite).
struct Narrowed<'a> {
    source: &'a HostTensor,
    mag: Mag,
    f32: Vec<f32>,
    largest: f64,
}

impl<'a> Narrowed<'a> {
    fn of(source: &'a HostTensor, mag: Mag) -> Self {
        const BLOCK: usize = 1 << 14;
        // Borrowed for float64 (what the error model's operands are).
        let wide = source.f64_values();
        let mut f32 = vec![0f32; wide.len()];
        let largest = f32
            .par_chunks_mut(BLOCK)
            .zip(wide.par_chunks(BLOCK))
            .map(|(d, s)| {
                largest_of(d.iter_mut().zip(s).map(|(d, &v)| {
                    let v = mag.of(v);
                    *d = v as f32;
                    v
                }))
            })
            .reduce(|| 0.0, f64::max);
        Narrowed {
            source,
            mag,
            f32,
            largest,
        }
    }

    /// The mapped values in float64 (where float32 could overflow).
    fn wide(&self) -> Vec<f64> {
        self.source
            .f64_values()
            .iter()
            .map(|&v| self.mag.of(v))
            .collect()
    }
}

/// [`largest`] of an iterator.
fn largest_of(values: impl Iterator<Item = f64>) -> f64 {
    values.fold(0.0, |m: f64, v| {
        if v.is_finite() {
            m.max(v)
        } else {
            f64::INFINITY
        }
    })
}

/// The largest element of non-negative values; NaN or infinite: infinity.
fn largest(x: &[f64]) -> f64 {
    largest_of(x.iter().copied())
}

/// A sum of `terms` products of non-negative float32 values (each factor
/// rounded to float32 first) is at most this factor below the exact one, in
/// any order of summation: `(terms + 4)·2⁻²³` covers the two input roundings,
/// the product's and the `terms − 1` additions' (γ_n for sums of
/// non-negative terms).
fn round_up_factor(terms: usize) -> f64 {
    1.0 + (terms as f64 + 4.0) * f64::from(f32::EPSILON)
}

/// The absolute slack that covers what float32 loses below its normal range
/// (flushed or subnormal factors and products), or None where a factor, a
/// product or a sum could overflow float32 or the inputs are not finite:
/// then float64.
fn nonneg_slack(max_a: f64, max_b: f64, terms: usize) -> Option<f64> {
    let n = terms.max(1) as f64;
    let fits = |v: f64| v.is_finite() && v < 1e36;
    (fits(max_a) && fits(max_b) && fits(max_a * max_b * n))
        .then(|| n * (1.0 + max_a + max_b) * f64::from(f32::MIN_POSITIVE))
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

/// The terms of each output of a `linear` or `conv2d`: one per weight of
/// an output (`K`, or `C/g·kH·kW`), plus one with a bias.
fn terms(c: &Call) -> usize {
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
        Node::Linear | Node::Conv2d(_) => {
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
        Node::Gelu | Node::GeluTanh => {
            // erf (or tanh) is an approximation everywhere: a few ulps of
            // 1 + erf, times |x| / 2, plus the final products; the tanh
            // form's x/2·(1 + tanh) cancels for negative x.
            let x = c.inputs[0].f64_values();
            let m: Vec<f64> = v
                .iter()
                .zip(x.iter())
                .map(|(v, x)| v.abs() + x.abs())
                .collect();
            exact(rounding(p, &v, 4.0, &m))
        }
        Node::Silu => {
            // x / (1 + exp(−x)) cancels nothing: a few ulps of the result.
            // The absolute term is 32·tiny: that common form gives −0 where
            // exp(−x) overflows float32 (x < −88.7) while the exact result
            // is up to 22·tiny (docs/operators.md).
            let m: Vec<f64> = v.iter().map(|v| v.abs()).collect();
            exact(
                rounding(p, &v, 4.0, &m)
                    .into_iter()
                    .map(|b| b + SILU_TINY * p.tiny)
                    .collect(),
            )
        }
        Node::Sin | Node::Cos => {
            // A few ulps of the result, as accurate sinf/cosf give over the
            // whole range (an argument reduction that loses |x|·u does not).
            let m: Vec<f64> = v.iter().map(|v| v.abs()).collect();
            exact(rounding(p, &v, 4.0, &m))
        }
        Node::Softmax { axis } => {
            let x = c.inputs[0].f64_values();
            affine(|lambda| softmax_local(&x, &v, &value.spec.shape, *axis, p, lambda))
        }
        Node::LayerNorm { axis, eps } => {
            affine(|lambda| layer_norm_local(c.inputs, *axis, *eps, p, lambda))
        }
        Node::RmsNorm { eps } => affine(|lambda| rms_norm_local(c.inputs, *eps, p, lambda)),
        Node::Sdpa(s) => {
            let (fixed, scaled, _) = sdpa(c.inputs, s.scale, None, p);
            (fixed, scaled)
        }
        // Data movement: exact, except where an input wider than the tier
        // (a float32 capture `check` was given at bf16) must be stored at
        // the tier's precision.
        Node::Crop(_)
        | Node::Reshape
        | Node::Permute { .. }
        | Node::Concat { .. }
        | Node::GatherRows
        | Node::RepeatRows { .. } => exact(
            v.iter()
                .map(|&v| {
                    if !c.off_tier_inputs || p.holds(v) {
                        0.0
                    } else {
                        p.u * v.abs() + p.tiny
                    }
                })
                .collect(),
        ),
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
    matches!(op, Op::Linear | Op::Conv2d | Op::Sdpa | Op::SparseConv3d)
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
        Node::Linear | Node::Conv2d(_) => {
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
        Node::GeluTanh => {
            // tanh to about an ulp of 1 + tanh, times |x|/2, and the products.
            let x = c.inputs[0].f64_values();
            v.iter()
                .zip(x.iter())
                .map(|(&v, &x)| stored(v) + rounding_var(ua, 2.0 * v.abs() + x.abs()))
                .collect()
        }
        Node::Silu => {
            // exp (an ulp, damped by e/(1 + e)), the sum and the quotient,
            // and the flush of the absolute term.
            let t = SILU_TINY * p.tiny;
            v.iter()
                .map(|&v| stored(v) + 2.0 * rounding_var(ua, v) + t * t / 3.0)
                .collect()
        }
        // An ulp or so of the result.
        Node::Sin | Node::Cos => v.iter().map(|&v| stored(v) + rounding_var(ua, v)).collect(),
        Node::Softmax { axis } => {
            let x = c.inputs[0].f64_values();
            softmax_sigma(&x, v, &value.spec.shape, *axis, p)
        }
        Node::LayerNorm { axis, eps } => layer_norm_sigma(c.inputs, *axis, *eps, p),
        Node::RmsNorm { eps } => rms_norm_sigma(c.inputs, *eps, p),
        Node::Sdpa(s) => sdpa_sigma(c.inputs, s.scale, p),
        // Coordinates and taps computed in float32 make the resize's error
        // depend on the implementation's arithmetic more than on rounding:
        // the local bound at λ = 1 stands in for a standard deviation.
        Node::ResizeBicubic(_) => fixed
            .iter()
            .zip(scaled)
            .map(|(f, s)| (f + s).powi(2) / 3.0)
            .collect(),
        Node::Crop(_)
        | Node::Reshape
        | Node::Permute { .. }
        | Node::Concat { .. }
        | Node::GatherRows
        | Node::RepeatRows { .. } => v
            .iter()
            .map(|&v| {
                if !c.off_tier_inputs || p.holds(v) {
                    0.0
                } else {
                    rounding_var(u, v) + p.tiny * p.tiny / 3.0
                }
            })
            .collect(),
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
        Node::Linear | Node::Conv2d(_) => {
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
        Node::RepeatRows { .. } => r.exec(c.op, c.attrs, &[&var(0)])?,
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
        Node::GeluTanh | Node::Silu | Node::Sin | Node::Cos => {
            let x = c.inputs[0].f64_values();
            let vx = var(0).to_f64_vec();
            let d = x
                .iter()
                .zip(vx.iter())
                .map(|(&x, &v)| {
                    // sin and cos also take the second-order term,
                    // E[(f''·δ²/2)²] = ¾·f''²·V² for a normal δ: their
                    // arguments carry absolute errors of u·|x| radians,
                    // tenths of a radian at 16 bits for |x| in the hundreds,
                    // where the slope alone vanishes at the extrema.
                    let curvature = match c.node {
                        Node::Sin => x.sin(),
                        Node::Cos => x.cos(),
                        _ => 0.0,
                    };
                    unary_slope(c.node, x).powi(2) * v + 0.75 * (curvature * v).powi(2)
                })
                .collect();
            dense(out_shape, d)
        }
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
        Node::Sdpa(s) => {
            let vars: Vec<HostTensor> = (0..3).map(var).collect();
            let p = c.precision.expect("float");
            dense(out_shape, sdpa(c.inputs, s.scale, Some(&vars), p).2)
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

/// `silu`'s absolute term, in units of the tier's `tiny` (see `evaluate`).
const SILU_TINY: f64 = 32.0;

/// √(2/π), `gelu_tanh`'s scale.
const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;

/// The logistic function without overflow: `exp` of a non-positive number only.
fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + (-x).exp())
    } else {
        let e = x.exp();
        e / (1.0 + e)
    }
}

/// The first derivative of an element-wise function of one input at `x`
/// (its limit at ±∞, where the formula would give ∞·0).
fn unary_slope(node: &Node, x: f64) -> f64 {
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

fn square(t: &HostTensor) -> HostTensor {
    dense(
        &t.spec.shape,
        t.f64_values().iter().map(|x| x * x).collect(),
    )
}

/// `factor·max|x|` over each `[H, W]` plane of an NCHW tensor, spread over
/// the output plane. Both bicubic variants have `Σ|w| ≤ 1.375` per axis, so
/// `Σ|w|·|x| ≤ 1.89·max|x|` in 2-D.
fn plane_max(x: &HostTensor, out_shape: &[usize], factor: f64) -> Result<Vec<f64>, Error> {
    let planes = out_shape[0] * out_shape[1];
    let (plane_in, plane_out) = (
        x.spec.shape[2] * x.spec.shape[3],
        out_shape[2] * out_shape[3],
    );
    let v = x.f64_values();
    if v.len() != planes * plane_in {
        return Err(Error::Tensor("resize bound: unexpected input shape".into()));
    }
    Ok(v.chunks(plane_in.max(1))
        .flat_map(|p| {
            let m = factor * p.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            std::iter::repeat_n(m, plane_out)
        })
        .collect())
}

/// Lanes of `shape` along `axis`: (outer, n, inner).
fn lanes(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

fn softmax_local(
    x: &[f64],
    p_out: &[f64],
    shape: &[usize],
    axis: usize,
    p: Precision,
    lambda: f64,
) -> Vec<f64> {
    let (outer, n, inner) = lanes(shape, axis);
    let g = growth(lambda, n);
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let m = (0..n).map(|j| x[at(j)]).fold(f64::NEG_INFINITY, f64::max);
            for j in 0..n {
                let (pj, d) = (p_out[at(j)], (x[at(j)] - m).abs());
                out[at(j)] = p.u * pj + p.u_acc * pj * (4.0 + d + g) + p.tiny;
            }
        }
    }
    out
}

/// Softmax's rounding model (variances): the exponent's argument (`u·|x − max|`), `exp`
/// (an ulp), the sum of `n` positive terms whose partial sums reach the total
/// (`n/2` of them, on average, once the largest term is in), the division,
/// and the stored result.
fn softmax_sigma(x: &[f64], p_out: &[f64], shape: &[usize], axis: usize, p: Precision) -> Vec<f64> {
    let (outer, n, inner) = lanes(shape, axis);
    let mut out = vec![0.0; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let m = (0..n).map(|j| x[at(j)]).fold(f64::NEG_INFINITY, f64::max);
            for j in 0..n {
                let (pj, d) = (p_out[at(j)], x[at(j)] - m);
                let rel = p.u_acc * p.u_acc * ((1.0 + d.abs()).powi(2) + n as f64 / 2.0 + 2.0)
                    + p.u * p.u;
                out[at(j)] = pj * pj * rel / 3.0 + p.tiny * p.tiny / 3.0;
            }
        }
    }
    out
}

/// `∂P_i/∂x_j = P_i(δ_ij − P_j)`, so `Σ_j J_ij²·V_j ≤ P_i²(V_i + Σ_j P_j²·V_j)`.
fn softmax_propagate(p_out: &[f64], v: &[f64], shape: &[usize], axis: usize) -> Vec<f64> {
    let (outer, n, inner) = lanes(shape, axis);
    let mut out = vec![0.0; p_out.len()];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let spread: f64 = (0..n).map(|j| p_out[at(j)].powi(2) * v[at(j)]).sum();
            for j in 0..n {
                out[at(j)] = p_out[at(j)].powi(2) * (v[at(j)] + spread);
            }
        }
    }
    out
}

/// One LayerNorm row: the row, its mean and `s = √(σ² + eps)`.
pub(super) struct Row<'a> {
    pub x: &'a [f64],
    pub mu: f64,
    pub var: f64,
    pub s: f64,
}

/// The rows of a LayerNorm over axes `axis..`, with their statistics.
pub(super) fn layer_norm_rows(x: &[f64], d: usize, eps: f64) -> impl Iterator<Item = Row<'_>> {
    let dn = d.max(1) as f64;
    x.chunks(d.max(1)).map(move |row| {
        let mu = row.iter().sum::<f64>() / dn;
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f64>() / dn;
        Row {
            x: row,
            mu,
            var,
            s: (var + eps).sqrt(),
        }
    })
}

/// LayerNorm over axes `axis..`: the local bound. The statistics are centred
/// sums (two-pass or Welford); docs/error-model.md has the derivation.
fn layer_norm_local(
    inputs: &[&HostTensor],
    axis: usize,
    eps: f64,
    p: Precision,
    lambda: f64,
) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let (gamma, beta) = (inputs[1].f64_values(), inputs[2].f64_values());
    let d: usize = inputs[0].spec.shape[axis..].iter().product();
    let (g, u, dn) = (growth(lambda, d), p.u_acc, d.max(1) as f64);
    let mut local = Vec::with_capacity(x.len());
    for Row { x: row, mu, var, s } in layer_norm_rows(&x, d, eps) {
        let m_abs = row.iter().map(|v| v.abs()).sum::<f64>() / dn;
        let d_mu = g * u * m_abs;
        let dc = |v: f64| u * (v.abs() + mu.abs()) + d_mu;
        let d_var =
            g * u * var + 2.0 * row.iter().map(|&v| (v - mu).abs() * dc(v)).sum::<f64>() / dn;
        let ds = 0.5 * d_var / (var + eps) + u;
        local.extend(row.iter().enumerate().map(|(j, &v)| {
            let xh = (v - mu) / s;
            let y = gamma[j] * xh + beta[j];
            gamma[j].abs() * (dc(v) / s + xh.abs() * (ds + 2.0 * u))
                + u * ((gamma[j] * xh).abs() + beta[j].abs())
                + p.u * y.abs()
                + p.tiny
        }));
    }
    local
}

/// LayerNorm's rounding model (variances; centred statistics): the sum for the mean,
/// the centred values `c = x − μ` (the mean's error shared by the row), the
/// sum of their squares (where the mean's error cancels, `Σc = 0`), the
/// square root, and `γ·c/s + β`.
fn layer_norm_sigma(inputs: &[&HostTensor], axis: usize, eps: f64, p: Precision) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let (gamma, beta) = (inputs[1].f64_values(), inputs[2].f64_values());
    let d: usize = inputs[0].spec.shape[axis..].iter().product();
    let (u, dn) = (p.u_acc, d.max(1) as f64);
    let k = u * u / 3.0;
    let mut out = Vec::with_capacity(x.len());
    for Row { x: row, mu, var, s } in layer_norm_rows(&x, d, eps) {
        let sum_sq: f64 = row.iter().map(|v| v * v).sum();
        let var_mu = k * (sum_var(d, mu * dn, sum_sq) / (dn * dn) + mu * mu);
        let c4: f64 = row.iter().map(|v| (v - mu).powi(4)).sum();
        let q = var * dn;
        // Σc²: its additions, its squares, and 2c·δc of each term's own rounding.
        let var_q = k * (sum_var(d, q, c4) + 4.0 * c4);
        let var_var = var_q / (dn * dn) + k * var * var;
        // δs/s: half the relative error of σ² + eps, and the square root.
        let rel_s = 0.25 * var_var / (var + eps).powi(2) + 2.0 * k;
        out.extend(row.iter().enumerate().map(|(j, &v)| {
            let c = v - mu;
            let xh = c / s;
            let y = gamma[j] * xh + beta[j];
            let var_c = k * c * c + var_mu;
            gamma[j].powi(2) * (var_c / (s * s) + xh * xh * rel_s)
                + k * ((gamma[j] * xh).powi(2) + y * y)
                + rounding_var(p.u, y)
                + p.tiny * p.tiny / 3.0
        }));
    }
    out
}

/// LayerNorm's propagation of the input variances `vars` (x, weight, bias):
/// `J_ij = γ_i/s·(δ_ij − 1/D − x̂_i·x̂_j/D)`, the off-diagonal part bounded
/// with `(a + b)² ≤ 2a² + 2b²`.
fn layer_norm_propagate(
    inputs: &[&HostTensor],
    axis: usize,
    eps: f64,
    vars: &[HostTensor],
) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let gamma = inputs[1].f64_values();
    let (vx, vg, vb) = (
        vars[0].f64_values(),
        vars[1].f64_values(),
        vars[2].f64_values(),
    );
    let d: usize = inputs[0].spec.shape[axis..].iter().product();
    let dn = d.max(1) as f64;
    let mut prop = Vec::with_capacity(x.len());
    for (r, Row { x: row, mu, s, .. }) in layer_norm_rows(&x, d, eps).enumerate() {
        let vx = &vx[r * d..(r + 1) * d];
        let mean_v = vx.iter().sum::<f64>() / dn;
        let xh2 = |v: f64| ((v - mu) / s).powi(2);
        let mean_xv = row.iter().zip(vx).map(|(&v, &e)| xh2(v) * e).sum::<f64>() / dn;
        prop.extend(row.iter().enumerate().map(|(j, &v)| {
            (gamma[j] / s).powi(2) * (vx[j] + 2.0 * (mean_v + xh2(v) * mean_xv) / dn)
                + vg[j] * xh2(v)
                + vb[j]
        }));
    }
    prop
}

/// One RMSNorm row: the row, `Q = ‖x‖²` and `m = max(‖x‖, eps)`.
pub(super) struct RmsRow<'a> {
    pub x: &'a [f64],
    pub q: f64,
    pub m: f64,
}

/// The rows of an RMSNorm (over the last axis, `d` long).
pub(super) fn rms_norm_rows(x: &[f64], d: usize, eps: f64) -> impl Iterator<Item = RmsRow<'_>> {
    x.chunks(d.max(1)).map(move |row| {
        let q = row.iter().map(|v| v * v).sum::<f64>();
        RmsRow {
            x: row,
            q,
            m: q.sqrt().max(eps),
        }
    })
}

/// RMSNorm's row length, `√d` and γ's length (γ repeats over the rows).
fn rms_dims(inputs: &[&HostTensor]) -> (usize, f64, usize) {
    let d = inputs[0].spec.shape.last().copied().unwrap_or(1);
    (d, (d as f64).sqrt(), inputs[1].spec.numel().max(1))
}

/// The smallest normal number of the accumulation: squares below it may be
/// flushed to 0 (a tiny row's `Q`, where eps is smaller still).
fn tiny_acc(p: Precision) -> f64 {
    if p.u_acc >= f64::from(f32::EPSILON) / 2.0 {
        f64::from(f32::MIN_POSITIVE)
    } else {
        f64::MIN_POSITIVE
    }
}

/// RMSNorm: the local bound. `Q = Σx²` is off by `δQ = (λ√d + 1)·u_acc·Q +
/// d·tiny_acc` (the additions, the squares, flushed squares); `m = √max(Q,
/// eps²)` by `δQ/(2m) + u_acc·m` (first order: `max` with eps is
/// 1-Lipschitz; the root, or eps narrowed); then `√d`, the division and two
/// products, relative `u_acc` each (5, for a reciprocal square root).
fn rms_norm_local(inputs: &[&HostTensor], eps: f64, p: Precision, lambda: f64) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let gamma = inputs[1].f64_values();
    let (d, sd, gn) = rms_dims(inputs);
    let (g, u) = (growth(lambda, d), p.u_acc);
    let mut local = Vec::with_capacity(x.len());
    for (r, RmsRow { x: row, q, m }) in rms_norm_rows(&x, d, eps).enumerate() {
        let dq = (g + 1.0) * u * q + d as f64 * tiny_acc(p);
        let rel = dq / (2.0 * m * m) + 6.0 * u;
        local.extend(row.iter().enumerate().map(|(j, &v)| {
            let y = v * sd * gamma[(r * d + j) % gn] / m;
            (rel + p.u) * y.abs() + p.tiny
        }));
    }
    local
}

/// RMSNorm's rounding model (variances): the sum of squares `V_Q =
/// u_acc²/3·S(d, Q, Σx⁴)`, the root (half `Q`'s relative error, and its own
/// rounding; eps narrowed where it is the larger), then `√d`, the division and
/// two products.
fn rms_norm_sigma(inputs: &[&HostTensor], eps: f64, p: Precision) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let gamma = inputs[1].f64_values();
    let (d, sd, gn) = rms_dims(inputs);
    let k = p.u_acc * p.u_acc / 3.0;
    let mut out = Vec::with_capacity(x.len());
    for (r, RmsRow { x: row, q, m }) in rms_norm_rows(&x, d, eps).enumerate() {
        let x4: f64 = row.iter().map(|v| v.powi(4)).sum();
        let rel_m = if q > 0.0 && q.sqrt() >= eps {
            0.25 * k * sum_var(d, q, x4) / (q * q) + k
        } else {
            k
        };
        out.extend(row.iter().enumerate().map(|(j, &v)| {
            let y = v * sd * gamma[(r * d + j) % gn] / m;
            y * y * (rel_m + 4.0 * k) + rounding_var(p.u, y) + p.tiny * p.tiny / 3.0
        }));
    }
    out
}

/// RMSNorm's propagation of the input variances `vars` (x, γ). With `x̂ =
/// x/‖x‖` and `c_i = √d·γ_i/m`, `J_ij = c_i(δ_ij − x̂_i·x̂_j)` where `‖x‖ ≥
/// eps` (`c_i·δ_ij` where eps is the larger), so `Σ_j J_ij²·V_j = c_i²((1 −
/// 2x̂_i²)·V_i + x̂_i²·Σ_j x̂_j²·V_j)` exactly; γ adds `(√d·x_i/m)²·V_γ`.
fn rms_norm_propagate(inputs: &[&HostTensor], eps: f64, vars: &[HostTensor]) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let gamma = inputs[1].f64_values();
    let (vx, vg) = (vars[0].f64_values(), vars[1].f64_values());
    let (d, sd, gn) = rms_dims(inputs);
    let mut prop = Vec::with_capacity(x.len());
    for (r, RmsRow { x: row, q, m }) in rms_norm_rows(&x, d, eps).enumerate() {
        let vx = &vx[r * d..(r + 1) * d];
        // x̂² where the norm, not eps, divides.
        let xh2 = |v: f64| {
            if q > 0.0 && q.sqrt() >= eps {
                v * v / q
            } else {
                0.0
            }
        };
        let spread: f64 = row.iter().zip(vx).map(|(&v, &e)| xh2(v) * e).sum();
        prop.extend(row.iter().enumerate().map(|(j, &v)| {
            let at = (r * d + j) % gn;
            let c = sd * gamma[at] / m;
            let h = xh2(v);
            c * c * ((1.0 - 2.0 * h) * vx[j] + h * spread).max(0.0) + (sd * v / m).powi(2) * vg[at]
        }));
    }
    prop
}

/// `a [m, k] · b`, where `b` is `[k, n]`, or `[n, k]` read transposed.
fn matmul(a: &[f64], b: &[f64], dims: (usize, usize, usize), b_transposed: bool) -> Vec<f64> {
    row_major_gemm(a, b, dims, b_transposed, 0.0, 1.0)
}

/// [`matmul`] of non-negative matrices, in float32 where nothing can
/// overflow, rounded up to an upper bound (as [`Reference::exec_nonneg`]).
fn nonneg_matmul(
    a: &[f64],
    b: &[f64],
    dims: (usize, usize, usize),
    b_transposed: bool,
) -> Vec<f64> {
    let slack = nonneg_slack(largest(a), largest(b), dims.1);
    if slack.is_none() {
        return matmul(a, b, dims, b_transposed);
    }
    let narrow = |x: &[f64]| x.par_iter().map(|&v| v as f32).collect::<Vec<f32>>();
    rounded_up(
        row_major_gemm(&narrow(a), &narrow(b), dims, b_transposed, 0.0, 1.0),
        dims.1,
        slack,
    )
}

/// [`nonneg_matmul`] of narrowed operands (float64 from their source where
/// float32 could overflow).
fn nonneg_gemm(
    a: Narrowed,
    b: Narrowed,
    dims: (usize, usize, usize),
    b_transposed: bool,
) -> Vec<f64> {
    let slack = nonneg_slack(a.largest, b.largest, dims.1);
    if slack.is_none() {
        return matmul(&a.wide(), &b.wide(), dims, b_transposed);
    }
    rounded_up(
        row_major_gemm(&a.f32, &b.f32, dims, b_transposed, 0.0, 1.0),
        dims.1,
        slack,
    )
}

/// A float32 sum of `terms` non-negative products, widened and rounded up
/// to an upper bound of the exact one.
fn rounded_up(out: Vec<f32>, terms: usize, slack: Option<f64>) -> Vec<f64> {
    let (up, slack) = (round_up_factor(terms), slack.unwrap_or(0.0));
    out.into_par_iter()
        .map(|x| f64::from(x) * up + slack)
        .collect()
}

/// `a [m, k] · b` in `T` (`zero` and `one` of it).
fn row_major_gemm<T: 'static + Copy>(
    a: &[T],
    b: &[T],
    (m, k, n): (usize, usize, usize),
    b_transposed: bool,
    zero: T,
    one: T,
) -> Vec<T> {
    let mut out = vec![zero; m * n];
    if m == 0 || n == 0 || k == 0 {
        return out;
    }
    assert!(
        a.len() >= m * k && b.len() >= k * n,
        "operands smaller than {m}x{k}x{n}"
    );
    let (b_rs, b_cs) = if b_transposed {
        (1, k as isize)
    } else {
        (n as isize, 1)
    };
    // SAFETY: `a` holds m·k and `b` k·n elements (asserted) at the given
    // strides, `out` m·n; no overlap.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            out.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr(),
            1,
            k as isize,
            b.as_ptr(),
            b_cs,
            b_rs,
            zero,
            one,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        );
    }
    out
}

fn map2(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// Attention's sizes: batch (the leading axes), queries, key width, keys,
/// value width.
#[derive(Clone, Copy)]
struct Dims {
    batch: usize,
    lq: usize,
    dk: usize,
    lk: usize,
    dv: usize,
}

impl Dims {
    fn of(inputs: &[&HostTensor]) -> Dims {
        let qs = &inputs[0].spec.shape;
        let r = qs.len();
        Dims {
            batch: qs[..r - 2].iter().product(),
            lq: qs[r - 2],
            dk: qs[r - 1],
            lk: inputs[1].spec.shape[r - 2],
            dv: inputs[2].spec.shape[r - 1],
        }
    }
}

/// The largest `[queries, keys]` matrix attention's rules hold at once
/// (32 MiB of float64): every quantity is per query row, so longer
/// sequences go a block of rows at a time (TRELLIS's 4096 tokens would
/// otherwise hold several 128 MiB matrices per head).
const ATTENTION_BLOCK: usize = 1 << 22;

/// Each batch index with its query rows, a block at a time (one block where
/// `lq·lk` fits [`ATTENTION_BLOCK`]).
fn query_blocks(
    batch: usize,
    lq: usize,
    lk: usize,
    block: usize,
) -> impl Iterator<Item = (usize, std::ops::Range<usize>)> {
    let rows = (block / lk.max(1)).clamp(1, lq.max(1));
    (0..batch).flat_map(move |b| {
        (0..lq)
            .step_by(rows)
            .map(move |start| (b, start..(start + rows).min(lq)))
    })
}

/// Attention `softmax(s·q kᵀ) v` per batch index, as matrix products:
/// without `vars`, the local bound as `(fixed, scaled)` (it is affine in λ);
/// with them, only the propagated variance.
fn sdpa(
    inputs: &[&HostTensor],
    scale: f64,
    vars: Option<&[HostTensor]>,
    p: Precision,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    sdpa_in_blocks(inputs, scale, vars, p, ATTENTION_BLOCK)
}

/// [`sdpa`] holding at most `block` elements of a `[queries, keys]` matrix.
fn sdpa_in_blocks(
    inputs: &[&HostTensor],
    scale: f64,
    vars: Option<&[HostTensor]>,
    p: Precision,
    block: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (q, k, v) = (
        inputs[0].f64_values(),
        inputs[1].f64_values(),
        inputs[2].f64_values(),
    );
    let dims = Dims::of(inputs);
    let Dims {
        batch,
        lq,
        dk,
        lk,
        dv,
    } = dims;
    let e: Option<[Vec<f64>; 3]> =
        vars.map(|e| [e[0].to_f64_vec(), e[1].to_f64_vec(), e[2].to_f64_vec()]);
    let (gd, gk) = (growth(1.0, dk), growth(1.0, lk));
    let u = p.u_acc;
    let abs = |x: &[f64]| x.iter().map(|v| v.abs()).collect::<Vec<_>>();
    let sq = |x: &[f64]| x.iter().map(|v| v * v).collect::<Vec<_>>();
    let (mut fixed, mut scaled, mut prop) = (Vec::new(), Vec::new(), Vec::new());
    for (b, rows) in query_blocks(batch, lq, lk, block) {
        let lq = rows.len();
        let qb = &q[(b * dims.lq + rows.start) * dk..][..lq * dk];
        let kb = &k[b * lk * dk..][..lk * dk];
        let vb = &v[b * lk * dv..][..lk * dv];
        let mut s = matmul(qb, kb, (lq, dk, lk), true);
        s.iter_mut().for_each(|x| *x *= scale);
        // |q|·|k|ᵀ: only the local bound needs it.
        let mut a = if e.is_none() {
            nonneg_matmul(&abs(qb), &abs(kb), (lq, dk, lk), true)
        } else {
            vec![0.0; lq * lk]
        };
        a.iter_mut().for_each(|x| *x *= scale.abs());
        // Per row: probabilities, then the local error of logits and
        // probabilities, split into the fixed part and the part ∝ λ. An
        // unfused kernel stores P at the tier's precision.
        // Rows are independent: each on any core, computed as it would be alone.
        let (mut pm, mut dp0, mut dp1) =
            (vec![0.0; lq * lk], vec![0.0; lq * lk], vec![0.0; lq * lk]);
        pm.par_chunks_mut(lk.max(1))
            .zip(dp0.par_chunks_mut(lk.max(1)))
            .zip(dp1.par_chunks_mut(lk.max(1)))
            .enumerate()
            .for_each(|(i, ((pi, d0), d1))| {
                let row = i * lk..(i + 1) * lk;
                let (si, ai) = (&s[row.clone()], &a[row]);
                let m = si.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                pi.iter_mut().zip(si).for_each(|(p, x)| *p = (x - m).exp());
                let z: f64 = pi.iter().sum();
                pi.iter_mut().for_each(|p| *p /= z);
                let (mean0, mean1) = (0..lk).fold((0.0, 0.0), |(m0, m1), j| {
                    (m0 + pi[j] * u * si[j].abs(), m1 + pi[j] * gd * u * ai[j])
                });
                for j in 0..lk {
                    d0[j] = pi[j] * (u * si[j].abs() + mean0)
                        + u * pi[j] * (4.0 + (si[j] - m).abs())
                        + p.u * pi[j];
                    d1[j] = pi[j] * (gd * u * ai[j] + mean1) + u * pi[j] * gk;
                }
            });
        if e.is_none() {
            let va = abs(vb);
            let o = matmul(&pm, vb, (lq, lk, dv), false);
            let bnd = nonneg_matmul(&pm, &va, (lq, lk, dv), false);
            let f = nonneg_matmul(&dp0, &va, (lq, lk, dv), false);
            let g = nonneg_matmul(&dp1, &va, (lq, lk, dv), false);
            fixed.extend(
                f.iter()
                    .zip(o.iter())
                    .map(|(f, o)| f + p.u * o.abs() + p.tiny),
            );
            scaled.extend(map2(&g, &bnd, |g, b| g + gk * u * b));
        }
        if let Some([vq, vk, vv]) = &e {
            // Variances: logits, probabilities (as softmax), then P·v.
            let vqb = &vq[(b * dims.lq + rows.start) * dk..][..lq * dk];
            let vkb = &vk[b * lk * dk..][..lk * dk];
            let vvb = &vv[b * lk * dv..][..lk * dv];
            let vs = map2(
                &nonneg_matmul(vqb, &sq(kb), (lq, dk, lk), true),
                &nonneg_matmul(&sq(qb), vkb, (lq, dk, lk), true),
                |x, y| scale * scale * (x + y),
            );
            let p2 = sq(&pm);
            let mut w = vec![0.0; lq * lk];
            w.par_chunks_mut(lk.max(1)).enumerate().for_each(|(i, wi)| {
                let row = i * lk..(i + 1) * lk;
                let (pi, vsi) = (&p2[row.clone()], &vs[row]);
                let spread: f64 = pi.iter().zip(vsi).map(|(p, v)| p * v).sum();
                for j in 0..lk {
                    wi[j] = pi[j] * (vsi[j] + spread);
                }
            });
            prop.extend(map2(
                &nonneg_matmul(&w, &sq(vb), (lq, lk, dv), false),
                &nonneg_matmul(&p2, vvb, (lq, lk, dv), false),
                |x, y| x + y,
            ));
        }
    }
    (fixed, scaled, prop)
}

/// Attention's rounding model (variances), per batch index: the logits as dot products
/// over `D` (scaled), the probabilities as a softmax of them (its own
/// roundings plus the logits' errors through its derivative), stored at the
/// tier's precision, and `P·v` as dot products over `Lk`.
fn sdpa_sigma(inputs: &[&HostTensor], scale: f64, p: Precision) -> Vec<f64> {
    sdpa_sigma_in_blocks(inputs, scale, p, ATTENTION_BLOCK)
}

/// [`sdpa_sigma`] holding at most `block` elements of a `[queries, keys]` matrix.
fn sdpa_sigma_in_blocks(
    inputs: &[&HostTensor],
    scale: f64,
    p: Precision,
    block: usize,
) -> Vec<f64> {
    let (q, k, v) = (
        inputs[0].f64_values(),
        inputs[1].f64_values(),
        inputs[2].f64_values(),
    );
    let dims = Dims::of(inputs);
    let Dims {
        batch,
        lq,
        dk,
        lk,
        dv,
    } = dims;
    let ku = p.u_acc * p.u_acc / 3.0;
    let sq = |x: &[f64]| x.iter().map(|v| v * v).collect::<Vec<_>>();
    let mut out = Vec::with_capacity(batch * lq * dv);
    for (b, rows) in query_blocks(batch, lq, lk, block) {
        let lq = rows.len();
        let qb = &q[(b * dims.lq + rows.start) * dk..][..lq * dk];
        let kb = &k[b * lk * dk..][..lk * dk];
        let vb = &v[b * lk * dv..][..lk * dv];
        let raw = matmul(qb, kb, (lq, dk, lk), true);
        let sq_terms_s = nonneg_matmul(&sq(qb), &sq(kb), (lq, dk, lk), true);
        let var_s: Vec<f64> = raw
            .par_iter()
            .zip(sq_terms_s.par_iter())
            .map(|(&s, &q)| scale * scale * ku * sum_var(dk, s, q) + ku * (scale * s).powi(2))
            .collect();
        let (mut pm, mut var_p) = (vec![0.0; lq * lk], vec![0.0; lq * lk]);
        pm.par_chunks_mut(lk.max(1))
            .zip(var_p.par_chunks_mut(lk.max(1)))
            .enumerate()
            .for_each(|(i, (pi, vpi))| {
                let row = i * lk..(i + 1) * lk;
                let si: Vec<f64> = raw[row.clone()].iter().map(|s| s * scale).collect();
                let vsi = &var_s[row];
                let m = si.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                pi.iter_mut()
                    .zip(si.iter())
                    .for_each(|(p, x)| *p = (x - m).exp());
                let z: f64 = pi.iter().sum();
                pi.iter_mut().for_each(|p| *p /= z);
                let spread: f64 = (0..lk).map(|j| pi[j] * pi[j] * vsi[j]).sum();
                for j in 0..lk {
                    let own = ku * ((1.0 + (si[j] - m).abs()).powi(2) + lk as f64 / 2.0 + 2.0);
                    vpi[j] = pi[j] * pi[j] * (vsi[j] + spread + own + p.u * p.u / 3.0);
                }
            });
        let o = matmul(&pm, vb, (lq, lk, dv), false);
        let sq_terms_o = nonneg_matmul(&sq(&pm), &sq(vb), (lq, lk, dv), false);
        let carried = nonneg_matmul(&var_p, &sq(vb), (lq, lk, dv), false);
        out.extend(
            o.iter()
                .zip(sq_terms_o.iter())
                .zip(carried.iter())
                .map(|((&o, &q), &c)| {
                    c + ku * sum_var(lk, o, q) + rounding_var(p.u, o) + p.tiny * p.tiny / 3.0
                }),
        );
    }
    out
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

#[cfg(test)]
mod tests {
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
}
