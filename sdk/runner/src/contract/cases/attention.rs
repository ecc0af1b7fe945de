//! Attention: long rows, extreme logits, every layout of q, k and v; with
//! the suite's grouped heads, causal offset and mask: keys masked by −∞, a
//! KV cache's offset.

use super::*;

/// The suite's use of `sdpa`: query heads per key/value head, and the
/// pattern of its mask (`Some(dims)`: 1 where it broadcasts, else 0).
struct Use {
    group: usize,
    mask: Option<Vec<usize>>,
}

impl Use {
    fn of(c: &Cases) -> Use {
        let specs = &c.needed.template_specs;
        let heads = |i: usize| {
            specs
                .get(i)
                .and_then(|s| s.shape.len().checked_sub(3).map(|a| s.shape[a]))
        };
        let group = match (heads(0), heads(1)) {
            (Some(hq), Some(hkv)) if hkv > 0 && hq % hkv == 0 => (hq / hkv).min(4),
            _ => 1,
        };
        let mask = specs
            .get(3)
            .map(|m| m.shape.iter().map(|&d| usize::from(d != 1)).collect());
        Use { group, mask }
    }

    /// q [1, 2·group, lq, head], k and v [1, 2, lk, *], and the mask (its
    /// broadcast axes kept at 1): normal biases, −∞ on about one key in
    /// eight (never key 0, which every causal row sees).
    fn inputs(
        &self,
        c: &mut Cases,
        lq: usize,
        lk: usize,
        qkv: [Vec<f64>; 3],
        layouts: [Option<Layout>; 3],
    ) -> Vec<Input> {
        let d = c.dtype;
        let [q, k, v] = self.shapes(lq, lk);
        let [lq_, lk_, lv] = layouts;
        let [qv, kv, vv] = qkv;
        let mut out = vec![
            input(&q, qv, d, lq_),
            input(&k, kv, d, lk_),
            input(&v, vv, d, lv),
        ];
        if let Some(pattern) = &self.mask {
            let logits = [1, 2 * self.group, lq, lk];
            let lead = logits.len().saturating_sub(pattern.len());
            let shape: Vec<usize> = pattern
                .iter()
                .enumerate()
                .map(|(a, &full)| if full == 1 { logits[lead + a] } else { 1 })
                .collect();
            let last = shape.last().copied().unwrap_or(1);
            let n: usize = shape.iter().product();
            let m = (0..n)
                .map(|e| {
                    if e % last != 0 && c.rng.below(8) == 0 {
                        f64::NEG_INFINITY
                    } else {
                        c.rng.normal()
                    }
                })
                .collect();
            out.push(input(&shape, m, d, None));
        }
        out
    }

    fn shapes(&self, lq: usize, lk: usize) -> [Vec<usize>; 3] {
        let (head, dv) = (24, 40);
        [
            vec![1, 2 * self.group, lq, head],
            vec![1, 2, lk, head],
            vec![1, 2, lk, dv],
        ]
    }
}

