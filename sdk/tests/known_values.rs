//! Both providers against outputs recorded from Pillow and PyTorch by
//! tools/make_reference_data.py (sdk/tests/data/).

mod common;
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
fn pil_bicubic_matches_pillow_bit_for_bit() {
    for dev in [cpu(), template_c()] {
        for (i, c) in cases("pillow_bicubic.json").iter().enumerate() {
            let input: Vec<u8> = floats(&c["input"]).into_iter().map(|v| v as u8).collect();
            let x = HostTensor::from_vec(&usizes(&c["input_shape"]), input).unwrap();
            let size: Vec<i64> = usizes(&c["size"]).into_iter().map(|v| v as i64).collect();
            let attrs = Attrs::new().with("size", AttrValue::Ints(size));
            let out = run(&dev, "vsdk.resize_pil_bicubic", &attrs, &[x]);
            assert_eq!(out.spec.shape, usizes(&c["output_shape"]));
            assert_eq!(
                out.to_f64_vec(),
                floats(&c["output"]),
                "{}: Pillow case {i}",
                dev.provider_info().name
            );
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
