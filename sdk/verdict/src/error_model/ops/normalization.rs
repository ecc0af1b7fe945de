//! Normalisation: softmax, layer_norm and rms_norm, row by row.

use super::*;

/// Lanes of `shape` along `axis`: (outer, n, inner).
pub(super) fn lanes(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

pub(super) fn softmax_local(
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
pub(super) fn softmax_sigma(
    x: &[f64],
    p_out: &[f64],
    shape: &[usize],
    axis: usize,
    p: Precision,
) -> Vec<f64> {
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
pub(super) fn softmax_propagate(
    p_out: &[f64],
    v: &[f64],
    shape: &[usize],
    axis: usize,
) -> Vec<f64> {
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
pub(in crate::error_model) struct Row<'a> {
    pub x: &'a [f64],
    pub mu: f64,
    pub var: f64,
    pub s: f64,
}

/// The rows of a LayerNorm over axes `axis..`, with their statistics.
pub(in crate::error_model) fn layer_norm_rows(
    x: &[f64],
    d: usize,
    eps: f64,
) -> impl Iterator<Item = Row<'_>> {
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

/// Row `r`'s affine parameters: the normalised shape's own (`d` long, every
/// row's), or one row per row of `x` (group norm's per-channel parameters
/// spread over its rows by [`GroupRows`]).
fn affine_row(t: &[f64], r: usize, d: usize) -> &[f64] {
    if t.len() == d {
        t
    } else {
        &t[r * d..(r + 1) * d]
    }
}

/// A group norm as a layer norm over rows `[N, G, C/G·spatial]`, with its
/// per-channel weight and bias spread to one value per element.
pub(super) struct GroupRows {
    x: HostTensor,
    weight: HostTensor,
    bias: HostTensor,
}

impl GroupRows {
    pub fn of(inputs: &[&HostTensor], groups: usize) -> GroupRows {
        let shape = &inputs[0].spec.shape;
        let (n, c) = (shape[0], shape[1]);
        let spatial: usize = shape[2..].iter().product();
        let rows = [n, groups, c / groups.max(1) * spatial];
        let spread = |t: &HostTensor| {
            let per_channel = t.f64_values();
            let v = (0..n * c * spatial)
                .map(|e| per_channel[e / spatial.max(1) % c.max(1)])
                .collect();
            dense(&rows, v)
        };
        GroupRows {
            x: dense(&rows, inputs[0].f64_values().to_vec()),
            weight: spread(inputs[1]),
            bias: spread(inputs[2]),
        }
    }

    pub fn inputs(&self) -> [&HostTensor; 3] {
        [&self.x, &self.weight, &self.bias]
    }

    pub fn owned(self) -> [HostTensor; 3] {
        [self.x, self.weight, self.bias]
    }
}

/// LayerNorm over axes `axis..`: the local bound. The statistics are centred
/// sums (two-pass or Welford); docs/error-model.md has the derivation.
pub(super) fn layer_norm_local(
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
    for (r, Row { x: row, mu, var, s }) in layer_norm_rows(&x, d, eps).enumerate() {
        let (gamma, beta) = (affine_row(&gamma, r, d), affine_row(&beta, r, d));
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
pub(super) fn layer_norm_sigma(
    inputs: &[&HostTensor],
    axis: usize,
    eps: f64,
    p: Precision,
) -> Vec<f64> {
    let x = inputs[0].f64_values();
    let (gamma, beta) = (inputs[1].f64_values(), inputs[2].f64_values());
    let d: usize = inputs[0].spec.shape[axis..].iter().product();
    let (u, dn) = (p.u_acc, d.max(1) as f64);
    let k = u * u / 3.0;
    let mut out = Vec::with_capacity(x.len());
    for (r, Row { x: row, mu, var, s }) in layer_norm_rows(&x, d, eps).enumerate() {
        let (gamma, beta) = (affine_row(&gamma, r, d), affine_row(&beta, r, d));
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
pub(super) fn layer_norm_propagate(
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
        let (gamma, vg, vb) = (
            affine_row(&gamma, r, d),
            affine_row(&vg, r, d),
            affine_row(&vb, r, d),
        );
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
pub(in crate::error_model) struct RmsRow<'a> {
    pub x: &'a [f64],
    pub q: f64,
    pub m: f64,
}

/// The rows of an RMSNorm (over the last axis, `d` long).
pub(in crate::error_model) fn rms_norm_rows(
    x: &[f64],
    d: usize,
    eps: f64,
) -> impl Iterator<Item = RmsRow<'_>> {
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
pub(super) fn rms_dims(inputs: &[&HostTensor]) -> (usize, f64, usize) {
    let d = inputs[0].spec.shape.last().copied().unwrap_or(1);
    (d, (d as f64).sqrt(), inputs[1].spec.numel().max(1))
}

/// The smallest normal number of the accumulation: squares below it may be
/// flushed to 0 (a tiny row's `Q`, where eps is smaller still).
pub(super) fn tiny_acc(p: Precision) -> f64 {
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
pub(super) fn rms_norm_local(
    inputs: &[&HostTensor],
    eps: f64,
    p: Precision,
    lambda: f64,
) -> Vec<f64> {
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
pub(super) fn rms_norm_sigma(inputs: &[&HostTensor], eps: f64, p: Precision) -> Vec<f64> {
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
pub(super) fn rms_norm_propagate(
    inputs: &[&HostTensor],
    eps: f64,
    vars: &[HostTensor],
) -> Vec<f64> {
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

/// One element of an inference batch norm: its channel's statistics and the
/// element's own terms.
pub(super) struct BatchNormElement {
    pub channel: usize,
    /// `weight / √(var + eps)`: the slope in x (and, negated, in mean).
    pub k: f64,
    /// `x − mean`.
    pub centred: f64,
    pub x: f64,
    pub mean: f64,
    pub bias: f64,
    /// `weight · x̂ / (2·(var + eps))`: the slope in var, negated.
    pub k_var: f64,
    /// `x̂ = (x − mean) / √(var + eps)`: the slope in weight.
    pub normalized: f64,
}

/// Every element of a batch norm of `inputs` (x, mean, var, weight, bias),
/// row-major over x's shape, channel axis 1, one at a time.
pub(super) fn batch_norm_elements<'a>(
    inputs: &[&'a HostTensor],
    eps: f64,
) -> impl Iterator<Item = BatchNormElement> + 'a {
    let shape = &inputs[0].spec.shape;
    let (ch, inner) = (shape[1].max(1), shape[2..].iter().product::<usize>().max(1));
    let per: Vec<Vec<f64>> = (1..5).map(|i| inputs[i].to_f64_vec()).collect();
    let xs = inputs[0].f64_values();
    (0..xs.len()).map(move |e| {
        let (x, channel) = (xs[e], (e / inner) % ch);
        let (mean, var, w, b) = (
            per[0][channel],
            per[1][channel],
            per[2][channel],
            per[3][channel],
        );
        let s2 = var + eps;
        let s = s2.sqrt();
        let normalized = (x - mean) / s;
        BatchNormElement {
            channel,
            k: w / s,
            centred: x - mean,
            x,
            mean,
            bias: b,
            k_var: w * normalized / (2.0 * s2),
            normalized,
        }
    })
}

/// The magnitude a batch norm's roundings scale with: the unfolded form's
/// `|k·(x − mean)|` and the folded form's `x·k + (b − mean·k)`, whose two
/// products cancel where the mean is large against the spread.
fn batch_norm_magnitude(t: &BatchNormElement) -> f64 {
    t.k.abs() * (t.x.abs() + t.mean.abs()) + (t.k * t.centred).abs() + t.bias.abs()
}

/// `u·|v| + 4·u_acc·m + tiny`, `m` as [`batch_norm_magnitude`]: the
/// subtraction, the root of var + eps, the division, the product and the
/// bias, or the folded form's two products and two sums.
pub(super) fn batch_norm_local(
    inputs: &[&HostTensor],
    eps: f64,
    v: &[f64],
    p: Precision,
) -> Vec<f64> {
    batch_norm_elements(inputs, eps)
        .zip(v)
        .map(|(t, &v)| p.u * v.abs() + 4.0 * p.u_acc * batch_norm_magnitude(&t) + p.tiny)
        .collect()
}

/// The folded form's roundings: `x·k`, `mean·k`, `b − mean·k` and the sum.
/// (The channel's scale, computed once per channel, rounds the same way for
/// all its elements: the stage marks the output `shared`, graph.rs.)
pub(super) fn batch_norm_sigma(
    inputs: &[&HostTensor],
    eps: f64,
    v: &[f64],
    stored: impl Fn(f64) -> f64,
    p: Precision,
) -> Vec<f64> {
    batch_norm_elements(inputs, eps)
        .zip(v)
        .map(|(t, &v)| {
            let shift = t.bias - t.mean * t.k;
            let terms = (t.x * t.k).powi(2) + (t.mean * t.k).powi(2) + shift * shift + v * v;
            stored(v) + p.u_acc * p.u_acc / 3.0 * terms
        })
        .collect()
}

/// `k²·(V_x + V_mean) + k_var²·V_var + x̂²·V_weight + V_bias`; the
/// statistics' variances are per channel.
pub(super) fn batch_norm_propagate(
    inputs: &[&HostTensor],
    eps: f64,
    vars: &[HostTensor],
) -> Vec<f64> {
    let vx = vars[0].f64_values();
    let per: Vec<Vec<f64>> = (1..5).map(|i| vars[i].to_f64_vec()).collect();
    batch_norm_elements(inputs, eps)
        .enumerate()
        .map(|(e, t)| {
            let c = t.channel;
            t.k * t.k * (vx[e] + per[0][c])
                + t.k_var * t.k_var * per[1][c]
                + t.normalized * t.normalized * per[2][c]
                + per[3][c]
        })
        .collect()
}
