//! Certification reports through the command line, on real isolated runs:
//! `keygen` keys that OpenSSL and Python's `cryptography` read; `run
//! --report` envelopes whose signature OpenSSL (over a PAE rebuilt here from
//! the envelope) and tools/verify_report.py accept; `verify` and its reason
//! for each kind of tampering; the verdict for filtered, flaky and
//! memorising runs; `merge` of shards; a model certified from its parts.
//!
//! OpenSSL and Python with `cryptography` are required (CI installs them):
//! without them these tests fail and say so, rather than skip.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use vsdk_hostile_providers as hostile;

use crate::common;
use common::{repo, require, Out};

fn out(o: Output) -> Out {
    Out::of(o)
}

fn test_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

fn cpu_lib() -> PathBuf {
    test_dir().join(format!(
        "libvsdk_provider_cpu{}",
        std::env::consts::DLL_SUFFIX
    ))
}

fn cli_env(args: &[&str], env: &[(&str, &Path)]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vips-conformance"));
    cmd.args(args)
        .env("VSDK_PROVIDER_PATH", test_dir())
        .env(hostile::TARGET_ENV, cpu_lib())
        .env_remove("VIPS_SIGN_KEY")
        .current_dir(repo());
    for (k, v) in env {
        cmd.env(k, v);
    }
    out(cmd.output().expect("run vips-conformance"))
}

