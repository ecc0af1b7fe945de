//! The embedded verifier (docs/embedded.md): a replay pack of the quick
//! DINOv2 suite, judged by a freestanding C program (no libc, its own
//! `_start`) linked against the no_std static library, gives the verdicts and
//! margins `vips-conformance run` gives for the same output bytes, to the
//! last bit: a passing CPU provider at fp32 and bf16, and a wrong variant.

use crate::common;

use common::{repo, require, Out};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn target_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The firmware library for the host or `target` (the `firmware` profile:
/// panics abort; in its own target directory, as the test's cargo holds the
/// workspace's).
fn firmware_library(target: Option<&str>) -> PathBuf {
    let build = target_dir().join("firmware-build");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut c = Command::new(cargo);
    c.args(["rustc", "-p", "vips-verify-capi", "--profile", "firmware"])
        .args(["--crate-type", "staticlib", "--features", "panic-handler"]);
    if let Some(t) = target {
        c.args(["--target", t]);
    }
    // Built as a firmware project builds it: not through tools/test's
    // clippy-driver (RUSTC_WORKSPACE_WRAPPER), which lints the workspace.
    let r = Out::of(
        c.env("CARGO_TARGET_DIR", &build)
            .env_remove("RUSTC_WORKSPACE_WRAPPER")
            .env_remove("CLIPPY_ARGS")
            .current_dir(repo())
            .output()
            .expect("run cargo"),
    );
    assert_eq!(
        r.code,
        0,
        "building the firmware library for {target:?}: {}",
        r.text()
    );
    build
        .join(target.unwrap_or(""))
        .join("firmware/libvips_verify_capi.a")
}

/// The firmware library and the freestanding program, built once: the
/// library with panics aborting (the `firmware` profile, in its own target
/// directory: the test's cargo holds the workspace's), the program with
/// `-ffreestanding -nostdlib -static`, so linking proves it needs no libc.
fn replay_program() -> &'static Path {
    static PROGRAM: OnceLock<PathBuf> = OnceLock::new();
    PROGRAM.get_or_init(|| {
        require("cc", &["--version"], "a C compiler (gcc)");
        let lib = firmware_library(None);
        let program = Path::new(env!("CARGO_TARGET_TMPDIR")).join("vips-replay-freestanding");
        let r = Out::of(
            Command::new("cc")
                .args(["-ffreestanding", "-nostdlib", "-static", "-fno-builtin"])
                .args(["-fno-stack-protector", "-fno-tree-loop-distribute-patterns"])
                .args(["-O2", "-Wall", "-Werror", "-Wl,--gc-sections", "-o"])
                .arg(&program)
                .arg("-I")
                .arg(repo().join("include"))
                .arg(repo().join("verify/capi/c/replay.c"))
                .arg(&lib)
                .output()
                .expect("run cc"),
        );
        assert_eq!(r.code, 0, "linking without libc: {}", r.text());
        program
    })
}

fn vips(args: &[&str], env: &[(&str, PathBuf)]) -> Out {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vips-conformance"));
    c.args(args).current_dir(repo());
    for (k, v) in env {
        c.env(k, v);
    }
    Out::of(c.output().expect("run vips-conformance"))
}

/// `run` on the quick suite at `tier` (isolated, the main round's outputs
/// saved): the results JSON and the saved outputs file.
fn run(dir: &Path, tier: &str, mutation: Option<&str>) -> (Value, PathBuf) {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_vips-conformance"));
    let libs = bin.parent().unwrap().to_path_buf();
    let saved = dir.join(format!(
        "outputs-{tier}-{}.safetensors",
        mutation.unwrap_or("cpu")
    ));
    let mut env = vec![("VSDK_PROVIDER_PATH", libs.clone())];
    let provider = match mutation {
        Some(m) => {
            env.push(("VSDK_MUTANT_TARGET", libs.join("libvsdk_provider_cpu.so")));
            env.push(("VSDK_MUTATION", PathBuf::from(m)));
            libs.join("libvsdk_mutant_provider.so")
        }
        None => libs.join("libvsdk_provider_cpu.so"),
    };
    let r = vips(
        &[
            "run",
            "dinov2-vits14-quick",
            "--tier",
            tier,
            "--json",
            "--no-differential",
            "--no-contract",
            "--provider",
            s(&provider),
            "--save-outputs",
            s(&saved),
        ],
        &env,
    );
    let results: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("results JSON: {e}: {}", r.text()));
    (results, saved)
}

/// The saved outputs, raw, in the pack's order (stage by stage, output by
/// output: the results' order); with each output's SHA-256 and shape.
fn device_outputs(results: &Value, saved: &Path, out: &Path) -> Vec<(String, Vec<u64>)> {
    let bytes = std::fs::read(saved).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut all = Vec::new();
    let mut hashes = Vec::new();
    for stage in results["tiers"][0]["stages"].as_array().unwrap() {
        for o in stage["outputs"].as_array().unwrap() {
            let t = st.tensor(o["tensor"].as_str().unwrap()).unwrap();
            all.extend_from_slice(t.data());
            let shape = t.shape().iter().map(|&d| d as u64).collect();
            hashes.push((hex::encode(Sha256::digest(t.data())), shape));
        }
    }
    std::fs::write(out, all).unwrap();
    hashes
}

