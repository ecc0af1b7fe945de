//! Certification reports in the library: the DSSE specification's published
//! test vectors, keys as standard PEM files, signing and verifying with each
//! way a report can be tampered with, the verdict rule, shard merging and a
//! model certified from its components.

use crate::common;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde_json::Value;
use std::path::{Path, PathBuf};
use vips_sdk::certify::dsse::{self, Envelope, TrustedKey};
use vips_sdk::certify::{
    compose, keys, merge, DsseError, Predicate, Statement, SubjectFiles, Verdict, VerifyError,
};
use vips_sdk::compare::Tier;
use vips_sdk::runner::{self, RunOptions, Status};
use vips_sdk::sandbox::{Facts, NAMESPACES, SECCOMP_FILTER};
use vips_sdk::suite::Suite;
use vips_sdk::Provider;

fn hex_bytes(s: &str) -> Vec<u8> {
    hex::decode(s).expect("hex")
}

#[test]
fn the_dsse_test_vectors_pass() {
    let text = include_str!("../data/dsse_vectors.json");
    let doc: Value = serde_json::from_str(text).unwrap();
    let key = |name: &str| {
        let k = &doc["keys"][name];
        let seed: [u8; 32] = hex_bytes(k["seed"].as_str().unwrap()).try_into().unwrap();
        let signing = SigningKey::from_bytes(&seed);
        assert_eq!(
            hex::encode(signing.verifying_key().to_bytes()),
            k["public"].as_str().unwrap()
        );
        TrustedKey {
            id: name.to_string(),
            key: signing.verifying_key(),
        }
    };
    let vectors = doc["vectors"].as_array().unwrap();
    assert_eq!(vectors.len(), 9);
    for v in vectors {
        let id = v["id"].as_str().unwrap();
        let envelope: Envelope = serde_json::from_value(v["envelope"].clone()).unwrap();
        let payload = dsse::decode_base64(&envelope.payload).unwrap();
        let signed = hex_bytes(v["pae"].as_str().unwrap());
        let trusted: Vec<TrustedKey> = v["trustedKeys"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| key(k.as_str().unwrap()))
            .collect();
        let types: Vec<&str> = v["supportedPayloadTypes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_str().unwrap())
            .collect();
        let threshold = v["threshold"].as_u64().unwrap() as usize;
        // `pae` is what the signatures cover (for a swapped type, not the
        // PAE of the envelope as it stands).
        let sig = dsse::decode_base64(&envelope.signatures[0].sig).unwrap();
        let sig = ed25519_dalek::Signature::from_slice(&sig).unwrap();
        assert!(
            trusted
                .iter()
                .any(|k| k.key.verify_strict(&signed, &sig).is_ok()),
            "{id}: the vector's PAE is what its first signature covers"
        );
        let result = envelope.verify(&types, &trusted, threshold);
        match v["expect"].as_str().unwrap() {
            "accept" => {
                assert_eq!(
                    dsse::pae(&envelope.payload_type, &payload),
                    signed,
                    "{id}: PAE"
                );
                assert_eq!(result.as_deref(), Ok(&payload[..]), "{id}")
            }
            _ => assert!(result.is_err(), "{id}: accepted"),
        }
    }
}

#[test]
fn our_signatures_are_the_vectors_signatures() {
    // Ed25519 is deterministic: signing the first vector's payload with key A
    // gives the published signature.
    let seed: [u8; 32] =
        hex_bytes("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
            .try_into()
            .unwrap();
    let key = SigningKey::from_bytes(&seed);
    let e = Envelope::sign(
        "application/vnd.in-toto+json",
        br#"{"_type":"https://in-toto.io/Statement/v1"}"#,
        &[("A", &key)],
    );
    assert_eq!(
        e.payload,
        "eyJfdHlwZSI6Imh0dHBzOi8vaW4tdG90by5pby9TdGF0ZW1lbnQvdjEifQ=="
    );
    assert_eq!(
        e.signatures[0].sig,
        "2WAfaHm5jluo0w+0rk8uVkluELJYWjSmU9x7EUzx+AyteDGJ4/nqyJXfmAUVFIAoQafWm7AxBZNw5M9ixNHiCA=="
    );
}

#[test]
fn keys_are_pkcs8_v1_and_spki_pem_written_0600_and_never_overwritten() {
    let dir = tempfile::tempdir().unwrap();
    let key = keys::generate().unwrap();
    let other = keys::generate().unwrap();
    assert_ne!(key.to_bytes(), other.to_bytes(), "fresh keys");
    let pem = keys::private_pem(&key).unwrap();
    assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{}", *pem);
    // PKCS#8 v1: SEQUENCE { INTEGER 0, ... } with no public key: 48 bytes.
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    let der = dsse::decode_base64(&body).unwrap();
    assert_eq!(der.len(), 48);
    assert_eq!(&der[..5], &[0x30, 0x2e, 0x02, 0x01, 0x00]);

    let path = dir.path().join("k.pem");
    keys::write_private_file(&path, &pem, false).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    assert_eq!(
        keys::read_private(&path).unwrap().to_bytes(),
        key.to_bytes()
    );
    let e = keys::write_private_file(&path, &keys::private_pem(&other).unwrap(), false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("already exists") && e.contains("--force"), "{e}");
    assert_eq!(
        keys::read_private(&path).unwrap().to_bytes(),
        key.to_bytes()
    );
    // --force replaces it, still 0600 even over a world-readable file.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        keys::write_private_file(&path, &keys::private_pem(&other).unwrap(), true).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            keys::read_private(&path).unwrap().to_bytes(),
            other.to_bytes()
        );
    }

    let public = dir.path().join("k.pub.pem");
    keys::write_public_file(
        &public,
        &keys::public_pem(&key.verifying_key()).unwrap(),
        false,
    )
    .unwrap();
    assert_eq!(keys::read_public(&public).unwrap(), key.verifying_key());
    // The wrong kind of key, or no key, says so.
    let e = keys::read_private(&public).unwrap_err().to_string();
    assert!(e.contains("holds a public key"), "{e}");
    let e = keys::read_public(&path).unwrap_err().to_string();
    assert!(e.contains("holds a private key"), "{e}");
    let junk = dir.path().join("junk.pem");
    std::fs::write(
        &junk,
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let e = keys::read_private(&junk).unwrap_err().to_string();
    assert!(
        e.contains("junk.pem") && e.contains("not an Ed25519 private key"),
        "{e}"
    );
    let e = keys::read_private(&dir.path().join("absent.pem"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("absent.pem") && e.contains("cannot read"), "{e}");
}

fn demo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../conformance/suites/demo-mlp")
}

/// A predicate from a real run of the demo suite on the CPU provider, in
/// process (so marked as such; tests that need an isolated run's verdict
/// say so by setting it).
fn demo_run(opts: RunOptions) -> (Suite, Predicate) {
    let suite = Suite::open(&demo_dir()).unwrap();
    let cpu = Provider::open_by_name("cpu").unwrap().device(0).unwrap();
    let report = runner::run(&suite, &cpu, &cpu, &opts).unwrap();
    let p = Predicate::of_run(&suite, &report, &report.tiers[0]).unwrap();
    (suite, p)
}

/// The facts of a worker that had every protection (what `run` records
/// on a host that grants them all: conformance/tests exercise the real one).
fn full_sandbox() -> Facts {
    Facts {
        namespaces: NAMESPACES.map(String::from).to_vec(),
        no_new_privs: true,
        seccomp: Some(SECCOMP_FILTER.into()),
        private_root: true,
        memory_limit_bytes: Some(1 << 30),
        memory_limit_by: vec!["cgroup v1".into(), "rlimit".into()],
        max_processes: Some(264),
        max_file_bytes: Some(1 << 30),
        core_dumps: false,
        runner_non_dumpable: true,
        tree_confirmed_dead: true,
        ..Facts::default()
    }
}

fn isolated(mut p: Predicate) -> Predicate {
    p.run.isolated = true;
    p.run.sandbox = Some(full_sandbox());
    p.assess();
    p
}

#[test]
fn a_worker_lacking_any_protection_certifies_nothing() {
    let (_, p) = demo_run(RunOptions::default());
    let p = isolated(p);
    assert_eq!(p.verdict, Verdict::Certified, "{:?}", p.reasons);
    type Weaken = fn(&mut Facts);
    let cases: [(Weaken, &str); 10] = [
        (
            |f| f.namespaces.retain(|n| n != "user"),
            "no user namespace",
        ),
        (|f| f.namespaces.retain(|n| n != "pid"), "no pid namespace"),
        (|f| f.no_new_privs = false, "no no_new_privs"),
        (|f| f.seccomp = None, "no seccomp filter"),
        (
            |f| f.seccomp = Some("vsdk-worker-v0".into()),
            "no seccomp filter",
        ),
        (|f| f.private_root = false, "saw the host's files"),
        (|f| f.memory_limit_by.clear(), "no memory limit"),
        (|f| f.core_dumps = true, "core dumps allowed"),
        (|f| f.runner_non_dumpable = false, "the runner was dumpable"),
        (|f| f.tree_confirmed_dead = false, "not confirmed gone"),
    ];
    for (weaken, reason) in cases {
        let mut q = p.clone();
        weaken(q.run.sandbox.as_mut().unwrap());
        q.assess();
        assert_eq!(q.verdict, Verdict::NotCertified, "{reason}");
        assert!(
            q.reasons
                .iter()
                .any(|r| r.contains("not fully sandboxed") && r.contains(reason)),
            "{reason}: {:?}",
            q.reasons
        );
    }
    let mut q = p.clone();
    q.run.sandbox = None;
    q.assess();
    assert!(
        q.reasons
            .iter()
            .any(|r| r.contains("sandbox is not recorded")),
        "{:?}",
        q.reasons
    );
}

fn signed(p: &Predicate, key: &SigningKey) -> Envelope {
    Statement::new(p.clone()).envelope(Some(key)).unwrap()
}

/// The payload with one byte changed, re-encoded (a signature-preserving
/// edit of the JSON that says something else).
fn tampered(e: &Envelope, from: &str, to: &str) -> Envelope {
    let payload = String::from_utf8(dsse::decode_base64(&e.payload).unwrap()).unwrap();
    assert!(payload.contains(from), "{from} not in the payload");
    let mut t = e.clone();
    use base64::Engine;
    t.payload = base64::engine::general_purpose::STANDARD.encode(payload.replacen(from, to, 1));
    t
}

#[test]
fn a_signed_report_verifies_and_every_tampering_fails_with_its_reason() {
    let (suite, p) = demo_run(RunOptions::default());
    let p = isolated(p);
    assert_eq!(p.verdict, Verdict::Certified, "{:?}", p.reasons);
    let key = keys::generate().unwrap();
    let pk = key.verifying_key();
    let env = signed(&p, &key);
    let cpu_lib = Provider::locate("cpu").unwrap();
    let files = SubjectFiles::hash(Some(&cpu_lib), Some(&suite.golden.path)).unwrap();
    let s = vips_sdk::certify::verify(&env, &[pk], &files).unwrap();
    assert_eq!(s.predicate, p);
    assert_eq!(s.subject[0].digest["sha256"], p.provider.library_sha256);

    // A modified byte of the payload: the verdict flipped.
    let bad = tampered(
        &env,
        "\"verdict\": \"CERTIFIED\"",
        "\"verdict\": \"CERTIFIEd\"",
    );
    let e = vips_sdk::certify::verify(&bad, &[pk], &files).unwrap_err();
    assert!(
        matches!(e, VerifyError::Envelope(DsseError::Modified(_))),
        "{e}"
    );
    assert!(e.to_string().contains("modified after signing"), "{e}");
    // The payload type changed.
    let mut bad = env.clone();
    bad.payload_type = "application/json".into();
    let e = vips_sdk::certify::verify(&bad, &[pk], &files)
        .unwrap_err()
        .to_string();
    assert!(e.contains("payload type `application/json`"), "{e}");
    // Another key.
    let other = keys::generate().unwrap().verifying_key();
    let e = vips_sdk::certify::verify(&env, &[other], &files)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("not signed by the given key") && e.contains(&keys::key_id(&pk)),
        "{e}"
    );
    // Unsigned.
    let unsigned = Statement::new(p.clone()).envelope(None).unwrap();
    let e = vips_sdk::certify::verify(&unsigned, &[pk], &files)
        .unwrap_err()
        .to_string();
    assert!(e.contains("unsigned"), "{e}");
    // A provider library that is not the certified one.
    let dir = tempfile::tempdir().unwrap();
    let lib = dir.path().join("libvsdk_provider_cpu.so");
    let mut bytes = std::fs::read(&cpu_lib).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&lib, &bytes).unwrap();
    let e = vips_sdk::certify::verify(&env, &[pk], &SubjectFiles::hash(Some(&lib), None).unwrap())
        .unwrap_err();
    assert!(
        matches!(
            e,
            VerifyError::Subject {
                what: "provider library",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains(&p.provider.library_sha256), "{e}");
    // A golden file that is not the certified one.
    let golden = dir.path().join("suite.golden");
    let mut bytes = std::fs::read(&suite.golden.path).unwrap();
    bytes[40] ^= 0x10;
    std::fs::write(&golden, &bytes).unwrap();
    let e = vips_sdk::certify::verify(
        &env,
        &[pk],
        &SubjectFiles::hash(None, Some(&golden)).unwrap(),
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            VerifyError::Subject {
                what: "golden vector set",
                ..
            }
        ),
        "{e}"
    );
    // A subject swapped in the statement (re-signed by the attacker's key
    // would be `WrongKey`; here the signature stays and the payload changes).
    let bad = tampered(&env, &p.provider.library_sha256, &"0".repeat(64));
    assert!(vips_sdk::certify::verify(&bad, &[pk], &files).is_err());
}