fn cli(args: &[&str]) -> Out {
    cli_env(args, &[])
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

/// A key pair in `dir`: (private, public).
fn keygen(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let key = dir.join(format!("{name}.pem"));
    let r = cli(&["keygen", s(&key)]);
    assert_eq!(r.code, 0, "{}", r.text());
    (key, dir.join(format!("{name}.pub.pem")))
}

/// The statement inside a report, signature not checked.
fn statement(report: &Path) -> Value {
    let env: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let payload = vips_sdk::certify::dsse::decode_base64(env["payload"].as_str().unwrap()).unwrap();
    serde_json::from_slice(&payload).unwrap()
}

fn reasons(report: &Path) -> Vec<String> {
    statement(report)["predicate"]["reasons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect()
}

fn verdict(report: &Path) -> String {
    statement(report)["predicate"]["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

fn python(args: &[&str]) -> Out {
    out(Command::new("python3")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("python3"))
}

#[test]
fn keygen_keys_are_read_by_openssl_and_python() {
    require("openssl", &["version"], "OpenSSL's command line");
    require(
        "python3",
        &["-c", "import cryptography"],
        "Python's `cryptography`",
    );
    let dir = tempfile::tempdir().unwrap();
    // README's main job: a key created on first use, and said so.
    let first = dir.path().join("first.pem");
    let r = cli(&["keygen", s(&first), "--if-missing"]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(
        r.stdout.contains("created a new signing key"),
        "{}",
        r.stdout
    );
    assert!(dir.path().join("first.pub.pem").is_file());
    let (key, public) = keygen(dir.path(), "vips-key");
    let r = out(Command::new("openssl")
        .args(["pkey", "-in", s(&key), "-noout", "-text"])
        .output()
        .unwrap());
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(r.stdout.contains("ED25519 Private-Key"), "{}", r.stdout);
    // The key id printed is the SHA-256 of the SPKI DER, as OpenSSL writes it.
    let der = Command::new("openssl")
        .args(["pkey", "-pubin", "-in", s(&public), "-outform", "DER"])
        .output()
        .unwrap();
    assert!(der.status.success());
    use sha2::Digest;
    let id = hex::encode(sha2::Sha256::digest(&der.stdout));
    let again = cli(&["keygen", s(&key), "--if-missing"]);
    assert_eq!(again.code, 0, "{}", again.text());
    assert!(
        again.stdout.contains("using the existing signing key") && again.stdout.contains(&id),
        "{}",
        again.stdout
    );
    let py = python(&[
        "-c",
        "import sys\nfrom cryptography.hazmat.primitives import serialization as s\n\
         k = s.load_pem_private_key(open(sys.argv[1], 'rb').read(), None)\n\
         p = s.load_pem_public_key(open(sys.argv[2], 'rb').read())\n\
         raw = lambda x: x.public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)\n\
         assert raw(k.public_key()) == raw(p)\nprint(type(k).__name__)",
        s(&key),
        s(&public),
    ]);
    assert_eq!(py.code, 0, "{}", py.text());
    assert!(py.stdout.contains("Ed25519PrivateKey"));
    // Never overwritten without --force.
    let before = std::fs::read(&key).unwrap();
    let r = cli(&["keygen", s(&key)]);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("already exists (pass --force"),
        "{}",
        r.stderr
    );
    assert_eq!(std::fs::read(&key).unwrap(), before);
    let r = cli(&["keygen", s(&key), "--force"]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert_ne!(std::fs::read(&key).unwrap(), before);
}

/// Rebuilds the PAE from the envelope by hand and checks the first
/// signature with `openssl pkeyutl`.
fn openssl_verifies(report: &Path, public: &Path, dir: &Path) -> bool {
    let env: Value = serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap();
    let decode = |f: &Value| vips_sdk::certify::dsse::decode_base64(f.as_str().unwrap()).unwrap();
    let body = decode(&env["payload"]);
    let t = env["payloadType"].as_str().unwrap();
    let mut pae = format!("DSSEv1 {} {t} {} ", t.len(), body.len()).into_bytes();
    pae.extend_from_slice(&body);
    std::fs::write(dir.join("pae.bin"), &pae).unwrap();
    std::fs::write(dir.join("sig.bin"), decode(&env["signatures"][0]["sig"])).unwrap();
    let r = out(Command::new("openssl")
        .args([
            "pkeyutl",
            "-verify",
            "-pubin",
            "-inkey",
            s(public),
            "-rawin",
        ])
        .arg("-in")
        .arg(dir.join("pae.bin"))
        .arg("-sigfile")
        .arg(dir.join("sig.bin"))
        .output()
        .unwrap());
    r.code == 0 && r.stdout.contains("Signature Verified Successfully")
}

#[test]
fn a_signed_report_verifies_with_openssl_python_and_verify_and_tampering_fails() {
    require("openssl", &["version"], "OpenSSL's command line");
    require(
        "python3",
        &["-c", "import cryptography"],
        "Python's `cryptography`",
    );
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keygen(dir.path(), "k");
    let report = dir.path().join("report.json");
    let r = cli(&[
        "run",
        "demo-mlp",
        "--report",
        s(&report),
        "--sign-key",
        s(&key),
    ]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(
        r.stdout
            .contains("CERTIFIED demo-mlp at fp32, signed with key"),
        "{}",
        r.stdout
    );
    assert_eq!(verdict(&report), "CERTIFIED", "{:?}", reasons(&report));

    assert!(
        openssl_verifies(&report, &public, dir.path()),
        "OpenSSL refused our signature"
    );
    let golden = repo().join("conformance/suites/demo-mlp/suite.golden");
    let py = python(&[
        "tools/verify_report.py",
        s(&report),
        "--pubkey",
        s(&public),
        "--provider",
        s(&cpu_lib()),
        "--golden",
        s(&golden),
    ]);
    assert_eq!(py.code, 0, "{}", py.text());
    assert!(
        py.stdout
            .contains("verdict CERTIFIED: demo-mlp 0.1.0 at fp32"),
        "{}",
        py.stdout
    );
    let v = cli(&[
        "verify",
        s(&report),
        "--pubkey",
        s(&public),
        "--provider",
        "cpu",
        "--golden",
        "demo-mlp",
    ]);
    assert_eq!(v.code, 0, "{}", v.text());
    for field in [
        "verdict:   CERTIFIED",
        "component: demo-mlp 0.1.0",
        "tier:      fp32",
        "provider:  cpu 0.1.0",
        "device:    ",
        "date:      20",
    ] {
        assert!(v.stdout.contains(field), "{field}: {}", v.stdout);
    }

    // One byte of the payload changed (the seed), signature kept.
    let env: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    let body = String::from_utf8(
        vips_sdk::certify::dsse::decode_base64(env["payload"].as_str().unwrap()).unwrap(),
    )
    .unwrap();
    let flipped = body.replacen("\"seed\": ", "\"seed\": 1", 1);
    assert_ne!(flipped, body);
    let mut bad = env.clone();
    use base64::Engine;
    bad["payload"] = Value::String(base64::engine::general_purpose::STANDARD.encode(flipped));
    let tampered = dir.path().join("tampered.json");
    std::fs::write(&tampered, serde_json::to_string(&bad).unwrap()).unwrap();
    let v = cli(&["verify", s(&tampered), "--pubkey", s(&public)]);
    assert_eq!(v.code, 1, "{}", v.text());
    assert!(
        v.stdout.contains("DOES NOT VERIFY") && v.stdout.contains("modified after signing"),
        "{}",
        v.stdout
    );
    assert!(!openssl_verifies(&tampered, &public, dir.path()));
    let py = python(&[
        "tools/verify_report.py",
        s(&tampered),
        "--pubkey",
        s(&public),
    ]);
    assert_eq!(py.code, 1, "{}", py.text());

    // Another key.
    let (_, other) = keygen(dir.path(), "other");
    let v = cli(&["verify", s(&report), "--pubkey", s(&other)]);
    assert_eq!(v.code, 1);
    assert!(
        v.stdout.contains("not signed by the given key"),
        "{}",
        v.stdout
    );
    let py = python(&["tools/verify_report.py", s(&report), "--pubkey", s(&other)]);
    assert_eq!(py.code, 1, "{}", py.text());

    // Another provider library (a forwarder to the same CPU provider).
    let v = cli(&[
        "verify",
        s(&report),
        "--pubkey",
        s(&public),
        "--provider",
        hostile::WORKING,
    ]);
    assert_eq!(v.code, 1);
    assert!(
        v.stdout.contains("the provider library") && v.stdout.contains("is not the certified one"),
        "{}",
        v.stdout
    );
    // Another golden set.
    let v = cli(&[
        "verify",
        s(&report),
        "--pubkey",
        s(&public),
        "--golden",
        "dinov2-vits14-quick",
    ]);
    assert_eq!(v.code, 1);
    assert!(v.stdout.contains("the golden vector set"), "{}", v.stdout);
    let py = python(&[
        "tools/verify_report.py",
        s(&report),
        "--pubkey",
        s(&public),
        "--provider",
        hostile::WORKING,
    ]);
    assert_eq!(py.code, 1, "{}", py.text());
    let other_golden = repo().join("conformance/suites/dinov2-vits14-quick/suite.golden");
    let py = python(&[
        "tools/verify_report.py",
        s(&report),
        "--pubkey",
        s(&public),
        "--golden",
        s(&other_golden),
    ]);
    assert_eq!(py.code, 1, "{}", py.text());
    assert!(py.stdout.contains("golden vector set"), "{}", py.stdout);
    // Not a report at all: an input error.
    let v = cli(&["verify", s(&public), "--pubkey", s(&public)]);
    assert_eq!(v.code, 2);
    assert!(v.stderr.contains("not a DSSE envelope"), "{}", v.stderr);
}

#[test]
fn without_a_key_the_report_is_unsigned_and_says_so_and_the_env_key_signs() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keygen(dir.path(), "ci");
    let report = dir.path().join("r.json");
    let r = cli(&["run", "demo-mlp", "--report", s(&report)]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(r.stdout.contains("UNSIGNED"), "{}", r.stdout);
    let v = cli(&["verify", s(&report), "--pubkey", s(&public)]);
    assert_eq!(v.code, 1);
    assert!(v.stdout.contains("unsigned"), "{}", v.stdout);
    let r = cli_env(
        &["run", "demo-mlp", "--report", s(&report)],
        &[("VIPS_SIGN_KEY", &key)],
    );
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(r.stdout.contains("$VIPS_SIGN_KEY"), "{}", r.stdout);
    let v = cli(&["verify", s(&report), "--pubkey", s(&public)]);
    assert_eq!(v.code, 0, "{}", v.text());
    // A bad key fails before the run, naming where it came from.
    let r = cli_env(
        &["run", "demo-mlp", "--report", s(&report)],
        &[("VIPS_SIGN_KEY", &public)],
    );
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.contains("$VIPS_SIGN_KEY") && r.stderr.contains("holds a public key"),
        "{}",
        r.stderr
    );
    // Several tiers need one file each.
    let r = cli(&[
        "run",
        "demo-mlp",
        "--tier",
        "fp32",
        "--tier",
        "bf16",
        "--report",
        s(&report),
    ]);
    assert_eq!(r.code, 2);
    assert!(r.stderr.contains("{tier}"), "{}", r.stderr);
    let template = dir.path().join("r-{tier}.json");
    let r = cli(&[
        "run",
        "demo-mlp",
        "--tier",
        "fp32",
        "--tier",
        "bf16",
        "--report",
        s(&template),
        "--sign-key",
        s(&key),
    ]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert_eq!(
        statement(&dir.path().join("r-bf16.json"))["predicate"]["tier"],
        "bf16"
    );
    assert_eq!(verdict(&dir.path().join("r-fp32.json")), "CERTIFIED");
}

#[test]
fn a_filtered_run_is_not_certified_though_it_passes() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let r = cli(&["run", "demo-mlp", "--stage", "head", "--report", s(&report)]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert_eq!(verdict(&report), "NOT CERTIFIED");
    let reasons = reasons(&report);
    assert!(
        reasons.contains(&"the run was filtered to the stages matching `head`".to_string()),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&"never run: fc1_gelu, layer_norm".to_string()),
        "{reasons:?}"
    );
    assert!(r.stdout.contains("NOT CERTIFIED demo-mlp"), "{}", r.stdout);
}

#[test]
fn a_flaky_driver_is_not_certified() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    let shared = shared_dir();
    let marker = shared.path().join("struck");
    let r = cli_env(
        &[
            "run",
            "demo-mlp",
            "--provider",
            hostile::FLAKY,
            "--flake-retries",
            "2",
            "--sandbox-bind-rw",
            s(shared.path()),
            "--report",
            s(&report),
        ],
        &[("VSDK_HOSTILE_MARKER", &marker)],
    );
    assert_eq!(r.code, 1, "{}", r.text());
    assert_eq!(verdict(&report), "NOT CERTIFIED");
    assert_eq!(
        reasons(&report),
        vec!["flaky stages (failed, then passed on a retry: never a pass): fc1_gelu".to_string()]
    );
}

/// A directory the worker may write (`--sandbox-bind-rw`): when the runner
/// is root the worker is `nobody` outside its sandbox.
fn shared_dir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    dir
}

#[test]
fn the_memorising_driver_is_not_certified() {
    let dir = tempfile::tempdir().unwrap();
    let shared = shared_dir();
    let tape = shared.path().to_path_buf();
    let report = dir.path().join("r.json");
    let record = Path::new("record");
    // The tape is written where the runner lets the worker write, and read
    // back where it lets it read.
    let r = cli_env(
        &[
            "run",
            "demo-mlp",
            "--provider",
            hostile::REPLAY,
            "--no-differential",
            "--sandbox-bind-rw",
            s(&tape),
        ],
        &[(hostile::TAPE_ENV, &tape), (hostile::MODE_ENV, record)],
    );
    assert_eq!(r.code, 0, "recording computes: {}", r.text());
    let r = cli_env(
        &[
            "run",
            "demo-mlp",
            "--provider",
            hostile::REPLAY,
            "--sandbox-bind",
            s(&tape),
            "--report",
            s(&report),
        ],
        &[
            (hostile::TAPE_ENV, &tape),
            (hostile::MODE_ENV, Path::new("replay")),
        ],
    );
    assert_eq!(r.code, 1, "{}", r.text());
    assert_eq!(verdict(&report), "NOT CERTIFIED");
    let reasons = reasons(&report);
    // The main round looks perfect; the differential round is the reason,
    // and the kernel contract, whose values are as fresh.
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].starts_with("failing stages in the differential round (fresh inputs): fc1_gelu"),
        "{reasons:?}"
    );
    assert!(
        reasons[1].starts_with("kernel contract FAIL: "),
        "{reasons:?}"
    );
    let p = &statement(&report)["predicate"];
    assert!(p["stages"]
        .as_array()
        .unwrap()
        .iter()
        .all(|s| s["status"] == "pass"));
    let d = &p["differential"]["stages"][0];
    assert!(
        d["reason"].as_str().unwrap().starts_with("replayed:"),
        "{d}"
    );
}

#[test]
fn a_memoriser_prepared_for_a_chosen_seed_is_not_certified() {
    // The driver records a whole run, differential round included, with a
    // seed it knows the certification will use (shards share one).
    let dir = tempfile::tempdir().unwrap();
    let shared = shared_dir();
    let tape = shared.path().to_path_buf();
    let report = dir.path().join("r.json");
    let with = |mode: &str, extra: &[&str]| {
        let mode = PathBuf::from(mode);
        let env = [
            (hostile::TAPE_ENV, tape.as_path()),
            (hostile::MODE_ENV, mode.as_path()),
        ];
        let bind = if mode == Path::new("record") {
            "--sandbox-bind-rw"
        } else {
            "--sandbox-bind"
        };
        let mut args = vec![
            "run",
            "demo-mlp",
            "--provider",
            hostile::REPLAY,
            "--seed",
            "99",
            bind,
            s(&tape),
            "--report",
            s(&report),
        ];
        args.extend_from_slice(extra);
        cli_env(&args, &env)
    };
    let r = with("record", &["--nonce", "5"]);
    assert_eq!(r.code, 0, "recording computes: {}", r.text());
    // Replayed with the seed alone: the runner's fresh nonce gives the
    // differential round inputs nobody recorded.
    let r = with("replay", &[]);
    assert_eq!(r.code, 1, "{}", r.text());
    let found = reasons(&report);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("in the differential round"), "{found:?}");
    assert!(found[1].starts_with("kernel contract FAIL: "), "{found:?}");
    // Replayed with the recorded nonce too: every round "passes", and the
    // given nonce alone keeps it from being certified.
    let r = with("replay", &["--nonce", "5"]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert_eq!(
        reasons(&report),
        vec!["the differential round's nonce was given (--nonce): its inputs were known before the run".to_string()]
    );
}

#[test]
fn a_run_that_fails_to_start_leaves_no_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("r.json");
    // The report file is created first; the results file cannot be.
    let output = dir.path().join("no-such-dir/results.json");
    let r = cli(&[
        "run",
        "demo-mlp",
        "--report",
        s(&report),
        "--output",
        s(&output),
    ]);
    assert_eq!(r.code, 2, "{}", r.text());
    assert!(r.stderr.contains("cannot write"), "{}", r.stderr);
    assert!(!report.exists(), "an empty report was left behind");
}

