//! Builders of hostile input files, written at test time (nothing big is
//! committed): golden files encoded by hand from docs/golden-format.md (so
//! they can declare what the SDK's writer refuses), `.npy` headers, `.npz`
//! archives (with a deflate stream for a gigabyte of zeros that costs a
//! megabyte), safetensors headers. Shared by sdk/tests/it/hostile_files.rs and
//! conformance/tests/it/hostile_files.rs, which includes it by path.

#![allow(dead_code)]

use sha2::{Digest, Sha256};

/// The demo suite's document.
pub const DEMO_YAML: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../conformance/suites/demo-mlp/suite.yaml"
);

fn varint(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn string(out: &mut Vec<u8>, s: &[u8]) {
    varint(out, s.len() as u64);
    out.extend_from_slice(s);
}

/// How an entry stores its values (docs/golden-format.md, `Data`).
pub enum Data {
    Raw(Vec<u8>),
    Uniform { seed: u64, low: f64, high: f64 },
    Normal { seed: u64, mean: f64, std: f64 },
    TestImage { seed: u64 },
}

/// One entry: dtype codes 0 float16, 1 bfloat16, 2 float32, 3 float64,
/// 4 uint8, 5 int32, 6 int64.
pub struct Entry {
    pub name: String,
    pub dtype: u8,
    pub shape: Vec<u64>,
    pub sha256: [u8; 32],
    pub data: Data,
}

impl Entry {
    pub fn new(name: &str, dtype: u8, shape: &[u64], data: Data) -> Entry {
        Entry {
            name: name.into(),
            dtype,
            shape: shape.to_vec(),
            sha256: [0; 32],
            data,
        }
    }
}

/// A golden file: magic, header, entries, checksum.
pub fn golden(document_sha256: [u8; 32], entries: &[Entry]) -> Vec<u8> {
    let mut out = b"VSDKGOLD".to_vec();
    varint(&mut out, 1);
    string(&mut out, b"hostile");
    string(&mut out, b"0.1.0");
    out.extend_from_slice(&document_sha256);
    varint(&mut out, entries.len() as u64);
    for e in entries {
        string(&mut out, e.name.as_bytes());
        out.push(e.dtype);
        varint(&mut out, e.shape.len() as u64);
        for &d in &e.shape {
            varint(&mut out, d);
        }
        out.extend_from_slice(&e.sha256);
        match &e.data {
            Data::Raw(bytes) => {
                varint(&mut out, 0);
                string(&mut out, bytes);
            }
            Data::Uniform { seed, low, high } => {
                varint(&mut out, 1);
                varint(&mut out, *seed);
                varint(&mut out, 0);
                out.extend_from_slice(&low.to_le_bytes());
                out.extend_from_slice(&high.to_le_bytes());
            }
            Data::Normal { seed, mean, std } => {
                varint(&mut out, 1);
                varint(&mut out, *seed);
                varint(&mut out, 1);
                out.extend_from_slice(&mean.to_le_bytes());
                out.extend_from_slice(&std.to_le_bytes());
            }
            Data::TestImage { seed } => {
                varint(&mut out, 1);
                varint(&mut out, *seed);
                varint(&mut out, 2);
            }
        }
    }
    let sum = Sha256::digest(&out);
    out.extend_from_slice(&sum);
    out
}

pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// A `.npy` file, version 1.0, with NumPy's padding; `data` follows.
pub fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = npy_raw((1, 0), header.len() as u32, header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// A `.npy` preamble with any version and declared header length.
pub fn npy_raw(version: (u8, u8), header_len: u32, header: &[u8]) -> Vec<u8> {
    let mut out = b"\x93NUMPY".to_vec();
    out.extend_from_slice(&[version.0, version.1]);
    if version.0 == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&header_len.to_le_bytes());
    }
    out.extend_from_slice(header);
    out
}

/// A float32 `.npy` of `values` with shape `shape` (Python tuple text).
pub fn npy_f32(shape: &str, values: &[f32]) -> Vec<u8> {
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    npy("<f4", shape, &data)
}

/// One member of a zip archive, as stored.
pub struct Member {
    pub name: String,
    /// 0 stored, 8 deflated.
    pub method: u16,
    pub stored: Vec<u8>,
    pub crc32: u32,
    /// The uncompressed size the archive declares.
    pub size: u64,
}

impl Member {
    /// A member stored uncompressed.
    pub fn stored(name: &str, bytes: Vec<u8>) -> Member {
        Member {
            name: name.into(),
            method: 0,
            crc32: crc32fast::hash(&bytes),
            size: bytes.len() as u64,
            stored: bytes,
        }
    }

    /// A deflated member whose content is `head` followed by zeros, `size`
    /// bytes in all (a multiple of 1 MiB): one compressed MiB of zeros is
    /// repeated, so a gigabyte costs a megabyte and a fraction of a second.
    pub fn deflated_zeros(name: &str, head: &[u8], size: u64) -> Member {
        use flate2::write::DeflateEncoder;
        use std::io::Write;
        const MIB: usize = 1 << 20;
        assert!(size.is_multiple_of(MIB as u64) && size >= 2 * MIB as u64 && head.len() < MIB / 2);
        let mut first = head.to_vec();
        first.resize(MIB, 0);
        let zeros = vec![0u8; MIB];
        // Sync flushes end each part on a byte boundary: the part for the
        // second MiB decodes to a MiB of zeros after any window of zeros.
        let mut e = DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(&first).unwrap();
        e.flush().unwrap();
        let a = e.get_ref().len();
        e.write_all(&zeros).unwrap();
        e.flush().unwrap();
        let b = e.get_ref().len();
        let all = e.finish().unwrap();
        let (chunk, tail) = (&all[a..b], &all[b..]);
        let mut stored = all[..b].to_vec();
        let mut crc = crc32fast::Hasher::new();
        crc.update(&first);
        crc.update(&zeros);
        for _ in 2..size / MIB as u64 {
            stored.extend_from_slice(chunk);
            crc.update(&zeros);
        }
        stored.extend_from_slice(tail);
        // Within deflate's largest ratio: the reader must accept the sizes.
        assert!(
            size < stored.len() as u64 * 1032,
            "{size} from {}",
            stored.len()
        );
        Member {
            name: name.into(),
            method: 8,
            stored,
            crc32: crc.finalize(),
            size,
        }
    }
}

