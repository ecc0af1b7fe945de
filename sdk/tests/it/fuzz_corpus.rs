//! The fuzz corpus, replayed without libFuzzer: every file of
//! `fuzz/corpus/<target>/` and `fuzz/regressions/<target>/` goes through the
//! same function as the fuzz target (`fuzz/targets.rs`). No input may panic;
//! the hand-made seeds (`seed-*`) must also still be accepted, so a format
//! change that leaves the fuzzer knocking at the door fails here.
//!
//! The golden and protocol seeds are written by
//! `cargo test -p vips-sdk --test it -- --ignored fuzz_corpus::write_seeds`;
//! the capture seeds by `fuzz/make_capture_seeds.py`.

#[path = "../../../fuzz/targets.rs"]
mod targets;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use vips_sdk::execution::{Attr, Finding, Program, Side, Spec, Step};
use vips_sdk::golden::{Distribution, GoldenWriter, Seeded};
use vips_sdk::isolation::protocol::{self, Reply, Request};
use vips_sdk::{DType, DeviceInfo, HostTensor, ProviderInfo};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .map(|e| e.expect("list the corpus").path())
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

fn replay(target: &str) {
    let (_, run) = targets::TARGETS
        .iter()
        .find(|(name, _)| *name == target)
        .expect("a target of that name");
    let dirs = ["corpus", "regressions"].map(|d| fuzz_dir().join(d).join(target));
    let inputs: Vec<PathBuf> = dirs.iter().flat_map(|d| files(d)).collect();
    assert!(
        inputs.iter().any(|p| is_seed(p)),
        "no seed inputs in {}",
        dirs[0].display()
    );
    let mut failures = Vec::new();
    for path in &inputs {
        let data = std::fs::read(path).expect("read a corpus file");
        match catch_unwind(AssertUnwindSafe(|| run(&data))) {
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                failures.push(format!("{}: panicked: {message}", path.display()));
            }
            Ok(Err(e)) if is_seed(path) => failures.push(format!(
                "{}: a seed that no longer decodes: {e}",
                path.display()
            )),
            Ok(_) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} {target} inputs failed:\n{}",
        failures.len(),
        inputs.len(),
        failures.join("\n")
    );
}

fn is_seed(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("seed-"))
}

#[test]
fn golden_corpus() {
    replay("golden");
}

#[test]
fn document_corpus() {
    replay("document");
}

#[test]
fn capture_corpus() {
    replay("capture");
}

#[test]
fn protocol_corpus() {
    replay("protocol");
}

#[test]
fn report_corpus() {
    replay("report");
}

#[test]
fn results_corpus() {
    replay("results");
}

/// Small valid golden files: every storage kind and distribution.
fn golden_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let x = HostTensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 0.5, 0.0, 3.25, -0.125]).unwrap();
    let h = HostTensor::from_vec(&[4], vec![half::f16::from_f32(1.5); 4]).unwrap();
    let i = HostTensor::from_vec(&[], vec![-7i64]).unwrap();
    let img = HostTensor::from_vec(&[1, 2, 3], (0..6u8).collect()).unwrap();
    let seeded = |distribution| Seeded {
        seed: 42,
        distribution,
    };
    let mut raw = GoldenWriter::new("seed-raw", "0.1.0", [1; 32]);
    raw.raw("x", &x).raw("h", &h).raw("i", &i).raw("img", &img);
    let mut gen = GoldenWriter::new("seed-gen", "1.0.0-rc.1", [2; 32]);
    gen.seeded(
        "u",
        DType::F32,
        &[3, 2],
        seeded(Distribution::Uniform {
            low: -1.0,
            high: 1.0,
        }),
    )
    .unwrap()
    .seeded(
        "n",
        DType::BF16,
        &[5],
        seeded(Distribution::Normal {
            mean: 0.0,
            std: 0.5,
        }),
    )
    .unwrap()
    .seeded("t", DType::U8, &[4, 4, 3], seeded(Distribution::TestImage))
    .unwrap();
    let empty = GoldenWriter::new("seed-empty", "0.0.0", [0; 32]);
    // Version 2: a stage output stored as its hash and fingerprint.
    let mut anchored = GoldenWriter::new("seed-anchored", "0.2.0", [3; 32]);
    anchored.raw("x", &x).anchored("y", &h);
    // Version 3: a tensor of the document's pinned weights file, its hash only.
    let mut pinned = GoldenWriter::new("seed-pinned", "0.3.0", [4; 32]);
    pinned.raw("x", &x).anchored("y", &h).pinned(
        "w",
        x.spec.clone(),
        vips_sdk::golden::canonical_sha256(&x),
    );
    vec![
        ("seed-raw.golden", raw.to_bytes().unwrap()),
        ("seed-anchored.golden", anchored.to_bytes().unwrap()),
        ("seed-pinned.golden", pinned.to_bytes().unwrap()),
        ("seed-seeded.golden", gen.to_bytes().unwrap()),
        ("seed-empty.golden", empty.to_bytes().unwrap()),
    ]
}