#[test]
fn shards_merge_into_one_signed_report() {
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keygen(dir.path(), "k");
    let seed = format!("{}", 1000 + rand::random::<u32>());
    let shard = |k: usize, seed: &str| {
        let p = dir.path().join(format!("shard-{k}-{seed}.json"));
        let r = cli(&[
            "run",
            "demo-mlp",
            "--shard",
            &format!("{k}/2"),
            "--seed",
            seed,
            "--report",
            s(&p),
        ]);
        assert_eq!(r.code, 0, "{}", r.text());
        assert_eq!(verdict(&p), "NOT CERTIFIED");
        p
    };
    let (one, two) = (shard(1, &seed), shard(2, &seed));
    let merged = dir.path().join("merged.json");
    let m = cli(&[
        "merge",
        s(&two),
        s(&one),
        "--report",
        s(&merged),
        "--sign-key",
        s(&key),
    ]);
    assert_eq!(m.code, 0, "{}", m.text());
    assert!(m.stdout.contains("shards:    1/2, 2/2"), "{}", m.stdout);
    let v = cli(&[
        "verify",
        s(&merged),
        "--pubkey",
        s(&public),
        "--provider",
        "cpu",
    ]);
    assert_eq!(v.code, 0, "{}", v.text());
    assert!(v.stdout.contains("verdict:   CERTIFIED"), "{}", v.stdout);
    let p = &statement(&merged)["predicate"];
    assert_eq!(p["stages"].as_array().unwrap().len(), 3);
    assert_eq!(p["run"]["seed"].to_string(), seed);

    // Incomplete: shard 2 of 2 missing.
    let m = cli(&[
        "merge",
        s(&one),
        "--report",
        s(&merged),
        "--sign-key",
        s(&key),
    ]);
    assert_eq!(m.code, 1, "{}", m.text());
    assert!(reasons(&merged)[0].contains("incomplete merge: no report for shard(s) 2/2"));
    // Another run's shard (another seed): refused.
    let other = shard(2, "7");
    let m = cli(&["merge", s(&one), s(&other), "--report", s(&merged)]);
    assert_eq!(m.code, 2, "{}", m.text());
    assert!(
        m.stderr.contains("differs from report 1 in seed"),
        "{}",
        m.stderr
    );
    // With --pubkey, unsigned shards are refused.
    let m = cli(&[
        "merge",
        s(&one),
        s(&two),
        "--report",
        s(&merged),
        "--pubkey",
        s(&public),
    ]);
    assert_eq!(m.code, 2, "{}", m.text());
    assert!(m.stderr.contains("unsigned"), "{}", m.stderr);
}

