//! Both providers against outputs recorded from Pillow and PyTorch by
//! tools/make_reference_data.py (sdk/tests/data/).

use crate::common;
use common::*;
use serde_json::Value;
use vips_sdk::{AttrValue, Attrs, DType, HostTensor};

fn cases(file: &str) -> Vec<Value> {
    let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
    v["cases"].as_array().expect("cases").clone()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn pil_bicubic_matches_pillow_bit_for_bit_in_both_pass_orders() {
    let all = cases("pillow_bicubic.json");
    // The recorded Pillow (13) runs the vertical pass first for some sizes;
    // the data holds such cases, where the two orders differ.
    assert!(all
        .iter()
        .any(|c| c["pillow_order"] == "vertical" && c["horizontal_first"] != c["vertical_first"]));
    for dev in [cpu(), template_c()] {
        for (i, c) in all.iter().enumerate() {
            for (vertical_first, want) in [(0, "horizontal_first"), (1, "vertical_first")] {
                let input: Vec<u8> = floats(&c["input"]).into_iter().map(|v| v as u8).collect();
                let x = HostTensor::from_vec(&usizes(&c["input_shape"]), input).unwrap();
                let size: Vec<i64> = usizes(&c["size"]).into_iter().map(|v| v as i64).collect();
                let attrs = Attrs::new()
                    .with("size", AttrValue::Ints(size))
                    .with("vertical_first", AttrValue::Int(vertical_first));
                let out = run(&dev, "vsdk.resize_pil_bicubic", &attrs, &[x]);
                assert_eq!(out.spec.shape, usizes(&c["output_shape"]));
                assert_eq!(
                    out.to_f64_vec(),
                    floats(&c[want]),
                    "{}: Pillow case {i}, {want}",
                    dev.provider_info().name
                );
            }
        }
    }
}

#[test]
fn resize_bicubic_matches_torch_interpolate() {
    for dev in [cpu(), template_c()] {
        for (i, c) in cases("torch_bicubic.json").iter().enumerate() {
            let x = T::new(&usizes(&c["input_shape"]), floats(&c["input"]));
            let mut attrs = Attrs::new().with(
                "antialias",
                AttrValue::Int(c["antialias"].as_i64().unwrap()),
            );
            attrs = match c.get("size") {
                Some(s) => attrs.with(
                    "size",
                    AttrValue::Ints(usizes(s).into_iter().map(|v| v as i64).collect()),
                ),
                None => attrs.with(
                    "scale_factor",
                    AttrValue::Floats(floats(&c["scale_factor"])),
                ),
            };
            let out = run(&dev, "vsdk.resize_bicubic", &attrs, &[x.host(DType::F32)]);
            assert_eq!(out.spec.shape, usizes(&c["output_shape"]), "case {i}");
            let what = format!("{}: torch case {i}", dev.provider_info().name);
            // PyTorch computes source coordinates and taps in float32, the
            // catalog in exact arithmetic: about 4e-6 apart on these inputs. The
            // wrong form (size=16 instead of the scale factor) is ~1 apart.
            assert_close(&what, &out.to_f64_vec(), &floats(&c["output"]), 1e-5, 2e-5);
        }
    }
}

/// `antialias = 1` with a `scale_factor` whose `floor(in · s)` equals `in`:
/// PyTorch's CPU kernel copies that axis unchanged instead of applying the
/// `1 / s` taps (docs/operators.md, `vsdk.resize_bicubic`). `antialias = 0`
/// keeps the `1 / s` taps. Checked against the f64 reference of
/// tests/common, whose antialiased taps at scale 1 are the identity.
#[test]
fn antialiased_resize_copies_an_axis_whose_length_does_not_change() {
    let (mut r, _) = rng("antialiased_resize_copies_an_axis_whose_length_does_not_change");
    // (input shape, scale factor): H kept (7·1.05 → 7), W halved; W kept
    // (7·1.1 → 7), H resized; neither changes.
    let configs: [([usize; 4], [f64; 2]); 3] = [
        ([1, 2, 7, 9], [1.05, 0.5]),
        ([2, 1, 9, 7], [0.6, 1.1]),
        ([1, 2, 7, 9], [1.05, 1.1]),
    ];
    for dev in [cpu(), template_c()] {
        let name = dev.provider_info().name.to_string();
        for (shape, s) in configs {
            let x = T::random(&mut r, &shape, -1.0, 1.0).rounded(DType::F32);
            let (ih, iw) = (shape[2], shape[3]);
            let out = [
                (ih as f64 * s[0]).floor() as usize,
                (iw as f64 * s[1]).floor() as usize,
            ];
            let attrs = |aa: i64| {
                Attrs::new()
                    .with("scale_factor", AttrValue::Floats(s.to_vec()))
                    .with("antialias", AttrValue::Int(aa))
            };
            // The documented rule: scale 1 (identity taps) on an unchanged axis.
            let eff = |n_in: usize, n_out: usize, s: f64| if n_in == n_out { 1.0 } else { 1.0 / s };
            let want = resize_bicubic(
                &x,
                out,
                [eff(ih, out[0], s[0]), eff(iw, out[1], s[1])],
                true,
            );
            // What the rule replaces: the 1/s taps on every axis. The fixture
            // must tell the two apart, or the test proves nothing.
            let naive = resize_bicubic(&x, out, [1.0 / s[0], 1.0 / s[1]], true);
            let gap = want
                .data
                .iter()
                .zip(&naive.data)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                gap > 1e-2,
                "{shape:?} × {s:?}: the two rules differ by only {gap}"
            );
            let got = run(
                &dev,
                "vsdk.resize_bicubic",
                &attrs(1),
                &[x.host(DType::F32)],
            );
            let what = format!("{name}: {shape:?} × {s:?}, antialias 1");
            assert_eq!(got.spec.shape, want.shape, "{what}");
            if out == [ih, iw] {
                assert_eq!(got.to_f64_vec(), x.data, "{what}: not a copy of the input");
            } else {
                assert_close(&what, &got.to_f64_vec(), &want.data, 1e-5, 2e-5);
            }
            // Without antialias the 1/s taps apply even to an unchanged axis.
            let got = run(
                &dev,
                "vsdk.resize_bicubic",
                &attrs(0),
                &[x.host(DType::F32)],
            );
            let plain = resize_bicubic(&x, out, [1.0 / s[0], 1.0 / s[1]], false);
            let what = format!("{name}: {shape:?} × {s:?}, antialias 0");
            assert_close(&what, &got.to_f64_vec(), &plain.data, 1e-5, 2e-5);
        }
    }
}