#[test]
fn reasons_name_what_keeps_a_run_from_being_certified() {
    // In process: the provider could have altered the runner.
    let (_, p) = demo_run(RunOptions::default());
    assert_eq!(p.verdict, Verdict::NotCertified);
    assert!(
        p.reasons.iter().any(|r| r.contains("--no-isolate")),
        "{:?}",
        p.reasons
    );

    // Filtered to a subset.
    let glob = globset::Glob::new("hidden*").unwrap().compile_matcher();
    let (_, p) = demo_run(RunOptions {
        stage_glob: Some(glob),
        ..RunOptions::default()
    });
    let p = isolated(p);
    assert_eq!(p.verdict, Verdict::NotCertified);
    assert!(p
        .reasons
        .iter()
        .any(|r| r.contains("filtered to the stages matching `hidden*`")));
    assert!(
        p.reasons.iter().any(|r| r.starts_with("never run: ")),
        "{:?}",
        p.reasons
    );

    // No differential round.
    let (_, p) = demo_run(RunOptions {
        differential: false,
        ..RunOptions::default()
    });
    let p = isolated(p);
    assert_eq!(p.verdict, Verdict::NotCertified);
    assert!(
        p.reasons.iter().any(|r| r.contains("differential round")),
        "{:?}",
        p.reasons
    );

    // A flaky stage, an expected failure: never a pass.
    let (_, p) = demo_run(RunOptions::default());
    let mut p = isolated(p);
    p.stages[1].status = Status::Flaky;
    p.stages[2].status = Status::ExpectedFail;
    p.assess();
    assert_eq!(p.verdict, Verdict::NotCertified);
    let flaky = format!(
        "flaky stages (failed, then passed on a retry: never a pass): {}",
        p.stages[1].stage
    );
    assert!(p.reasons.contains(&flaky), "{:?}", p.reasons);
    assert!(p
        .reasons
        .iter()
        .any(|r| r.contains("baseline") && r.contains(&p.stages[2].stage)));
}

