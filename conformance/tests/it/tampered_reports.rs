//! The tampered-report corpus (issue 22, "verifiers agree"): reports made
//! at test time from a freshly signed report of a real run, each checked by
//! `vips-conformance verify`, `tools/verify_report.py` and OpenSSL. Both
//! verifiers must give each case its expected answer (accept or refuse, the
//! check that refuses it, the exit code), and OpenSSL's answer on the
//! signatures must be theirs.
//!
//! OpenSSL (`openssl pkeyutl -verify` over the PAE of each signature, as
//! docs/report-format.md does it by hand) checks signatures only. It sees:
//! an edited payload or payload type under the old signature, signatures by
//! an untrusted key, garbage and malleated signatures. It cannot see what a
//! holder of the trusted key signs: a verdict its records do not give,
//! repeated JSON keys, swapped subjects, a foreign payload type, a report
//! in another form; nor the envelope rules (repeated keys, more than 64
//! signatures), which refuse a report before any signature is checked.
//! One case differs on the signature itself: R = identity (below).
//!
//! The corpus is written to a temporary directory, printed, and kept when
//! a case fails, with `cases.txt` saying what each file is and how to run
//! the three checks on it by hand.
//!
//! OpenSSL and Python with `cryptography` are required (CI installs them):
//! without them this test fails and says so, rather than skip.

use base64::Engine;
use ed25519_dalek::SigningKey;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use vips_sdk::certify::{self, dsse, keys, predicate::ShardFacts, Envelope, Statement};
use vips_sdk::runner::Status;
use vips_sdk::sandbox::{Facts, NAMESPACES, SECCOMP_FILTER};

use crate::common;
use common::{repo, require, Out};

fn test_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

/// The CPU provider as built for the tests.
fn built_cpu_lib() -> PathBuf {
    test_dir().join(format!(
        "libvsdk_provider_cpu{}",
        std::env::consts::DLL_SUFFIX
    ))
}

/// The corpus's own copy of the CPU provider, which every run uses and
/// every comparison reads: a build beside the test cannot change it.
fn cpu_lib(dir: &Path) -> PathBuf {
    dir.join("lib")
        .join(built_cpu_lib().file_name().expect("a file name"))
}

