//! The kernel contract through the command line, on real isolated runs of
//! the DINOv2 quick suite: drivers that pass every stage of the suite but
//! break the calling contract (strides, stride-0 broadcasts, float-to-integer
//! casts, softmax without its maximum, one-pass variance, a scratch buffer
//! shared by "thread-safe" calls) are NOT CERTIFIED with the contract case
//! that caught them named; a SERIAL driver that fails any overlapping call
//! passes (the host never overlaps its calls); the CPU provider keeps the
//! whole contract, and a run without it certifies nothing. The mutants are
//! testing/mutant-provider over the CPU provider.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{repo, Out};

fn test_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent().expect("in a directory").to_path_buf()
}

/// `run dinov2-vits14-quick` with a report and a results file, on
/// `provider`, with `env`; returns the exit, the results and the report's
/// predicate.
fn run(provider: &Path, env: &[(&str, &str)], extra: &[&str]) -> (Out, Value, Value) {
    let dir = tempfile::tempdir().unwrap();
    let (results, report) = (dir.path().join("results"), dir.path().join("report.json"));
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vips-conformance"));
    cmd.args(["run", "dinov2-vits14-quick", "--output"])
        .arg(&results)
        .arg("--report")
        .arg(&report)
        .args(extra)
        .arg("--provider")
        .arg(provider)
        .env("VSDK_PROVIDER_PATH", test_dir())
        .env(
            "VSDK_MUTANT_TARGET",
            test_dir().join(vips_sdk::library_file_name("cpu")),
        )
        .env_remove("VIPS_SIGN_KEY")
        .current_dir(repo());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = Out::of(cmd.output().expect("run vips-conformance"));
    let read = |p: &Path| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(p)
                .unwrap_or_else(|e| panic!("{}: {e}\n{}", p.display(), out.text())),
        )
        .unwrap()
    };
    let results = read(&results);
    let envelope = read(&report);
    let payload =
        vips_sdk::certify::dsse::decode_base64(envelope["payload"].as_str().unwrap()).unwrap();
    let statement: Value = serde_json::from_slice(&payload).unwrap();
    (out, results, statement["predicate"].clone())
}

fn mutant(mutation: &str) -> (Out, Value, Value) {
    run(
        &test_dir().join("libvsdk_mutant_provider.so"),
        &[("VSDK_MUTATION", mutation)],
        &[],
    )
}

/// The records of one round of the first tier.
fn rows<'a>(results: &'a Value, round: &str) -> &'a Vec<Value> {
    results["tiers"][0][round].as_array().unwrap()
}