#[test]
fn nonfinite_metrics_survive_the_json() {
    let (_, mut p) = demo_run(RunOptions::default());
    p.stages[0].outputs[0].max_e = f64::INFINITY;
    p.stages[0].outputs[0].margin = f64::NEG_INFINITY;
    p.stages[0].outputs[0].p50_e = f64::NAN;
    let text = serde_json::to_string(&Statement::new(p.clone())).unwrap();
    assert!(
        text.contains("\"max_e\":\"inf\"") && text.contains("\"margin\":\"-inf\""),
        "{text}"
    );
    let back: Statement = serde_json::from_str(&text).unwrap();
    let o = &back.predicate.stages[0].outputs[0];
    assert!(o.max_e == f64::INFINITY && o.margin == f64::NEG_INFINITY && o.p50_e.is_nan());
}

#[test]
fn outputs_record_the_statistical_criteria_and_older_records_still_read() {
    let (_, p) = demo_run(RunOptions::default());
    // demo-mlp's outputs come from a linear: rms and bias tested.
    let o = &p.stages[0].outputs[0];
    assert!(o.rms_t.is_some_and(|r| r > 0.0 && r < 2.5), "{o:?}");
    assert!(
        o.bias_ratio.is_some() && o.tolerance_factor.is_none(),
        "{o:?}"
    );
    let text = serde_json::to_string(o).unwrap();
    assert!(
        text.contains("\"rms_t\":") && !text.contains("tolerance_factor"),
        "{text}"
    );
    // A record written before the fields existed reads, without them.
    let mut old: serde_json::Value = serde_json::from_str(&text).unwrap();
    for f in ["rms_t", "bias_ratio"] {
        old.as_object_mut().unwrap().remove(f);
    }
    let back: vips_sdk::certify::OutputRecord = serde_json::from_value(old).unwrap();
    assert!(back.rms_t.is_none() && back.bias_ratio.is_none());
}