/// A JSON number of a judgement as the bits of the f64 (null: NaN, not
/// tested; the strings the report writes for infinities).
fn bits(v: &Value) -> u64 {
    let x = match v {
        Value::Null => f64::NAN,
        Value::String(s) if s == "inf" || s == "Infinity" => f64::INFINITY,
        Value::String(s) if s == "-inf" || s == "-Infinity" => f64::NEG_INFINITY,
        Value::String(s) if s == "nan" || s == "NaN" => f64::NAN,
        v => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    };
    x.to_bits()
}

fn flat(index: &Value, shape: &[u64]) -> u64 {
    index
        .as_array()
        .unwrap()
        .iter()
        .zip(shape)
        .fold(0, |f, (i, d)| f * d + i.as_u64().unwrap())
}

/// Replays `pack` on `outputs` and checks every verdict line against the
/// run's judgement of the same bytes. Returns (outputs, failed) and the exit code.
fn replay_agrees(
    pack: &Path,
    outputs: &Path,
    results: &Value,
    saved: &[(String, Vec<u64>)],
) -> (usize, usize, i32) {
    let r = Out::of(
        Command::new(replay_program())
            .arg(pack)
            .arg(outputs)
            .output()
            .expect("run the freestanding replay"),
    );
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.last(), Some(&"END"), "{}", r.text());
    let verdicts: Vec<Vec<&str>> = lines
        .iter()
        .filter(|l| l.starts_with("VERDICT "))
        .map(|l| l.split(' ').collect())
        .collect();
    let mut k = 0;
    let mut failed = 0;
    for stage in results["tiers"][0]["stages"].as_array().unwrap() {
        for o in stage["outputs"].as_array().unwrap() {
            let v = &verdicts[k];
            let j = &o["judgement"];
            let what = format!("{} {}", stage["stage"], o["tensor"]);
            assert_eq!(v[1], stage["stage"].as_str().unwrap(), "{what}");
            assert_eq!(v[2], o["tensor"].as_str().unwrap(), "{what}");
            assert_eq!(
                v[3] == "1",
                j["passed"].as_bool().unwrap(),
                "{what}: passed"
            );
            assert_eq!(v[4], j["over_bound"].to_string(), "{what}: over_bound");
            assert_eq!(v[5], j["elements"].to_string(), "{what}: elements");
            for (i, field) in [
                "max_e",
                "rms_e",
                "rms_t",
                "bias_z",
                "bias_ratio",
                "max_abs_error",
                "rel_l2_error",
                "tolerance_factor",
            ]
            .iter()
            .enumerate()
            {
                let device = u64::from_str_radix(v[6 + i], 16).unwrap();
                let host = bits(&j[*field]);
                let same = device == host
                    || (f64::from_bits(device).is_nan() && f64::from_bits(host).is_nan());
                assert!(
                    same,
                    "{what}: {field}: device {} host {}",
                    f64::from_bits(device),
                    f64::from_bits(host)
                );
            }
            let (hash, shape) = &saved[k];
            let worst = if j["worst"].is_null() {
                u64::MAX
            } else {
                flat(&j["worst"]["index"], shape)
            };
            assert_eq!(v[14], worst.to_string(), "{what}: the worst element");
            assert_eq!(v[15], *hash, "{what}: the output's SHA-256");
            failed += usize::from(v[3] != "1");
            k += 1;
        }
    }
    assert_eq!(k, verdicts.len(), "one verdict per output");
    (k, failed, r.code)
}

#[test]
fn a_freestanding_replay_gives_the_hosts_verdicts_and_margins() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for tier in ["fp32", "bf16"] {
        let pack = dir.path().join(format!("quick-{tier}.vrp"));
        let r = vips(
            &[
                "pack-replay",
                "dinov2-vits14-quick",
                "--tier",
                tier,
                "--out",
                s(&pack),
            ],
            &[],
        );
        assert_eq!(r.code, 0, "{}", r.text());
        let (results, saved) = run(dir.path(), tier, None);
        assert_eq!(results["passed"], true, "the CPU provider passes at {tier}");
        let outputs = dir.path().join(format!("outputs-{tier}.bin"));
        let saved_outputs = device_outputs(&results, &saved, &outputs);
        let (n, failed, code) = replay_agrees(&pack, &outputs, &results, &saved_outputs);
        assert_eq!((n, failed, code), (18, 0, 0), "{tier}");

        // A wrong variant (GELU's tanh approximation): the same failures,
        // with the same margins.
        if tier == "fp32" {
            let (results, saved) = run(dir.path(), tier, Some("gelu_tanh"));
            assert_eq!(results["passed"], false, "gelu_tanh fails");
            let outputs = dir.path().join("outputs-gelu_tanh.bin");
            let saved_outputs = device_outputs(&results, &saved, &outputs);
            let (n, failed, code) = replay_agrees(&pack, &outputs, &results, &saved_outputs);
            assert_eq!(n, 18);
            assert!(failed >= 12, "every block fails: {failed}");
            assert_eq!(code, 1);
        }
    }
}