/// Bilinear (both corner conventions) and nearest (`nearest`,
/// `nearest-exact`) against PyTorch's `F.interpolate` on float64 inputs
/// (tools/make_reference_data.py): the CPU provider at float64, where
/// nearest must be exact (every output an input element, chosen by PyTorch's
/// float32 index arithmetic) and bilinear within float64 rounding; the C
/// template and the GPU source under SIMT at float32, within float32
/// rounding.
#[test]
fn bilinear_and_nearest_match_torch_interpolate() {
    let all = cases("torch_resize.json");
    for (dev, dtype, tol) in [
        (cpu(), DType::F64, 1e-12),
        (template_c(), DType::F32, 1e-5),
        (simt(), DType::F32, 1e-5),
    ] {
        for (i, c) in all.iter().enumerate() {
            let mode = c["mode"].as_str().unwrap();
            let x = T::new(&usizes(&c["input_shape"]), floats(&c["input"]));
            let (op, mut attrs) = match mode {
                "bilinear" => (
                    "vsdk.resize_bilinear",
                    Attrs::new().with(
                        "align_corners",
                        AttrValue::Int(c["align_corners"].as_i64().unwrap()),
                    ),
                ),
                "nearest" => ("vsdk.resize_nearest", Attrs::new()),
                _ => (
                    "vsdk.resize_nearest",
                    Attrs::new().with("exact", AttrValue::Int(1)),
                ),
            };
            attrs = match c.get("size") {
                Some(s) => attrs.with(
                    "size",
                    AttrValue::Ints(usizes(s).into_iter().map(|v| v as i64).collect()),
                ),
                None => attrs.with(
                    "scale_factor",
                    AttrValue::Floats(floats(&c["scale_factor"])),
                ),
            };
            let input = x.rounded(dtype);
            let out = run(&dev, op, &attrs, &[input.host(dtype)]);
            let what = format!("{}: {mode} case {i}", dev.provider_info().name);
            assert_eq!(out.spec.shape, usizes(&c["output_shape"]), "{what}");
            let want = floats(&c["output"]);
            if mode == "bilinear" {
                assert_close(&what, &out.to_f64_vec(), &want, tol, tol);
            } else {
                // PyTorch's nearest of the (rounded) input: the same elements.
                let rounded: Vec<f64> = T::new(&usizes(&c["output_shape"]), want)
                    .rounded(dtype)
                    .data;
                assert_eq!(out.to_f64_vec(), rounded, "{what}");
            }
        }
    }
}
