//! The body of every fuzz target, in one place: the libFuzzer binaries
//! (`fuzz/fuzz_targets/*.rs`) call these, and `sdk/tests/it/fuzz_corpus.rs`
//! replays the committed corpus through the same functions in the normal
//! test suite.
//!
//! Each function must return, without panicking, for every input, in bounded
//! time and memory: refusing the input with an error is the expected outcome
//! for most of them. Each returns whether the decoder accepted the input as
//! given, or the decoder's reason for refusing it (the replay checks that
//! the hand-made seeds still decode).

#![allow(dead_code)] // each fuzz binary uses one target

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use vips_sdk::capture;
use vips_sdk::document::Document;
use vips_sdk::golden::GoldenFile;
use vips_sdk::isolation::protocol::{self, Carries, Reply, Request};

/// Tensors larger than this are only decoded, not generated: a valid file
/// may declare gigabytes of seeded values, which is not a bug.
const MAX_GENERATED_BYTES: usize = 1 << 20;

/// Accepted, or why not.
pub type Outcome = Result<(), String>;

/// A target's body.
pub type Target = fn(&[u8]) -> Outcome;

/// The targets by name, as the corpus directories are named.
pub const TARGETS: &[(&str, Target)] = &[
    ("golden", golden),
    ("document", document),
    ("capture", capture),
    ("protocol", protocol),
    ("report", report),
    ("results", results),
];

/// A JSON results file read back (`runner::results::read_json`: decoded,
/// every error map validated), as `vips-conformance report` reads one.
pub fn results(data: &[u8]) -> Outcome {
    vips_sdk::runner::results::read_json(data).map(|_| ())
}

/// A golden vector file (`GoldenFile::from_bytes`), then every tensor of a
/// bounded size materialised (raw ones are checked by the decoder itself;
/// seeded ones are regenerated and hashed).
///
/// The file checksum stops nearly every mutation at the door, so the input
/// is decoded a second time with its last 32 bytes replaced by the SHA-256
/// of the rest: mutations then reach the header and the entries.
pub fn golden(data: &[u8]) -> Outcome {
    let accepted = golden_decode(data.to_vec());
    if let Some(body_len) = data.len().checked_sub(32) {
        let body = &data[..body_len];
        let mut fixed = body.to_vec();
        fixed.extend_from_slice(&Sha256::digest(body));
        if fixed != data {
            let _ = golden_decode(fixed);
        }
    }
    accepted
}

fn golden_decode(bytes: Vec<u8>) -> Outcome {
    let file =
        GoldenFile::from_bytes(Path::new("fuzz.golden"), bytes).map_err(|e| e.to_string())?;
    let mut outcome = Ok(());
    for t in &file.tensors {
        assert!(file.tensor(&t.name).is_some());
        let _ = file.raw_bytes(t);
        // An anchored value is the reference's to regenerate, from a
        // document; a pinned one is read from the document's weights file.
        if matches!(
            t.source,
            vips_sdk::golden::Source::Anchored(_) | vips_sdk::golden::Source::Pinned
        ) {
            continue;
        }
        if t.spec.size_bytes() <= MAX_GENERATED_BYTES {
            if let Err(e) = file.materialize(t) {
                outcome = Err(e.to_string());
            }
        }
    }
    outcome
}

/// A VIPS document (`Document::parse`) from the input as text (invalid
/// UTF-8 replaced, so every input reaches the YAML parser), then the values
/// of its small seeded and literal tensors and every node's attributes.
/// `check_uses` is not called: it reads the files the document names.
pub fn document(data: &[u8]) -> Outcome {
    let text = String::from_utf8_lossy(data);
    let doc = Document::parse(Path::new("fuzz.yaml"), &text).map_err(|e| e.to_string())?;
    for t in &doc.tensors {
        let small = t.shape.as_ref().is_some_and(|s| {
            s.iter()
                .try_fold(t.dtype.size_bytes(), |a, &d| a.checked_mul(d))
                .is_some_and(|b| b <= MAX_GENERATED_BYTES)
        });
        if small {
            let _ = t.intrinsic();
        }
        assert!(doc.tensor(&t.name).is_some());
    }
    for s in &doc.stages {
        assert!(doc.stage(&s.name).is_some());
        for n in &s.graph {
            let _ = n.attrs_at(Some(vips_sdk::DType::F16));
        }
        for v in &s.verify {
            let _ = v.tensor();
        }
    }
    Ok(())
}

