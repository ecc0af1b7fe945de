//! Linear and convolution: odd sizes, transposed and broadcast weights.

use super::*;

pub(super) fn linear(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    let (k, n) = (37, 19);
    let scale = 1.0 / (k as f64).sqrt();
    for (variant, about, layout) in c.layouts(&[3, 5, k]) {
        let x = c.normals(&[3, 5, k], 1.0);
        let w = c.normals(&[n, k], scale);
        let b = c.normals(&[n], 0.1);
        c.add(
            variant,
            about,
            none.clone(),
            vec![
                input(&[3, 5, k], x, d, Some(layout)),
                input(&[n, k], w, d, None),
                input(&[n], b, d, None),
            ],
        );
    }
    let x = c.normals(&[7, k], 1.0);
    let w = c.normals(&[n, k], scale);
    c.add(
        "transposed-weight",
        "the weight passed as a transposed view of a [K, N] matrix, no bias",
        none.clone(),
        vec![
            input(&[7, k], x, d, None),
            input(&[n, k], w, d, Some(transposed(&[n, k]))),
        ],
    );
    let long = 4099;
    let x = c.normals(&[4, long], 1.0);
    let w = c.normals(&[33, long], 1.0 / (long as f64).sqrt());
    let b = c.normals(&[33], 0.1);
    c.add(
        "long-k",
        "a reduction of 4099 terms (odd, past any tile)",
        none.clone(),
        vec![
            input(&[4, long], x, d, None),
            input(&[33, long], w, d, None),
            input(&[33], b, d, None),
        ],
    );
    let (_, tiny, sub) = values::limits(d);
    let x = c.with_specials(&[6, k], 1.0, &[0.0, -0.0, sub, -sub, tiny, f64::NAN]);
    let w = c.normals(&[n, k], scale);
    let b = c.normals(&[n], 0.1);
    c.add(
        "specials",
        "±0, subnormal and NaN inputs (a NaN makes its row NaN)",
        none,
        vec![
            input(&[6, k], x, d, None),
            input(&[n, k], w, d, None),
            input(&[n], b, d, None),
        ],
    );
}

pub(super) fn conv2d(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["strides", "pads", "dilations", "groups"]);
    let ints = |name: &str, default: [i64; 2]| match attrs.get(name) {
        Some(AttrValue::Ints(v)) if v.len() >= 2 => [v[0], v[1]],
        _ => default,
    };
    let (s, dil) = (ints("strides", [1, 1]), ints("dilations", [1, 1]));
    let groups = match attrs.get("groups") {
        Some(AttrValue::Int(g)) => (*g).max(1) as usize,
        _ => 1,
    };
    let w_spec = c.needed.template_specs.get(1).map(|s| s.shape.clone());
    let (cg, kh, kw) = match w_spec.as_deref() {
        Some([_, cg, kh, kw]) => (*cg, *kh, *kw),
        _ => (3, 3, 3),
    };
    let (ch, out) = (cg * groups, 4 * groups);
    let h = (dil[0] as usize) * (kh - 1) + 1 + 2 * s[0] as usize + 1;
    let w = (dil[1] as usize) * (kw - 1) + 1 + 3 * s[1] as usize + 2;
    let x_shape = [2, ch, h, w];
    let w_shape = [out, cg, kh, kw];
    let scale = 1.0 / ((cg * kh * kw) as f64).sqrt();
    for (variant, about, layout) in c.layouts(&x_shape) {
        let x = c.normals(&x_shape, 1.0);
        let wv = c.normals(&w_shape, scale);
        let b = c.normals(&[out], 0.1);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&x_shape, x, d, Some(layout)),
                input(&w_shape, wv, d, None),
                input(&[out], b, d, None),
            ],
        );
    }
}

/// Batched matmul: the three layouts of `a`, then batch axes that
/// broadcast both ways (`[3, 1, M, K] @ [4, K, N]`), `b` given as a
/// transposed view, and `K = 1`.
pub(super) fn matmul(c: &mut Cases) {
    let d = c.dtype;
    let none = Attrs::new();
    let (m, k, n) = (5, 37, 19);
    let scale = 1.0 / (k as f64).sqrt();
    for (variant, about, layout) in c.layouts(&[2, 3, m, k]) {
        let a = c.normals(&[2, 3, m, k], 1.0);
        let b = c.normals(&[2, 3, k, n], scale);
        c.add(
            variant,
            about,
            none.clone(),
            vec![
                input(&[2, 3, m, k], a, d, Some(layout)),
                input(&[2, 3, k, n], b, d, None),
            ],
        );
    }
    let a = c.normals(&[3, 1, m, k], 1.0);
    let b = c.normals(&[4, k, n], scale);
    c.add(
        "broadcast-batch",
        "batch axes broadcast both ways: [3, 1, M, K] @ [4, K, N] is [3, 4, M, N]",
        none.clone(),
        vec![
            input(&[3, 1, m, k], a, d, None),
            input(&[4, k, n], b, d, None),
        ],
    );
    let a = c.normals(&[2, m, k], 1.0);
    let b = c.normals(&[2, k, n], scale);
    c.add(
        "transposed-b",
        "b passed as a transposed view (its last axis not contiguous)",
        none.clone(),
        vec![
            input(&[2, m, k], a, d, None),
            input(&[2, k, n], b, d, Some(transposed(&[2, k, n]))),
        ],
    );
    let a = c.normals(&[7, 1], 1.0);
    let b = c.normals(&[1, 9], 1.0);
    c.add(
        "outer-product",
        "K = 1: an outer product",
        none,
        vec![input(&[7, 1], a, d, None), input(&[1, 9], b, d, None)],
    );
}