fn shard(k: usize, n: usize, seed: u64) -> Predicate {
    let (_, p) = demo_run(RunOptions {
        shard: Some((k, n)),
        seed,
        ..RunOptions::default()
    });
    isolated(p)
}

#[test]
fn shards_merge_into_a_certified_report_only_when_complete() {
    let seed = 0x5eed_0000_u64 + rand::random::<u16>() as u64;
    let parts: Vec<Predicate> = (1..=3).map(|k| shard(k, 3, seed)).collect();
    for p in &parts {
        assert_eq!(p.verdict, Verdict::NotCertified);
        assert!(
            p.reasons.iter().any(|r| r.contains("merge every shard")),
            "{:?}",
            p.reasons
        );
    }
    // Any order.
    let merged = merge::merge(vec![parts[2].clone(), parts[0].clone(), parts[1].clone()]).unwrap();
    assert_eq!(merged.verdict, Verdict::Certified, "{:?}", merged.reasons);
    let names: Vec<&str> = merged.stages.iter().map(|s| s.stage.as_str()).collect();
    assert_eq!(
        names,
        merged
            .must_pass
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
    );
    assert_eq!(merged.shards.len(), 3);
    assert_eq!(merged.shards[0].shard.to_string(), "1/3");
    // Each shard drew its own nonce.
    assert_ne!(merged.shards[0].nonce, merged.shards[1].nonce);

    // One shard short.
    let short = merge::merge(vec![parts[0].clone(), parts[2].clone()]).unwrap();
    assert_eq!(short.verdict, Verdict::NotCertified);
    assert_eq!(
        short.reasons[0],
        "incomplete merge: no report for shard(s) 2/3"
    );
    assert!(short.reasons.iter().any(|r| r.starts_with("never run: ")));

    // Not the same run: another seed, a duplicate, a whole run.
    let e = merge::merge(vec![parts[0].clone(), shard(2, 3, seed + 1)]).unwrap_err();
    assert!(
        e.to_string().contains("differs from report 1 in seed"),
        "{e}"
    );
    let e = merge::merge(vec![parts[0].clone(), parts[0].clone()]).unwrap_err();
    assert!(e.to_string().contains("shard 1/3 appears twice"), "{e}");
    let (_, whole) = demo_run(RunOptions::default());
    let e = merge::merge(vec![parts[0].clone(), whole]).unwrap_err();
    assert!(e.to_string().contains("not a shard"), "{e}");
    let mut other_lib = parts[1].clone();
    other_lib.provider.library_sha256 = "ab".repeat(32);
    let e = merge::merge(vec![parts[0].clone(), other_lib]).unwrap_err();
    assert!(e.to_string().contains("provider library SHA-256"), "{e}");
}

