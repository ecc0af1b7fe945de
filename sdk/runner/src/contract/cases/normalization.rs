//! Normalisation: rows whose mean dwarfs their spread, gains near one.

use super::*;

pub(super) fn softmax(c: &mut Cases) {
    let d = c.dtype;
    let axis = Attrs::new().with("axis", AttrValue::Int(-1));
    layout_cases(c, &axis, &[vec![4, 6, 33]], 3.0);
    let v = c.normals(&[2, 8209], 3.0);
    c.add(
        "long-rows",
        "rows of 8209 elements (past any one block's width)",
        axis.clone(),
        vec![input(&[2, 8209], v, d, None)],
    );
    let (rows, cols) = (8, 67);
    let mut v = Vec::new();
    for _ in 0..rows {
        let mut row: Vec<f64> = (0..cols).map(|_| 300.0 * c.rng.unit() - 150.0).collect();
        row[c.rng.below(cols)] = 100.0 + 50.0 * c.rng.unit();
        row[c.rng.below(cols)] = f64::NEG_INFINITY;
        v.extend(row);
    }
    c.add(
        "large-logits",
        "logits from -150 to 150, every row's maximum at least 100, and -Inf entries (exp overflows unless the maximum is subtracted)",
        axis,
        vec![input(&[rows, cols], v, d, None)],
    );
}

/// A row's mean this many times its spread: one-pass `E[x²] − μ²` cancels
/// catastrophically (kept representable in 16-bit dtypes).
pub(super) fn large_mean(d: DType) -> (f64, f64) {
    match d {
        DType::F16 => (3000.0, 4.0),
        DType::BF16 => (8192.0, 256.0),
        _ => (1e4, 1.0),
    }
}

pub(super) fn layer_norm(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["eps"]).with("axis", AttrValue::Int(-1));
    for (variant, about, layout) in c.layouts(&[6, 40]) {
        let x = c.normals(&[6, 40], 2.0);
        let w: Vec<f64> = (0..40).map(|_| 1.0 + 0.3 * c.rng.normal()).collect();
        let b = c.normals(&[40], 0.5);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&[6, 40], x, d, Some(layout)),
                input(&[40], w, d, None),
                input(&[40], b, d, None),
            ],
        );
    }
    for (variant, about, shape, (mean, spread)) in [
        (
            "large-mean",
            "rows whose mean is thousands of times their spread (E[x²] ≫ σ²: one-pass variance cancels)",
            [8usize, 384],
            large_mean(d),
        ),
        ("long-rows", "rows of 4099 elements", [2, 4099], (0.0, 2.0)),
    ] {
        let x: Vec<f64> = (0..shape[0] * shape[1])
            .map(|_| mean + spread * c.rng.normal())
            .collect();
        let w: Vec<f64> = (0..shape[1]).map(|_| 1.0 + 0.3 * c.rng.normal()).collect();
        let b = c.normals(&[shape[1]], 0.5);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&shape, x, d, None),
                input(&[shape[1]], w, d, None),
                input(&[shape[1]], b, d, None),
            ],
        );
    }
}

/// γ near 1 (as trained from ones), of `shape`.
pub(super) fn gains(c: &mut Cases, shape: &[usize]) -> Vec<f64> {
    let n = shape.iter().product();
    (0..n).map(|_| 1.0 + 0.3 * c.rng.normal()).collect()
}

pub(super) fn rms_norm(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["eps"]);
    let eps = match attrs.get("eps") {
        Some(AttrValue::Float(e)) => *e,
        _ => 1e-12,
    };
    // TRELLIS's q and k: [B, L, heads, D] with γ [heads, D].
    let (shape, g_shape) = ([3usize, 4, 40], [4usize, 40]);
    for (variant, about, layout) in c.layouts(&shape) {
        let x = c.normals(&shape, 2.0);
        let g = gains(c, &g_shape);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&shape, x, d, Some(layout)),
                input(&g_shape, g, d, None),
            ],
        );
    }
    // Rows of every scale: the squares of a huge row stay inside float32
    // (the accumulation), a tiny row's norm stays above eps, another's
    // falls below it (divided by eps), and an all-zero row gives 0.
    let (huge, small): (f64, f64) = match d {
        DType::F16 => (3e4, 2e-3),
        DType::F64 => (1e100, 1e-100),
        _ => (1e17, 1e-9),
    };
    let (rows, len) = (10usize, 48usize);
    let below = 0.1 * eps / (len as f64).sqrt();
    let mut x = Vec::with_capacity(rows * len);
    for r in 0..rows {
        let scale = match r % 5 {
            0 => 1.0,
            1 => huge,
            2 => small.max(1e3 * eps),
            3 => below,
            _ => 0.0,
        };
        x.extend((0..len).map(|_| scale * c.rng.normal()));
    }
    let g = gains(c, &[len]);
    c.add(
        "row-scales",
        "rows of every scale against a γ of the last axis only: huge (squares near float32's range), tiny, below eps (divided by eps) and all zero (0)",
        attrs.clone(),
        vec![input(&[rows, len], x, d, None), input(&[len], g, d, None)],
    );
    let shape = [2usize, 4099];
    let x = c.normals(&shape, 2.0);
    let g = gains(c, &shape);
    c.add(
        "long-rows",
        "rows of 4099 elements, γ the input's whole shape",
        attrs,
        vec![input(&shape, x, d, None), input(&shape, g, d, None)],
    );
}

