//! Data movement: crops (plain and stepped), pads in every mode,
//! concatenations, reshapes and permutations of views.

use super::*;

pub(super) fn movement(c: &mut Cases) {
    let d = c.dtype;
    let shape = [4usize, 6, 5];
    let attrs = match c.op {
        Op::Crop => Attrs::new()
            .with("offsets", AttrValue::Ints(vec![1, 2, 1]))
            .with("sizes", AttrValue::Ints(vec![3, 3, 4])),
        Op::Concat => Attrs::new().with("axis", AttrValue::Int(1)),
        Op::Reshape => Attrs::new().with("shape", AttrValue::Ints(vec![6, -1])),
        _ => Attrs::new().with("perm", AttrValue::Ints(vec![2, 0, 1])),
    };
    let pool: Vec<f64> = if d.is_float() {
        specials(d)
    } else {
        vec![0.0, 1.0, 127.0, 255.0, -1.0, 2147483647.0, -2147483648.0]
    };
    let shapes: Vec<Vec<usize>> = match c.op {
        Op::Concat => vec![shape.to_vec(), vec![4, 2, 5]],
        _ => vec![shape.to_vec()],
    };
    let layouts = c.layouts(&shape);
    // Integer dtypes: the padded view alone (the layouts are the same code).
    let take = if d.is_float() { 3 } else { 1 };
    for (variant, about, layout) in layouts
        .into_iter()
        .skip(if d.is_float() { 0 } else { 1 })
        .take(take)
    {
        let inputs: Vec<Input> = shapes
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let v = c.with_specials(s, 100.0, &pool);
                let l = (i == 0).then(|| layout.clone());
                input(s, v, d, l)
            })
            .collect();
        if c.op == Op::Crop && c.needed.attr_names.iter().any(|a| a == "steps") {
            // A slice with a step on two axes, the last element read at the
            // extent's last index on the first (a port reading a contiguous
            // window, or one past the end, shows). Only where the component
            // steps: a driver written before crops took steps still keeps
            // the contract of the plain crops it runs.
            let stepped = Attrs::new()
                .with("offsets", AttrValue::Ints(vec![0, 1, 1]))
                .with("sizes", AttrValue::Ints(vec![2, 5, 2]))
                .with("steps", AttrValue::Ints(vec![3, 1, 2]));
            c.add(
                &format!("{variant} stepped"),
                &format!("{about}, every 3rd and 2nd element"),
                stepped,
                inputs.clone(),
            );
        }
        c.add(variant, about, attrs.clone(), inputs);
    }
}

/// `vsdk.pad` in each mode on the three layouts: pads that differ on every
/// side (each axis padded on one side more than the other, two on one side
/// only), as far as reflect allows (`n − 1`) so that its last mirrored
/// element is the far edge's neighbour; the constant not 0 (a port that
/// pads with zeros shows), −1/3 in a float dtype (rounded once, to nearest:
/// a port that narrows it twice or truncates shows), 7 in an integer one.
/// A mode other than the default is required only where the component
/// uses it.
pub(super) fn pad(c: &mut Cases) {
    let d = c.dtype;
    let shape = [4usize, 6, 5];
    let pads = vec![3, 0, 4, 1, 5, 0];
    let pool: Vec<f64> = if d.is_float() {
        specials(d)
    } else {
        vec![0.0, 1.0, 127.0, 255.0, 2147483647.0]
    };
    let value = if d.is_float() { -1.0 / 3.0 } else { 7.0 };
    // Constant padding, the default and the plainest, is always required.
    let used = |mode: &str| {
        mode == "constant" || c.needed.uses("mode", &AttrValue::Str(mode.into()), false)
    };
    let modes: Vec<(&str, bool)> = ["constant", "reflect", "replicate", "circular"]
        .into_iter()
        .map(|m| (m, used(m)))
        .collect();
    let layouts = c.layouts(&shape);
    let take = if d.is_float() { 3 } else { 1 };
    for (variant, about, layout) in layouts
        .into_iter()
        .skip(if d.is_float() { 0 } else { 1 })
        .take(take)
    {
        let v = c.with_specials(&shape, 100.0, &pool);
        let x = input(&shape, v, d, Some(layout));
        for &(mode, required) in &modes {
            let mut attrs = Attrs::new()
                .with("pads", AttrValue::Ints(pads.clone()))
                .with("mode", AttrValue::Str(mode.into()));
            if mode == "constant" {
                attrs = attrs.with("value", AttrValue::Float(value));
            }
            c.add(
                &format!("{variant} {mode}"),
                &format!("{about}, `{mode}` padding of 3/0/4 before and 1/5/0 after"),
                attrs,
                vec![x.clone()],
            );
            if !required {
                if let Some(case) = c.out.last_mut() {
                    case.required = false;
                }
            }
        }
    }
}
