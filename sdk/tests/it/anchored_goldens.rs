//! Hash-anchored golden values (docs/golden-format.md, "Anchored tensors"):
//! under a budget, `generate` stores stage outputs as hashes; a suite
//! regenerates them on the reference, equal to the values stored in full,
//! and a hash the reference no longer reproduces is refused by name.

use sha2::{Digest, Sha256};
use std::path::Path;
use vips_sdk::document::Document;
use vips_sdk::golden::{canonical_sha256, GoldenFile, Source};
use vips_sdk::runner::{self, RunOptions, Status};
use vips_sdk::suite::Suite;
use vips_sdk::{Device, Provider};

/// The demo MLP with fresh seeds, and a golden budget when given.
fn document(seed: u64, budget: Option<u64>) -> Document {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/suites/demo-mlp/suite.yaml"
    ))
    .unwrap();
    let mut text = text
        .replace("seed: 100,", &format!("seed: {seed},"))
        .replace("seed: 101,", &format!("seed: {},", seed ^ 0x5555));
    if let Some(b) = budget {
        text.push_str(&format!("\ngolden:\n  budget_bytes: {b}\n"));
    }
    Document::parse(Path::new("anchored.yaml"), &text).unwrap()
}

fn cpu() -> Device {
    Provider::open_by_name("cpu").unwrap().device(0).unwrap()
}

fn suite(doc: &Document, bytes: Vec<u8>) -> Suite {
    Suite::new(
        doc.clone(),
        GoldenFile::from_bytes(Path::new("anchored.golden"), bytes).unwrap(),
    )
    .unwrap()
}

const OUTPUTS: [&str; 3] = ["h", "n", "p"];

fn anchored(file: &GoldenFile) -> Vec<&str> {
    OUTPUTS
        .into_iter()
        .filter(|n| matches!(file.tensor(n).unwrap().source, Source::Anchored(_)))
        .collect()
}

/// The file with its trailing checksum recomputed after an edit.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    let body = bytes.len() - 32;
    let sum = Sha256::digest(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum);
    bytes
}

#[test]
fn anchored_values_are_regenerated_equal_to_the_stored_ones_and_judge_alike() {
    let seed = rand::random::<u32>() as u64;
    eprintln!("seed {seed}");
    let reference = cpu();
    let full_doc = document(seed, None);
    let full = vips_sdk::generate::generate(&full_doc, &reference, &[]).unwrap();
    let full_suite = suite(&full_doc, full.clone());
    assert_eq!(full_suite.golden.format_version, 1, "no budget: version 1");
    // A budget that holds the head's output but not every output.
    let budget = full.len() as u64 - 300;
    let doc = document(seed, Some(budget));
    let bytes = vips_sdk::generate::generate(&doc, &reference, &[]).unwrap();
    assert!(bytes.len() as u64 <= budget, "{} > {budget}", bytes.len());
    let s = suite(&doc, bytes);
    assert_eq!(s.golden.format_version, 2);
    let anchors = anchored(&s.golden);
    assert!(!anchors.is_empty(), "something is anchored");
    // Stored in full from the last stage backwards.
    assert_eq!(
        anchors,
        OUTPUTS[..anchors.len()],
        "the first stages anchored"
    );
    assert!(!anchors.contains(&"p"), "the last stage's output fits");
    for name in OUTPUTS {
        let (a, b) = (s.tensor(name).unwrap(), full_suite.tensor(name).unwrap());
        assert_eq!(a.bytes, b.bytes, "{name}");
        assert_eq!(
            canonical_sha256(&a),
            s.golden.tensor(name).unwrap().sha256,
            "{name}"
        );
    }
    // The verdicts do not depend on how the goldens are stored.
    let opts = RunOptions::default();
    let r = runner::run(&s, &reference, &reference, &opts).unwrap();
    let f = runner::run(&full_suite, &reference, &reference, &opts).unwrap();
    for (a, b) in r.tiers[0].stages.iter().zip(&f.tiers[0].stages) {
        assert_eq!((&a.stage, a.status), (&b.stage, Status::Pass));
        assert_eq!(a.status, b.status, "{}", a.stage);
    }
}

