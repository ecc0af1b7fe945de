//! Hostile drivers (testing/hostile-providers: forwarders to the CPU
//! provider that crash, hang, scribble, half-write, replay, flip bits, print
//! to stdout, throw, or report absurd counts), each through one CLI run in a
//! worker process: the misbehaving stage gets its verdict, every other stage
//! is reported as it is, the results files are written, and the exit code is
//! 0 only for a pass.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use vsdk_hostile_providers as hostile;

fn test_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

/// Stages around the one with the misbehaving kernel (GELU in block_00's MLP).
const STAGES: &str = "{preprocess,patch_embed,block_00,final_norm}";
const BAD: &str = "block_00";

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
    report: Value,
    dir: tempfile::TempDir,
}

impl Run {
    fn status(&self, round: &str, stage: &str) -> String {
        self.stage(round, stage)["status"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    fn stage(&self, round: &str, stage: &str) -> &Value {
        let key = if round == "main" {
            "stages"
        } else {
            "differential"
        };
        self.report["tiers"][0][key]
            .as_array()
            .and_then(|s| s.iter().find(|s| s["stage"] == stage))
            .unwrap_or_else(|| panic!("no {round} result for {stage}: {}", self.stdout))
    }

    fn reason(&self, round: &str, stage: &str) -> String {
        self.stage(round, stage)["reason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Every stage but `bad` passed in both rounds.
    fn others_pass(&self, bad: &str) {
        for round in ["main", "differential"] {
            for s in ["preprocess", "patch_embed", "final_norm"] {
                if s != bad {
                    assert_eq!(
                        self.status(round, s),
                        "pass",
                        "{round} {s}: {}",
                        self.stdout
                    );
                }
            }
        }
    }

    fn csv(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("results.json.csv")).expect("results CSV")
    }
}

fn run_with(lib: &str, extra: &[&str], env: &[(&str, &Path)]) -> Run {
    let dir = tempfile::tempdir().expect("temp dir");
    let output = dir.path().join("results.json");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vips-conformance"));
    cmd.args([
        "run",
        "dinov2-vits14-quick",
        "--stage",
        STAGES,
        "--provider",
        lib,
    ])
    .arg("--output")
    .arg(&output)
    .args(extra)
    .env("VSDK_PROVIDER_PATH", test_dir())
    .env(hostile::TARGET_ENV, test_dir().join(vips_sdk_file("cpu")))
    .current_dir(env!("CARGO_MANIFEST_DIR").to_owned() + "/..");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("run vips-conformance");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let text = std::fs::read_to_string(&output).unwrap_or_default();
    let report = serde_json::from_str(&text).unwrap_or(Value::Null);
    Run {
        code: out.status.code().expect("exited"),
        stdout,
        stderr,
        report,
        dir,
    }
}

fn vips_sdk_file(name: &str) -> String {
    format!("libvsdk_provider_{name}{}", std::env::consts::DLL_SUFFIX)
}

fn run(lib: &str, extra: &[&str]) -> Run {
    run_with(lib, extra, &[])
}

/// A crashing kernel: CRASHED in both rounds, with how and where.
fn crashes(lib: &str, how: &str) {
    let r = run(lib, &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    for round in ["main", "differential"] {
        assert_eq!(r.status(round, BAD), "crashed", "{}", r.stdout);
        let reason = r.reason(round, BAD);
        assert!(reason.contains(how), "{reason}");
        assert!(reason.contains("`vsdk.gelu`@1"), "{reason}");
    }
    r.others_pass(BAD);
    assert_eq!(r.report["passed"], false);
    let csv = r.csv();
    assert!(csv.contains("fp32,isolated,main,block_00,CRASHED"), "{csv}");
    assert!(csv.contains("fp32,isolated,main,final_norm,PASS"), "{csv}");
}

#[test]
fn the_working_forwarder_passes_and_is_named_for_what_it_is() {
    let r = run(hostile::WORKING, &[]);
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.report["passed"], true);
    r.others_pass("");
    assert_eq!(r.status("main", BAD), "pass");
    let id = &r.report["identity"];
    assert_eq!(
        id["claimed"]["name"], "cpu",
        "the forwarder claims the CPU provider's name"
    );
    let note = id["claim_note"].as_str().expect("a claim note");
    assert!(note.contains("libvsdk_hostile_working"), "{note}");
    let bytes = std::fs::read(hostile::WORKING).unwrap();
    use sha2::Digest;
    assert_eq!(id["library_sha256"], hex(&sha2::Sha256::digest(&bytes)));
    assert_eq!(id["isolated"], true);
    assert!(id["runner_sha256"].as_str().unwrap().len() == 64);
    assert!(r.report["seed"].as_u64().is_some());
    let junit = std::fs::read_to_string(r.dir.path().join("results.json.junit.xml")).unwrap();
    assert!(
        junit.contains("<testcase classname=\"dinov2-vits14-quick.fp32.main\" name=\"block_00\""),
        "{junit}"
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn a_segfault_is_crashed() {
    crashes(hostile::SEGFAULT, "SIGSEGV");
}

#[test]
fn an_abort_is_crashed() {
    crashes(hostile::ABORT, "SIGABRT");
}

#[test]
fn exit_zero_in_a_kernel_is_crashed_not_a_pass() {
    crashes(hostile::EXIT0, "exited with status 0");
}

#[test]
fn a_hang_times_out() {
    let r = run(hostile::HANG, &["--timeout", "4"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    for round in ["main", "differential"] {
        assert_eq!(r.status(round, BAD), "timeout");
        assert!(r
            .reason(round, BAD)
            .contains("no answer within 4.0 s while running `vsdk.gelu`@1"));
    }
    r.others_pass(BAD);
}

#[test]
fn a_write_just_past_an_output_is_out_of_bounds() {
    let r = run(hostile::OOB_NEAR, &[]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "out_of_bounds", "{}", r.stdout);
    assert!(
        r.reason("main", BAD)
            .contains("`vsdk.gelu` wrote past the end of `hidden_act` (bytes +0..+7 after it)"),
        "{}",
        r.reason("main", BAD)
    );
    r.others_pass(BAD);
}

/// 4 KiB written 1 MiB past an output lands wherever the provider's
/// allocator put other memory: a tensor the runner holds (OUT OF BOUNDS:
/// corrupted), unmapped memory (CRASHED), or memory nobody checks, which
/// no host can see from outside (docs/runner.md). Whatever it hits, it is
/// the worker's memory: the runner and every other stage are unharmed, and
/// the exit code follows the verdict.
#[test]
fn a_far_write_stays_in_the_worker() {
    let r = run(hostile::OOB_FAR, &[]);
    let status = r.status("main", BAD);
    assert!(
        ["out_of_bounds", "crashed", "pass"].contains(&status.as_str()),
        "{status}: {}",
        r.stdout
    );
    r.others_pass(BAD);
    let passed = r.report["passed"].as_bool().expect("a verdict");
    assert_eq!(r.code, if passed { 0 } else { 1 }, "{}", r.stdout);
}

#[test]
fn a_half_written_output_is_unwritten() {
    let r = run(hostile::HALF_WRITE, &[]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "unwritten", "{}", r.stdout);
    let reason = r.reason("main", BAD);
    assert!(reason.starts_with("`vsdk.gelu` left"), "{reason}");
    assert!(reason.contains("of `hidden_act` unwritten"), "{reason}");
    r.others_pass(BAD);
}

#[test]
fn a_replaying_memoriser_is_caught_by_the_differential_round() {
    let tape = tempfile::tempdir().unwrap();
    let env = |mode: &'static str| {
        vec![
            (hostile::TAPE_ENV, tape.path().to_path_buf()),
            (hostile::MODE_ENV, PathBuf::from(mode)),
        ]
    };
    let envs = |v: &Vec<(&'static str, PathBuf)>| {
        v.iter().map(|(k, p)| (*k, p.clone())).collect::<Vec<_>>()
    };
    let record = envs(&env("record"));
    let refs: Vec<(&str, &Path)> = record.iter().map(|(k, p)| (*k, p.as_path())).collect();
    let r = run_with(hostile::REPLAY, &["--no-differential"], &refs);
    assert_eq!(r.code, 0, "recording computes: {}", r.stdout);
    let replay = envs(&env("replay"));
    let refs: Vec<(&str, &Path)> = replay.iter().map(|(k, p)| (*k, p.as_path())).collect();
    let r = run_with(hostile::REPLAY, &[], &refs);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.report["passed"], false);
    // The main round replays what it recorded: preprocess and patch_embed
    // look perfect there. The differential round catches them.
    assert_eq!(r.status("main", "patch_embed"), "pass", "{}", r.stdout);
    for s in ["preprocess", "patch_embed", "final_norm"] {
        assert_eq!(r.status("differential", s), "fail", "{}", r.stdout);
        assert!(
            r.reason("differential", s).starts_with("replayed:"),
            "{}",
            r.reason("differential", s)
        );
    }
}

#[test]
fn nondeterminism_is_reported_and_fails_only_when_required() {
    let r = run(hostile::NONDETERMINISTIC, &[]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let findings = r.stage("main", BAD)["findings"].to_string();
    assert!(
        findings.contains("nondeterministic") && findings.contains("hidden_act"),
        "{findings}"
    );
    let r = run(hostile::NONDETERMINISTIC, &["--require-deterministic"]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "fail");
    assert!(r.reason("main", BAD).contains("differs between two runs"));
    r.others_pass(BAD);
}

#[test]
fn a_driver_printing_to_stdout_does_not_break_json() {
    let r = run(hostile::STDOUT_NOISE, &["--json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let printed: Value = serde_json::from_str(&r.stdout).expect("stdout is only the JSON report");
    assert_eq!(printed["passed"], true);
}

/// The CLI's first load and the first stage's retry crash; after two
/// failed loads no more workers are started: the rest are MISSING, with the
/// crash as the reason.
#[test]
fn an_exception_from_create_crashes_and_the_rest_is_missing() {
    let r = run(hostile::THROW_CREATE, &[]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.status("main", "preprocess"), "crashed");
    for s in ["preprocess", "patch_embed", BAD, "final_norm"] {
        if s != "preprocess" {
            assert_eq!(r.status("main", s), "missing");
            assert!(r.reason("main", s).contains("failed to load twice"));
        }
        let reason = r.reason("main", s);
        assert!(
            reason.contains(&format!("while loading {} (create)", hostile::THROW_CREATE)),
            "{reason}"
        );
        assert!(reason.contains("foreign exception"), "{reason}");
    }
}

#[test]
fn a_crash_in_destroy_fails_a_passing_run() {
    let r = run(hostile::DESTROY_CRASH, &[]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    r.others_pass("");
    let teardown = r.report["teardown"].as_str().expect("teardown failure");
    assert!(
        teardown.contains("SIGSEGV") && teardown.contains("destroy"),
        "{teardown}"
    );
    assert!(r.stdout.contains("verdict: FAIL"));
}

#[test]
fn absurd_counts_are_refused() {
    for (lib, what) in [
        (
            hostile::HUGE_KERNEL_COUNT,
            "kernel_count reported 9223372036854775808 kernels",
        ),
        (
            hostile::HUGE_DEVICE_COUNT,
            "device_count reported 4294967295 devices",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
            .args(["providers", "--provider", lib])
            .env("VSDK_PROVIDER_PATH", test_dir())
            .env(hostile::TARGET_ENV, test_dir().join(vips_sdk_file("cpu")))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(what), "{err}");
    }
}

#[test]
fn a_flake_is_flaky_never_a_pass() {
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("struck");
    let r = run_with(
        hostile::FLAKY,
        &["--flake-retries", "2", "--no-differential"],
        &[("VSDK_HOSTILE_MARKER", &file)],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "flaky");
    assert!(r
        .reason("main", BAD)
        .contains("passed on attempt 2 after failing (CRASHED"));
    assert_eq!(r.stage("main", BAD)["attempts"], 2);
}

#[test]
fn a_baseline_expects_failures_and_only_tightens() {
    let first = run(hostile::SEGFAULT, &["--no-differential"]);
    assert_eq!(first.code, 1);
    let baseline = first.dir.path().join("results.json.csv");
    let again = run(
        hostile::SEGFAULT,
        &[
            "--no-differential",
            "--baseline",
            baseline.to_str().unwrap(),
        ],
    );
    assert_eq!(again.code, 0, "{}", again.stdout);
    assert_eq!(again.status("main", BAD), "expected_fail");
    let fixed = run(
        hostile::WORKING,
        &[
            "--no-differential",
            "--baseline",
            baseline.to_str().unwrap(),
        ],
    );
    assert_eq!(fixed.code, 1, "{}", fixed.stdout);
    assert_eq!(fixed.status("main", BAD), "unexpected_pass");
}

#[test]
fn max_fails_stops_the_run_and_leaves_the_rest_missing() {
    let r = run(hostile::SEGFAULT, &["--max-fails", "1"]);
    assert_eq!(r.code, 1);
    assert_eq!(r.status("main", BAD), "crashed");
    assert_eq!(r.status("main", "final_norm"), "missing");
    assert!(r.reason("main", "final_norm").contains("--max-fails"));
    assert!(r.report["stopped_early"].is_string());
}

#[test]
fn an_unwritable_output_fails_before_the_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args([
            "run",
            "dinov2-vits14-quick",
            "--output",
            "/nonexistent/dir/r.json",
        ])
        .env("VSDK_PROVIDER_PATH", test_dir())
        .current_dir(env!("CARGO_MANIFEST_DIR").to_owned() + "/..")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("/nonexistent/dir/r.json: cannot write"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "nothing ran");
}
