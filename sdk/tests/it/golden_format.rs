//! Golden vector files: round trip, every kind of damage, and cross-language
//! regeneration of seeded tensors from the documentation.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use vips_sdk::golden::*;
use vips_sdk::{DType, HostTensor};

fn fresh_seed() -> u64 {
    let seed = rand::random();
    eprintln!("seed {seed}");
    seed
}

fn sample_file(seed: u64) -> (Vec<u8>, HostTensor) {
    let x: Vec<f32> = (0..24)
        .map(|i| (splitmix64(seed, i) >> 40) as f32 / 1000.0 - 8.0)
        .collect();
    let x = HostTensor::from_vec(&[2, 3, 4], x).unwrap();
    let mut w = GoldenWriter::new("demo", "1.0.0", [7; 32]);
    w.raw("x", &x);
    let normal = Seeded {
        seed,
        distribution: Distribution::Normal {
            mean: 0.0,
            std: 0.02,
        },
    };
    w.seeded("w", DType::F32, &[16, 8], normal).unwrap();
    let img = HostTensor::from_vec(&[2, 2, 3], (0..12u8).map(|v| v * 20).collect()).unwrap();
    w.raw("img", &img);
    (w.to_bytes().unwrap(), x)
}

fn decode(bytes: Vec<u8>) -> Result<GoldenFile, GoldenError> {
    GoldenFile::from_bytes(Path::new("suite.golden"), bytes)
}

/// Rewrites the trailing checksum so a deliberate change passes it.
fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    use sha2::Digest;
    let end = bytes.len() - 32;
    let sum = sha2::Sha256::digest(&bytes[..end]);
    bytes[end..].copy_from_slice(&sum);
    bytes
}

#[test]
fn round_trip_borrows_raw_tensors_and_checks_hashes() {
    let seed = fresh_seed();
    let (bytes, x) = sample_file(seed);
    let f = decode(bytes.clone()).unwrap();
    assert_eq!(
        (f.component.as_str(), f.component_version.as_str()),
        ("demo", "1.0.0")
    );
    assert_eq!(f.tensors.len(), 3);
    let tx = f.tensor("x").unwrap();
    assert_eq!(f.raw_bytes(tx).unwrap(), &x.bytes[..]);
    let raw_ptr = f.raw_bytes(tx).unwrap().as_ptr() as usize;
    assert!(
        matches!(tx.source, Source::Raw { offset, .. } if offset > 8),
        "borrowed from the file"
    );
    assert!(raw_ptr != x.bytes.as_ptr() as usize);
    let w = f.materialize(f.tensor("w").unwrap()).unwrap();
    assert_eq!(w.spec.shape, vec![16, 8]);
    let img = f.materialize(f.tensor("img").unwrap()).unwrap();
    assert_eq!(img.spec.dtype, DType::U8);
    // The seeded 16x8 tensor costs a few bytes, not its 512 raw ones.
    assert!(bytes.len() < 512, "{} bytes", bytes.len());
}

#[test]
fn truncation_and_corruption_fail_the_checksum() {
    let (bytes, _) = sample_file(fresh_seed());
    let e = decode(bytes[..bytes.len() - 5].to_vec())
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("suite.golden: checksum mismatch"), "{e}");
    let mut flipped = bytes.clone();
    flipped[40] ^= 0x10;
    let e = decode(flipped).unwrap_err().to_string();
    assert!(e.starts_with("suite.golden: checksum mismatch"), "{e}");
    let e = decode(b"PK\x03\x04 not ours at all, but long enough to have a trailer".to_vec())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("suite.golden: not a VIPS golden vector file"),
        "{e}"
    );
}

#[test]
fn a_tensor_whose_hash_does_not_match_is_named() {
    let (bytes, x) = sample_file(fresh_seed());
    // Change one value of `x` inside the file, keep the checksum valid.
    let at = bytes
        .windows(x.bytes.len())
        .position(|w| w == &x.bytes[..])
        .unwrap();
    let mut bad = bytes.clone();
    bad[at + 5] ^= 1;
    let e = decode(reseal(bad)).unwrap_err().to_string();
    assert!(
        e.starts_with("suite.golden: tensor `x`: SHA-256 mismatch: the file records "),
        "{e}"
    );
}

#[test]
fn a_declared_length_beyond_the_file_is_an_error_not_an_allocation() {
    // A raw tensor whose byte string claims 2^60 bytes.
    let mut bytes = b"VSDKGOLD".to_vec();
    bytes.extend([1, 4, b'd', b'e', b'm', b'o', 1, b'1']); // version 1, "demo", "1"
    bytes.extend([0; 32]); // document hash
    bytes.push(1); // one tensor
    bytes.extend([1, b'x', 2, 1, 8]); // name "x", float32, shape [8]
    bytes.extend([0; 32]); // its hash
    bytes.push(0); // Raw
    let mut len = 1u64 << 60; // varint
    while len >= 0x80 {
        bytes.push((len as u8) | 0x80);
        len >>= 7;
    }
    bytes.push(len as u8);
    bytes.extend([0; 32]);
    let e = decode(reseal(bytes)).unwrap_err().to_string();
    assert!(
        e.starts_with("suite.golden: tensor #0 of 1 at byte 49: Hit the end of buffer"),
        "{e}"
    );
}

