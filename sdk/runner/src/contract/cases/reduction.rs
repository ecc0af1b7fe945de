//! Reductions: windows hanging over the edge (ceil_mode, padding), all-equal
//! windows (max's ties), all-negative data (padding that is not −∞), NaN and
//! ±Inf, sums that overflow a 16-bit accumulator, rows past a block.

use super::*;
use vsdk_catalog::{Node, TensorSpec};

/// Whether the catalog accepts `op` with `attrs` on an input of `shape`.
fn fits(c: &Cases, attrs: &Attrs, shape: &[usize]) -> bool {
    Node::infer(c.op, attrs, &[TensorSpec::new(c.dtype, shape)]).is_ok()
}

fn pair(attrs: &Attrs, name: &str, default: usize) -> [usize; 2] {
    match attrs.get(name) {
        Some(AttrValue::Ints(v)) if v.len() == 2 => [v[0].max(1) as usize, v[1].max(1) as usize],
        _ => [default; 2],
    }
}

/// Values of `dtype` in `[lo, 2·lo)` whose window sums overflow float16
/// unless accumulated wider (for float16 only: the others' accumulators
/// are float32, the storage's own range).
fn f16_overflowing(c: &mut Cases, shape: &[usize]) -> Option<(Vec<f64>, &'static str)> {
    (c.dtype == DType::F16).then(|| {
        let n = shape.iter().product();
        let v = (0..n).map(|_| 4096.0 * (1.0 + c.rng.unit())).collect();
        (
            v,
            "float16 values from 4096 to 8192: a window's sum passes 65504 unless accumulated in float32",
        )
    })
}

/// NaN, ±Inf and the dtype's specials in about one element of eight; for a
/// sum, no value whose total leaves the dtype's range.
fn with_specials(c: &mut Cases, shape: &[usize]) -> Vec<f64> {
    let (max, _, _) = values::limits(c.dtype);
    let mut allowed = specials(c.dtype);
    if c.op == Op::Sum {
        allowed.retain(|v| v.abs() < max / 64.0 || !v.is_finite());
    }
    c.with_specials(shape, 2.0, &allowed)
}

pub(super) fn pool(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&[
        "kernel",
        "strides",
        "pads",
        "dilations",
        "ceil_mode",
        "count_include_pad",
        "output_size",
    ]);
    // Planes with windows overlapping the edges: for a fixed window, sides
    // where the strides do not divide the padded length (the last window
    // hangs over with ceil_mode and stops short without); for adaptive bins,
    // sides no multiple of the output (overlapping bins).
    let side = |a: usize| -> Vec<usize> {
        if c.op == Op::AdaptiveAvgPool2d {
            let out = pair(&attrs, "output_size", 1)[a];
            return vec![2 * out + 1, 3 * out + 2, out.saturating_sub(1).max(1)];
        }
        let (k, s, dil) = (
            pair(&attrs, "kernel", 1)[a],
            pair(&attrs, "strides", 1)[a],
            pair(&attrs, "dilations", 1)[a],
        );
        let span = dil * (k - 1) + 1;
        let uneven = (span + 2 * s..span + 3 * s + 1).find(|h| (h - span) % s != 0);
        vec![uneven.unwrap_or(span + 2 * s + 1), span + 1, span]
    };
    let (hs, ws) = (side(0), side(1));
    let shape = [2, 3, hs[0], ws[0]];
    if !fits(c, &attrs, &shape) {
        // The template's own attributes fit its own input: nothing to vary.
        return;
    }
    layout_cases(c, &attrs, &[shape.to_vec()], 2.0);
    for (h, w) in [(hs[1], ws[1]), (hs[2], ws[2])] {
        let small = [1, 5, h, w];
        if fits(c, &attrs, &small) {
            let x = c.normals(&small, 2.0);
            c.add(
                &format!("plane-{h}x{w}"),
                "a small odd plane: one or two windows per side, most of them at an edge",
                attrs.clone(),
                vec![input(&small, x, d, None)],
            );
        }
    }
    let x: Vec<f64> = c
        .normals(&shape, 2.0)
        .into_iter()
        .map(|v| -1.0 - v.abs())
        .collect();
    c.add(
        "negative",
        "every value below −1: a window over padding or the edge must not see a 0 (max pooling pads with −∞)",
        attrs.clone(),
        vec![input(&shape, x, d, None)],
    );
    let levels = [-1.0, 0.5, 0.5, 2.0];
    let x: Vec<f64> = (0..shape.iter().product())
        .map(|e| {
            if e < shape[2] * shape[3] {
                0.75
            } else {
                c.rng.pick(&levels)
            }
        })
        .collect();
    c.add(
        "ties",
        "values from four levels (windows whose largest value appears more than once) and a constant plane",
        attrs.clone(),
        vec![input(&shape, x, d, None)],
    );
    let x = with_specials(c, &shape);
    c.add(
        "specials",
        "NaN (max pooling returns it, as PyTorch does), ±Inf, ±0 and subnormals in windows",
        attrs.clone(),
        vec![input(&shape, x, d, None)],
    );
    if c.op != Op::MaxPool2d {
        if let Some((x, about)) = f16_overflowing(c, &shape) {
            c.add("f16-range", about, attrs, vec![input(&shape, x, d, None)]);
        }
    }
}

pub(super) fn reduce(c: &mut Cases) {
    let d = c.dtype;
    let attrs = c.kept(&["axes", "keepdims"]);
    let rank = c
        .needed
        .template_specs
        .first()
        .map_or(2, |s| s.shape.len().max(1));
    let reduced = |a: usize| -> bool {
        match attrs.get("axes") {
            Some(AttrValue::Ints(v)) => v.iter().any(|&x| x.rem_euclid(rank as i64) as usize == a),
            _ => false,
        }
    };
    let odd = [3, 5, 7, 4, 6, 2, 3, 2];
    let shape: Vec<usize> = (0..rank).map(|a| odd[a % odd.len()]).collect();
    if !fits(c, &attrs, &shape) {
        return;
    }
    layout_cases(c, &attrs, &[shape.to_vec()], 2.0);
    // The first reduced axis long: 4099 terms and more per output.
    let first = (0..rank).find(|&a| reduced(a));
    let long: Vec<usize> = (0..rank)
        .map(|a| {
            if Some(a) == first {
                4099
            } else {
                shape[a].min(2)
            }
        })
        .collect();
    let x = c.normals(&long, 2.0);
    c.add(
        "long",
        "4099 terms or more per output (past any one block's width)",
        attrs.clone(),
        vec![input(&long, x, d, None)],
    );
    let x = with_specials(c, &shape);
    c.add(
        "specials",
        "NaN, ±Inf, ±0 and subnormals among the terms",
        attrs.clone(),
        vec![input(&shape, x, d, None)],
    );
    if c.op == Op::Mean {
        if let Some((x, about)) = f16_overflowing(c, &long) {
            c.add("f16-range", about, attrs, vec![input(&long, x, d, None)]);
        }
    }
}