fn golden() -> PathBuf {
    repo().join("conformance/suites/demo-mlp/suite.golden")
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

fn vips(args: &[&str]) -> Out {
    Out::of(
        Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
            .args(args)
            .env("VSDK_PROVIDER_PATH", test_dir())
            .env_remove("VIPS_SIGN_KEY")
            .current_dir(repo())
            .output()
            .expect("run vips-conformance"),
    )
}

fn python(args: &[&str]) -> Out {
    Out::of(
        Command::new("python3")
            .args(args)
            .current_dir(repo())
            .output()
            .expect("python3"),
    )
}

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// A signing key, its public key file and its key id.
struct Key {
    private: SigningKey,
    private_file: PathBuf,
    public: PathBuf,
    id: String,
}

impl Key {
    fn new(dir: &Path, name: &str) -> Key {
        let private_file = dir.join(format!("{name}.pem"));
        let r = vips(&["keygen", s(&private_file)]);
        assert_eq!(r.code, 0, "{}", r.text());
        let private = keys::read_private(&private_file).expect("the key keygen wrote");
        Key {
            id: keys::key_id(&private.verifying_key()),
            private,
            private_file,
            public: dir.join(format!("{name}.pub.pem")),
        }
    }

    /// `{"keyid", "sig"}` over the PAE of `payload_type` and `payload`.
    fn sign(&self, payload_type: &str, payload: &[u8]) -> Value {
        let e = Envelope::sign(payload_type, payload, &[(&self.id, &self.private)]);
        serde_json::to_value(&e.signatures[0]).expect("a signature encodes")
    }
}

/// An envelope as JSON text, the signatures as given.
fn envelope(payload_type: &str, payload: &[u8], signatures: Vec<Value>) -> String {
    serde_json::to_string_pretty(&serde_json::json!({
        "payload": B64.encode(payload),
        "payloadType": payload_type,
        "signatures": signatures,
    }))
    .expect("JSON")
}

/// The statement's JSON bytes as the runner writes them.
fn payload(statement: &Statement) -> Vec<u8> {
    serde_json::to_vec_pretty(statement).expect("a statement encodes")
}

/// Which check refuses a report, in the order both verifiers run them.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Check {
    /// Not a DSSE envelope as we write one: an input error, exit 2.
    EnvelopeJson,
    /// Payload type, signature count, payload base64: before any signature.
    BeforeSignature,
    /// No signature verifies with a trusted key.
    Signature,
    /// The signed statement: its form, subjects, verdict against records.
    SignedStatement,
    /// A file given to compare is not the certified one.
    Files,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// Verifies; exit 0 when the report says CERTIFIED, else 1.
    Verifies { certified: bool },
    /// Refused by `check`, both messages containing the phrase.
    Refused(Check, &'static str),
}

impl Expect {
    fn code(self) -> i32 {
        match self {
            Expect::Verifies { certified: true } => 0,
            Expect::Refused(Check::EnvelopeJson, _) => 2,
            _ => 1,
        }
    }

    /// What the verifiers' own signature check answered: `None` when they
    /// refused the report before checking a signature.
    fn signature_verified(self) -> Option<bool> {
        match self {
            Expect::Refused(Check::EnvelopeJson | Check::BeforeSignature, _) => None,
            Expect::Refused(Check::Signature, _) => Some(false),
            _ => Some(true),
        }
    }
}

struct Case {
    name: String,
    what: String,
    file: PathBuf,
    /// The public keys each verifier trusts.
    trusted: Vec<PathBuf>,
    /// Compare the provider library and the golden set too.
    files: bool,
    expect: Expect,
    /// Whether OpenSSL verifies one of the signatures with a trusted key.
    openssl: bool,
    /// Why OpenSSL's signature answer differs from the verifiers', where it
    /// does by design.
    openssl_differs: Option<&'static str>,
}

struct Corpus {
    dir: PathBuf,
    cases: Vec<Case>,
}

impl Corpus {
    fn add(
        &mut self,
        name: &str,
        what: &str,
        text: impl AsRef<[u8]>,
        trusted: &[&Key],
        expect: Expect,
        openssl: bool,
    ) -> &mut Case {
        let file = self.dir.join(format!("{name}.json"));
        std::fs::write(&file, text).expect("write a corpus file");
        self.cases.push(Case {
            name: name.to_string(),
            what: what.to_string(),
            file,
            trusted: trusted.iter().map(|k| k.public.clone()).collect(),
            files: false,
            expect,
            openssl,
            openssl_differs: None,
        });
        self.cases.last_mut().expect("just pushed")
    }
}

/// Sandbox facts that lack nothing a certificate requires.
fn full_sandbox() -> Facts {
    let facts = Facts {
        namespaces: NAMESPACES.iter().map(|n| n.to_string()).collect(),
        no_new_privs: true,
        seccomp: Some(SECCOMP_FILTER.to_string()),
        private_root: true,
        memory_limit_bytes: Some(4 << 30),
        memory_limit_by: vec!["rlimit".into()],
        max_processes: Some(64),
        max_file_bytes: Some(1 << 30),
        core_dumps: false,
        runner_non_dumpable: true,
        tree_confirmed_dead: true,
        ..Facts::default()
    };
    assert!(
        facts.lacking().is_empty(),
        "the test's full sandbox lacks {:?}: update full_sandbox()",
        facts.lacking()
    );
    facts
}

fn shard_facts(base: &Statement, k: usize, n: usize) -> ShardFacts {
    let p = &base.predicate;
    ShardFacts {
        shard: certify::predicate::ShardId { k, n },
        nonce: p.run.nonce + k as u64,
        host: p.host.clone(),
        device_stable_id: p.device.stable_id.clone(),
        runner_sha256: p.sdk.runner_sha256.clone(),
        started: p.run.started.clone(),
        finished: p.run.finished.clone(),
    }
}

/// Edits of a report's records, each applied to a report whose records
/// give CERTIFIED: every rule of `Predicate::assess` and every status.
/// An edit of a report's records.
type Edit = Box<dyn Fn(&mut certify::Predicate)>;

fn record_edits(base: &Statement) -> Vec<(String, Edit)> {
    let mut edits: Vec<(String, Edit)> = vec![("as-is".into(), Box::new(|_| {}))];
    for status in Status::ALL {
        let name = serde_json::to_value(status).unwrap();
        let name = name
            .as_str()
            .expect("a status is a JSON string")
            .to_string();
        edits.push((
            format!("main-{name}"),
            Box::new(move |p| p.stages[0].status = status),
        ));
        edits.push((
            format!("differential-{name}"),
            Box::new(move |p| p.differential.stages[1].status = status),
        ));
    }
    let lack = |f: fn(&mut Facts)| -> Edit {
        Box::new(move |p| {
            let mut facts = full_sandbox();
            f(&mut facts);
            p.run.sandbox = Some(facts);
        })
    };
    let one = base.clone();
    let two = base.clone();
    let more: Vec<(&str, Edit)> = vec![
        (
            "statuses-mixed",
            Box::new(|p| {
                let n = p.stages.len();
                p.stages[0].status = Status::Fail;
                p.stages[1 % n].status = Status::Crashed;
                p.stages[2 % n].status = Status::Fail;
            }),
        ),
        (
            "never-run",
            Box::new(|p| {
                p.stages.remove(1);
            }),
        ),
        (
            "never-run-differential",
            Box::new(|p| {
                p.differential.stages.remove(0);
            }),
        ),
        (
            "a-stage-twice",
            Box::new(|p| {
                let mut again = p.stages[0].clone();
                again.status = Status::Timeout;
                p.stages.push(again);
            }),
        ),
        ("must-pass-empty", Box::new(|p| p.must_pass.clear())),
        (
            "reference-not-cpu",
            Box::new(|p| p.reference.name = "vendor".into()),
        ),
        ("nonce-given", Box::new(|p| p.run.nonce_given = true)),
        ("in-process", Box::new(|p| p.run.isolated = false)),
        ("sandbox-unrecorded", Box::new(|p| p.run.sandbox = None)),
        (
            "sandbox-partial",
            lack(|f| {
                f.namespaces.retain(|n| n != "net" && n != "ipc");
                f.seccomp = None;
                f.core_dumps = true;
            }),
        ),
        ("sandbox-no-namespaces", lack(|f| f.namespaces.clear())),
        ("sandbox-privs", lack(|f| f.no_new_privs = false)),
        (
            "sandbox-other-seccomp",
            lack(|f| f.seccomp = Some("vsdk-worker-v0".into())),
        ),
        ("sandbox-host-files", lack(|f| f.private_root = false)),
        ("sandbox-memory", lack(|f| f.memory_limit_by.clear())),
        ("sandbox-processes", lack(|f| f.max_processes = None)),
        ("sandbox-file-size", lack(|f| f.max_file_bytes = None)),
        ("sandbox-dumpable", lack(|f| f.runner_non_dumpable = false)),
        ("sandbox-tree", lack(|f| f.tree_confirmed_dead = false)),
        (
            "filtered",
            Box::new(|p| p.run.stage_glob = Some("fc*".into())),
        ),
        (
            "lone-shard",
            Box::new(|p| p.run.shard = Some(certify::predicate::ShardId { k: 1, n: 2 })),
        ),
        (
            "stopped-early",
            Box::new(|p| p.run.stopped_early = Some("after 1 failure (--max-fails 1)".into())),
        ),
        (
            "teardown",
            Box::new(|p| p.run.teardown = Some("the provider crashed while being released".into())),
        ),
        ("no-differential", Box::new(|p| p.differential.ran = false)),
        (
            "end-to-end-out-of-bounds",
            Box::new(|p| {
                let record = |tensor: &str, passed| certify::predicate::EndToEndRecord {
                    tensor: tensor.into(),
                    passed,
                    rel_l2_error: 0.5,
                    cosine_similarity: 0.9,
                    max_rel_l2: 0.01,
                    min_cosine: 0.999,
                };
                p.end_to_end = vec![record("y", true), record("z", false), record("w", false)];
            }),
        ),
        (
            "merge-complete",
            Box::new(move |p| p.shards = vec![shard_facts(&one, 1, 2), shard_facts(&one, 2, 2)]),
        ),
        (
            "merge-incomplete",
            Box::new(move |p| p.shards = vec![shard_facts(&two, 1, 4), shard_facts(&two, 3, 4)]),
        ),
        (
            "many-reasons",
            Box::new(|p| {
                p.run.isolated = false;
                p.run.nonce_given = true;
                p.stages[0].status = Status::MemoryLimit;
                p.differential.stages[0].status = Status::ProcessesLeft;
                p.differential.ran = true;
                p.stages.pop();
            }),
        ),
    ];
    edits.extend(more.into_iter().map(|(n, e)| (n.to_string(), e)));
    edits
}

/// A signature over `message` by `key` whose R is the identity point:
/// RFC 8032's equation holds (S = k·a), so OpenSSL accepts it; strict
/// verification (small-order R) refuses it. Python does the arithmetic.
fn identity_r_signature(key: &Key, message: &[u8], dir: &Path) -> Vec<u8> {
    let file = dir.join("identity-r.pae.bin");
    std::fs::write(&file, message).unwrap();
    let script = "import sys, hashlib\n\
        from cryptography.hazmat.primitives import serialization as s\n\
        key = s.load_pem_private_key(open(sys.argv[1], 'rb').read(), None)\n\
        seed = key.private_bytes(s.Encoding.Raw, s.PrivateFormat.Raw, s.NoEncryption())\n\
        A = key.public_key().public_bytes(s.Encoding.Raw, s.PublicFormat.Raw)\n\
        L = 2**252 + 27742317777372353535851937790883648493\n\
        h = hashlib.sha512(seed).digest()\n\
        a = int.from_bytes(h[:32], 'little') & ((1 << 254) - 8) | (1 << 254)\n\
        R = b'\\x01' + bytes(31)\n\
        k = int.from_bytes(hashlib.sha512(R + A + open(sys.argv[2], 'rb').read()).digest(), 'little') % L\n\
        print((R + (k * a % L).to_bytes(32, 'little')).hex())";
    let r = python(&["-c", script, s(&key.private_file), s(&file)]);
    assert_eq!(r.code, 0, "{}", r.text());
    hex::decode(r.stdout.trim()).expect("hex")
}

/// S + L: the same signature in a second encoding (malleated), which
/// RFC 8032 verifiers refuse (S must be below the group order L).
fn malleated(sig: &[u8]) -> Vec<u8> {
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut out = sig.to_vec();
    let mut carry = 0u16;
    for (i, l) in L.iter().enumerate() {
        let sum = out[32 + i] as u16 + *l as u16 + carry;
        out[32 + i] = sum as u8;
        carry = sum >> 8;
    }
    assert_eq!(carry, 0, "S + L fits in 32 bytes");
    out
}

/// Whether OpenSSL verifies any of the envelope's signatures with any of
/// `trusted`, over the PAE rebuilt from the envelope as a JSON reader that
/// keeps the last of repeated keys (jq) sees it. A signature is given to
/// OpenSSL as the bytes base64 decodes it to (standard or URL-safe).
fn openssl_verifies(file: &Path, trusted: &[PathBuf], work: &Path) -> bool {
    let Ok(env) = serde_json::from_slice::<Value>(&std::fs::read(file).unwrap()) else {
        return false;
    };
    let (Some(payload), Some(t), Some(signatures)) = (
        env["payload"].as_str(),
        env["payloadType"].as_str(),
        env["signatures"].as_array(),
    ) else {
        return false;
    };
    let Ok(body) = dsse::decode_base64(payload) else {
        return false;
    };
    let pae = work.join("pae.bin");
    std::fs::write(&pae, dsse::pae(t, &body)).unwrap();
    let sig = work.join("sig.bin");
    for signature in signatures {
        let Some(Ok(bytes)) = signature["sig"].as_str().map(dsse::decode_base64) else {
            continue;
        };
        std::fs::write(&sig, bytes).unwrap();
        for key in trusted {
            let r = Out::of(
                Command::new("openssl")
                    .args(["pkeyutl", "-verify", "-pubin", "-inkey", s(key), "-rawin"])
                    .args(["-in", s(&pae), "-sigfile", s(&sig)])
                    .output()
                    .expect("openssl"),
            );
            if r.code == 0 && r.stdout.contains("Signature Verified Successfully") {
                return true;
            }
        }
    }
    false
}

/// The two verifiers' command lines for a case.
fn commands(case: &Case, dir: &Path) -> (Vec<String>, Vec<String>) {
    let mut rust = vec!["verify".to_string(), s(&case.file).to_string()];
    let script = repo().join("tools/verify_report.py");
    let mut py = vec![s(&script).to_string(), s(&case.file).to_string()];
    for key in &case.trusted {
        for args in [&mut rust, &mut py] {
            args.extend(["--pubkey".to_string(), s(key).to_string()]);
        }
    }
    if case.files {
        for args in [&mut rust, &mut py] {
            args.extend([
                "--provider".to_string(),
                s(&cpu_lib(dir)).to_string(),
                "--golden".to_string(),
                s(&golden()).to_string(),
            ]);
        }
    }
    (rust, py)
}

/// What is wrong with a verifier's answer, if anything.
fn judge(who: &str, out: &Out, expect: Expect) -> Option<String> {
    let text = out.text();
    let problem = if out.code != expect.code() {
        Some(format!(
            "exit code {}, expected {}",
            out.code,
            expect.code()
        ))
    } else {
        match expect {
            Expect::Verifies { certified } => {
                let verdict = if certified {
                    "CERTIFIED"
                } else {
                    "NOT CERTIFIED"
                };
                (!text.contains("signature verified")
                    || text.contains("DOES NOT VERIFY")
                    || !text.contains(verdict))
                .then(|| format!("expected it to verify, saying {verdict}"))
            }
            Expect::Refused(check, phrase) => (!text.contains(phrase)
                || (check != Check::EnvelopeJson && !text.contains("DOES NOT VERIFY")))
            .then(|| format!("expected a refusal by the {check:?} check saying `{phrase}`")),
        }
    };
    problem.map(|p| format!("{who}: {p}; it said:\n{}", text.trim_end()))
}

#[test]
fn verify_python_and_openssl_agree_on_every_tampered_report() {
    require("openssl", &["version"], "OpenSSL's command line");
    require(
        "python3",
        &["-c", "import cryptography"],
        "Python's `cryptography`",
    );
    let tmp = tempfile::Builder::new()
        .prefix("vips-tampered-reports-")
        // Not /tmp: the sandboxed worker sees its own /tmp, not the
        // provider copied there.
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .unwrap();
    let dir = tmp.path().to_path_buf();
    println!("corpus: {}", dir.display());
    let trusted = Key::new(&dir, "trusted");
    let leaked = Key::new(&dir, "leaked");
    let provider = cpu_lib(&dir);
    std::fs::create_dir(dir.join("lib")).unwrap();
    std::fs::copy(built_cpu_lib(), &provider).expect("copy the CPU provider");

    // A real run, signed: the corpus's source. Its verdict is whatever the
    // run gives (NOT CERTIFIED without the full sandbox); no case needs it
    // to be CERTIFIED.
    let original = dir.join("original.json");
    let r = vips(&[
        "run",
        "demo-mlp",
        "--provider",
        s(&provider),
        "--report",
        s(&original),
        "--sign-key",
        s(&trusted.private_file),
    ]);
    assert!(original.is_file(), "no report written: {}", r.text());
    let env: Envelope =
        certify::read_envelope(&original).unwrap_or_else(|e| panic!("the run's report: {e}"));
    let body = dsse::decode_base64(&env.payload).unwrap();
    let base = certify::read_statement(&env).unwrap();
    assert_eq!(
        payload(&base),
        body,
        "the runner writes statements as the test does"
    );
    let certified = base.predicate.verdict == certify::Verdict::Certified;
    let filtered_file = dir.join("filtered.json");
    let r = vips(&[
        "run",
        "demo-mlp",
        "--provider",
        s(&provider),
        "--stage",
        "head",
        "--report",
        s(&filtered_file),
        "--sign-key",
        s(&trusted.private_file),
    ]);
    assert!(filtered_file.is_file(), "no report written: {}", r.text());
    let filtered_env = certify::read_envelope(&filtered_file).unwrap();
    let filtered_body = dsse::decode_base64(&filtered_env.payload).unwrap();
    let filtered = certify::read_statement(&filtered_env).unwrap();
    assert_eq!(
        filtered.predicate.verdict,
        certify::Verdict::NotCertified,
        "a filtered run is never certified"
    );
    let t = certify::PAYLOAD_TYPE;
    let good = trusted.sign(t, &body);
    let mut c = Corpus {
        dir: dir.clone(),
        cases: Vec::new(),
    };
    use Check::*;
    use Expect::*;

    c.add(
        "original",
        "the report as the run wrote it, with the provider library and golden set compared",
        std::fs::read(&original).unwrap(),
        &[&trusted],
        Verifies { certified },
        true,
    )
    .files = true;
    c.add(
        "filtered",
        "a run filtered with --stage head, as written (NOT CERTIFIED)",
        std::fs::read(&filtered_file).unwrap(),
        &[&trusted],
        Verifies { certified: false },
        true,
    )
    .files = true;
    c.add(
        "original-other-key",
        "the report as written, checked with another key",
        std::fs::read(&original).unwrap(),
        &[&leaked],
        Refused(Signature, "not signed by the given key"),
        false,
    );

    // A number edited: margins are protected by the signature alone.
    let mut margin = base.clone();
    margin.predicate.stages[0].outputs[0].margin = 0.999;
    let margin = payload(&margin);
    c.add(
        "margin-edited",
        "a margin edited, the signature kept",
        envelope(t, &margin, vec![good.clone()]),
        &[&trusted],
        Refused(Signature, "modified after signing"),
        false,
    );
    let resigned = envelope(t, &margin, vec![leaked.sign(t, &margin)]);
    c.add(
        "margin-edited-leaked-key",
        "a margin edited and signed with the leaked key, which is trusted: nothing but the signature protects a margin",
        &resigned,
        &[&leaked],
        Verifies { certified },
        true,
    );
    c.add(
        "margin-edited-leaked-key-untrusted",
        "the same, checked with the genuine key only",
        &resigned,
        &[&trusted],
        Refused(Signature, "not signed by the given key"),
        false,
    );

    // The verdict edited: a filtered run's NOT CERTIFIED made CERTIFIED,
    // its reasons emptied (a filtered run is never certified, whatever the
    // sandbox gives); and the full run's verdict flipped, whichever it is.
    let mut forged = filtered.clone();
    forged.predicate.verdict = certify::Verdict::Certified;
    forged.predicate.reasons.clear();
    let forged = payload(&forged);
    c.add(
        "verdict-edited",
        "a filtered run's NOT CERTIFIED edited to CERTIFIED, reasons emptied, the signature kept",
        envelope(t, &forged, vec![trusted.sign(t, &filtered_body)]),
        &[&trusted],
        Refused(Signature, "modified after signing"),
        false,
    );
    c.add(
        "verdict-edited-leaked-key",
        "a filtered run's NOT CERTIFIED edited to CERTIFIED, reasons emptied, validly signed with the leaked (trusted) key",
        envelope(t, &forged, vec![leaked.sign(t, &forged)]),
        &[&leaked],
        Refused(SignedStatement, "does not follow from the report's own records"),
        true,
    );
    let mut flipped = base.clone();
    if certified {
        flipped.predicate.verdict = certify::Verdict::NotCertified;
        flipped.predicate.reasons = vec!["forged".into()];
    } else {
        flipped.predicate.verdict = certify::Verdict::Certified;
        flipped.predicate.reasons.clear();
    }
    let flipped = payload(&flipped);
    c.add(
        "verdict-flipped-leaked-key",
        "the full run's verdict flipped, reasons to match, signed with the leaked (trusted) key",
        envelope(t, &flipped, vec![leaked.sign(t, &flipped)]),
        &[&leaked],
        Refused(
            SignedStatement,
            "does not follow from the report's own records",
        ),
        true,
    );
    let mut reasons = base.clone();
    reasons.predicate.reasons = vec!["a reason of the forger's".into()];
    let reasons = payload(&reasons);
    c.add(
        "reasons-edited-leaked-key",
        "the verdict kept, the reasons replaced, signed with the leaked (trusted) key",
        envelope(t, &reasons, vec![leaked.sign(t, &reasons)]),
        &[&leaked],
        Refused(
            SignedStatement,
            "does not follow from the report's own records",
        ),
        true,
    );

    // Repeated keys: a reader keeping the last would see CERTIFIED.
    let text = String::from_utf8(body.clone()).unwrap();
    let filtered_text = String::from_utf8(filtered_body.clone()).unwrap();
    let at = filtered_text
        .find("    \"component\": {")
        .expect("the predicate's component");
    let duplicate = format!(
        "{}    \"verdict\": \"CERTIFIED\",\n    \"reasons\": [],\n{}",
        &filtered_text[..at],
        &filtered_text[at..]
    );
    let d = duplicate.as_bytes();
    c.add(
        "duplicate-verdict",
        "a filtered run's `verdict` and `reasons` twice, the second saying CERTIFIED, signed with the leaked (trusted) key",
        envelope(t, d, vec![leaked.sign(t, d)]),
        &[&leaked],
        Refused(SignedStatement, "the key `predicate.verdict` appears twice"),
        true,
    );
    let digest = format!("\"sha256\": \"{}\"", base.subject[0].digest["sha256"]);
    let duplicate = text.replacen(
        &digest,
        &format!("\"sha256\": \"{}\",\n{digest}", "0".repeat(64)),
        1,
    );
    assert_ne!(duplicate, text);
    let d = duplicate.as_bytes();
    c.add(
        "duplicate-digest",
        "the provider subject's `sha256` twice (a map: serde alone keeps the last), signed with the leaked (trusted) key",
        envelope(t, d, vec![leaked.sign(t, d)]),
        &[&leaked],
        Refused(SignedStatement, "the key `subject[0].digest.sha256` appears twice"),
        true,
    );
    let two_payloads = envelope(t, &body, vec![good.clone()]).replacen(
        "\"payload\":",
        &format!("\"payload\": \"{}\",\n  \"payload\":", B64.encode(&forged)),
        1,
    );
    c.add(
        "duplicate-payload",
        "two `payload` keys in the envelope: a forged CERTIFIED, then the signed original",
        two_payloads,
        &[&trusted],
        Refused(EnvelopeJson, "the key `payload` appears twice"),
        true,
    );
    let two_types = envelope(t, &body, vec![good.clone()]).replacen(
        "\"payloadType\":",
        "\"payloadType\": \"application/json\",\n  \"payloadType\":",
        1,
    );
    c.add(
        "duplicate-payload-type",
        "two `payloadType` keys in the envelope",
        two_types,
        &[&trusted],
        Refused(EnvelopeJson, "the key `payloadType` appears twice"),
        true,
    );
    let two_sigs = envelope(t, &body, vec![good.clone()]).replacen(
        "\"sig\":",
        &format!("\"sig\": \"{}\",\n      \"sig\":", B64.encode([7u8; 64])),
        1,
    );
    c.add(
        "duplicate-sig",
        "two `sig` keys in one signature: garbage, then the valid one",
        two_sigs,
        &[&trusted],
        Refused(EnvelopeJson, "the key `signatures[0].sig` appears twice"),
        true,
    );

    // Subjects.
    let mut swapped = base.clone();
    swapped.subject.swap(0, 1);
    let swapped = payload(&swapped);
    c.add(
        "subjects-swapped",
        "the two subjects swapped, signed with the leaked (trusted) key",
        envelope(t, &swapped, vec![leaked.sign(t, &swapped)]),
        &[&leaked],
        Refused(SignedStatement, "the subjects are not the predicate's"),
        true,
    );
    let other = "ab".repeat(32);
    let mut subject = base.clone();
    subject.subject[0]
        .digest
        .insert("sha256".into(), other.clone());
    let subject = payload(&subject);
    c.add(
        "subject-other-library",
        "the provider subject names another library than the predicate, signed with the leaked (trusted) key",
        envelope(t, &subject, vec![leaked.sign(t, &subject)]),
        &[&leaked],
        Refused(SignedStatement, "the subjects are not the predicate's"),
        true,
    );
    let mut library = base.clone();
    library.subject[0]
        .digest
        .insert("sha256".into(), other.clone());
    library.predicate.provider.library_sha256 = other;
    let library = payload(&library);
    c.add(
        "other-library",
        "subject and predicate agree on another library: refused when the real library is compared",
        envelope(t, &library, vec![leaked.sign(t, &library)]),
        &[&leaked],
        Refused(Files, "the provider library"),
        true,
    )
    .files = true;
    let mut gold = base.clone();
    gold.subject[1]
        .digest
        .insert("sha256".into(), "cd".repeat(32));
    gold.predicate.component.golden_sha256 = "cd".repeat(32);
    let gold = payload(&gold);
    c.add(
        "other-golden",
        "subject and predicate agree on another golden set: refused when the real one is compared",
        envelope(t, &gold, vec![leaked.sign(t, &gold)]),
        &[&leaked],
        Refused(Files, "the golden vector set"),
        true,
    )
    .files = true;

    // The payload type.
    let json = "application/json";
    c.add(
        "payload-type-edited",
        "payloadType changed, the signature kept (the type is signed: PAE)",
        envelope(json, &body, vec![good.clone()]),
        &[&trusted],
        Refused(BeforeSignature, "payload type `application/json`"),
        false,
    );
    c.add(
        "payload-type-signed",
        "another payload type, validly signed with the trusted key",
        envelope(json, &body, vec![trusted.sign(json, &body)]),
        &[&trusted],
        Refused(BeforeSignature, "payload type `application/json`"),
        true,
    );

    // Several signatures; keyids are hints, every signature is tried.
    let garbage = serde_json::json!({"keyid": trusted.id, "sig": B64.encode([7u8; 64])});
    c.add(
        "signatures-valid-and-garbage",
        "a valid signature and a garbage one naming the same key",
        envelope(t, &body, vec![garbage.clone(), good.clone()]),
        &[&trusted],
        Verifies { certified },
        true,
    );
    c.add(
        "signatures-two-keys-one-trusted",
        "signatures by the leaked key and the genuine one, only the genuine one trusted",
        envelope(t, &body, vec![leaked.sign(t, &body), good.clone()]),
        &[&trusted],
        Verifies { certified },
        true,
    );
    c.add(
        "signatures-none-valid",
        "a garbage signature naming the trusted key and one by an untrusted key",
        envelope(t, &body, vec![garbage.clone(), leaked.sign(t, &body)]),
        &[&trusted],
        Refused(Signature, "modified after signing"),
        false,
    );
    let unnamed = serde_json::json!({"sig": B64.encode([9u8; 64])});
    c.add(
        "signatures-none-valid-unnamed",
        "a garbage signature without a keyid and one by an untrusted key",
        envelope(t, &body, vec![unnamed, leaked.sign(t, &body)]),
        &[&trusted],
        Refused(Signature, "signed by an unnamed key, "),
        false,
    );
    c.add(
        "unsigned",
        "no signature",
        envelope(t, &body, vec![]),
        &[&trusted],
        Refused(Signature, "unsigned"),
        false,
    );
    c.add(
        "signatures-65",
        "65 signatures, the first valid: more than an envelope may carry",
        envelope(t, &body, vec![good.clone(); 65]),
        &[&trusted],
        Refused(BeforeSignature, "65 signatures, more than the 64"),
        true,
    );
    let genuine = B64.decode(good["sig"].as_str().unwrap()).unwrap();
    c.add(
        "signature-malleated",
        "the valid signature with S + L (the same signature, encoded again)",
        envelope(
            t,
            &body,
            vec![serde_json::json!({"keyid": trusted.id, "sig": B64.encode(malleated(&genuine))})],
        ),
        &[&trusted],
        Refused(Signature, "modified after signing"),
        false,
    );
    let mut stray = good["sig"].as_str().unwrap().to_string();
    // 64 bytes: the last character before `==` carries 4 unused bits.
    let last = stray.len() - 3;
    let bumped = (stray.as_bytes()[last] + 1) as char;
    stray.replace_range(last..last + 1, &bumped.to_string());
    c.add(
        "signature-stray-base64-bits",
        "the valid signature with the unused bits of its base64 set (not canonical base64)",
        envelope(
            t,
            &body,
            vec![serde_json::json!({"keyid": trusted.id, "sig": stray})],
        ),
        &[&trusted],
        Refused(Signature, "modified after signing"),
        false,
    );
    let url_safe = envelope(t, &body, vec![good.clone()]).replacen(
        &B64.encode(&body),
        &base64::engine::general_purpose::URL_SAFE.encode(&body),
        1,
    );
    c.add(
        "payload-url-safe-base64",
        "the payload in URL-safe base64 (DSSE readers accept both)",
        url_safe,
        &[&trusted],
        Verifies { certified },
        true,
    );
    let identity = identity_r_signature(&leaked, &dsse::pae(t, &body), &dir);
    c.add(
        "signature-identity-r",
        "the report signed by the leaked (trusted) key with R = identity",
        envelope(
            t,
            &body,
            vec![serde_json::json!({"keyid": leaked.id, "sig": B64.encode(identity)})],
        ),
        &[&leaked],
        Refused(Signature, "modified after signing"),
        true,
    )
    .openssl_differs = Some(
        "RFC 8032 (OpenSSL) accepts R = identity; both verifiers verify strictly (ed25519-dalek's verify_strict refuses a small-order R), and only the key's holder can make one",
    );

    // The form: what serde alone would read, and another verifier not.
    let mut unwritten = String::new();
    for line in text.lines() {
        if !line.trim_start().starts_with("\"stage_glob\": null") {
            unwritten.push_str(line);
            unwritten.push('\n');
        }
    }
    let unwritten = unwritten.trim_end().to_string();
    assert_ne!(
        unwritten, text,
        "a run with no --stage writes `stage_glob: null`"
    );
    let u = unwritten.as_bytes();
    c.add(
        "field-left-out",
        "`run.stage_glob: null` left out (serde alone reads it as null), signed with the leaked (trusted) key",
        envelope(t, u, vec![leaked.sign(t, u)]),
        &[&leaked],
        Refused(SignedStatement, "not a VIPS certification statement"),
        true,
    );
    let mut whole = base.clone();
    whole.predicate.stages[0].seconds = 1.0;
    let integer = String::from_utf8(payload(&whole)).unwrap();
    let integer = integer.replacen("\"seconds\": 1.0,", "\"seconds\": 1,", 1);
    let i = integer.as_bytes();
    c.add(
        "number-form",
        "a float written as an integer (`seconds: 1`), signed with the leaked (trusted) key",
        envelope(t, i, vec![leaked.sign(t, i)]),
        &[&leaked],
        Refused(SignedStatement, "not a VIPS certification statement"),
        true,
    );

    // The rule, both ways: records edited and their verdict re-derived
    // (both verifiers accept), or left as it was (both refuse). Each edit
    // starts from the run's records with a full sandbox: they give
    // CERTIFIED, so each edit's reasons stand alone. The consistent copies
    // are what a leaked key can sign that no verifier can tell.
    let mut clean = base.clone();
    clean.predicate.run.sandbox = Some(full_sandbox());
    clean.predicate.assess();
    assert_eq!(
        clean.predicate.verdict,
        certify::Verdict::Certified,
        "{:?}",
        clean.predicate.reasons
    );
    assert!(clean.predicate.stages.len() >= 2 && clean.predicate.differential.stages.len() >= 2);
    for (name, edit) in record_edits(&base) {
        let mut stale = clean.clone();
        edit(&mut stale.predicate);
        let mut derived = stale.clone();
        derived.predicate.assess();
        let certified = derived.predicate.verdict == certify::Verdict::Certified;
        let p = payload(&derived);
        c.add(
            &format!("rule-{name}"),
            &format!(
                "records edited ({name}), verdict and reasons derived again ({}), signed with the leaked (trusted) key",
                derived.predicate.reasons.join("; ")
            ),
            envelope(t, &p, vec![leaked.sign(t, &p)]),
            &[&leaked],
            Verifies { certified },
            true,
        );
        if derived != stale {
            let p = payload(&stale);
            c.add(
                &format!("rule-{name}-stale"),
                &format!("records edited ({name}), the CERTIFIED verdict kept, signed with the leaked (trusted) key"),
                envelope(t, &p, vec![leaked.sign(t, &p)]),
                &[&leaked],
                Refused(SignedStatement, "does not follow from the report's own records"),
                true,
            );
        }
    }

    // Merged reports, written by `merge`: complete and not.
    let shard = |k: usize| {
        let p = dir.join(format!("shard-{k}.json"));
        let seed = base.predicate.run.seed.to_string();
        let r = vips(&[
            "run",
            "demo-mlp",
            "--provider",
            s(&provider),
            "--shard",
            &format!("{k}/2"),
            "--seed",
            &seed,
            "--report",
            s(&p),
        ]);
        assert!(p.is_file(), "{}", r.text());
        p
    };
    let (one, two) = (shard(1), shard(2));
    for (name, shards) in [
        ("merged", vec![&one, &two]),
        ("merged-incomplete", vec![&one]),
    ] {
        let merged = dir.join(format!("{name}.json"));
        let mut args = vec!["merge"];
        args.extend(shards.iter().map(|p| s(p)));
        args.extend([
            "--report",
            s(&merged),
            "--sign-key",
            s(&trusted.private_file),
        ]);
        let r = vips(&args);
        assert!(merged.is_file(), "{}", r.text());
        let st = certify::read_statement(&certify::read_envelope(&merged).unwrap()).unwrap();
        let certified = st.predicate.verdict == certify::Verdict::Certified;
        let what = format!(
            "a merge of {} of 2 shards as `merge` writes it ({})",
            shards.len(),
            st.predicate.reasons.join("; ")
        );
        c.add(
            name,
            &what,
            std::fs::read(&merged).unwrap(),
            &[&trusted],
            Verifies { certified },
            true,
        )
        .files = true;
    }

    // Each case through the three.
    let mut listing = String::from(
        "The tampered-report corpus of conformance/tests/it/tampered_reports.rs: each case's file,\n\
         what it is, the answer both verifiers must give, and their command lines. OpenSSL is run\n\
         on the PAE of each signature as in docs/report-format.md, \"With standard tools\".\n\n",
    );
    let mut failures = Vec::new();
    let mut table = Vec::new();
    // The three verifiers of each case, several cases at once (each a few
    // short processes: start-up, not arithmetic, is their cost).
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut outcomes: Vec<_> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..4)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(case) = c.cases.get(i) else {
                            return done;
                        };
                        let (rust, py) = commands(case, &dir);
                        let rust_out = vips(&rust.iter().map(String::as_str).collect::<Vec<_>>());
                        let py_out = python(&py.iter().map(String::as_str).collect::<Vec<_>>());
                        let work = dir.join(format!("openssl-{i}"));
                        std::fs::create_dir_all(&work).unwrap();
                        let openssl = openssl_verifies(&case.file, &case.trusted, &work);
                        done.push((i, (rust, py, rust_out, py_out, openssl)));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap())
            .collect()
    });
    outcomes.sort_by_key(|(i, _)| *i);
    for (case, (_, (rust, py, rust_out, py_out, openssl))) in c.cases.iter().zip(outcomes) {
        let mut problems: Vec<String> = [
            judge("vips-conformance verify", &rust_out, case.expect),
            judge("tools/verify_report.py", &py_out, case.expect),
        ]
        .into_iter()
        .flatten()
        .collect();
        if openssl != case.openssl {
            problems.push(format!(
                "OpenSSL: a signature verifies: {openssl}, expected {}",
                case.openssl
            ));
        }
        // OpenSSL's signature answer against the verifiers' own, where they
        // checked a signature.
        if let Some(theirs) = case.expect.signature_verified() {
            let agree = theirs == case.openssl;
            if agree == case.openssl_differs.is_some() {
                problems.push(format!(
                    "the verifiers' signature check says {theirs}, OpenSSL {}: {}",
                    case.openssl,
                    case.openssl_differs.unwrap_or("they must agree")
                ));
            }
        }
        let expected = match case.expect {
            Expect::Verifies { certified } => format!(
                "verifies, {}",
                if certified {
                    "CERTIFIED"
                } else {
                    "NOT CERTIFIED"
                }
            ),
            Expect::Refused(check, _) => format!("refused ({check:?})"),
        };
        table.push(format!(
            "{:<45} {:<28} verify {} python {} openssl {}",
            case.name,
            expected,
            rust_out.code,
            py_out.code,
            if case.openssl { "valid" } else { "invalid" }
        ));
        writeln!(
            listing,
            "{}: {}\n  expected: {expected}, exit {}; OpenSSL finds a valid signature: {}{}\n  {} {}\n  python3 {}\n",
            case.name,
            case.what,
            case.expect.code(),
            case.openssl,
            case.openssl_differs
                .map(|w| format!(" (differs from the verifiers by design: {w})"))
                .unwrap_or_default(),
            env!("CARGO_BIN_EXE_vips-conformance"),
            rust.join(" "),
            py.join(" ")
        )
        .unwrap();
        if !problems.is_empty() {
            failures.push(format!(
                "{}: {}\n  {}",
                case.name,
                case.what,
                problems.join("\n  ")
            ));
        }
    }
    std::fs::write(dir.join("cases.txt"), &listing).unwrap();
    println!("{}", table.join("\n"));
    println!(
        "{} cases; each described in {}",
        c.cases.len(),
        dir.join("cases.txt").display()
    );
    if !failures.is_empty() {
        let kept = tmp.keep();
        panic!(
            "{} of {} cases got another answer (corpus kept in {}, cases.txt says how to re-run each):\n\n{}",
            failures.len(),
            c.cases.len(),
            kept.display(),
            failures.join("\n\n")
        );
    }
}