/// A pack cut short, or with one byte changed, is an error, never a verdict
/// the pack did not earn.
#[test]
fn a_damaged_pack_is_refused_by_the_freestanding_replay() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let pack = dir.path().join("quick.vrp");
    let r = vips(
        &[
            "pack-replay",
            "dinov2-vits14-quick",
            "--tier",
            "fp32",
            "--stages",
            "patch_embed",
            "--out",
            s(&pack),
        ],
        &[],
    );
    assert_eq!(r.code, 0, "{}", r.text());
    let bytes = std::fs::read(&pack).unwrap();
    let outputs = dir.path().join("zeros.bin");
    std::fs::write(&outputs, vec![0u8; 1 << 20]).unwrap();
    let replay = |pack: &[u8]| {
        let p = dir.path().join("damaged.vrp");
        std::fs::write(&p, pack).unwrap();
        Out::of(
            Command::new(replay_program())
                .arg(&p)
                .arg(&outputs)
                .output()
                .unwrap(),
        )
    };
    let cut = replay(&bytes[..bytes.len() - 10]);
    assert_eq!(cut.code, 2, "{}", cut.text());
    assert!(
        cut.stdout
            .contains("ERROR the pack ended before its End frame"),
        "{}",
        cut.text()
    );
    let mut flipped = bytes.clone();
    let at = bytes.len() / 2;
    flipped[at] ^= 0x01;
    let r = replay(&flipped);
    assert_eq!(r.code, 2, "{}", r.text());
    assert!(r.stdout.contains("ERROR"), "{}", r.text());
    let mut magic = bytes.clone();
    magic[0] = b'X';
    let r = replay(&magic);
    assert!(r.stdout.contains("ERROR feed status 4"), "{}", r.text());
}

/// The same library for a Cortex-M4 (`thumbv7em-none-eabihf`), linked into
/// a bare-metal image by `arm-none-eabi-ld` with no C library, no start files
/// and nothing undefined (an entry that calls every function of
/// verify.h: verify/capi/c/cortex_m_start.s). Linked, not run.
#[test]
fn the_library_links_into_a_bare_metal_cortex_m_image() {
    require(
        "arm-none-eabi-ld",
        &["--version"],
        "GNU binutils for bare-metal ARM (apt-get install binutils-arm-none-eabi)",
    );
    let target = "thumbv7em-none-eabihf";
    let installed = Out::of(
        Command::new("rustup")
            .args(["target", "list", "--installed"])
            .output()
            .expect("run rustup"),
    );
    assert!(
        installed.stdout.lines().any(|l| l == target),
        "the Rust target {target} is not installed (tools/test runs `rustup target add {target}`)"
    );
    let lib = firmware_library(Some(target));
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let (start, image) = (dir.path().join("start.o"), dir.path().join("firmware.elf"));
    let r = Out::of(
        Command::new("arm-none-eabi-as")
            .args(["-mcpu=cortex-m4", "-mthumb", "-o"])
            .arg(&start)
            .arg(repo().join("verify/capi/c/cortex_m_start.s"))
            .output()
            .expect("run arm-none-eabi-as"),
    );
    assert_eq!(r.code, 0, "{}", r.text());
    let r = Out::of(
        Command::new("arm-none-eabi-ld")
            .args(["--gc-sections", "-e", "_start", "-Ttext=0x08000000", "-o"])
            .arg(&image)
            .arg(&start)
            .arg(&lib)
            .output()
            .expect("run arm-none-eabi-ld"),
    );
    assert_eq!(r.code, 0, "linking bare metal: {}", r.text());
    let symbols = Out::of(
        Command::new("readelf")
            .args(["-h", "-s"])
            .arg(&image)
            .output()
            .unwrap(),
    );
    assert!(
        symbols
            .stdout
            .contains("Machine:                           ARM"),
        "{}",
        symbols.stdout
    );
    for f in [
        "vsdk_verify_feed",
        "vsdk_verify_output",
        "vsdk_verify_finish",
    ] {
        assert!(symbols.stdout.contains(f), "{f} is in the image");
    }
    // Nothing undefined but the null symbol.
    let undefined = symbols
        .stdout
        .lines()
        .filter(|l| l.contains(" UND ") && !l.trim_end().ends_with("UND"))
        .count();
    assert_eq!(undefined, 0, "{}", symbols.stdout);
}
