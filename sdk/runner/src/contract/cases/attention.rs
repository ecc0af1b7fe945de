//! Attention: long rows, extreme logits, every layout of q, k and v.

use super::*;

pub(super) fn sdpa(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["scale"]);
    let (head, dv) = (24usize, 40usize);
    let scale = match attrs.get("scale") {
        Some(AttrValue::Float(s)) => *s,
        _ => 1.0 / (head as f64).sqrt(),
    };
    // Logits of a few units: q and k with entries of size scale^-1/2.
    let qk = (1.0 / (scale * (head as f64).sqrt())).sqrt();
    let shapes = |lq: usize, lk: usize| {
        [
            vec![1, 2, lq, head],
            vec![1, 2, lk, head],
            vec![1, 2, lk, dv],
        ]
    };
    let [q, k, v] = shapes(17, 33);
    for (variant, about, layout) in c.layouts(&k) {
        let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
        // Keys and values laid out alike (a KV cache's view of both).
        let vl = match variant {
            "transposed" => transposed(&v),
            "padded" => padded(&v, 3, 1),
            _ => broadcast(&v, 1),
        };
        c.add(
            &format!("{variant}-kv"),
            &about.replace("an input", "keys and values"),
            attrs.clone(),
            vec![
                input(&q, qv, d, None),
                input(&k, kv, d, Some(layout)),
                input(&v, vv, d, Some(vl)),
            ],
        );
    }
    let [q, k, v] = shapes(5, 1031);
    let (qv, kv, vv) = (c.normals(&q, qk), c.normals(&k, qk), c.normals(&v, 1.0));
    c.add(
        "long-keys",
        "1031 keys (odd, past any tile)",
        attrs.clone(),
        vec![
            input(&q, qv, d, None),
            input(&k, kv, d, None),
            input(&v, vv, d, None),
        ],
    );
    // Every query aligned with one key so that scale·q·k reaches 100-150.
    let [q, k, v] = shapes(9, 33);
    let kv = c.normals(&k, 1.0);
    let mut qv = Vec::new();
    for h in 0..2 {
        for _ in 0..9 {
            let j = c.rng.below(33);
            let key = &kv[(h * 33 + j) * head..(h * 33 + j + 1) * head];
            let norm2: f64 = key.iter().map(|x| x * x).sum();
            let target = 100.0 + 50.0 * c.rng.unit();
            qv.extend(key.iter().map(|x| x * target / (scale * norm2)));
        }
    }
    let vv = c.normals(&v, 1.0);
    c.add(
        "large-logits",
        "attention logits of 100 to 150 (exp overflows unless the maximum is subtracted)",
        attrs,
        vec![
            input(&q, qv, d, None),
            input(&k, kv, d, None),
            input(&v, vv, d, None),
        ],
    );
}