#[test]
fn a_huge_seeded_shape_is_refused_before_generation() {
    let mut w = GoldenWriter::new("demo", "1", [0; 32]);
    let s = Seeded {
        seed: 1,
        distribution: Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
    };
    w.seeded("w", DType::F32, &[3], s).unwrap();
    let bytes = w.to_bytes().unwrap();
    // shape [3] is encoded as varint count 1 then 3; make it [2^60]... by
    // swapping in a longer varint and resealing.
    let pat = [1u8, b'w', 2, 1, 3];
    let at = bytes.windows(5).position(|p| p == pat).unwrap();
    let mut bad = bytes[..at + 4].to_vec();
    bad.extend([0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10]);
    bad.extend(&bytes[at + 5..]);
    let e = decode(reseal(bad)).unwrap_err().to_string();
    assert!(
        e.starts_with(
            "suite.golden: tensor `w`: shape [1152921504606846976] of float32 declares more than"
        ),
        "{e}"
    );
}

#[test]
fn an_unknown_format_version_is_refused() {
    let (mut bytes, _) = sample_file(fresh_seed());
    bytes[8] = 9;
    let e = decode(reseal(bytes)).unwrap_err().to_string();
    assert_eq!(
        e,
        "suite.golden: format version 9 (this SDK reads versions 1 to 3)"
    );
}

#[test]
fn python_regenerates_seeded_tensors_bit_exactly_from_the_docs() {
    let seed = fresh_seed();
    let specs = [
        (
            DType::F32,
            vec![5, 7],
            Distribution::Uniform {
                low: -0.5,
                high: 0.25,
            },
        ),
        (
            DType::F64,
            vec![11],
            Distribution::Normal {
                mean: 1.0,
                std: 0.1,
            },
        ),
        (
            DType::F16,
            vec![3, 3],
            Distribution::Normal {
                mean: 0.0,
                std: 3.0,
            },
        ),
        (
            DType::BF16,
            vec![20],
            Distribution::Uniform {
                low: -100.0,
                high: 100.0,
            },
        ),
    ];
    let json: Vec<String> = specs
        .iter()
        .enumerate()
        .map(|(i, (d, shape, dist))| {
            let dist = match dist {
                Distribution::Uniform { low, high } => format!("{{\"uniform\": [{low:?}, {high:?}]}}"),
                Distribution::Normal { mean, std } => format!("{{\"normal\": [{mean:?}, {std:?}]}}"),
                    Distribution::TestImage => "{\"test_image\": true}".to_string(),
            };
            format!(
                "{{\"dtype\": \"{d}\", \"shape\": {shape:?}, \"seed\": {}, \"distribution\": {dist}}}",
                seed.wrapping_add(i as u64)
            )
        })
        .collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/seeded_reference.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 is needed for this test (CI installs it)");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(format!("[{}]", json.join(",")).as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{script} failed");
    let py: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    for (i, (d, shape, dist)) in specs.iter().enumerate() {
        let s = Seeded {
            seed: seed.wrapping_add(i as u64),
            distribution: *dist,
        };
        let t = s.generate(*d, shape).unwrap();
        assert_eq!(
            py[i]["hex"].as_str().unwrap(),
            hex::encode(t.bytes.as_slice()),
            "{d} {dist:?} seed {}",
            s.seed
        );
        assert_eq!(
            py[i]["sha256"].as_str().unwrap(),
            hex::encode(canonical_sha256(&t)),
            "{d}"
        );
    }
}

#[test]
fn random_damage_behind_a_valid_checksum_never_panics() {
    // The checksum stops accidental damage; this is the hostile case: bytes
    // changed and the checksum recomputed. Decoding must fail cleanly or
    // succeed, never panic or allocate what the file cannot hold.
    let seed = fresh_seed();
    let (bytes, _) = sample_file(seed);
    for round in 0..500u64 {
        let mut bad = bytes.clone();
        let flips = 1 + splitmix64(seed, 3 * round) % 4;
        for f in 0..flips {
            let r = splitmix64(seed ^ 0xDEAD, 3 * round + f);
            let at = 8 + (r as usize) % (bad.len() - 40);
            bad[at] = (r >> 32) as u8;
        }
        let result = std::panic::catch_unwind(|| {
            decode(reseal(bad.clone())).map(|f| {
                // Whatever decodes must also materialise or fail cleanly.
                f.tensors
                    .iter()
                    .filter(|t| f.materialize(t).is_ok())
                    .count()
            })
        });
        assert!(result.is_ok(), "round {round} (seed {seed}) panicked");
    }
}