#[test]
fn a_model_is_certified_when_each_component_has_a_report() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let (key, public) = keygen(dir.path(), "k");
    let demo = repo().join("conformance/suites/demo-mlp/suite.yaml");
    let sha = hex::encode(sha2::Sha256::digest(std::fs::read(&demo).unwrap()));
    let model = dir.path().join("model");
    std::fs::create_dir(&model).unwrap();
    std::fs::write(
        model.join("suite.yaml"),
        format!(
            r#"vips: 1
component: {{ id: demo-model, version: 1.0.0, title: "A classifier built on demo-mlp" }}
uses:
  - {{ component: demo-mlp, version: 0.1.0, sha256: "{sha}", path: "{}" }}
tensors:
  a: {{ dtype: float32, shape: [4, 10], source: {{ seeded: {{ seed: 7, normal: [0, 2] }} }} }}
  y: {{ dtype: float32, shape: [4, 10], source: golden }}
stages:
  - stage: act
    algorithm: "y = GELU(a)"
    impl: "torch.nn.GELU()"
    inputs: [a]
    outputs: [y]
    graph:
      - {{ op: vsdk.gelu, inputs: [a], outputs: [y] }}
"#,
            demo.display()
        ),
    )
    .unwrap();
    let g = cli(&["generate", s(&model)]);
    assert_eq!(g.code, 0, "{}", g.text());
    let (model_report, demo_report) = (dir.path().join("model.json"), dir.path().join("demo.json"));
    for (suite, report) in [(s(&model), &model_report), ("demo-mlp", &demo_report)] {
        let r = cli(&["run", suite, "--report", s(report), "--sign-key", s(&key)]);
        assert_eq!(r.code, 0, "{}", r.text());
    }
    let v = cli(&[
        "verify",
        s(&model_report),
        s(&demo_report),
        "--pubkey",
        s(&public),
        "--model",
        s(&model),
        "--tier",
        "fp32",
        "--provider",
        "cpu",
    ]);
    assert_eq!(v.code, 0, "{}", v.text());
    assert!(
        v.stdout.contains("model demo-model at fp32: CERTIFIED"),
        "{}",
        v.stdout
    );
    let v = cli(&[
        "verify",
        s(&model_report),
        "--pubkey",
        s(&public),
        "--model",
        s(&model),
        "--tier",
        "fp32",
    ]);
    assert_eq!(v.code, 1, "{}", v.text());
    assert!(
        v.stdout.contains("model demo-model at fp32: NOT CERTIFIED"),
        "{}",
        v.stdout
    );
    assert!(
        v.stdout
            .contains(&format!("demo-mlp 0.1.0 ({}): MISSING", &sha[..16])),
        "{}",
        v.stdout
    );
    let v = cli(&[
        "verify",
        s(&model_report),
        s(&demo_report),
        "--pubkey",
        s(&public),
        "--model",
        s(&model),
        "--tier",
        "bf16",
    ]);
    assert_eq!(v.code, 1);
    assert!(
        v.stdout.contains("a report covers tier fp32, not bf16"),
        "{}",
        v.stdout
    );
}