/// One encoded message of each kind, and a reply stream.
fn protocol_seeds() -> Vec<(&'static str, Vec<u8>)> {
    fn message<T: serde::Serialize>(header: &T, tensors: &[&HostTensor]) -> Vec<u8> {
        let blobs: Vec<&[u8]> = tensors.iter().map(|t| &t.bytes[..]).collect();
        let mut out = Vec::new();
        protocol::write(&mut out, header, &blobs).unwrap();
        out
    }
    let spec = |dtype: &str, shape: &[u64]| Spec {
        dtype: dtype.into(),
        shape: shape.to_vec(),
    };
    let x = HostTensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.0]).unwrap();
    let x_repeat = HostTensor::from_vec(&[2, 2], vec![1.0f32, 2.0, 3.0, 4.5]).unwrap();
    let b = HostTensor::from_vec(&[3], vec![1u8, 2, 3]).unwrap();
    let mut step = Step::new("vsdk.add", 1, &vips_sdk::Attrs::new());
    step.attrs = vec![
        ("i".into(), Attr::Int(-3)),
        ("f".into(), Attr::Float(0.5)),
        ("s".into(), Attr::Str("float16".into())),
        ("is".into(), Attr::Ints(vec![1, -1])),
        ("fs".into(), Attr::Floats(vec![f64::NAN, -0.0])),
    ];
    step.inputs = vec!["x".into(), "x".into()];
    step.outputs = vec!["y".into()];
    let mut fused = Step::new("vendor.fused", 2, &vips_sdk::Attrs::new());
    fused.inputs = vec!["y".into(), "b".into()];
    fused.outputs = vec!["z".into()];
    fused.out_specs = Some(vec![spec("float32", &[2, 2])]);
    let run = Request::Run {
        program: Program {
            steps: vec![step, fused],
            ..Program::default()
        },
        inputs: vec![
            ("x".into(), spec("float32", &[2, 2])),
            ("b".into(), spec("uint8", &[3])),
        ],
        seed: 9,
    };
    let opened = Reply::Opened {
        provider: ProviderInfo {
            name: "cpu".into(),
            vendor: "VIPS".into(),
            version: "1.0.0".into(),
            description: "reference".into(),
            abi_version: vips_sdk::ABI_VERSION,
            library: "/usr/lib/libvsdk_cpu.so".into(),
            thread_safe: false,
        },
        device: DeviceInfo {
            index: 0,
            device_type: 1,
            name: "host".into(),
            driver_version: "1".into(),
            stable_id: "cpu-0".into(),
            memory_bytes: 1 << 30,
        },
    };
    let ran = Reply::Ran {
        outputs: vec![("y".into(), spec("float32", &[2, 2]))],
        repeated: vec![false],
        findings: vec![
            Finding::OutOfBounds {
                kernel: "vsdk.add".into(),
                tensor: "y".into(),
                side: Side::After,
                first: 0,
                last: 3,
            },
            Finding::Corrupted {
                tensor: "x".into(),
                first_byte: 4,
            },
            Finding::Unwritten {
                kernel: "vsdk.add".into(),
                tensor: "y".into(),
                count: 1,
                first_index: 2,
            },
            Finding::Nondeterministic {
                tensor: "y".into(),
                count: 2,
                first_index: 0,
            },
        ],
        kernel_seconds: 0.25,
    };
    let stream = [
        message(&Reply::Running(0), &[]),
        message(&Reply::Running(1), &[]),
        // Both runs' outputs: the repeat differs in one element.
        message(&ran, &[&x, &x_repeat]),
    ]
    .concat();
    let policy = vips_sdk::sandbox::Policy::for_library(
        std::path::Path::new("/opt/v/lib.so"),
        1 << 20,
        None,
    );
    let facts = vips_sdk::sandbox::Facts {
        namespaces: vips_sdk::sandbox::NAMESPACES.map(String::from).to_vec(),
        seccomp: Some(vips_sdk::sandbox::SECCOMP_FILTER.into()),
        missing: vec!["cgroup: read-only file system".into()],
        ..Default::default()
    };
    vec![
        (
            "seed-open",
            message(
                &Request::Open {
                    library: b"/opt/\xffvendor/lib.so".to_vec(),
                    device: 1,
                },
                &[],
            ),
        ),
        (
            "seed-supports",
            message(
                &Request::Supports(vec![("vsdk.gelu".into(), 1, "bfloat16".into())]),
                &[],
            ),
        ),
        ("seed-run", message(&run, &[&x, &b])),
        ("seed-shutdown", message(&Request::Shutdown, &[])),
        ("seed-sandbox", message(&Request::Sandbox(policy), &[])),
        (
            "seed-sandboxed",
            message(
                &Reply::Sandboxed {
                    facts,
                    init_pid: 4242,
                },
                &[],
            ),
        ),
        ("seed-opened", message(&opened, &[])),
        (
            "seed-supported",
            message(&Reply::Supported(vec![true, false]), &[]),
        ),
        ("seed-ran-stream", stream),
        (
            "seed-failed",
            message(&Reply::Failed("out of memory".into()), &[]),
        ),
        ("seed-closed", message(&Reply::Closed, &[])),
    ]
}

#[test]
fn generated_seeds_are_accepted() {
    for (name, bytes) in golden_seeds() {
        assert_eq!(targets::golden(&bytes), Ok(()), "{name}");
    }
    for (name, bytes) in protocol_seeds() {
        assert_eq!(targets::protocol(&bytes), Ok(()), "{name}");
    }
}

/// Writes the golden and protocol seeds into `fuzz/corpus/`.
#[test]
#[ignore = "writes into the source tree: run by hand to regenerate the seeds"]
fn write_seeds() {
    for (target, seeds) in [("golden", golden_seeds()), ("protocol", protocol_seeds())] {
        let dir = fuzz_dir().join("corpus").join(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
    }
}
