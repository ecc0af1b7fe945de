//! Resampling: Pillow's filters, the bicubic, bilinear and nearest resizes.

use super::*;

pub(super) fn resize_pil(c: &mut Cases) {
    let attrs_of = |c: &Cases, size: [i64; 2]| {
        c.kept(&["vertical_first", "alpha"])
            .with("size", AttrValue::Ints(size.to_vec()))
    };
    // The component's images have an alpha channel (RGBA): so do the cases,
    // its values often 0 or 255 (kept as they are) and otherwise any.
    let alpha = matches!(attrs_of(c, [1, 1]).get("alpha"), Some(AttrValue::Int(1)));
    let channels = if alpha { 4 } else { 3 };
    let pixels = |c: &mut Cases, n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| {
                // Hard 0/255 edges (the filter overshoots: clamped) and noise.
                if (i / 7) % 3 == 0 {
                    255.0 * ((i / 3) % 2) as f64
                } else {
                    c.rng.below(256) as f64
                }
            })
            .collect()
    };
    for (variant, about, shape, size, layout) in [
        (
            "down",
            "odd sizes, downsampling (the filter widens)",
            [37usize, 41, channels],
            [19, 23],
            None,
        ),
        (
            "up",
            "odd sizes, upsampling",
            [13, 11, channels],
            [29, 31],
            None,
        ),
        (
            "padded",
            "an image with padded rows and an offset",
            [33, 35, channels],
            [17, 21],
            Some(padded(&[33, 35, channels], 5, 2)),
        ),
    ] {
        let attrs = attrs_of(c, size);
        let v = pixels(c, shape.iter().product());
        c.add(
            variant,
            about,
            attrs,
            vec![input(&shape, v, DType::U8, layout)],
        );
    }
}

pub(super) fn resize(c: &mut Cases) {
    let mut attrs = c.kept(&["scale_factor", "antialias"]);
    if attrs.get("scale_factor").is_none() {
        attrs = attrs.with("size", AttrValue::Ints(vec![23, 13]));
    }
    layout_cases(c, &attrs, &[vec![2, 3, 17, 19]], 1.0);
}

/// Bilinear and nearest: the component's own attributes on the three
/// layouts, then each corner convention (bilinear's `align_corners`,
/// nearest's `exact`) both ways at sizes where they part: an odd upsample,
/// a downsample by a non-integer factor, an axis kept (a `scale_factor` of
/// 1.05 that leaves it its length: copied) and one doubled. A convention
/// is required where one of the component's nodes uses it.
pub(super) fn resize_2d(c: &mut Cases) {
    let flag = if c.op == Op::ResizeBilinear {
        "align_corners"
    } else {
        "exact"
    };
    let mut attrs = c.kept(&["scale_factor", flag]);
    if attrs.get("scale_factor").is_none() {
        attrs = attrs.with("size", AttrValue::Ints(vec![23, 13]));
    }
    layout_cases(c, &attrs, &[vec![2, 3, 17, 19]], 1.0);
    for on in [false, true] {
        for (variant, size) in [
            ("size", AttrValue::Ints(vec![31, 7])),
            ("scale_factor", AttrValue::Floats(vec![1.05, 2.0])),
        ] {
            let shape = [1, 2, 9, 12];
            let v = c.normals(&shape, 1.0);
            c.add(
                &format!("{flag}={} {variant}", u8::from(on)),
                &format!(
                    "{flag} = {} with a {variant}: 9 x 12 to {}",
                    u8::from(on),
                    if variant == "size" {
                        "31 x 7 (odd up, non-integer down)"
                    } else {
                        "9 x 24 (an axis kept at 1.05, one doubled)"
                    }
                ),
                Attrs::new()
                    .with(variant, size)
                    .with(flag, AttrValue::Int(i64::from(on))),
                vec![input(&shape, v, c.dtype, None)],
            );
            let used = c.needed.uses(flag, &AttrValue::Int(i64::from(on)), !on);
            if let Some(case) = c.out.last_mut() {
                case.required &= used;
            }
        }
    }
}