/// A zip archive (no zip64: every size below 4 GiB).
pub fn zip(members: &[Member]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    let date: u16 = (40 << 9) | (1 << 5) | 1; // 2020-01-01
    for m in members {
        let offset = out.len() as u32;
        let fixed = |sig: u32, out: &mut Vec<u8>, central: bool| {
            out.extend_from_slice(&sig.to_le_bytes());
            if central {
                out.extend_from_slice(&20u16.to_le_bytes()); // made by
            }
            out.extend_from_slice(&20u16.to_le_bytes()); // needed
            out.extend_from_slice(&0u16.to_le_bytes()); // flags
            out.extend_from_slice(&m.method.to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes()); // time
            out.extend_from_slice(&date.to_le_bytes());
            out.extend_from_slice(&m.crc32.to_le_bytes());
            out.extend_from_slice(&(m.stored.len() as u32).to_le_bytes());
            out.extend_from_slice(&(m.size as u32).to_le_bytes());
            out.extend_from_slice(&(m.name.len() as u16).to_le_bytes());
            out.extend_from_slice(&0u16.to_le_bytes()); // extra
        };
        fixed(0x0403_4b50, &mut out, false);
        out.extend_from_slice(m.name.as_bytes());
        out.extend_from_slice(&m.stored);
        fixed(0x0201_4b50, &mut central, true);
        central.extend_from_slice(&0u16.to_le_bytes()); // comment
        central.extend_from_slice(&0u16.to_le_bytes()); // disk
        central.extend_from_slice(&0u16.to_le_bytes()); // internal attributes
        central.extend_from_slice(&0u32.to_le_bytes()); // external attributes
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(m.name.as_bytes());
    }
    let (cd_offset, cd_size) = (out.len() as u32, central.len() as u32);
    out.extend_from_slice(&central);
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]); // disks
    out.extend_from_slice(&(members.len() as u16).to_le_bytes());
    out.extend_from_slice(&(members.len() as u16).to_le_bytes());
    out.extend_from_slice(&cd_size.to_le_bytes());
    out.extend_from_slice(&cd_offset.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes()); // comment
    out
}

/// A `.npz` holding a float32 array `unused` of 2^30 bytes in all (header
/// included) that deflates to about a megabyte.
pub fn npz_with_a_gigabyte_member() -> Vec<u8> {
    let size = 1u64 << 30;
    let header = npy("<f4", "(268435424,)", &[]);
    assert_eq!(header.len(), 128, "the header pads to 128 bytes");
    zip(&[Member::deflated_zeros("unused.npy", &header, size)])
}

/// A safetensors file whose 8-byte header length says `header_len`.
pub fn safetensors_raw(header_len: u64, rest: &[u8]) -> Vec<u8> {
    let mut out = header_len.to_le_bytes().to_vec();
    out.extend_from_slice(rest);
    out
}

/// `- - - … x` nested `depth` deep on one line.
pub fn deep_block_sequence(depth: usize) -> String {
    format!("{}x\n", "- ".repeat(depth))
}

/// The demo document with `extra` inserted as the first lines under
/// `tensors:`.
pub fn demo_with_tensors(extra: &str) -> String {
    let text = std::fs::read_to_string(DEMO_YAML).unwrap();
    text.replacen("tensors:\n", &format!("tensors:\n{extra}"), 1)
}

/// A small document whose only stage reads tensor `x` (declared by
/// `x_decl`, a `tensors:` entry) and runs `graph` to the golden `y`.
pub fn small_document(x_decl: &str, y_decl: &str, graph: &str) -> String {
    format!(
        "vips: 1\ncomponent:\n  id: hostile\n  version: 0.1.0\n  title: \"a hostile document\"\n\
         tensors:\n  {x_decl}\n  {y_decl}\n\
         stages:\n  - stage: s\n    algorithm: \"a\"\n    impl: \"b\"\n    inputs: [x]\n    outputs: [y]\n\
         \x20   graph:\n{graph}"
    )
}

/// `.npz` members holding the demo suite's `h`, `n` and `p` as float32
/// `.npy` files (what a PyTorch user would capture).
pub fn demo_members(demo: &vips_sdk::suite::Suite) -> Vec<Member> {
    ["h", "n", "p"]
        .iter()
        .map(|n| {
            let t = demo.tensor(n).unwrap();
            let shape = format!(
                "({})",
                t.spec
                    .shape
                    .iter()
                    .map(|d| format!("{d},"))
                    .collect::<String>()
            );
            Member::stored(
                &format!("{n}.npy"),
                npy_f32(&shape, &t.to_vec::<f32>().unwrap()),
            )
        })
        .collect()
}
