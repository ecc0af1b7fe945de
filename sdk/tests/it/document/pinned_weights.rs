//! Weights by reference (docs/vips-format.md, "`weights`: a pinned weights
//! file"): a document pins a safetensors file by its SHA-256; `generate`
//! reads it and stores only the hashes of its tensors; a suite reads them
//! from the file, checks the file's hash and each tensor's, and runs. A
//! changed, missing or incomplete file is refused by name.

use crate::common;

use rand::Rng;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use vips_sdk::compare::Tier;
use vips_sdk::document::Document;
use vips_sdk::golden::{canonical_sha256, GoldenFile, Source};
use vips_sdk::runner::{self, Mode, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::HostTensor;

/// The checkpoint: (key, shape, dtype); `fc2.weight` is stored as float64
/// (the document declares float32: converted on reading, the same way by
/// `generate` and by a run).
const WEIGHTS: [(&str, &[usize], safetensors::Dtype); 3] = [
    ("fc1.weight", &[128, 64], safetensors::Dtype::F32),
    ("fc1.bias", &[128], safetensors::Dtype::F32),
    ("fc2.weight", &[16, 128], safetensors::Dtype::F64),
];

/// A checkpoint entry: key, shape, dtype, little-endian bytes.
type Entry = (String, Vec<usize>, safetensors::Dtype, Vec<u8>);

/// Random, trained-looking values (never zeros).
fn checkpoint(rng: &mut impl Rng) -> Vec<Entry> {
    WEIGHTS
        .iter()
        .map(|(key, shape, dtype)| {
            let n: usize = shape.iter().product();
            let scale = 1.0 / (*shape.last().unwrap() as f64).sqrt();
            let values: Vec<f64> = (0..n).map(|_| rng.gen_range(-scale..scale)).collect();
            let bytes = match dtype {
                safetensors::Dtype::F64 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
                _ => values
                    .iter()
                    .flat_map(|&v| (v as f32).to_le_bytes())
                    .collect(),
            };
            (key.to_string(), shape.to_vec(), *dtype, bytes)
        })
        .collect()
}

fn write_checkpoint(path: &Path, tensors: &[Entry]) {
    let views: Vec<(String, safetensors::tensor::TensorView)> = tensors
        .iter()
        .map(|(k, shape, dtype, bytes)| {
            (
                k.clone(),
                safetensors::tensor::TensorView::new(*dtype, shape.clone(), bytes).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

fn sha256_hex(path: &Path) -> String {
    hex::encode(Sha256::digest(std::fs::read(path).unwrap()))
}

/// A two-stage MLP whose weights come from `weights.safetensors`; `pin`:
/// the document pins that file (else `generate --weights` supplies it).
fn document_text(seed: u64, pin: Option<&str>, fc2_key: &str) -> String {
    let weights = pin.map_or(String::new(), |sha| {
        format!("weights:\n  file: weights.safetensors\n  sha256: \"{sha}\"\n")
    });
    format!(
        r#"vips: 1
component: {{ id: pinned-mlp, version: 0.1.0, title: "an MLP with its weights by reference" }}
{weights}golden:
  budget_bytes: 8000
tensors:
  x:  {{ dtype: float32, shape: [4, 64], source: {{ seeded: {{ seed: {seed}, normal: [0.0, 1.0] }} }} }}
  w1: {{ dtype: float32, shape: [128, 64], source: {{ weights: fc1.weight }} }}
  b1: {{ dtype: float32, shape: [128], source: {{ weights: fc1.bias }} }}
  w2: {{ dtype: float32, shape: [16, 128], source: {{ weights: {fc2_key} }} }}
  h:  {{ dtype: float32, shape: [4, 128], source: golden }}
  y:  {{ dtype: float32, shape: [4, 16], source: golden }}
stages:
  - stage: fc1_gelu
    algorithm: "h = GELU(x · w1ᵀ + b1)"
    impl: "torch.nn.Linear(64, 128) then torch.nn.GELU()"
    inputs: [x, w1, b1]
    outputs: [h]
    graph:
      - {{ op: vsdk.linear, inputs: [x, w1, b1], outputs: [t] }}
      - {{ op: vsdk.gelu, inputs: [t], outputs: [h] }}
  - stage: head
    algorithm: "y = h · w2ᵀ"
    impl: "torch.nn.Linear(128, 16, bias=False)"
    inputs: [h, w2]
    outputs: [y]
    graph:
      - {{ op: vsdk.linear, inputs: [h, w2], outputs: [y] }}
"#
    )
}

/// A suite directory with the checkpoint and a document pinning it.
struct Fixture {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    weights: PathBuf,
    tensors: Vec<Entry>,
    seed: u64,
}

impl Fixture {
    fn new(test: &str) -> Fixture {
        let (mut rng, seed) = common::rng(test);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let weights = path.join("weights.safetensors");
        let tensors = checkpoint(&mut rng);
        write_checkpoint(&weights, &tensors);
        let sha = sha256_hex(&weights);
        let doc = document_text(seed % 1_000_000, Some(&sha), "fc2.weight");
        std::fs::write(path.join("suite.yaml"), doc).unwrap();
        Fixture {
            _dir: dir,
            dir: path,
            weights,
            tensors,
            seed: seed % 1_000_000,
        }
    }

    fn document(&self) -> Document {
        Document::open(self.dir.join("suite.yaml")).unwrap()
    }

    /// `generate` without any capture: the pinned file is read.
    fn generate(&self) -> Vec<u8> {
        let bytes = vips_sdk::generate::generate(&self.document(), &common::cpu(), &[]).unwrap();
        std::fs::write(self.dir.join("suite.golden"), &bytes).unwrap();
        bytes
    }
}

fn opts(mode: Mode) -> RunOptions {
    RunOptions {
        mode,
        tiers: vec![Tier::Fp32],
        ..RunOptions::default()
    }
}

#[test]
fn pinned_weights_stay_out_of_the_golden_file_and_the_suite_runs() {
    let f = Fixture::new("pinned_weights_stay_out_of_the_golden_file_and_the_suite_runs");
    let bytes = f.generate();
    let weights_size = std::fs::metadata(&f.weights).unwrap().len() as usize;
    assert!(
        bytes.len() <= 8000 && bytes.len() * 4 < weights_size,
        "golden file {} bytes, weights {weights_size}",
        bytes.len()
    );
    // Not one weight's bytes are in it (nor their float32 conversion).
    for (key, _, _, data) in &f.tensors {
        assert!(
            !bytes.windows(64).any(|w| w == &data[..64]),
            "{key} is stored"
        );
    }
    let golden = GoldenFile::from_bytes(Path::new("suite.golden"), bytes.clone()).unwrap();
    assert_eq!(golden.format_version, 3);
    let suite = Suite::open(&f.dir).unwrap();
    for name in ["w1", "b1", "w2"] {
        let g = golden.tensor(name).unwrap();
        assert_eq!(g.source, Source::Pinned, "{name}");
        assert_eq!(canonical_sha256(&suite.tensor(name).unwrap()), g.sha256);
    }
    // The values read are the checkpoint's (w2 converted from float64).
    let w1 = suite.tensor("w1").unwrap();
    assert_eq!(*w1.bytes, f.tensors[0].3);
    let w2 = suite.tensor("w2").unwrap();
    let stored: Vec<f64> = f.tensors[2]
        .3
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        w2.to_f64_vec(),
        stored.iter().map(|&v| v as f32 as f64).collect::<Vec<_>>()
    );
    // The same suite with its weights copied into the golden file
    // (`generate --weights`, no pin) computes the same golden outputs.
    let copied = Document::parse(
        &f.dir.join("copied.yaml"),
        &document_text(f.seed, None, "fc2.weight")
            .replace("budget_bytes: 8000", "budget_bytes: 200000"),
    )
    .unwrap();
    let full =
        vips_sdk::generate::generate(&copied, &common::cpu(), std::slice::from_ref(&f.weights))
            .unwrap();
    assert!(full.len() > weights_size / 2, "{} bytes", full.len());
    let full = Suite::new(
        copied,
        GoldenFile::from_bytes(Path::new("copied.golden"), full).unwrap(),
    )
    .unwrap();
    assert_eq!(full.golden.format_version, 1);
    for name in ["h", "y", "w1", "b1", "w2"] {
        assert_eq!(
            suite.tensor(name).unwrap().bytes,
            full.tensor(name).unwrap().bytes,
            "{name}"
        );
    }
    // `run` on the CPU provider passes, in both modes.
    let cpu = common::cpu();
    for mode in [Mode::Isolated, Mode::Chained] {
        let r = runner::run(&suite, &cpu, &cpu, &opts(mode)).unwrap();
        let statuses: Vec<Status> = r.tiers[0].stages.iter().map(|s| s.status).collect();
        assert_eq!(statuses, vec![Status::Pass; 2], "{mode:?}");
    }
    // A version-2 file cannot hold a pinned entry.
    let mut old = bytes;
    assert_eq!(old[8], 3, "the header's version varint");
    old[8] = 2;
    let body = old.len() - 32;
    let sum = Sha256::digest(&old[..body]);
    old[body..].copy_from_slice(&sum);
    let e = GoldenFile::from_bytes(Path::new("a.golden"), old).unwrap_err();
    assert!(
        e.to_string()
            .contains("a pinned tensor in a version 2 file"),
        "{e}"
    );
}

#[test]
fn a_modified_weights_file_is_refused_naming_both_hashes() {
    let f = Fixture::new("a_modified_weights_file_is_refused_naming_both_hashes");
    f.generate();
    let pinned = sha256_hex(&f.weights);
    // One element of fc1.weight changed.
    let mut tensors = f.tensors.clone();
    let v = f32::from_le_bytes(tensors[0].3[40..44].try_into().unwrap());
    tensors[0].3[40..44].copy_from_slice(&(v * 1.5 + 0.25).to_le_bytes());
    write_checkpoint(&f.weights, &tensors);
    let actual = sha256_hex(&f.weights);
    assert_ne!(pinned, actual);
    let suite = Suite::open(&f.dir).unwrap();
    let e = suite.tensor("w1").unwrap_err().to_string();
    for want in [
        f.weights.display().to_string(),
        pinned.clone(),
        actual.clone(),
        "tensor `w1`".into(),
    ] {
        assert!(e.contains(&want), "{e}\nwanted: {want}");
    }
    // A run stops there, and so does `generate`.
    let cpu = common::cpu();
    let r = runner::run(&suite, &cpu, &cpu, &opts(Mode::Isolated));
    let e = match r {
        Err(e) => e.to_string(),
        Ok(r) => format!(
            "{:?}",
            r.tiers[0]
                .stages
                .iter()
                .map(|s| (&s.status, &s.reason))
                .collect::<Vec<_>>()
        ),
    };
    assert!(e.contains(&pinned) && e.contains(&actual), "{e}");
    let e = vips_sdk::generate::generate(&f.document(), &cpu, &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains(&pinned) && e.contains(&actual), "{e}");
}

#[test]
fn a_missing_weights_file_or_key_is_refused_by_name() {
    let f = Fixture::new("a_missing_weights_file_or_key_is_refused_by_name");
    f.generate();
    let moved = f.dir.join("elsewhere.safetensors");
    std::fs::rename(&f.weights, &moved).unwrap();
    let suite = Suite::open(&f.dir).unwrap();
    let e = suite.tensor("w2").unwrap_err().to_string();
    let document = f.dir.join("suite.yaml").display().to_string();
    assert!(
        e.contains(&f.weights.display().to_string()) && e.contains(&document),
        "{e}"
    );
    let e = vips_sdk::generate::generate(&f.document(), &common::cpu(), &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains(&f.weights.display().to_string()), "{e}");
    std::fs::rename(&moved, &f.weights).unwrap();
    // A key the file does not have.
    let sha = sha256_hex(&f.weights);
    let text = document_text(f.seed, Some(&sha), "head.weight");
    let doc = Document::parse(&f.dir.join("suite.yaml"), &text).unwrap();
    let e = vips_sdk::generate::generate(&doc, &common::cpu(), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`head.weight`") && e.contains(&f.weights.display().to_string()),
        "{e}"
    );
    // A shape other than the declared one names the tensor.
    let text = document_text(f.seed, Some(&sha), "fc2.weight").replace(
        "shape: [16, 128], source: { weights",
        "shape: [16, 127], source: { weights",
    );
    let doc = Document::parse(&f.dir.join("suite.yaml"), &text).unwrap();
    let e = vips_sdk::generate::generate(&doc, &common::cpu(), &[])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor `w2`") && e.contains("[16, 128]") && e.contains("[16, 127]"),
        "{e}"
    );
}

#[test]
fn the_pin_is_checked_when_the_document_is_read() {
    let base = document_text(1, Some(&"ab".repeat(32)), "fc2.weight");
    let parse = |text: &str| Document::parse(Path::new("doc.yaml"), text);
    let doc = parse(&base).unwrap();
    let pin = doc.weights.unwrap();
    assert_eq!(pin.file, "weights.safetensors");
    assert_eq!(pin.sha256, [0xab; 32]);
    let e = parse(&base.replace(&"ab".repeat(32), "abc"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("weights.sha256: expected 64 hex digits"), "{e}");
    let e = parse(&base.replace("file: weights.safetensors", "file: weights.npz"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("weights.file: `weights.npz`"), "{e}");
    let e = parse(&base.replace("  file: weights", "  path: weights"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("Unknown field `path`"), "{e}");
    // A golden file that reads a tensor from a pinned file its document
    // does not pin is refused.
    let unpinned = parse(&document_text(1, None, "fc2.weight")).unwrap();
    let mut w = vips_sdk::golden::GoldenWriter::new("pinned-mlp", "0.1.0", unpinned.sha256);
    for t in &unpinned.tensors {
        let shape = t.shape.clone().unwrap();
        let n: usize = shape.iter().product();
        let v = HostTensor::from_vec(&shape, vec![0.5f32; n]).unwrap();
        match &t.source {
            vips_sdk::document::TensorSource::Seeded(s) => {
                w.seeded(&t.name, t.dtype, &shape, *s).unwrap();
            }
            _ if t.name == "w1" => {
                w.pinned(&t.name, v.spec.clone(), canonical_sha256(&v));
            }
            _ => {
                w.raw(&t.name, &v);
            }
        }
    }
    let golden = GoldenFile::from_bytes(Path::new("x.golden"), w.to_bytes().unwrap()).unwrap();
    let e = Suite::new(unpinned, golden).err().unwrap().to_string();
    assert!(
        e.contains("tensor `w1`") && e.contains("the document pins no weights file"),
        "{e}"
    );
}
