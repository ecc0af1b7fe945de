//! Hostile drivers (testing/hostile-providers: forwarders to the CPU
//! provider that crash, hang, scribble, half-write, replay, flip bits, print
//! to stdout, throw, or report absurd counts), each through one CLI run in a
//! worker process: the misbehaving stage gets its verdict, every other stage
//! is reported as it is, the results files are written, and the exit code is
//! 0 only for a pass.
//!
//! Then the drivers that game or attack the runner (issue 22): right only in
//! some runs (by call count, output fill, address, process name), stealing
//! the signing key, leaving a daemon to rewrite the report, writing into the
//! runner's memory, leaving 150 detached processes, taking 20 GiB. Each gets
//! NOT CERTIFIED or a clear error, with the key unread, nothing left running
//! and the runner alive. The tests kill whatever such a driver may have left
//! (by process name, when they end, passing or not); the fork and memory
//! drivers run only in the sandboxed worker, never in process.

use serde_json::Value;
use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
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
        let key = match round {
            "main" => "stages",
            r => r,
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
    let extra: Vec<OsString> = extra.iter().map(OsString::from).collect();
    let env: Vec<(&str, OsString)> = env.iter().map(|(k, v)| (*k, v.into())).collect();
    Cli {
        extra,
        env,
        ..Cli::new(lib)
    }
    .run()
}

/// One `vips-conformance run` of the quick suite on a hostile driver.
struct Cli<'a> {
    lib: &'a str,
    stages: &'a str,
    extra: Vec<OsString>,
    env: Vec<(&'a str, OsString)>,
    /// Started through `sh`, with this file open as descriptor 3 (for
    /// `--sign-key-fd 3`).
    fd_3: Option<PathBuf>,
    /// The results path as [`hostile::NEEDLE_ENV`].
    output_as_needle: bool,
    /// RLIMIT_AS for the CLI and everything it starts: a safety net for
    /// drivers that take memory, whatever the runner's own limit does.
    address_space: Option<u64>,
}

