//! An engine we did not write, judged through the C library: ONNX Runtime
//! runs the quick DINOv2 suite (tools/ort_dinov2.py builds the ONNX graph from
//! the document, with the suite's weights), and examples/c-engine/check.c
//! judges its per-stage tensors with `vsdk_tensors_open` and `vsdk_check`, in
//! isolated mode (every stage fed its golden inputs) and chained mode (the
//! engine end to end from the golden pixels: `preprocess` NOT CAPTURED, the
//! exact `outputs` stage judged on the engine's own x_norm, the component's
//! outputs end to end). The same engine with LayerNorm eps 1e-5 fails both.
//!
//! Needs python3 with numpy, onnx, onnxruntime and pyyaml (tools/test
//! installs them from PyPI where missing, into a prefix it names in
//! $VSDK_ORT_PYTHONPATH) and a C compiler: without them it fails, saying so.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .parent()
        .expect("target/<profile>")
        .to_path_buf()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// examples/c-engine/check.c linked with the static libvips_sdk.a.
fn check_program(dir: &Path) -> PathBuf {
    let archive = target_dir().join("libvips_sdk.a");
    assert!(
        archive.is_file(),
        "{} is missing: `cargo test` does not build staticlibs; run `cargo build --workspace` first (tools/test does)",
        archive.display()
    );
    let exe = dir.join("check");
    let out = Command::new("cc")
        .args([
            "-std=c99",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-pedantic",
            "-O1",
        ])
        .arg("-I")
        .arg(repo().join("include"))
        .arg(repo().join("examples/c-engine/check.c"))
        .arg(&archive)
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("a C compiler is needed (`cc`): {e}"));
    assert!(out.status.success(), "building check.c: {}", text(&out));
    exe
}

/// ONNX Runtime's captures of the quick suite with LayerNorm `eps`: the
/// end-to-end run's and the isolated run's.
fn ort_captures(dir: &Path, eps: &str) -> (PathBuf, PathBuf) {
    let out_path = dir.join(format!("ort-{eps}.npz"));
    let out = Command::new("python3")
        .arg(repo().join("tools/ort_dinov2.py"))
        .args(["--suite", "dinov2-vits14-quick", "--ln-eps", eps, "--out"])
        .arg(&out_path)
        .env("VSDK_CLI", env!("CARGO_BIN_EXE_vips-conformance"))
        .envs(std::env::var_os("VSDK_ORT_PYTHONPATH").map(|p| ("PYTHONPATH", p)))
        .output()
        .expect("python3 is needed");
    assert!(
        out.status.success(),
        "tools/ort_dinov2.py (needs numpy, onnx, onnxruntime, pyyaml: `python3 -m pip install numpy onnx onnxruntime pyyaml`, as tools/test does) failed:\n{}",
        text(&out)
    );
    let isolated = dir.join(format!("ort-{eps}.isolated.npz"));
    assert!(isolated.is_file(), "{}", text(&out));
    (out_path, isolated)
}

fn check(program: &Path, captures: &Path, chained: bool) -> (i32, String) {
    let out = Command::new(program)
        .arg("dinov2-vits14-quick")
        .arg(captures)
        .arg(if chained { "--chained" } else { "--isolated" })
        .env("VSDK_SUITES_PATH", repo().join("conformance/suites"))
        .env("VSDK_PROVIDER_PATH", target_dir())
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), text(&out))
}

/// The line of `stage` in check.c's output.
fn line<'a>(out: &'a str, stage: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(stage))
        .unwrap_or_else(|| panic!("no `{stage}` line in:\n{out}"))
}

#[test]
fn onnx_runtime_judged_through_the_c_library() {
    let dir = tempfile::tempdir().unwrap();
    let program = check_program(dir.path());
    let (chained, isolated) = ort_captures(dir.path(), "1e-06");

    let (code, out) = check(&program, &chained, true);
    assert_eq!(code, 0, "{out}");
    assert!(line(&out, "preprocess").contains("NOT CAPTURED"), "{out}");
    for stage in [
        "patch_embed",
        "block_00",
        "block_11",
        "final_norm",
        "outputs",
    ] {
        assert!(line(&out, stage).contains("PASS"), "{out}");
    }
    assert!(
        out.contains("end to end x_norm_clstoken: PASS")
            && out.contains("end to end x_norm_patchtokens: PASS"),
        "{out}"
    );
    let (code, out) = check(&program, &isolated, false);
    assert_eq!(code, 0, "{out}");
    assert!(line(&out, "outputs").contains("PASS"), "{out}");

    // PyTorch's default eps instead of DINOv2's: the first blocks fail
    // (their rms, as every element stays within its bound), in both modes.
    let (chained, isolated) = ort_captures(dir.path(), "1e-05");
    for (captures, is_chained) in [(&chained, true), (&isolated, false)] {
        let (code, out) = check(&program, captures, is_chained);
        assert_eq!(code, 1, "{out}");
        let block_00 = line(&out, "block_00");
        assert!(
            block_00.contains("FAIL") && block_00.contains("rms"),
            "{out}"
        );
        assert!(out.contains("check: FAIL"), "{out}");
    }
}