#[test]
fn a_model_is_certified_from_its_components_reports() {
    use sha2::Digest;
    let dir = tempfile::tempdir().unwrap();
    let demo_doc = demo_dir().join("suite.yaml");
    let sha = hex::encode(sha2::Sha256::digest(std::fs::read(&demo_doc).unwrap()));
    let model_path = dir.path().join("model.yaml");
    std::fs::write(
        &model_path,
        common::model_doc(&sha, &demo_doc.display().to_string()),
    )
    .unwrap();
    let model = vips_sdk::document::Document::open(&model_path).unwrap();
    let (_, demo) = demo_run(RunOptions::default());
    let demo = Statement::new(isolated(demo));
    // The model's own stage, certified: its predicate, as a run of it would
    // give, reusing the demo's provider.
    let mut own = demo.clone();
    own.predicate.component.id = "demo-model".into();
    own.predicate.component.version = "1.0.0".into();
    own.predicate.component.document_sha256 = hex::encode(model.sha256);

    let check = compose::check_model(&model, &[own.clone(), demo.clone()], Tier::Fp32, None);
    assert!(check.certified, "{check:?}");

    // The component's report missing.
    let check = compose::check_model(&model, &[own.clone()], Tier::Fp32, None);
    assert!(!check.certified);
    assert_eq!(check.components[1].0.component, "demo-mlp");
    assert_eq!(
        check.components[1].1,
        compose::Standing::Missing { hint: None }
    );
    // At another tier only.
    let check = compose::check_model(&model, &[own.clone(), demo.clone()], Tier::Bf16, None);
    assert!(
        matches!(&check.components[1].1, compose::Standing::Missing { hint: Some(h) } if h.contains("tier fp32"))
    );
    // Not certified, with its reasons.
    let mut failed = demo.clone();
    failed.predicate.stages[0].status = Status::Fail;
    failed.predicate.assess();
    let check = compose::check_model(&model, &[own.clone(), failed], Tier::Fp32, None);
    match &check.components[1].1 {
        compose::Standing::NotCertified { reasons, .. } => {
            assert!(reasons[0].starts_with("failing stages: "), "{reasons:?}")
        }
        other => panic!("{other:?}"),
    }
    // For another provider binary than the one asked about.
    let check = compose::check_model(&model, &[own, demo], Tier::Fp32, Some(&"cd".repeat(32)));
    assert!(!check.certified);
}