impl<'a> Cli<'a> {
    fn new(lib: &'a str) -> Cli<'a> {
        Cli {
            lib,
            stages: STAGES,
            extra: Vec::new(),
            env: Vec::new(),
            fd_3: None,
            output_as_needle: false,
            address_space: None,
        }
    }

    fn arg(mut self, a: impl Into<OsString>) -> Self {
        self.extra.push(a.into());
        self
    }

    fn env(mut self, k: &'a str, v: impl Into<OsString>) -> Self {
        self.env.push((k, v.into()));
        self
    }

    fn run(self) -> Run {
        let dir = tempfile::tempdir().expect("temp dir");
        let output = dir.path().join("results.json");
        let bin = env!("CARGO_BIN_EXE_vips-conformance");
        let mut cmd = match &self.fd_3 {
            None => Command::new(bin),
            Some(file) => {
                let mut sh = Command::new("sh");
                sh.args(["-c", "f=$1; shift; exec \"$@\" 3<\"$f\"", "sh"])
                    .arg(file)
                    .arg(bin);
                sh
            }
        };
        cmd.args([
            "run",
            "dinov2-vits14-quick",
            "--stage",
            self.stages,
            "--provider",
            self.lib,
        ])
        .arg("--output")
        .arg(&output)
        .args(&self.extra)
        .env("VSDK_PROVIDER_PATH", test_dir())
        .env(hostile::TARGET_ENV, test_dir().join(vips_sdk_file("cpu")))
        .current_dir(repo());
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if self.output_as_needle {
            cmd.env(hostile::NEEDLE_ENV, &output);
        }
        if let Some(bytes) = self.address_space {
            let limit = libc::rlimit {
                rlim_cur: bytes,
                rlim_max: bytes,
            };
            // SAFETY: setrlimit is async-signal-safe and touches nothing of
            // the parent's; `limit` is a plain copy.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_AS, &limit) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        finish(cmd, dir, &output)
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn finish(mut cmd: Command, dir: tempfile::TempDir, output: &Path) -> Run {
    let out = cmd.output().expect("run vips-conformance");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "{stderr}");
    let text = std::fs::read_to_string(output).unwrap_or_default();
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
    // No first-call allowance: the hang is on gelu's first call.
    let r = run(
        hostile::HANG,
        &["--timeout", "4", "--first-call-allowance", "0"],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    for round in ["main", "differential"] {
        assert_eq!(r.status(round, BAD), "timeout");
        assert!(r
            .reason(round, BAD)
            .contains("no answer within 4.0 s while running `vsdk.gelu`@1"));
    }
    r.others_pass(BAD);
    // Every kernel-contract case of gelu hangs too, each killed at its limit;
    // the other kernels' cases pass. (The other hang tests skip the contract:
    // five more timeouts each, waited out.)
    let contract = r.report["tiers"][0]["contract"].as_array().unwrap();
    let gelu: Vec<_> = contract
        .iter()
        .filter(|c| c["stage"].as_str().unwrap().starts_with("vsdk.gelu@1 "))
        .collect();
    assert!(!gelu.is_empty(), "{}", r.stdout);
    for case in &gelu {
        assert_eq!(case["status"], "timeout", "{case}");
        assert!(
            case["reason"]
                .as_str()
                .unwrap()
                .starts_with("no answer within 4.0 s while running `vsdk.gelu`@1"),
            "{case}"
        );
    }
    assert!(contract
        .iter()
        .filter(|c| !c["stage"].as_str().unwrap().starts_with("vsdk.gelu@1 "))
        .all(|c| c["status"] == "pass"));
}

/// Without `--timeout` a stage gets 2 s + 50 x its reference's measured
/// time; with `--after-timeout skip`, later stages calling the kernel that
/// hung are TIMEOUT without running, and say so (the settings too).
#[test]
fn a_hang_costs_its_derived_timeout_and_later_stages_may_be_skipped() {
    let r = Cli {
        stages: "{preprocess,block_00,block_01}",
        ..Cli::new(hostile::HANG)
    }
    .arg("--after-timeout")
    .arg("skip")
    .arg("--first-call-allowance")
    .arg("0")
    .arg("--no-contract")
    .run();
    assert_eq!(r.code, 1, "{}", r.stdout);
    let given = r.stage("main", BAD)["timeout_seconds"].as_f64().unwrap();
    assert!(
        given >= vips_sdk::runner::TIMEOUT_FLOOR.as_secs_f64() && given < 60.0,
        "{given}"
    );
    assert!(
        r.reason("main", BAD).contains(&format!(
            "no answer within {given:.1} s while running `vsdk.gelu`@1"
        )),
        "{}",
        r.reason("main", BAD)
    );
    assert_eq!(r.status("main", "block_01"), "timeout");
    assert_eq!(
        r.reason("main", "block_01"),
        "not run: `vsdk.gelu` timed out in stage block_00 (--after-timeout skip)"
    );
    assert_eq!(r.stage("main", "block_01")["attempts"], 0);
    assert_eq!(r.status("main", "preprocess"), "pass");
    assert_eq!(r.report["settings"]["skip_after_timeout"], true);
}

/// A driver whose kernel's first call in a process is slow (a GPU's JIT
/// compile, as the CUDA provider's first stage on an H200) passes: a stage
/// calling a kernel its worker has not run gets the first-call allowance
/// on top of its timeout. Without it, the same driver times out.
#[test]
fn a_kernels_slow_first_call_gets_the_first_call_allowance() {
    let slow = hostile::SLOW_START_SECONDS as f64;
    let r = run(hostile::SLOW_START, &["--timeout", "3"]);
    assert_eq!(r.code, 0, "{}", r.stdout);
    let given = r.stage("main", BAD)["timeout_seconds"].as_f64().unwrap();
    let allowance = vips_sdk::runner::FIRST_CALL_ALLOWANCE.as_secs_f64();
    assert_eq!(given, 3.0 + allowance);
    // Every kernel-contract case records the limit it ran under too.
    let contract = r.report["tiers"][0]["contract"].as_array().unwrap();
    assert!(!contract.is_empty(), "{}", r.stdout);
    for case in contract {
        let limit = case["timeout_seconds"].as_f64().unwrap_or_default();
        assert!(limit >= 3.0, "{}: {limit}", case["stage"]);
    }
    // Warm by then: block_00 ran gelu in this worker.
    let later = Cli {
        stages: "{block_00,block_01}",
        ..Cli::new(hostile::SLOW_START)
    }
    .arg("--timeout")
    .arg("3")
    .arg("--no-contract")
    .run();
    assert_eq!(later.code, 0, "{}", later.stdout);
    assert_eq!(
        later.stage("main", "block_01")["timeout_seconds"].as_f64(),
        Some(3.0)
    );

    let r = run(
        hostile::SLOW_START,
        &[
            "--timeout",
            "3",
            "--first-call-allowance",
            "0",
            "--no-contract",
        ],
    );
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "timeout", "{}", r.stdout);
    assert!(slow > 3.0);
    assert!(r
        .reason("main", BAD)
        .contains("no answer within 3.0 s while running `vsdk.gelu`@1"));
}

/// A kernel that timed out with the first-call allowance never gets it
/// again: a hanging driver's every later stage (each in a fresh, cold
/// worker) costs its timeout alone. The other kernels of the stage that
/// hung keep theirs.
#[test]
fn a_kernel_that_hung_with_the_allowance_is_not_given_it_again() {
    let r = Cli {
        stages: "{block_00,block_01,final_norm}",
        ..Cli::new(hostile::HANG)
    }
    .arg("--timeout")
    .arg("2")
    .arg("--first-call-allowance")
    .arg("3")
    .arg("--no-contract")
    .run();
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "timeout", "{}", r.stdout);
    assert_eq!(r.stage("main", BAD)["timeout_seconds"].as_f64(), Some(5.0));
    assert!(r
        .reason("main", BAD)
        .contains("no answer within 5.0 s while running `vsdk.gelu`@1"));
    for (round, stage) in [
        ("main", "block_01"),
        ("differential", BAD),
        ("differential", "block_01"),
    ] {
        assert_eq!(r.status(round, stage), "timeout", "{round} {stage}");
        assert_eq!(
            r.stage(round, stage)["timeout_seconds"].as_f64(),
            Some(2.0),
            "{round} {stage}"
        );
    }
    // layer_norm was cold in block_00 too, but gelu hung: a fresh worker
    // after block_01's timeout gives final_norm the allowance.
    assert_eq!(r.status("main", "final_norm"), "pass", "{}", r.stdout);
    assert_eq!(
        r.stage("main", "final_norm")["timeout_seconds"].as_f64(),
        Some(5.0)
    );
}

#[test]
fn a_write_just_past_an_output_is_out_of_bounds() {
    let r = run(hostile::OOB_NEAR, &[]);
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert_eq!(r.status("main", BAD), "out_of_bounds", "{}", r.stdout);
    // The guard's pattern is drawn per run (even bytes): once in 128 runs its
    // first byte is the driver's 'H' (0x48), and the write to +0 cannot be
    // seen; 'O' (0x4F) at +1 and '!' at +7 are odd, so always seen.
    let reason = r.reason("main", BAD);
    assert!(
        ["+0..+7", "+1..+7"]
            .iter()
            .any(|bytes| reason.contains(&format!(
                "`vsdk.gelu` wrote past the end of `hidden_act` (bytes {bytes} after it)"
            ))),
        "{reason}"
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

/// A directory the worker may write: when the runner is root the worker is
/// `nobody` outside its sandbox, so it must be writable by other users.
fn shared_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn a_replaying_memoriser_is_caught_by_the_differential_round() {
    let tape = shared_dir();
    let env = |mode: &'static str| {
        vec![
            (hostile::TAPE_ENV, tape.path().to_path_buf()),
            (hostile::MODE_ENV, PathBuf::from(mode)),
        ]
    };
    let envs = |v: &Vec<(&'static str, PathBuf)>| {
        v.iter().map(|(k, p)| (*k, p.clone())).collect::<Vec<_>>()
    };
    // The worker sees the tape directory only where the runner binds it:
    // writable to record, read-only to replay.
    let tape_dir = tape.path().to_str().unwrap();
    let record = envs(&env("record"));
    let refs: Vec<(&str, &Path)> = record.iter().map(|(k, p)| (*k, p.as_path())).collect();
    let r = run_with(
        hostile::REPLAY,
        &["--no-differential", "--sandbox-bind-rw", tape_dir],
        &refs,
    );
    assert_eq!(r.code, 0, "recording computes: {}", r.stdout);
    let replay = envs(&env("replay"));
    let refs: Vec<(&str, &Path)> = replay.iter().map(|(k, p)| (*k, p.as_path())).collect();
    let r = run_with(hostile::REPLAY, &["--sandbox-bind", tape_dir], &refs);
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
    let marker = shared_dir();
    let file = marker.path().join("struck");
    let r = run_with(
        hostile::FLAKY,
        &[
            "--flake-retries",
            "2",
            "--no-differential",
            "--sandbox-bind-rw",
            marker.path().to_str().unwrap(),
        ],
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
    // The kernel contract's cases of the crashing kernel are tracked too.
    let gelu = "vsdk.gelu@1 float32 large";
    assert_eq!(again.status("contract", gelu), "expected_fail");
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
    assert_eq!(fixed.status("contract", gelu), "unexpected_pass");
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

// ---------------------------------------------------------------------------
// Drivers that game or attack the runner (issue 22)
// ---------------------------------------------------------------------------

/// A key pair from `keygen` and where the signed report goes.
struct Signing {
    dir: tempfile::TempDir,
    key: PathBuf,
    public: PathBuf,
    report: PathBuf,
}

impl Signing {
    fn new() -> Signing {
        Signing::in_dir(tempfile::tempdir().expect("temp dir"))
    }

    fn in_dir(dir: tempfile::TempDir) -> Signing {
        let key = dir.path().join("k.pem");
        let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
            .arg("keygen")
            .arg(&key)
            .output()
            .expect("run keygen");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Signing {
            public: dir.path().join("k.pub.pem"),
            report: dir.path().join("report.json"),
            key,
            dir,
        }
    }

    /// `--report R --sign-key K`.
    fn args(&self) -> Vec<OsString> {
        vec![
            "--report".into(),
            self.report.clone().into(),
            "--sign-key".into(),
            self.key.clone().into(),
        ]
    }

    /// The key's base64 body (what a thief would have to show).
    fn secret(&self) -> String {
        let pem = std::fs::read_to_string(&self.key).unwrap();
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        assert!(body.len() >= 40, "{pem}");
        body
    }

    fn statement(&self) -> Value {
        let text = std::fs::read_to_string(&self.report).expect("the report was written");
        let envelope: Value = serde_json::from_str(&text).expect("the report is JSON");
        let payload =
            vips_sdk::certify::dsse::decode_base64(envelope["payload"].as_str().unwrap()).unwrap();
        serde_json::from_slice(&payload).unwrap()
    }

    fn verdict(&self) -> String {
        self.statement()["predicate"]["verdict"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn reasons(&self) -> Vec<String> {
        self.statement()["predicate"]["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    }

    /// `verify R --pubkey PUB` says the signature holds (the verdict may
    /// still be NOT CERTIFIED: exit code 1).
    fn signature_verifies(&self) -> bool {
        let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
            .arg("verify")
            .arg(&self.report)
            .arg("--pubkey")
            .arg(&self.public)
            .output()
            .expect("run verify");
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout.contains(&format!("{}: signature verified", self.report.display()))
    }
}

/// Live processes whose `/proc/<pid>/comm` is `name` (a zombie is dead: not
/// counted).
fn processes_named(name: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // The state follows the command in parentheses (which may hold spaces).
        let state = stat.rsplit_once(") ").and_then(|(_, r)| r.chars().next());
        if comm.trim_end_matches('\n') == name && !matches!(state, Some('Z' | 'X') | None) {
            found.push(pid);
        }
    }
    found
}

/// When dropped (a failing test too), kills every process with one of
/// these names: what a hostile driver may have left behind.
struct Reaper(&'static [&'static str]);

impl Drop for Reaper {
    fn drop(&mut self) {
        for _ in 0..50 {
            let left: Vec<i32> = self.0.iter().flat_map(|n| processes_named(n)).collect();
            if left.is_empty() {
                return;
            }
            for pid in left {
                // SAFETY: no memory effects; at worst the process is gone.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The report's NOT CERTIFIED names `stages` failing in the main round and
/// in the differential round (an empty list: no such reason).
fn fails_in_report(s: &Signing, main: &[&str], differential: &[&str]) {
    assert_eq!(s.verdict(), "NOT CERTIFIED");
    let reasons = s.reasons();
    for (round, stages) in [
        ("failing stages: ", main),
        (
            "failing stages in the differential round (fresh inputs): ",
            differential,
        ),
    ] {
        let found: Vec<&String> = reasons.iter().filter(|r| r.starts_with(round)).collect();
        if stages.is_empty() {
            assert!(found.is_empty(), "{reasons:?}");
        } else {
            assert_eq!(
                found,
                [&format!("{round}{}", stages.join(", "))],
                "{reasons:?}"
            );
        }
    }
}

/// The stage's failure is put on GELU: the first run's drill-down names it
/// as the first operator out of its bound, or the reason names it as the
/// operator out of bounds in the repeat.
fn gelu_blamed(stage: &Value) -> bool {
    stage["drill_down"]["op"] == "vsdk.gelu@1"
        || stage["reason"]
            .as_str()
            .is_some_and(|r| r.contains("operator 18 `vsdk.gelu@1`"))
}

/// A driver wrong (×1.01) in GELU in at least one of a stage's two runs: the
/// wrong run is judged, so block_00 FAILs in both rounds (each runs it
/// twice), GELU is blamed, and the report is NOT CERTIFIED for it. Returns
/// the run for the variant's own checks.
fn fails_block_00(lib: &str) -> Run {
    let signing = Signing::new();
    let r = Cli {
        extra: signing.args(),
        ..Cli::new(lib)
    }
    .run();
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    for round in ["main", "differential"] {
        assert_eq!(r.status(round, BAD), "fail", "{round}: {}", r.stdout);
        assert!(gelu_blamed(r.stage(round, BAD)), "{round}: {}", r.stdout);
    }
    r.others_pass(BAD);
    assert!(
        r.csv().contains("fp32,isolated,main,block_00,FAIL"),
        "{}",
        r.csv()
    );
    fails_in_report(&signing, &[BAD], &[BAD]);
    assert!(signing.signature_verifies());
    r
}

#[test]
fn right_then_wrong_by_call_count_is_not_certified() {
    let r = fails_block_00(hostile::RIGHT_THEN_WRONG_COUNT);
    // Whichever run got the even call, it is named.
    for round in ["main", "differential"] {
        let reason = r.reason(round, BAD);
        assert!(
            reason.contains("out of bounds") || reason.contains("hidden_act"),
            "{round}: {reason}"
        );
    }
}

#[test]
fn right_then_wrong_by_fill_pattern_is_not_certified() {
    let r = fails_block_00(hostile::RIGHT_THEN_WRONG_FILL);
    // Right on the 0xFF poison of run 1, wrong on run 2's zeros.
    for round in ["main", "differential"] {
        let reason = r.reason(round, BAD);
        assert!(
            reason.starts_with(
                "run 2 of 2 (the repeat on the same inputs) is out of bounds although run 1 passed"
            ),
            "{round}: {reason}"
        );
    }
}

/// Wrong where bit 6 of the output's address is set: the runner places
/// every buffer afresh (random guard sizes), so over 12 blocks × 2 rounds ×
/// 2 runs some GELU output lands there (all 48 missing it: 2^-48 if the
/// placement is random). Every block it hit fails; the rest pass.
#[test]
fn right_then_wrong_by_address_is_not_certified() {
    let signing = Signing::new();
    let r = Cli {
        stages: "{preprocess,patch_embed,block_*,final_norm}",
        extra: signing.args(),
        ..Cli::new(hostile::RIGHT_THEN_WRONG_ADDRESS)
    }
    .run();
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    r.others_pass("");
    let mut failing = [Vec::new(), Vec::new()];
    for (i, round) in ["main", "differential"].into_iter().enumerate() {
        for b in 0..12 {
            let stage = format!("block_{b:02}");
            match r.status(round, &stage).as_str() {
                "pass" => {}
                "fail" => {
                    assert!(gelu_blamed(r.stage(round, &stage)), "{round} {stage}");
                    failing[i].push(stage);
                }
                other => panic!("{round} {stage}: {other}: {}", r.stdout),
            }
        }
    }
    assert!(
        !failing[0].is_empty() || !failing[1].is_empty(),
        "no block failed: {}",
        r.stdout
    );
    let main: Vec<&str> = failing[0].iter().map(String::as_str).collect();
    let differential: Vec<&str> = failing[1].iter().map(String::as_str).collect();
    fails_in_report(&signing, &main, &differential);
}

/// Right only when the process, its program or its parent is called
/// vips-conformance: the worker must not be.
#[test]
fn a_driver_that_behaves_only_under_the_runners_name_is_not_certified() {
    fails_block_00(hostile::NAME_DETECTOR);
}

/// What a run wrote: its output, the results files and the report.
fn everything_written(r: &Run, signing: &Signing) -> Vec<(String, String)> {
    let mut texts = vec![
        ("stdout".to_string(), r.stdout.clone()),
        ("stderr".to_string(), r.stderr.clone()),
    ];
    for dir in [r.dir.path(), signing.dir.path()] {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name != "k.pem" {
                let bytes = std::fs::read(entry.path()).unwrap_or_default();
                texts.push((name, String::from_utf8_lossy(&bytes).into_owned()));
            }
        }
    }
    texts
}

/// The key thief looks for the signing key in the runner's command line and
/// environment, every process's, its own descriptors, and the very path
/// the test names: given by path or by `$VIPS_SIGN_KEY` (world-readable, in
/// a directory shown to the worker: only the runner's mask hides it), or by
/// descriptor, the key is never found. It forwards correctly when it finds
/// nothing, so the stages pass: proof that nothing was found, besides the
/// key's absence from everything written.
#[test]
fn a_key_thief_never_sees_the_signing_key() {
    use std::os::unix::fs::PermissionsExt;
    for way in ["--sign-key", "VIPS_SIGN_KEY", "--sign-key-fd"] {
        let signing = if way == "--sign-key-fd" {
            Signing::new()
        } else {
            // Outside /tmp (the worker's /tmp is its own), readable by any
            // user the worker could be mapped to.
            let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            let signing = Signing::in_dir(dir);
            let mode = |m| std::fs::Permissions::from_mode(m);
            std::fs::set_permissions(signing.dir.path(), mode(0o755)).unwrap();
            std::fs::set_permissions(&signing.key, mode(0o644)).unwrap();
            signing
        };
        let secret = signing.secret();
        let shown = signing.dir.path().to_str().unwrap().to_string();
        let mut cli = Cli::new(hostile::KEY_THIEF)
            .env(hostile::KEY_PATH_ENV, &signing.key)
            .arg("--report")
            .arg(&signing.report);
        cli = match way {
            // In a directory bound into the worker: only the runner's mask
            // hides it there.
            "--sign-key" => cli
                .arg("--sign-key")
                .arg(&signing.key)
                .arg("--sandbox-bind")
                .arg(&shown),
            "VIPS_SIGN_KEY" => cli
                .env("VIPS_SIGN_KEY", &signing.key)
                .arg("--sandbox-bind")
                .arg(&shown),
            // A descriptor has no path the runner could hide: the file's
            // directory is not shown to the worker.
            _ => Cli {
                fd_3: Some(signing.key.clone()),
                ..cli.arg("--sign-key-fd").arg("3")
            },
        };
        let r = cli.run();
        assert_eq!(r.code, 0, "{way}: {}{}", r.stdout, r.stderr);
        for round in ["main", "differential"] {
            assert_eq!(
                r.status(round, BAD),
                "pass",
                "{way}: {round}: {}",
                r.reason(round, BAD)
            );
        }
        for (what, text) in everything_written(&r, &signing) {
            for leak in [secret.as_str(), hostile::STOLEN, "PRIVATE KEY"] {
                assert!(!text.contains(leak), "{way}: {what} holds {leak}");
            }
        }
        assert!(signing.signature_verifies(), "{way}: signed with the key");
    }
}

/// The rewriter's daemon waits for the report to settle (or the runner to
/// go) and overwrites it: it must be dead before the runner exits, so the
/// report still verifies, unchanged, 2 s later. Leaving it is itself a
/// failure (PROCESSES LEFT).
#[test]
fn a_report_rewriting_daemon_does_not_outlive_the_run() {
    let _reaper = Reaper(&[hostile::REWRITER_NAME]);
    let signing = Signing::new();
    let r = Cli {
        extra: signing.args(),
        ..Cli::new(hostile::REPORT_REWRITER)
    }
    .env(hostile::REPORT_PATH_ENV, &signing.report)
    .run();
    assert_eq!(processes_named(hostile::REWRITER_NAME), Vec::<i32>::new());
    // The daemon is started by create, so the first stage's worker left it.
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.status("main", "preprocess"), "processes_left");
    assert!(
        r.reason("main", "preprocess").contains("(create)"),
        "{}",
        r.reason("main", "preprocess")
    );
    assert_eq!(signing.verdict(), "NOT CERTIFIED");
    assert!(
        signing
            .reasons()
            .contains(&"stages PROCESSES LEFT: preprocess".to_string()),
        "{:?}",
        signing.reasons()
    );
    let written = std::fs::read(&signing.report).expect("the report");
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        std::fs::read(&signing.report).unwrap() == written,
        "the report changed after the run: {}",
        String::from_utf8_lossy(&std::fs::read(&signing.report).unwrap())
    );
    assert!(!String::from_utf8_lossy(&written).contains(hostile::REWRITTEN));
    assert!(signing.signature_verifies());
    assert_eq!(processes_named(hostile::REWRITER_NAME), Vec::<i32>::new());
}

/// The memory writer looks for the results path in the runner's memory
/// (through /proc/<pid>/mem) and changes its first byte: the results still
/// go where they were asked, and the runner ends normally.
#[test]
fn a_driver_cannot_write_into_the_runners_memory() {
    let r = Cli {
        output_as_needle: true,
        ..Cli::new(hostile::MEM_WRITER)
    }
    .run();
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("verdict: PASS"), "{}", r.stdout);
    let output = r.dir.path().join("results.json");
    assert!(
        r.report.is_object(),
        "{} did not read back",
        output.display()
    );
    assert_eq!(r.report["passed"], true);
    assert!(r.csv().contains("fp32,isolated,main,block_00,PASS"));
    // Where the results would have gone with the path's first byte changed.
    let text = output.to_str().unwrap();
    let changed = repo().join(format!("X{}", &text[1..]));
    assert!(!changed.exists(), "{}", changed.display());
}

/// 150 detached processes asleep for 10 minutes: killed with the worker,
/// confirmed gone before the results are written, and the stage is marked.
#[test]
fn processes_left_behind_are_killed_and_fail_the_run() {
    let _reaper = Reaper(&[hostile::ORPHAN_NAME]);
    let signing = Signing::new();
    let r = Cli {
        extra: signing.args(),
        ..Cli::new(hostile::FORK_DETACH)
    }
    .run();
    assert_eq!(processes_named(hostile::ORPHAN_NAME), Vec::<i32>::new());
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.status("main", BAD), "processes_left", "{}", r.stdout);
    assert!(r.stdout.contains("PROCESSES LEFT"), "{}", r.stdout);
    assert!(
        r.csv()
            .contains("fp32,isolated,main,block_00,PROCESSES LEFT"),
        "{}",
        r.csv()
    );
    assert_eq!(r.report["passed"], false);
    assert_eq!(signing.verdict(), "NOT CERTIFIED");
    let reasons = signing.reasons();
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("stages PROCESSES LEFT: ") && r.contains(BAD)),
        "{reasons:?}"
    );
    for s in ["preprocess", "patch_embed"] {
        assert_eq!(r.status("main", s), "pass", "{s}: {}", r.stdout);
    }
}

/// 20 GiB in 256 MiB pieces against `--memory-limit 512`: the limit kills
/// the worker (MEMORY LIMIT) or refuses the allocation (the driver's own
/// error), and the runner carries on. An 8 GiB address-space limit on the
/// whole CLI is a safety net for this host, not the limit under test: a
/// driver getting past 512 MiB fails the test.
#[test]
fn the_memory_limit_stops_a_20_gib_allocation() {
    let signing = Signing::new();
    let r = Cli {
        extra: signing.args(),
        address_space: Some(8 << 30),
        ..Cli::new(hostile::ALLOCATOR)
    }
    .arg("--memory-limit")
    .arg("512")
    .run();
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("verdict: FAIL"), "{}", r.stdout);
    assert_eq!(
        r.report["identity"]["sandbox"]["memory_limit_bytes"],
        512u64 << 20
    );
    let status = r.status("main", BAD);
    let reason = r.reason("main", BAD);
    // With a memory cgroup (this machine kind grants one), touched memory is
    // counted and the kernel's OOM kill is the stage's own status.
    let by_cgroup = r.report["identity"]["sandbox"]["memory_limit_by"]
        .as_array()
        .is_some_and(|a| {
            a.iter()
                .any(|b| b.as_str().is_some_and(|b| b.starts_with("cgroup")))
        });
    if by_cgroup {
        assert_eq!(status, "memory_limit", "{reason}");
    }
    match status.as_str() {
        "memory_limit" => assert!(r.stdout.contains("MEMORY LIMIT"), "{}", r.stdout),
        "error" => {
            let after = reason
                .split("malloc of 256 MiB failed after ")
                .nth(1)
                .and_then(|t| t.split(" MiB").next())
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("not the driver's malloc failure: {reason}"));
            assert!(after < 512, "{after} MiB allocated under a 512 MiB limit");
        }
        other => panic!("{other}: {reason}"),
    }
    assert_eq!(r.status("main", "preprocess"), "pass");
    assert_eq!(signing.verdict(), "NOT CERTIFIED");
    let reasons = signing.reasons();
    assert!(
        reasons
            .iter()
            .any(|x| x.starts_with("stages ") && x.contains(BAD)),
        "{reasons:?}"
    );
}
