//! Weights by reference from the command line: a document pinning a
//! safetensors file is generated without `--weights`, `inspect` shows the
//! pinned file, the golden file holds no weights, and `run` passes.

use crate::common;

use common::{repo, Out};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

fn cli(args: &[&str]) -> Out {
    let exe = std::env::current_exe().expect("test program path");
    Out::of(
        Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
            .args(args)
            // The CPU provider, a dev-dependency, is built beside this test.
            .env("VSDK_PROVIDER_PATH", exe.parent().expect("in a directory"))
            .env_remove("VIPS_SIGN_KEY")
            .current_dir(repo())
            .output()
            .expect("run vips-conformance"),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 temp path")
}

#[test]
fn a_suite_with_pinned_weights_generates_inspects_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("pinned");
    std::fs::create_dir(&suite).unwrap();
    // The demo's seeded weights (random values), exported as a checkpoint.
    let weights = suite.join("weights.safetensors");
    let demo = repo().join("conformance/suites/demo-mlp");
    let r = cli(&["export", s(&demo), "--out", s(&weights)]);
    assert_eq!(r.code, 0, "{}", r.text());
    let sha = hex::encode(Sha256::digest(std::fs::read(&weights).unwrap()));
    // The demo document with its weights read from the checkpoint.
    let mut text = std::fs::read_to_string(demo.join("suite.yaml")).unwrap();
    for (name, seed) in [
        ("w1", 101),
        ("b1", 102),
        ("gamma", 103),
        ("beta", 104),
        ("w2", 105),
        ("b2", 106),
    ] {
        let start = text
            .find(&format!("{{ seeded: {{ seed: {seed},"))
            .unwrap_or_else(|| panic!("{name}'s recipe"));
        let end = start + text[start..].find("} }").unwrap() + 3;
        text.replace_range(start..end, &format!("{{ weights: {name} }}"));
    }
    text = text.replace(
        "\ntensors:\n",
        &format!("\nweights:\n  file: weights.safetensors\n  sha256: \"{sha}\"\n\ntensors:\n"),
    );
    std::fs::write(suite.join("suite.yaml"), &text).unwrap();
    let r = cli(&["generate", s(&suite)]);
    assert_eq!(r.code, 0, "{}", r.text());
    let golden = std::fs::read(suite.join("suite.golden")).unwrap();
    let checkpoint = std::fs::read(&weights).unwrap();
    // Smaller than the six weights' float32 values alone: they are not in it.
    let weight_bytes = (32 * 16 + 3 * 32 + 10 * 32 + 10) * 4;
    assert!(
        golden.len() < weight_bytes,
        "golden {} bytes, weights {weight_bytes}",
        golden.len(),
    );
    let r = cli(&["inspect", s(&suite.join("suite.yaml"))]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert!(
        r.stdout.contains(&format!(
            "weights: {} (pinned, sha256 {sha})",
            weights.display()
        )),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("weights `w1` from weights.safetensors"),
        "{}",
        r.stdout
    );
    let r = cli(&["inspect", s(&suite.join("suite.golden"))]);
    assert_eq!(r.code, 0, "{}", r.text());
    assert_eq!(
        r.stdout
            .matches("pinned (read from the weights file")
            .count(),
        6,
        "{}",
        r.stdout
    );
    let r = cli(&["run", s(&suite)]);
    assert_eq!(r.code, 0, "{}", r.text());
    // A weights file changed since: `run` refuses it, naming both hashes.
    let mut changed = checkpoint.clone();
    let last = changed.len() - 1;
    changed[last] ^= 0x01;
    std::fs::write(&weights, &changed).unwrap();
    let now = hex::encode(Sha256::digest(&changed));
    let r = cli(&["run", s(&suite)]);
    assert_eq!(r.code, 2, "{}", r.text());
    assert!(
        r.text().contains(&sha) && r.text().contains(&now),
        "{}",
        r.text()
    );
}