#[test]
fn a_verifying_key_is_what_the_envelope_names() {
    let key = keys::generate().unwrap();
    let (_, p) = demo_run(RunOptions::default());
    let env = signed(&p, &key);
    let vk: VerifyingKey = key.verifying_key();
    assert_eq!(
        env.signatures[0].keyid.as_deref(),
        Some(keys::key_id(&vk).as_str())
    );
}

#[test]
fn a_signed_statement_must_agree_with_itself() {
    let (_, p) = demo_run(RunOptions::default());
    let p = isolated(p);
    let key = keys::generate().unwrap();
    let pk = key.verifying_key();
    let files = SubjectFiles::default();
    // Subjects that are not the predicate's provider and golden set, signed.
    let mut s = Statement::new(p.clone());
    s.subject[0].digest.insert("sha256".into(), "ab".repeat(32));
    let e = vips_sdk::certify::verify(&s.envelope(Some(&key)).unwrap(), &[pk], &files)
        .unwrap_err()
        .to_string();
    assert!(e.contains("the subjects are not the predicate's"), "{e}");
    s = Statement::new(p.clone());
    s.subject.pop();
    let e = vips_sdk::certify::verify(&s.envelope(Some(&key)).unwrap(), &[pk], &files)
        .unwrap_err()
        .to_string();
    assert!(e.contains("the subjects are not the predicate's"), "{e}");
    // Another predicate type.
    s = Statement::new(p.clone());
    s.predicate_type = "https://slsa.dev/provenance/v1".into();
    let e = vips_sdk::certify::verify(&s.envelope(Some(&key)).unwrap(), &[pk], &files)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`predicateType` is `https://slsa.dev/provenance/v1`"),
        "{e}"
    );
    // A verdict its own records do not give (a buggy or older runner), signed.
    let mut wrong = p.clone();
    wrong.stages[0].status = Status::Crashed;
    let e = vips_sdk::certify::verify(&signed(&wrong, &key), &[pk], &files)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("the verdict `CERTIFIED` does not follow from the report's own records")
            && e.contains("stages CRASHED: fc1_gelu"),
        "{e}"
    );
}

#[test]
fn an_empty_must_pass_list_a_foreign_reference_or_a_given_nonce_certify_nothing() {
    let (_, p) = demo_run(RunOptions::default());
    let mut p = isolated(p);
    assert_eq!(p.verdict, Verdict::Certified, "{:?}", p.reasons);
    p.must_pass.clear();
    p.assess();
    assert_eq!(
        p.reasons,
        vec!["the must-pass list is empty: nothing was certified"]
    );

    let (_, p) = demo_run(RunOptions::default());
    let mut p = isolated(p);
    p.reference.name = "acme".into();
    p.assess();
    assert_eq!(
        p.reasons,
        vec!["the reference was provider `acme`, not the SDK's CPU reference provider `cpu`"]
    );

    let (_, p) = demo_run(RunOptions {
        seed: 7,
        nonce: 7,
        nonce_given: true,
        ..RunOptions::default()
    });
    let p = isolated(p);
    assert_eq!(p.verdict, Verdict::NotCertified);
    assert!(
        p.reasons[0].contains("nonce was given (--nonce)"),
        "{:?}",
        p.reasons
    );
    assert_eq!(p.run.nonce, 7);
}