/// Inference batch norm: views of `[N, C, H, W]`, channels whose running
/// variance is 0 (the result is `(x − mean)/√eps`: an eps ignored or
/// misplaced shows at once), a mean thousands of times the spread (the folded
/// `x·k + (b − mean·k)` cancels) and `[N, C]` of an MLP.
pub(super) fn batch_norm(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["eps"]);
    let stats = |c: &mut Cases, ch: usize, zero_var: bool, centre: f64| -> Vec<Vec<f64>> {
        let mean: Vec<f64> = (0..ch).map(|_| centre + c.rng.normal()).collect();
        let var: Vec<f64> = (0..ch)
            .map(|i| {
                if zero_var && i % 2 == 0 {
                    0.0
                } else {
                    0.2 + 3.0 * c.rng.unit()
                }
            })
            .collect();
        let w = gains(c, &[ch]);
        let b = c.normals(&[ch], 0.5);
        vec![mean, var, w, b]
    };
    let with_stats = |x: Input, s: Vec<Vec<f64>>| {
        let ch = s[0].len();
        let mut v = vec![x];
        v.extend(s.into_iter().map(|p| input(&[ch], p, d, None)));
        v
    };
    let shape = [2, 6, 5, 7];
    for (variant, about, layout) in c.layouts(&shape) {
        let x = c.normals(&shape, 2.0);
        let s = stats(c, 6, false, 0.0);
        c.add(
            variant,
            about,
            attrs.clone(),
            with_stats(input(&shape, x, d, Some(layout)), s),
        );
    }
    let s = stats(c, 6, true, 0.0);
    let x: Vec<f64> = (0..2 * 6 * 35)
        .map(|e| s[0][(e / 35) % 6] + 1e-3 * c.rng.normal())
        .collect();
    c.add(
        "zero-variance",
        "every other channel's running variance 0, x within 1e-3 of its mean: (x − mean)/√eps",
        attrs.clone(),
        with_stats(input(&[2, 6, 5, 7], x, d, None), s),
    );
    let (centre, spread) = large_mean(d);
    let s = stats(c, 6, false, centre);
    let x: Vec<f64> = (0..2 * 6 * 35)
        .map(|e| s[0][(e / 35) % 6] + spread * c.rng.normal())
        .collect();
    c.add(
        "large-mean",
        "running means thousands of times the spread (the folded x·k + (b − mean·k) cancels)",
        attrs.clone(),
        with_stats(input(&[2, 6, 5, 7], x, d, None), s),
    );
    let s = stats(c, 6, false, 0.0);
    let x = c.normals(&[37, 6], 2.0);
    c.add(
        "rank-2",
        "[N, C] (BatchNorm1d after a linear layer)",
        attrs,
        with_stats(input(&[37, 6], x, d, None), s),
    );
}

/// Group norm on the three layouts with the component's groups and eps,
/// then groups of one channel (instance norm) and of all (layer norm over
/// `[C, ...]`), a group of constant values (variance 0: `eps` alone), and
/// a large mean against the spread (cancellation).
pub(super) fn group_norm(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["groups", "eps"]);
    let ch = c
        .needed
        .template_specs
        .first()
        .and_then(|s| s.shape.get(1).copied())
        .unwrap_or(6);
    let groups = match attrs.get("groups") {
        Some(AttrValue::Int(g)) if *g >= 1 => *g as usize,
        _ => 1,
    };
    let shape = [2, ch, 5, 3];
    let params = |c: &mut Cases| {
        let w = gains(c, &[ch]);
        let b = c.normals(&[ch], 0.5);
        [input(&[ch], w, d, None), input(&[ch], b, d, None)]
    };
    for (variant, about, layout) in c.layouts(&shape) {
        let x = c.normals(&shape, 2.0);
        let [w, b] = params(c);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![input(&shape, x, d, Some(layout)), w, b],
        );
    }
    let with_groups = |g: usize| {
        let mut a = attrs.clone();
        a.0.retain(|(n, _)| n != "groups");
        a.with("groups", AttrValue::Int(g as i64))
    };
    for (variant, about, g) in [
        ("instance", "groups = C: each channel alone", ch),
        ("layer", "groups = 1: the whole sample", 1),
    ] {
        let x = c.normals(&shape, 2.0);
        let [w, b] = params(c);
        c.add(
            variant,
            about,
            with_groups(g),
            vec![input(&shape, x, d, None), w, b],
        );
    }
    let per_group = ch / groups.max(1) * 15;
    let x: Vec<f64> = (0..2 * ch * 15)
        .map(|e| {
            let group = e / per_group.max(1);
            if group.is_multiple_of(2) {
                1.5 // constant: variance 0
            } else {
                40.0 + 0.01 * (e % 7) as f64
            }
        })
        .collect();
    let [w, b] = params(c);
    c.add(
        "constant-groups",
        "constant groups (variance 0: eps alone) beside groups with a large mean and a small spread",
        attrs.clone(),
        vec![input(&shape, x, d, None), w, b],
    );
}
