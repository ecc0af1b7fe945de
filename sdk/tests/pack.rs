//! `pack` round trip: tensors computed and dumped by NumPy (an independent
//! float64 implementation of the demo suite) become a golden file that the
//! runner accepts, and that agrees with the SDK's own `generate`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use vips_sdk::document::{Document, TensorSource};
use vips_sdk::golden::{Distribution, GoldenFile};
use vips_sdk::runner::{self, RunOptions};
use vips_sdk::suite::Suite;
use vips_sdk::{HostTensor, Provider};

const DEMO: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../conformance/suites/demo-mlp/suite.yaml"
);

fn tmp(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("pack");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn numpy_capture(doc: &Document) -> Vec<PathBuf> {
    let specs: Vec<String> = doc
        .tensors
        .iter()
        .filter_map(|t| match &t.source {
            TensorSource::Seeded(s) => {
                let dist = match s.distribution {
                    Distribution::Uniform { low, high } => format!("{{\"uniform\": [{low:?}, {high:?}]}}"),
                    Distribution::Normal { mean, std } => format!("{{\"normal\": [{mean:?}, {std:?}]}}"),
                    Distribution::TestImage => "{\"test_image\": true}".to_string(),
                };
                Some(format!(
                    "{{\"name\": \"{}\", \"dtype\": \"{}\", \"shape\": {:?}, \"seed\": {}, \"distribution\": {dist}}}",
                    t.name,
                    t.dtype,
                    t.shape.as_ref().unwrap(),
                    s.seed
                ))
            }
            _ => None,
        })
        .collect();
    let (out, p) = (tmp("demo_capture.npz"), tmp("p.npy"));
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/demo_reference.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(&out)
        .arg(&p)
        .stdin(Stdio::piped())
        .spawn()
        .expect("python3 with numpy is needed (tools/test installs numpy)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("[{}]", specs.join(",")).as_bytes())
        .unwrap();
    assert!(
        child.wait().unwrap().success(),
        "{script} failed (is numpy installed?)"
    );
    vec![out, p]
}

#[test]
fn numpy_captures_pack_into_a_golden_file_the_runner_accepts() {
    let doc = Document::open(DEMO).unwrap();
    let captures = numpy_capture(&doc);
    let (bytes, summary) = vips_sdk::pack::pack(&doc, &captures).unwrap();
    assert_eq!(summary.stored, vec!["h", "n", "p"]);
    assert_eq!(summary.seeded.len(), 7);
    let golden = GoldenFile::from_bytes(Path::new("packed.golden"), bytes).unwrap();
    let suite = Suite::new(doc.clone(), golden).unwrap();
    let cpu = Provider::open_by_name("cpu").unwrap().device(0).unwrap();
    let report = runner::run(&suite, &cpu, &cpu, &RunOptions::default()).unwrap();
    assert!(report.passed, "{:#?}", report.tiers[0].stages);
    // NumPy's values and the SDK's generate agree to float32 rounding.
    let committed = Suite::open(Path::new(DEMO).parent().unwrap()).unwrap();
    for name in ["h", "n", "p"] {
        let (a, b) = (
            suite.tensor(name).unwrap().to_f64_vec(),
            committed.tensor(name).unwrap().to_f64_vec(),
        );
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max);
        assert!(
            worst <= 1e-6,
            "{name}: NumPy and generate differ by {worst}"
        );
    }
}

#[test]
fn pack_checks_captures_against_the_document() {
    let doc = Document::open(DEMO).unwrap();
    let wrong = tmp("wrong.safetensors");
    // `h` with the wrong shape, saved as safetensors.
    let h = HostTensor::from_vec(&[4, 31], vec![0.5f32; 124]).unwrap();
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![4, 31], &h.bytes)
        .unwrap();
    safetensors::serialize_to_file([("h", view)], None, &wrong).unwrap();
    let e = vips_sdk::pack::pack(&doc, &[wrong])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor `h`: ")
            && e.contains("has shape [4, 31], the document declares [4, 32]"),
        "{e}"
    );
    let missing = vips_sdk::pack::pack(&doc, &[]).unwrap_err().to_string();
    assert!(
        missing.contains("tensor `h`: `h` is not in the captures"),
        "{missing}"
    );
    std::fs::write(tmp("bad.npy"), b"\x93NUMPY garbage").unwrap();
    let e = vips_sdk::pack::pack(&doc, &[tmp("bad.npy")])
        .unwrap_err()
        .to_string();
    assert!(e.contains("bad.npy: not a .npy file"), "{e}");
}
