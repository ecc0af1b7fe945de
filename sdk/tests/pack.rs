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

/// The document's seeded tensors as tools/demo_reference.py reads them.
fn seeded_specs(doc: &Document) -> String {
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
    format!("[{}]", specs.join(","))
}

/// The demo's captures, under `tag/` (tests run in parallel): an .npz with
/// `h` and `n`, and `p.npy`.
fn numpy_capture(doc: &Document, tag: &str) -> Vec<PathBuf> {
    std::fs::create_dir_all(tmp(tag)).unwrap();
    let (out, p) = (
        tmp(&format!("{tag}/demo_capture.npz")),
        tmp(&format!("{tag}/p.npy")),
    );
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
        .write_all(seeded_specs(doc).as_bytes())
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
    let captures = numpy_capture(&doc, "round_trip");
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

/// A fresh seed per run (printed so a failure reproduces), or `VSDK_TEST_SEED`.
fn fresh_seed(test: &str) -> u64 {
    let seed = std::env::var("VSDK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: VSDK_TEST_SEED={seed}");
    seed
}

/// Runs the Python statements `code` with NumPy as `np`, `a` the arrays of
/// the .npz `base`, `seeded` the document's seeded tensors regenerated by
/// tools/demo_reference.py (float64 arrays) and `rng` NumPy's generator on
/// `seed`; saves `a` afterwards to `name` (an .npz, each array in its dtype).
/// Returns the capture's path and what `code` printed.
fn numpy_edit(doc: &Document, base: &Path, name: &str, seed: u64, code: &str) -> (PathBuf, String) {
    let out = tmp(name);
    let tools = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools");
    let script = format!(
        "import json, sys\nimport numpy as np\nsys.path.insert(0, {tools:?})\nimport demo_reference\n\
         seeded = {{s['name']: demo_reference.tensor(s) for s in json.load(sys.stdin)}}\n\
         a = dict(np.load(sys.argv[1]))\nrng = np.random.default_rng(int(sys.argv[3]))\n\
         {code}\nnp.savez(sys.argv[2], **a)\n"
    );
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(&script)
        .arg(base)
        .arg(&out)
        .arg(seed.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 with numpy is needed (tools/test installs numpy)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(seeded_specs(doc).as_bytes())
        .unwrap();
    let result = child.wait_with_output().unwrap();
    assert!(result.status.success(), "python3 failed on:\n{script}");
    (out, String::from_utf8(result.stdout).unwrap())
}

fn pack_err(doc: &Document, captures: &[PathBuf]) -> String {
    match vips_sdk::pack::pack(doc, captures) {
        Ok((_, summary)) => panic!("pack accepted {captures:?}: {summary:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_captured_seeded_tensor_must_equal_its_recipe() {
    let seed = fresh_seed("a_captured_seeded_tensor_must_equal_its_recipe");
    let doc = Document::open(DEMO).unwrap();
    let base = numpy_capture(&doc, "seeded");
    // The regenerated `x` (float64, rounded by pack) and `b1` (float32) agree:
    // checked, kept as recipes, not reported as unknown.
    let (same, _) = numpy_edit(
        &doc,
        &base[0],
        "seeded_same.npz",
        seed,
        "a['x'] = seeded['x']\na['b1'] = seeded['b1'].astype(np.float32)",
    );
    let (bytes, summary) = vips_sdk::pack::pack(&doc, &[same, base[1].clone()]).unwrap();
    assert_eq!(summary.verified, vec!["x", "b1"]);
    assert_eq!(summary.seeded.len(), 7);
    assert!(summary.unused.is_empty(), "{:?}", summary.unused);
    let golden = GoldenFile::from_bytes(Path::new("packed.golden"), bytes).unwrap();
    assert!(
        golden.raw_bytes(golden.tensor("x").unwrap()).is_none(),
        "x stored raw"
    );
    // One entry per declared tensor, in the document's order
    // (docs/golden-format.md).
    let entries: Vec<&str> = golden.tensors.iter().map(|t| t.name.as_str()).collect();
    let declared: Vec<&str> = doc.tensors.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(entries, declared);
    // Two elements of `x` moved by random amounts: pack names the larger.
    let (moved, printed) = numpy_edit(
        &doc,
        &base[0],
        "seeded_moved.npz",
        seed,
        "x = seeded['x'].copy()\ni, j = rng.choice(x.size, 2, replace=False)\n\
         x.flat[i] += rng.uniform(0.1, 1.0) * rng.choice([-1, 1])\n\
         x.flat[j] += rng.uniform(1e-4, 1e-2)\na['x'] = x\n\
         print(i, repr(abs(float(np.float32(x.flat[i])) - float(seeded['x'].flat[i]))))",
    );
    let (i, d) = printed.trim().split_once(' ').unwrap();
    let d: f64 = d.parse().unwrap();
    let e = pack_err(&doc, &[moved, base[1].clone()]);
    assert!(
        e.contains("tensor `x`: ")
            && e.contains("differs from the document's seeded recipe (seed 100")
            && e.contains(&format!("largest difference {d:e} at flat index {i} "))
            && e.contains("2 of 64 elements differ"),
        "{e}"
    );
}

#[test]
fn a_capture_narrower_than_the_declared_float_type_is_refused() {
    let seed = fresh_seed("a_capture_narrower_than_the_declared_float_type_is_refused");
    let doc = Document::open(DEMO).unwrap();
    let base = numpy_capture(&doc, "narrow");
    // An expected output captured in float16 for a float32 declaration.
    let (h16, _) = numpy_edit(
        &doc,
        &base[0],
        "h16.npz",
        seed,
        "a['h'] = rng.normal(size=a['h'].shape).astype(np.float16)",
    );
    let e = pack_err(&doc, &[h16.clone(), base[1].clone()]);
    assert!(
        e.contains("tensor `h`: ")
            && e.contains("h16.npz is float16, narrower than the declared float32"),
        "{e}"
    );
    // The same for a captured copy of a seeded tensor.
    let (x16, _) = numpy_edit(
        &doc,
        &base[0],
        "x16.npz",
        seed,
        "a['x'] = seeded['x'].astype(np.float16)",
    );
    let e = pack_err(&doc, &[x16, base[1].clone()]);
    assert!(
        e.contains("tensor `x`: ") && e.contains("is float16, narrower than the declared float32"),
        "{e}"
    );
    // Wider captures are rounded, as before: the float64 `h` of the
    // capture, and a random float64 `p`.
    let (p64, _) = numpy_edit(
        &doc,
        &base[0],
        "p64.npz",
        seed,
        "a['p'] = rng.uniform(0.01, 1.0, size=(4, 10))",
    );
    let (_, summary) = vips_sdk::pack::pack(&doc, &[p64]).unwrap();
    assert_eq!(summary.stored, vec!["h", "n", "p"]);
}

/// The demo document with `nan: allow` on its first stage (which outputs `h`).
fn demo_allowing_nan() -> Document {
    let text = std::fs::read_to_string(DEMO).unwrap();
    let edited = text.replacen(
        "    outputs: [h]\n",
        "    outputs: [h]\n    nan: allow\n",
        1,
    );
    assert_ne!(edited, text);
    let path = tmp("nan_allow.yaml");
    std::fs::write(&path, edited).unwrap();
    let doc = Document::open(&path).unwrap();
    assert_eq!(doc.stages[0].nan, vips_sdk::compare::NanPolicy::Allow);
    doc
}

#[test]
fn a_non_finite_expected_output_is_refused_unless_its_stage_allows_nan() {
    let seed = fresh_seed("a_non_finite_expected_output_is_refused_unless_its_stage_allows_nan");
    let doc = Document::open(DEMO).unwrap();
    let allow = demo_allowing_nan();
    let base = numpy_capture(&doc, "non_finite");
    // NaN at two random places of `h`: the first is named.
    let (nan, printed) = numpy_edit(
        &doc,
        &base[0],
        "h_nan.npz",
        seed,
        "h = a['h'].copy()\nk = rng.choice(h.size, 2, replace=False)\nh.flat[k] = np.nan\n\
         a['h'] = h\nprint(k.min())",
    );
    let first = printed.trim();
    let captures = [nan, base[1].clone()];
    let e = pack_err(&doc, &captures);
    assert!(
        e.contains("tensor `h`: ")
            && e.contains("an output of stage `fc1_gelu`, holds NaN at flat index ")
            && e.contains(&format!("at flat index {first}: "))
            && e.contains("`nan: fail`"),
        "{e}"
    );
    // Under `nan: allow` the NaNs are packed as they are.
    let (bytes, _) = vips_sdk::pack::pack(&allow, &captures).unwrap();
    let golden = GoldenFile::from_bytes(Path::new("nan.golden"), bytes).unwrap();
    let h = golden
        .materialize(golden.tensor("h").unwrap())
        .unwrap()
        .to_f64_vec();
    assert!(h[first.parse::<usize>().unwrap()].is_nan());
    assert_eq!(h.iter().filter(|v| v.is_nan()).count(), 2);
    // ±Inf is refused either way, and so is a float64 value that overflows
    // float32 when rounded.
    let (inf, printed) = numpy_edit(
        &doc,
        &base[0],
        "h_inf.npz",
        seed,
        "h = a['h'].copy()\ni = rng.integers(h.size)\nh.flat[i] = rng.choice([-1, 1]) * np.inf\n\
         a['h'] = h\nprint(i, h.flat[i] > 0)",
    );
    let (i, positive) = printed.trim().split_once(' ').unwrap();
    let sign = if positive == "True" { "" } else { "-" };
    for d in [&doc, &allow] {
        let e = pack_err(d, &[inf.clone(), base[1].clone()]);
        assert!(
            e.contains("tensor `h`: ")
                && e.contains(&format!("holds {sign}inf at flat index {i}: "))
                && e.contains("must be finite"),
            "{e}"
        );
    }
    let (big, printed) = numpy_edit(
        &doc,
        &base[0],
        "h_big.npz",
        seed,
        "h = a['h'].copy()\ni = rng.integers(h.size)\nh.flat[i] = 1e39\na['h'] = h\nprint(i)",
    );
    let e = pack_err(&allow, &[big, base[1].clone()]);
    assert!(
        e.contains(&format!("holds inf at flat index {}", printed.trim()))
            && e.contains("(captured as float64 1e39, which overflows float32)"),
        "{e}"
    );
}
