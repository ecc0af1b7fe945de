//! Attention (`sdpa`): its rules a block of query rows at a time.

use super::*;

pub(super) fn map2(a: &[f64], b: &[f64], f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    a.iter().zip(b).map(|(&x, &y)| f(x, y)).collect()
}

/// Attention's sizes: batch (the leading axes), queries, key width, keys,
/// value width.
#[derive(Clone, Copy)]
pub(super) struct Dims {
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
pub(super) const ATTENTION_BLOCK: usize = 1 << 22;

/// Each batch index with its query rows, a block at a time (one block where
/// `lq·lk` fits [`ATTENTION_BLOCK`]).
pub(super) fn query_blocks(
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
pub(super) fn sdpa(
    inputs: &[&HostTensor],
    node: &Sdpa,
    vars: Option<&[HostTensor]>,
    p: Precision,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    sdpa_in_blocks(inputs, node, vars, p, ATTENTION_BLOCK)
}

/// `t`'s values broadcast (NumPy's rule, the catalog checked it) to `shape`.
fn broadcast_to(t: &HostTensor, shape: &[usize]) -> Vec<f64> {
    let (from, x) = (&t.spec.shape, t.to_f64_vec());
    let lead = shape.len() - from.len();
    let mut strides = vec![0; shape.len()];
    let mut step = 1;
    for a in (0..from.len()).rev() {
        strides[lead + a] = if from[a] == 1 { 0 } else { step };
        step *= from[a];
    }
    let n: usize = shape.iter().product();
    (0..n)
        .map(|mut e| {
            let mut at = 0;
            for a in (0..shape.len()).rev() {
                at += (e % shape[a]) * strides[a];
                e /= shape[a];
            }
            x[at]
        })
        .collect()
}

/// What is added to the logits `scale · q kᵀ`: the mask (broadcast to
/// `[batch, Lq, Lk]`), −∞ where a causal row does not see a key; and the
/// mask's error variance, where it carries one.
struct Added {
    mask: Option<Vec<f64>>,
    var: Option<Vec<f64>>,
}

impl Added {
    fn of(inputs: &[&HostTensor], mask_var: Option<&HostTensor>) -> Added {
        let Some(m) = inputs.get(3) else {
            return Added {
                mask: None,
                var: None,
            };
        };
        let mut logits = inputs[0].spec.shape.clone();
        let r = logits.len();
        logits[r - 1] = inputs[1].spec.shape[r - 2];
        Added {
            mask: Some(broadcast_to(m, &logits)),
            var: mask_var.map(|v| broadcast_to(v, &logits)),
        }
    }

    /// Logits row `i` of batch `b` (`row` holds `scale · q kᵀ`), in place.
    fn apply(&self, node: &Sdpa, at: usize, i: usize, row: &mut [f64]) {
        if let Some(m) = &self.mask {
            row.iter_mut().zip(&m[at..]).for_each(|(x, m)| *x += m);
        }
        if node.causal_offset.is_some() {
            for (j, x) in row.iter_mut().enumerate() {
                if !node.sees(i, j) {
                    *x = f64::NEG_INFINITY;
                }
            }
        }
    }
}

/// [`sdpa`] holding at most `block` elements of a `[queries, keys]` matrix.
pub(super) fn sdpa_in_blocks(
    inputs: &[&HostTensor],
    node: &Sdpa,
    vars: Option<&[HostTensor]>,
    p: Precision,
    block: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let scale = node.scale;
    let added = Added::of(inputs, vars.and_then(|v| v.get(3)));
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
        let kv = node.kv_batch(b);
        let kb = &k[kv * lk * dk..][..lk * dk];
        let vb = &v[kv * lk * dv..][..lk * dv];
        let mut s = matmul(qb, kb, (lq, dk, lk), true);
        s.iter_mut().for_each(|x| *x *= scale);
        for (i, row) in s.chunks_mut(lk.max(1)).enumerate() {
            let at = (b * dims.lq + rows.start + i) * lk;
            added.apply(node, at, rows.start + i, row);
        }
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
                // A masked key (−∞) weighs nothing and adds no error.
                let seen = |j: usize| si[j] > f64::NEG_INFINITY;
                let (mean0, mean1) = (0..lk)
                    .filter(|&j| seen(j))
                    .fold((0.0, 0.0), |(m0, m1), j| {
                        (m0 + pi[j] * u * si[j].abs(), m1 + pi[j] * gd * u * ai[j])
                    });
                for j in (0..lk).filter(|&j| seen(j)) {
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
            let vkb = &vk[kv * lk * dk..][..lk * dk];
            let vvb = &vv[kv * lk * dv..][..lk * dv];
            let mut vs = map2(
                &nonneg_matmul(vqb, &sq(kb), (lq, dk, lk), true),
                &nonneg_matmul(&sq(qb), vkb, (lq, dk, lk), true),
                |x, y| scale * scale * (x + y),
            );
            if let Some(vm) = &added.var {
                // A masked key (−∞) carries no error, whatever its mask's variance.
                let at = (b * dims.lq + rows.start) * lk;
                vs.iter_mut()
                    .zip(&vm[at..])
                    .zip(&s)
                    .filter(|(_, &x)| x > f64::NEG_INFINITY)
                    .for_each(|((v, m), _)| *v += m);
            }
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
pub(super) fn sdpa_sigma(inputs: &[&HostTensor], node: &Sdpa, p: Precision) -> Vec<f64> {
    sdpa_sigma_in_blocks(inputs, node, p, ATTENTION_BLOCK)
}

/// [`sdpa_sigma`] holding at most `block` elements of a `[queries, keys]` matrix.
pub(super) fn sdpa_sigma_in_blocks(
    inputs: &[&HostTensor],
    node: &Sdpa,
    p: Precision,
    block: usize,
) -> Vec<f64> {
    let scale = node.scale;
    let added = Added::of(inputs, None);
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
        let kv = node.kv_batch(b);
        let kb = &k[kv * lk * dk..][..lk * dk];
        let vb = &v[kv * lk * dv..][..lk * dv];
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
                let mut si: Vec<f64> = raw[row.clone()].iter().map(|s| s * scale).collect();
                let at = (b * dims.lq + rows.start + i) * lk;
                added.apply(node, at, rows.start + i, &mut si);
                let vsi = &var_s[row];
                let m = si.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                pi.iter_mut()
                    .zip(si.iter())
                    .for_each(|(p, x)| *p = (x - m).exp());
                let z: f64 = pi.iter().sum();
                pi.iter_mut().for_each(|p| *p /= z);
                let spread: f64 = (0..lk).map(|j| pi[j] * pi[j] * vsi[j]).sum();
                for j in (0..lk).filter(|&j| si[j] > f64::NEG_INFINITY) {
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

/// Each output element of a rotary embedding of `x`: Some((partner, table
/// index)) where it turns (`out = x·c ± x_partner·s`), None where it passes
/// through.
fn rotary_terms(shape: &[usize], r: &Rotary) -> impl Fn(usize) -> Option<(usize, usize)> {
    let rank = shape.len();
    let (l, d) = (shape[rank - 2], shape[rank - 1].max(1));
    let half = r.dims / 2;
    let mut feature: Vec<Option<(usize, usize)>> = vec![None; d];
    for i in 0..half {
        let (a, b) = r.pair(i);
        feature[a] = Some((b, i));
        feature[b] = Some((a, i));
    }
    move |e| {
        let (row, f) = (e / d, e % d);
        feature[f].map(|(p, i)| (e - f + p, (row % l.max(1)) * half + i))
    }
}

/// Rotary embedding's local bound: two products and a sum where a feature
/// turns (`2·u_acc·(|x·c| + |x_p·s|)`), exact where it passes.
pub(super) fn rotary_local(
    inputs: &[&HostTensor],
    r: &Rotary,
    v: &[f64],
    p: Precision,
) -> Vec<f64> {
    let (x, c, s) = (
        inputs[0].f64_values(),
        inputs[1].f64_values(),
        inputs[2].f64_values(),
    );
    let terms = rotary_terms(&inputs[0].spec.shape, r);
    v.iter()
        .enumerate()
        .map(|(e, &v)| match terms(e) {
            Some((q, t)) => {
                p.u * v.abs() + 2.0 * p.u_acc * ((x[e] * c[t]).abs() + (x[q] * s[t]).abs()) + p.tiny
            }
            None => 0.0,
        })
        .collect()
}

/// Its rounding model: the two products and the sum, then the stored result.
pub(super) fn rotary_variance(
    inputs: &[&HostTensor],
    r: &Rotary,
    v: &[f64],
    p: Precision,
    stored: impl Fn(f64) -> f64,
) -> Vec<f64> {
    let (x, c, s) = (
        inputs[0].f64_values(),
        inputs[1].f64_values(),
        inputs[2].f64_values(),
    );
    let terms = rotary_terms(&inputs[0].spec.shape, r);
    let ku = p.u_acc * p.u_acc / 3.0;
    v.iter()
        .enumerate()
        .map(|(e, &v)| match terms(e) {
            Some((q, t)) => {
                stored(v) + ku * ((x[e] * c[t]).powi(2) + (x[q] * s[t]).powi(2) + v * v)
            }
            None => 0.0,
        })
        .collect()
}

/// Input errors through it: `c²·V_x + s²·V_partner + x²·V_c + x_partner²·V_s`.
pub(super) fn rotary_propagate(
    inputs: &[&HostTensor],
    r: &Rotary,
    vars: &[HostTensor],
) -> Vec<f64> {
    let (x, c, s) = (
        inputs[0].f64_values(),
        inputs[1].f64_values(),
        inputs[2].f64_values(),
    );
    let (vx, vc, vs) = (
        vars[0].to_f64_vec(),
        vars[1].to_f64_vec(),
        vars[2].to_f64_vec(),
    );
    let terms = rotary_terms(&inputs[0].spec.shape, r);
    (0..x.len())
        .map(|e| match terms(e) {
            Some((q, t)) => {
                c[t] * c[t] * vx[e]
                    + s[t] * s[t] * vx[q]
                    + x[e] * x[e] * vc[t]
                    + x[q] * x[q] * vs[t]
            }
            None => vx[e],
        })
        .collect()
}