#[test]
fn the_nonce_changes_the_differential_inputs_and_the_seed_alone_does_not_fix_them() {
    let outputs = |nonce| {
        let (_, p) = demo_run(RunOptions {
            seed: 11,
            nonce,
            ..RunOptions::default()
        });
        p.differential
            .stages
            .iter()
            .map(|s| s.outputs[0].sha256.clone())
            .collect::<Vec<_>>()
    };
    let a = rand::random::<u64>();
    assert_eq!(outputs(a), outputs(a), "seed and nonce repeat a run");
    assert_ne!(outputs(a), outputs(a ^ 1), "the nonce changes the inputs");
}

#[test]
fn a_shard_count_beyond_the_limit_is_refused_before_counting() {
    let mut p = shard(1, 3, 5);
    p.run.shard = Some(vips_sdk::certify::predicate::ShardId {
        k: 1,
        n: usize::MAX,
    });
    let mut q = p.clone();
    q.run.shard = Some(vips_sdk::certify::predicate::ShardId {
        k: 2,
        n: usize::MAX,
    });
    let e = merge::merge(vec![p, q]).unwrap_err().to_string();
    assert!(e.contains("not a shard") && e.contains("n <= 4096"), "{e}");
}

/// An envelope repeating a key is refused at any depth, naming the first
/// repeated key in document order (as a streaming reader meets it).
#[test]
fn a_key_twice_is_refused_at_any_depth_and_named() {
    for (json, path) in [
        (r#"{"a": 1, "a": 2}"#, "a"),
        (
            r#"{"x": [{"b": 1}, {"c": {"d": 1, "d": [2]}}]}"#,
            "x[1].c.d",
        ),
        (r#"[{"k": {}}, {"k": 1, "k": 1}]"#, "[1].k"),
        (r#"{"a": {"b": 1, "b": 2}, "a": 3}"#, "a.b"),
        (
            r#"{"payload": "", "payload": "", "payloadType": "t", "signatures": []}"#,
            "payload",
        ),
    ] {
        let e = vips_sdk::certify::parse_envelope(json.as_bytes()).unwrap_err();
        assert!(
            e.contains(&format!("the key `{path}` appears twice")),
            "{e}"
        );
    }
    // Keys repeated only across objects are no repetition (the document is
    // refused for its form, not for a key).
    let e = vips_sdk::certify::parse_envelope(br#"{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}"#)
        .unwrap_err();
    assert!(!e.contains("appears twice"), "{e}");
    assert!(e.contains("unknown field `a`"), "{e}");
    // A well-formed envelope followed by anything is not JSON.
    let e = vips_sdk::certify::parse_envelope(
        br#"{"payload": "", "payloadType": "t", "signatures": []} x"#,
    )
    .unwrap_err();
    assert!(e.contains("trailing characters"), "{e}");
}

#[test]
fn an_envelope_must_be_in_the_form_we_write() {
    let ok = r#"{"payload": "", "payloadType": "t", "signatures": [{"keyid": "k", "sig": "AA=="}, {"sig": ""}]}"#;
    assert!(vips_sdk::certify::parse_envelope(ok.as_bytes()).is_ok());
    for (bad, says) in [
        (
            r#"["", "t", []]"#,
            "`the document` is not as the runner writes it",
        ),
        (
            r#"{"payload": "", "payloadType": "t", "signatures": [{"keyid": null, "sig": ""}]}"#,
            "`signatures[0].keyid` is not as the runner writes it: null where it writes nothing",
        ),
        (
            r#"{"payload": "", "payloadType": "t", "signatures": [["k", "s"]]}"#,
            "`signatures[0]`",
        ),
        (
            r#"{"payload": "", "payloadType": "t"}"#,
            "missing field `signatures`",
        ),
    ] {
        let e = vips_sdk::certify::parse_envelope(bad.as_bytes()).unwrap_err();
        assert!(e.contains(says), "{bad}: {e}");
    }
}