#[test]
fn an_anchor_the_reference_does_not_reproduce_is_refused_by_name() {
    let seed = rand::random::<u32>() as u64;
    eprintln!("seed {seed}");
    let reference = cpu();
    let doc = document(seed, Some(1500));
    let bytes = vips_sdk::generate::generate(&doc, &reference, &[]).unwrap();
    let good = GoldenFile::from_bytes(Path::new("a.golden"), bytes.clone()).unwrap();
    assert!(anchored(&good).contains(&"h"), "{:?}", anchored(&good));
    // Change one bit of `h`'s recorded hash.
    let hash = good.tensor("h").unwrap().sha256;
    let at = bytes.windows(32).position(|w| w == hash).unwrap();
    let mut bad = bytes.clone();
    bad[at + 5] ^= 0x10;
    let s = suite(&doc, resealed(bad));
    let e = s.tensor("h").unwrap_err().to_string();
    assert!(e.contains("tensor `h`"), "{e}");
    assert!(e.contains("no longer reproduces"), "{e}");
    assert!(e.contains("all 32 sampled elements agree"), "{e}");
    // Downstream, the stage that reads `h` cannot be run either.
    let e = s.tensor("n").map(|_| ()).unwrap_err().to_string();
    assert!(e.contains("`h`") || e.contains("`n`"), "{e}");
    // The file claims version 1, which has no anchored tensors.
    let mut old = bytes;
    assert_eq!(old[8], 2, "the header's version varint");
    old[8] = 1;
    let e = GoldenFile::from_bytes(Path::new("a.golden"), resealed(old)).unwrap_err();
    assert!(
        e.to_string()
            .contains("an anchored tensor in a version 1 file"),
        "{e}"
    );
}

#[test]
fn a_budget_below_what_must_be_stored_is_an_error() {
    let doc = document(rand::random::<u32>() as u64, Some(200));
    let e = vips_sdk::generate::generate(&doc, &cpu(), &[]).unwrap_err();
    assert!(e.to_string().contains("budget of 200"), "{e}");
}

/// Regenerated anchored values are kept in the reference cache under their
/// recorded SHA-256 and read back (and dropped from memory when released),
/// and an entry whose bytes were altered is dropped, and regenerated by the
/// next suite that needs it.
#[test]
fn regenerated_anchored_values_are_cached_by_hash_and_a_tampered_one_is_redone() {
    let seed = rand::random::<u32>() as u64;
    eprintln!("seed {seed}");
    let reference = cpu();
    let full = vips_sdk::generate::generate(&document(seed, None), &reference, &[]).unwrap();
    let doc = document(seed, Some(full.len() as u64 - 300));
    let bytes = vips_sdk::generate::generate(&doc, &reference, &[]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = vips_sdk::reference_cache::ReferenceCache {
        dir: dir.path().join("reference"),
        max_bytes: vips_sdk::reference_cache::DEFAULT_MAX_BYTES,
    };
    let first = suite(&doc, bytes.clone());
    first.use_cache(cache.clone());
    let name = anchored(&first.golden)[0];
    let value = first.tensor(name).unwrap();
    let sha = first.golden.tensor(name).unwrap().sha256;
    let entry = dir
        .path()
        .join("reference")
        .join(format!("{}.anchored", hex::encode(sha)));
    assert_eq!(std::fs::read(&entry).unwrap(), *value.bytes, "written");
    let spec = value.spec.clone();
    let (hit, _) = cache.get_anchored(&sha, &spec);
    assert_eq!(hit.unwrap().bytes, value.bytes, "read back");
    // Held in memory until released; released, it is looked up again (here
    // regenerated and rewritten, its entry having been removed).
    std::fs::remove_file(&entry).unwrap();
    assert_eq!(first.tensor(name).unwrap().bytes, value.bytes);
    assert!(!entry.exists(), "held in memory");
    let released = name.to_string();
    first.release([&released]);
    assert_eq!(first.tensor(name).unwrap().bytes, value.bytes);
    assert!(entry.exists(), "released: regenerated and written again");
    // Tampered: one value changed, the name (its hash) kept.
    let mut altered = value.bytes.to_vec();
    altered[0] ^= 0x40;
    std::fs::write(&entry, &altered).unwrap();
    let (miss, lookup) = cache.get_anchored(&sha, &spec);
    assert!(miss.is_none());
    assert_eq!(lookup, vips_sdk::reference_cache::Lookup::Damaged);
    assert!(!entry.exists(), "a damaged entry is dropped");
    std::fs::write(&entry, &altered).unwrap();
    let second = suite(&doc, bytes);
    second.use_cache(cache);
    assert_eq!(
        second.tensor(name).unwrap().bytes,
        value.bytes,
        "regenerated"
    );
    assert_eq!(std::fs::read(&entry).unwrap(), *value.bytes, "rewritten");
}