pub(super) fn sdpa(c: &mut Cases) {
    let attrs = c.kept(&["scale", "causal_offset"]);
    let using = Use::of(c);
    let head = 24usize;
    let scale = match attrs.get("scale") {
        Some(AttrValue::Float(s)) => *s,
        _ => 1.0 / (head as f64).sqrt(),
    };
    // Logits of a few units: q and k with entries of size scale^-1/2.
    let qk = (1.0 / (scale * (head as f64).sqrt())).sqrt();
    let [q, k, v] = using.shapes(17, 33);
    for (variant, about, layout) in c.layouts(&k) {
        let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
        // Keys and values laid out alike (a KV cache's view of both).
        let vl = match variant {
            "transposed" => transposed(&v),
            "padded" => padded(&v, 3, 1),
            _ => broadcast(&v, 1),
        };
        let ins = using.inputs(c, 17, 33, [qv, kv, vv], [None, Some(layout), Some(vl)]);
        c.add(
            &format!("{variant}-kv"),
            &about.replace("an input", "keys and values"),
            attrs.clone(),
            ins,
        );
    }
    let [q, k, v] = using.shapes(5, 1031);
    let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
    let ins = using.inputs(c, 5, 1031, [qv, kv, vv], [None, None, None]);
    c.add(
        "long-keys",
        "1031 keys (odd, past any tile)",
        attrs.clone(),
        ins,
    );
    if attrs.get("causal_offset").is_some() {
        // A KV cache: the queries are the last 7 of 40 positions, each
        // seeing itself and everything before.
        let [q, k, v] = using.shapes(7, 40);
        let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
        let ins = using.inputs(c, 7, 40, [qv, kv, vv], [None, None, None]);
        let cache = c.kept(&["scale"]).with("causal_offset", AttrValue::Int(33));
        c.add(
            "kv-cache",
            "7 queries after 33 cached keys (causal_offset 33): query i sees keys 0 to 33 + i",
            cache,
            ins,
        );
    }
    // Every query aligned with one key so that scale·q·k reaches 100-150
    // (key 0 under a causal mask, the only one every row sees).
    let [q, k, v] = using.shapes(9, 33);
    let kv = c.normals(&k, 1.0);
    let mut qv = Vec::new();
    for hq in 0..q[1] {
        let h = hq / using.group;
        for _ in 0..9 {
            let j = if attrs.get("causal_offset").is_some() {
                0
            } else {
                c.rng.below(33)
            };
            let key = &kv[(h * 33 + j) * head..(h * 33 + j + 1) * head];
            let norm2: f64 = key.iter().map(|x| x * x).sum();
            let target = 100.0 + 50.0 * c.rng.unit();
            qv.extend(key.iter().map(|x| x * target / (scale * norm2)));
        }
    }
    let vv = c.normals(&v, 1.0);
    let ins = using.inputs(c, 9, 33, [qv, kv, vv], [None, None, None]);
    c.add(
        "large-logits",
        "attention logits of 100 to 150 (exp overflows unless the maximum is subtracted)",
        attrs,
        ins,
    );
}

pub(super) fn rotary(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["interleaved"]);
    let specs = &c.needed.template_specs;
    // The suite's head width and pairs; rows of positions from `start`.
    let width = specs
        .first()
        .and_then(|s| s.shape.last().copied())
        .unwrap_or(16)
        .max(2);
    let half = specs
        .get(1)
        .and_then(|s| s.shape.get(1).copied())
        .unwrap_or(width / 2)
        .clamp(1, width / 2);
    let tables = |l: usize, start: f64| -> [Vec<f64>; 2] {
        let angle = |p: usize, i: usize| {
            (start + p as f64) * 10000f64.powf(-2.0 * i as f64 / (2 * half) as f64)
        };
        let all = |f: fn(f64) -> f64| {
            (0..l * half)
                .map(|e| f(angle(e / half, e % half)))
                .collect()
        };
        [all(f64::cos), all(f64::sin)]
    };
    let x_shape = [2, 3, 7, width];
    for (variant, about, layout) in c.layouts(&x_shape) {
        let x = c.normals(&x_shape, 1.0);
        let [cos, sin] = tables(7, 0.0);
        c.add(
            variant,
            about,
            attrs.clone(),
            vec![
                input(&x_shape, x, d, Some(layout)),
                input(&[7, half], cos, d, None),
                input(&[7, half], sin, d, None),
            ],
        );
    }
    let l = 1031;
    let shape = [1, 2, l, width];
    let x = c.normals(&shape, 1.0);
    let [cos, sin] = tables(l, 131_072.0);
    c.add(
        "long-cache",
        "1031 rows at positions from 131072 (a long KV cache: the tables are the call's, never recomputed from a row index)",
        attrs,
        vec![
            input(&shape, x, d, None),
            input(&[l, half], cos, d, None),
            input(&[l, half], sin, d, None),
        ],
    );
}