fn failing(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .filter(|r| r["status"] != "pass")
        .map(|r| r["stage"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn drivers_that_break_the_calling_contract_are_not_certified_and_the_case_is_named() {
    let cases = [
        ("ignore_strides", "vsdk.linear@1 float32 transposed-weight"),
        ("ignore_broadcast", "vsdk.layer_norm@1 float32 broadcast"),
        ("cast_truncate", "vsdk.cast@1 float32 to-uint8"),
        ("softmax_no_max", "vsdk.sdpa@1 float32 large-logits"),
        (
            "layer_norm_one_pass",
            "vsdk.layer_norm@1 float32 large-mean",
        ),
        ("shared_scratch", "concurrency"),
    ];
    // Three runs at a time: much of a run waits (worker start-ups, pipes).
    let mut runs = Vec::new();
    for chunk in cases.chunks(3) {
        runs.extend(std::thread::scope(|s| {
            let started: Vec<_> = chunk
                .iter()
                .map(|(m, _)| s.spawn(move || mutant(m)))
                .collect();
            started
                .into_iter()
                .map(|h| h.join().expect("a run"))
                .collect::<Vec<_>>()
        }));
    }
    for ((mutation, case), (out, results, predicate)) in cases.into_iter().zip(runs) {
        assert_eq!(out.code, 1, "{mutation}: {}", out.text());
        // The suite's own calls never show it: only the contract does.
        assert!(
            failing(rows(&results, "stages")).is_empty()
                && failing(rows(&results, "differential")).is_empty(),
            "{mutation}: the suite itself caught it: {:?}",
            failing(rows(&results, "stages"))
        );
        let contract = rows(&results, "contract");
        assert!(
            failing(contract).contains(&case.to_string()),
            "{mutation}: {case} passed; failing: {:?}",
            failing(contract)
        );
        let caught = contract.iter().find(|r| r["stage"] == case).unwrap();
        assert!(
            caught["reason"].as_str().is_some_and(|r| !r.is_empty()),
            "{mutation}: no reason: {caught}"
        );
        assert_eq!(predicate["verdict"], "NOT CERTIFIED", "{mutation}");
        let reasons: Vec<&str> = predicate["reasons"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert!(
            reasons
                .iter()
                .any(|r| r.starts_with("kernel contract") && r.contains(case)),
            "{mutation}: {reasons:?}"
        );
        // The table says it too.
        assert!(out.stdout.contains(case), "{mutation}: {}", out.stdout);
        if mutation == "shared_scratch" {
            let note = concurrency_note(contract);
            assert!(
                note.contains("at once (the provider declares VSDK_CONCURRENCY_THREAD_SAFE)"),
                "{note}"
            );
        }
    }
}

/// The concurrency row's note: it is the contract's last row.
fn concurrency_note(contract: &[Value]) -> &str {
    let row = contract.last().unwrap();
    assert_eq!(row["stage"], "concurrency");
    row["notes"][0].as_str().unwrap()
}

#[test]
fn a_serial_driver_is_never_called_concurrently() {
    // It fails any call that overlaps another: the host serialises it,
    // though four threads drive the concurrency pass.
    let (out, results, predicate) = mutant("serial_overlap");
    assert_eq!(out.code, 0, "{}", out.text());
    let contract = rows(&results, "contract");
    assert!(failing(contract).is_empty(), "{:?}", failing(contract));
    let note = concurrency_note(contract);
    assert!(note.contains("serialised by the host"), "{note}");
    assert_eq!(
        predicate["contract"]["cases"].as_array().unwrap().len(),
        contract.len()
    );
}

#[test]
fn the_cpu_provider_keeps_the_contract_and_a_run_without_it_certifies_nothing() {
    let cpu = test_dir().join(vips_sdk::library_file_name("cpu"));
    let (out, results, predicate) = run(&cpu, &[], &[]);
    assert_eq!(out.code, 0, "{}", out.text());
    let contract = rows(&results, "contract");
    assert!(failing(contract).is_empty(), "{:?}", failing(contract));
    // Every kernel of the document has cases, views and extreme values
    // among them, every input of a view ran as one.
    let kernels = predicate["contract"]["kernels"].as_array().unwrap();
    assert!(kernels.len() >= 15, "{kernels:?}");
    for k in kernels {
        let k = k.as_str().unwrap();
        assert!(
            contract
                .iter()
                .any(|r| r["stage"].as_str().unwrap().starts_with(&format!("{k} "))),
            "no case for {k}"
        );
    }
    for variant in [
        "transposed",
        "padded",
        "broadcast",
        "large-logits",
        "large-mean",
        "specials",
        "to-int32",
    ] {
        assert!(
            contract
                .iter()
                .any(|r| r["stage"].as_str().unwrap().ends_with(variant)),
            "no {variant} case"
        );
    }
    assert!(out.stdout.contains("kernel contract"), "{}", out.stdout);

    let (out, results, predicate) = run(&cpu, &[], &["--no-contract"]);
    assert_eq!(out.code, 0, "{}", out.text());
    assert!(rows(&results, "contract").is_empty());
    assert_eq!(predicate["verdict"], "NOT CERTIFIED");
    assert!(
        predicate["reasons"].as_array().unwrap().iter().any(|r| r
            .as_str()
            .unwrap()
            .starts_with("the kernel contract did not run")),
        "{}",
        predicate["reasons"]
    );
}