/// A capture file (`capture::read`, which is path-based): the first byte
/// picks the format (`% 3`: .npy, .npz, .safetensors), the rest is written
/// to a scratch file with that extension.
pub fn capture(data: &[u8]) -> Outcome {
    let (&kind, rest) = data.split_first().ok_or("no format byte")?;
    let ext = ["npy", "npz", "safetensors"][usize::from(kind % 3)];
    let dir = scratch_dir();
    let path = dir.join(format!("input.{ext}"));
    std::fs::write(&path, rest).expect("write the scratch capture file");
    let result = capture::read(&path);
    let _ = std::fs::remove_dir_all(&dir);
    result.map(drop).map_err(|e| e.to_string())
}

/// A directory of its own for each call (replays run on several threads).
fn scratch_dir() -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "vsdk-fuzz-capture-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).expect("create the scratch directory");
    dir
}

/// The worker protocol: the input as a stream of requests, then as a stream
/// of replies (`protocol::read`). Every message that decodes is written
/// again (`protocol::write`) and read back: the second reading must succeed
/// and encode to the same bytes, i.e. equal the first bit for bit (compared
/// as encodings, since headers may hold NaN attributes).
pub fn protocol(data: &[u8]) -> Outcome {
    let requests = stream::<Request>(data);
    let replies = stream::<Reply>(data);
    requests
        .or(replies)
        .map_err(|e| format!("neither a request nor a reply: {e}"))
}

/// Reads messages until the end of the input or the first error: accepted
/// when every byte was read as messages.
fn stream<T>(data: &[u8]) -> Outcome
where
    T: serde::Serialize + serde::de::DeserializeOwned + Carries + std::fmt::Debug,
{
    let mut input = data;
    while !input.is_empty() {
        let first = protocol::read::<T>(&mut input).map_err(|e| e.to_string())?;
        let wire = encode(&first);
        let second = protocol::read::<T>(&mut &wire[..])
            .unwrap_or_else(|e| panic!("{:?} does not decode after encoding: {e}", first.header));
        assert_eq!(
            encode(&second),
            wire,
            "{:?} changes in a round trip",
            first.header
        );
        let specs = |m: &protocol::Message<T>| {
            m.tensors
                .iter()
                .map(|t| (t.spec.clone(), t.bytes.clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(specs(&first), specs(&second));
    }
    Ok(())
}

fn encode<T: serde::Serialize>(m: &protocol::Message<T>) -> Vec<u8> {
    let tensors: Vec<&[u8]> = m.tensors.iter().map(|t| &t.bytes[..]).collect();
    let mut wire = Vec::new();
    protocol::write(&mut wire, &m.header, &tensors).expect("a decoded header encodes");
    wire
}

/// A certification report: the DSSE envelope, its signatures checked (with
/// no trusted key, so every signature is decoded and refused), the
/// statement inside read and checked, its verdict assessed again, merged
/// with itself, and re-encoded: the re-encoding must read back to the same
/// bytes.
pub fn report(data: &[u8]) -> Outcome {
    use vips_sdk::certify::{self, merge, predicate::ShardId};
    let envelope = certify::parse_envelope(data)?;
    let _ = certify::verify(&envelope, &[], &certify::SubjectFiles::default());
    let statement = certify::read_statement(&envelope).map_err(|e| e.to_string())?;
    let mut predicate = statement.predicate.clone();
    predicate.assess();
    // As shard 1 of 2 beside a copy as shard 2: the merge reaches its checks,
    // coverage and verdict.
    let mut one = predicate.clone();
    let mut two = predicate;
    one.run.shard = Some(ShardId { k: 1, n: 2 });
    two.run.shard = Some(ShardId { k: 2, n: 2 });
    let _ = merge::merge(vec![one.clone(), two]);
    let _ = merge::merge(vec![one, statement.predicate.clone()]);
    let again = statement.envelope(None)?;
    let reread = certify::read_statement(&again)
        .unwrap_or_else(|e| panic!("a statement that does not read back after encoding: {e}"));
    assert_eq!(
        reread.envelope(None)?,
        again,
        "a statement that changes in a round trip"
    );
    Ok(())
}
