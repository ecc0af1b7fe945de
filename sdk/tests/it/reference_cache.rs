//! The reference cache (docs/runner.md, "The reference cache") never changes
//! a verdict: the same run without it, cold and warm agrees field by field;
//! a damaged entry is noticed, recomputed and rewritten; the directory stays
//! within its bound.

use serde_json::Value;
use std::path::Path;
use vips_sdk::reference_cache::{ReferenceCache, DEFAULT_MAX_BYTES};
use vips_sdk::runner::{self, RunOptions, RunReport};
use vips_sdk::suite::Suite;
use vips_sdk::Provider;

fn demo() -> Suite {
    Suite::open(Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/suites/demo-mlp"
    )))
    .unwrap()
}

/// Every stage result of the run (both rounds) without what measures time
/// or says where the reference came from.
fn verdicts(r: &RunReport) -> Vec<Value> {
    r.tiers
        .iter()
        .flat_map(|t| t.stages.iter().chain(&t.differential))
        .map(|s| {
            let mut v = serde_json::to_value(s).unwrap();
            let o = v.as_object_mut().unwrap();
            for k in [
                "seconds",
                "timings",
                "timeout_seconds",
                "reference_cached",
                "notes",
            ] {
                o.remove(k);
            }
            v
        })
        .collect()
}

fn entries(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "ref"));
    v
}

#[test]
fn the_cache_never_changes_a_verdict_and_a_damaged_entry_is_recomputed() {
    let suite = demo();
    let cpu = Provider::open_by_name("cpu").unwrap().device(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let cache = ReferenceCache {
        dir: dir.path().join("reference"),
        max_bytes: DEFAULT_MAX_BYTES,
    };
    let (seed, nonce) = (rand::random::<u64>(), rand::random::<u64>());
    eprintln!("seed {seed} nonce {nonce}");
    let opts = |cache: Option<ReferenceCache>| RunOptions {
        seed,
        nonce,
        contract: false,
        reference_cache: cache,
        ..RunOptions::default()
    };
    let run = |o: &RunOptions| runner::run(&suite, &cpu, &cpu, o).unwrap();
    let without = run(&opts(None));
    let cold = run(&opts(Some(cache.clone())));
    let stages = suite.document.stages.len();
    assert_eq!(entries(&cache.dir).len(), stages, "one entry per stage");
    let warm = run(&opts(Some(cache.clone())));
    assert!(cold.tiers[0].stages.iter().all(|s| !s.reference_cached));
    assert!(warm.tiers[0].stages.iter().all(|s| s.reference_cached));
    // The differential round's inputs are fresh: never cached.
    assert!(warm.tiers[0]
        .differential
        .iter()
        .all(|s| !s.reference_cached));
    assert_eq!(verdicts(&without), verdicts(&cold));
    assert_eq!(verdicts(&without), verdicts(&warm));
    assert!(verdicts(&warm).iter().all(|v| v["status"] == "pass"));

    // One flipped byte in every entry: each is noticed and recomputed.
    for path in entries(&cache.dir) {
        let mut bytes = std::fs::read(&path).unwrap();
        let i = bytes.len() / 2;
        bytes[i] ^= 0x01;
        std::fs::write(&path, bytes).unwrap();
    }
    let damaged = run(&opts(Some(cache.clone())));
    for s in &damaged.tiers[0].stages {
        assert!(!s.reference_cached, "{}", s.stage);
        assert!(
            s.notes.iter().any(|n| n.contains("did not check out")),
            "{}: {:?}",
            s.stage,
            s.notes
        );
    }
    assert_eq!(verdicts(&without), verdicts(&damaged));
    let again = run(&opts(Some(cache.clone())));
    assert!(again.tiers[0].stages.iter().all(|s| s.reference_cached));

    // Bounded: a cache that holds one entry keeps no more.
    let largest = entries(&cache.dir)
        .iter()
        .map(|p| p.metadata().unwrap().len())
        .max()
        .unwrap();
    let small = ReferenceCache {
        dir: dir.path().join("small"),
        max_bytes: largest + 1,
    };
    run(&opts(Some(small.clone())));
    let total: u64 = entries(&small.dir)
        .iter()
        .map(|p| p.metadata().unwrap().len())
        .sum();
    assert!(total <= small.max_bytes, "{total} > {}", small.max_bytes);
}

/// A cache for this build lives under the program's name and its build; the
/// program's directories of other builds are removed (an error-model change
/// relinks the program: its entries are never read again), another
/// program's are left alone, and this build's own entries stay.
#[test]
fn a_cache_for_this_build_drops_the_entries_of_earlier_builds() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let program = dir.path().join(exe.file_name().unwrap());
    let stale = program.join("0-0");
    let other = dir.path().join("another-program").join("0-0");
    for d in [&stale, &other] {
        std::fs::create_dir_all(d).unwrap();
        std::fs::write(d.join("x.ref"), b"stale").unwrap();
    }
    let cache = ReferenceCache::for_this_build(dir.path(), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(cache.dir.parent(), Some(program.as_path()));
    assert_ne!(cache.dir, stale);
    assert!(!stale.exists(), "an earlier build's entries are removed");
    assert!(other.join("x.ref").exists(), "another program's stay");
    std::fs::create_dir_all(&cache.dir).unwrap();
    std::fs::write(cache.dir.join("y.ref"), b"kept").unwrap();
    let again = ReferenceCache::for_this_build(dir.path(), DEFAULT_MAX_BYTES).unwrap();
    assert_eq!(again.dir, cache.dir);
    assert!(
        again.dir.join("y.ref").exists(),
        "this build's entries stay"
    );
}
