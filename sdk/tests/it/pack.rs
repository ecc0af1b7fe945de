//! `pack` round trip: tensors computed and dumped by NumPy (an independent
//! implementation of the demo suite, in float64 or float32) become a golden
//! file that the runner accepts: the stage outputs computed by the float64
//! reference, the captured ones judged against it.

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

fn cpu() -> vips_sdk::Device {
    Provider::open_by_name("cpu").unwrap().device(0).unwrap()
}

fn pack(
    doc: &Document,
    captures: &[PathBuf],
) -> Result<(Vec<u8>, vips_sdk::pack::PackSummary), vips_sdk::pack::PackError> {
    vips_sdk::pack::pack(doc, &cpu(), captures, false)
}

/// The golden file `generate` computes for `doc`.
fn generated(doc: &Document) -> Vec<u8> {
    vips_sdk::generate::generate(doc, &cpu(), &[]).unwrap()
}

#[test]
fn numpy_captures_pack_into_a_golden_file_the_runner_accepts() {
    let doc = Document::open(DEMO).unwrap();
    let captures = numpy_capture(&doc, "round_trip");
    let (bytes, summary) = pack(&doc, &captures).unwrap();
    assert_eq!(summary.computed, vec!["h", "n", "p"]);
    assert!(summary.stored.is_empty(), "{:?}", summary.stored);
    assert_eq!(summary.seeded.len(), 7);
    // NumPy's float64 values agree with the reference: every stage judged.
    assert_eq!(summary.agreeing, vec!["fc1_gelu", "layer_norm", "head"]);
    assert!(summary.disagreeing.is_empty(), "{:?}", summary.disagreeing);
    // The outputs are the reference's: the file is generate's, byte for byte.
    assert!(bytes == generated(&doc), "pack and generate differ");
    let golden = GoldenFile::from_bytes(Path::new("packed.golden"), bytes).unwrap();
    let suite = Suite::new(doc.clone(), golden).unwrap();
    let cpu = cpu();
    let report = runner::run(&suite, &cpu, &cpu, &RunOptions::default()).unwrap();
    assert!(report.passed, "{:#?}", report.tiers[0].stages);
}

/// The demo with fresh seeds (a copy of its document beside the captures).
fn fresh_demo(test: &str) -> Document {
    let seed = fresh_seed(test);
    let mut text = std::fs::read_to_string(DEMO).unwrap();
    for s in 100..=106u64 {
        let fresh = (seed % (1 << 40)) * 8 + s;
        text = text.replace(&format!("seed: {s}, "), &format!("seed: {fresh}, "));
    }
    let path = tmp(&format!("{test}.yaml"));
    std::fs::write(&path, text).unwrap();
    Document::open(&path).unwrap()
}

/// NumPy computing the demo in float32 end to end, as a float32 model does.
const FLOAT32_DEMO: &str = "import math\nf = np.float32\nt = {k: v.astype(f) for k, v in seeded.items()}\n\
    erf = np.vectorize(math.erf, otypes=[f])\nlin = t['x'] @ t['w1'].T + t['b1']\n\
    h = f(0.5) * lin * (f(1) + erf(lin / f(math.sqrt(2))))\nm = h.mean(-1, keepdims=True)\n\
    n = (h - m) / np.sqrt(((h - m) ** 2).mean(-1, keepdims=True) + f(1e-6)) * t['gamma'] + t['beta']\n\
    lg = n @ t['w2'].T + t['b2']\ne = np.exp(lg - lg.max(-1, keepdims=True))\np = e / e.sum(-1, keepdims=True)\n\
    assert h.dtype == n.dtype == p.dtype == f\na = dict(h=h, n=n, p=p)";

/// Issue 46: float32 captures of a model (each stage fed the float32 output
/// of the one before, as the model ran) pack into a suite that `run`
/// passes: the golden outputs are the reference's, not the captures (which
/// the reference check at the start of each stage refuses), and the
/// captures agree with them as `check` judges them.
#[test]
fn float32_captures_pack_into_a_runnable_suite() {
    let doc = fresh_demo("float32_captures_pack_into_a_runnable_suite");
    let base = numpy_capture(&doc, "float32");
    let (f32s, _) = numpy_edit(&doc, &base[0], "float32/all.npz", 0, FLOAT32_DEMO);
    let (bytes, summary) = pack(&doc, &[f32s]).unwrap();
    assert_eq!(summary.agreeing, vec!["fc1_gelu", "layer_norm", "head"]);
    let judged = summary.judged.unwrap();
    assert!(judged.starts_with("at fp32, chained mode"), "{judged}");
    assert!(bytes == generated(&doc), "pack and generate differ");
    let golden = GoldenFile::from_bytes(Path::new("packed.golden"), bytes).unwrap();
    let suite = Suite::new(doc, golden).unwrap();
    let cpu = cpu();
    let report = runner::run(&suite, &cpu, &cpu, &RunOptions::default()).unwrap();
    assert!(report.passed, "{:#?}", report.tiers[0].stages);
}

/// A capture of another computation than the document's (GELU by its tanh
/// approximation) is refused, naming the stage; with `allow_disagreement`
/// the golden file is written and the stage listed.
#[test]
fn captures_that_disagree_with_the_document_are_named() {
    let doc = fresh_demo("captures_that_disagree_with_the_document_are_named");
    let base = numpy_capture(&doc, "tanh");
    let tanh = FLOAT32_DEMO.replace(
        "erf(lin / f(math.sqrt(2)))",
        "np.tanh(f(math.sqrt(2 / math.pi)) * (lin + f(0.044715) * lin ** 3))",
    );
    assert_ne!(tanh, FLOAT32_DEMO);
    let (caps, _) = numpy_edit(&doc, &base[0], "tanh/all.npz", 0, &tanh);
    let e = pack(&doc, std::slice::from_ref(&caps))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("disagree with the document's float64 reference")
            && e.contains("`fc1_gelu` FAIL")
            && !e.contains("`layer_norm` FAIL"),
        "{e}"
    );
    let (bytes, summary) = vips_sdk::pack::pack(&doc, &cpu(), &[caps], true).unwrap();
    assert!(bytes == generated(&doc), "pack and generate differ");
    assert!(
        summary.disagreeing[0].starts_with("`fc1_gelu` FAIL")
            && summary.disagreeing[1..]
                .iter()
                .all(|d| d.contains("end to end")),
        "{:?}",
        summary.disagreeing
    );
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
    let e = pack(&doc, &[wrong]).unwrap_err().to_string();
    assert!(
        e.contains("tensor `h`: ")
            && e.contains("has shape [4, 31], the document declares [4, 32]"),
        "{e}"
    );
    // No stage output captured: the reference's file, nothing judged.
    let (bytes, summary) = pack(&doc, &[]).unwrap();
    assert!(bytes == generated(&doc) && summary.judged.is_none());
    std::fs::write(tmp("bad.npy"), b"\x93NUMPY garbage").unwrap();
    let e = pack(&doc, &[tmp("bad.npy")]).unwrap_err().to_string();
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
    match pack(doc, captures) {
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
    let (bytes, summary) = pack(&doc, &[same, base[1].clone()]).unwrap();
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
fn a_captured_seeded_tensor_narrower_than_declared_is_refused() {
    let seed = fresh_seed("a_captured_seeded_tensor_narrower_than_declared_is_refused");
    let doc = Document::open(DEMO).unwrap();
    let base = numpy_capture(&doc, "narrow");
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
}

/// Captured outputs are judged, never stored: NaN at random places of `h`
/// fails its stage (named), and with `allow_disagreement` the golden `h` is
/// the reference's, finite.
#[test]
fn a_non_finite_captured_output_is_a_disagreement() {
    let seed = fresh_seed("a_non_finite_captured_output_is_a_disagreement");
    let doc = Document::open(DEMO).unwrap();
    let base = numpy_capture(&doc, "non_finite");
    let (nan, _) = numpy_edit(
        &doc,
        &base[0],
        "h_nan.npz",
        seed,
        "h = a['h'].copy()\nk = rng.choice(h.size, 2, replace=False)\nh.flat[k] = np.nan\na['h'] = h",
    );
    let captures = [nan, base[1].clone()];
    let e = pack_err(&doc, &captures);
    assert!(e.contains("`fc1_gelu` FAIL"), "{e}");
    let (bytes, summary) = vips_sdk::pack::pack(&doc, &cpu(), &captures, true).unwrap();
    assert!(summary.disagreeing[0].starts_with("`fc1_gelu` FAIL"));
    let golden = GoldenFile::from_bytes(Path::new("nan.golden"), bytes).unwrap();
    let h = golden
        .materialize(golden.tensor("h").unwrap())
        .unwrap()
        .to_f64_vec();
    assert!(h.iter().all(|v| v.is_finite()));
}
