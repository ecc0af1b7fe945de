//! Golden vector files: one compact, versioned, checksummed file per suite
//! (docs/golden-format.md). Decoding never trusts a declared length, checks
//! every hash, and hands out raw tensor bytes as slices of the file.

mod seeded;

pub use seeded::{splitmix64, Distribution, Seeded};

use crate::limits::{read_regular_file, MAX_SEEDED_TENSOR_BYTES, MAX_SEEDED_TOTAL_BYTES};
use crate::{DType, Element, HostTensor, TensorSpec};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The first 8 bytes of every golden file.
pub const MAGIC: &[u8; 8] = b"VSDKGOLD";
/// The format version this SDK writes and reads.
pub const FORMAT_VERSION: u32 = 1;
/// Largest tensor a golden file may declare (bytes once materialised): a
/// guard against a corrupt or hostile shape, far above any real suite.
/// Seeded tensors have tighter limits (`crate::limits`).
pub use crate::limits::MAX_TENSOR_BYTES;

const TRAILER: usize = 32;

/// Why a golden file cannot be used. Every message names the file and the place.
#[derive(Debug, thiserror::Error)]
pub enum GoldenError {
    #[error("{}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    #[error("{}: {reason}", path.display())]
    Corrupt { path: PathBuf, reason: String },
    #[error("{}: tensor `{tensor}`: {reason}", path.display())]
    Tensor {
        path: PathBuf,
        tensor: String,
        reason: String,
    },
}

/// DLPack-style dtype code in the file (catalog order).
fn dtype_code(d: DType) -> u8 {
    DType::ALL
        .iter()
        .position(|&x| x == d)
        .expect("every dtype is in ALL") as u8
}

/// How a tensor's values are stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum Data<'a> {
    /// Little-endian, C order, in the tensor's dtype.
    #[serde(borrow)]
    Raw(&'a [u8]),
    Seeded(Seeded),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Header<'a> {
    format_version: u32,
    component: &'a str,
    component_version: &'a str,
    /// SHA-256 of the VIPS document these vectors belong to.
    document_sha256: [u8; 32],
    tensor_count: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Entry<'a> {
    name: &'a str,
    dtype: u8,
    shape: Vec<u64>,
    /// SHA-256 of the canonical bytes: the values as little-endian float32.
    sha256: [u8; 32],
    #[serde(borrow)]
    data: Data<'a>,
}

/// Where one tensor's values come from, without borrowing the file.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// Byte range of the raw values within the file.
    Raw {
        offset: usize,
        len: usize,
    },
    Seeded(Seeded),
}

/// One tensor of a golden file.
#[derive(Debug, Clone, PartialEq)]
pub struct GoldenTensor {
    pub name: String,
    pub spec: TensorSpec,
    pub sha256: [u8; 32],
    pub source: Source,
}

/// The canonical hash of a tensor: SHA-256 of its values as little-endian
/// float32 in C order (`hashlib.sha256(a.astype('<f4').tobytes())`).
///
/// Streams: other dtypes are converted (through f64, then to f32, round to
/// nearest even) a chunk at a time, never as a copy of the whole tensor.
pub fn canonical_sha256(t: &HostTensor) -> [u8; 32] {
    canonical_sha256_of(t.spec.dtype, &t.bytes)
}

/// [`canonical_sha256`] of little-endian values of `dtype`.
fn canonical_sha256_of(dtype: DType, bytes: &[u8]) -> [u8; 32] {
    /// Elements converted per hasher update.
    const CHUNK: usize = 4096;
    fn feed<T: Element>(h: &mut Sha256, bytes: &[u8]) {
        let size = T::DTYPE.size_bytes();
        let mut buf = Vec::with_capacity(4 * CHUNK);
        for chunk in bytes.chunks(size * CHUNK) {
            buf.clear();
            for c in chunk.chunks_exact(size) {
                buf.extend_from_slice(&(T::read_le(c).to_f64() as f32).to_le_bytes());
            }
            h.update(&buf);
        }
    }
    let mut h = Sha256::new();
    match dtype {
        DType::F32 => h.update(bytes),
        DType::F16 => feed::<f16>(&mut h, bytes),
        DType::BF16 => feed::<bf16>(&mut h, bytes),
        DType::F64 => feed::<f64>(&mut h, bytes),
        DType::U8 => feed::<u8>(&mut h, bytes),
        DType::I32 => feed::<i32>(&mut h, bytes),
        DType::I64 => feed::<i64>(&mut h, bytes),
    }
    h.finalize().into()
}

/// A decoded golden file: the bytes and an index into them.
#[derive(Debug)]
pub struct GoldenFile {
    pub path: PathBuf,
    pub component: String,
    pub component_version: String,
    pub document_sha256: [u8; 32],
    /// SHA-256 of the whole file, trailer included (what `sha256sum` prints):
    /// the identity certification reports cite.
    pub file_sha256: [u8; 32],
    pub tensors: Vec<GoldenTensor>,
    bytes: Vec<u8>,
}

impl GoldenFile {
    pub fn open(path: impl AsRef<Path>) -> Result<Self, GoldenError> {
        let path = path.as_ref();
        // A FIFO or a device is refused before it is opened; a regular file
        // bounds what is read.
        let bytes = read_regular_file(path, crate::limits::MAX_GOLDEN_BYTES).map_err(|reason| {
            GoldenError::Io {
                path: path.to_path_buf(),
                reason,
            }
        })?;
        Self::from_bytes(path, bytes)
    }

    /// Decodes `bytes` (read from `path`, which only names it in errors).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Self, GoldenError> {
        let corrupt = |reason: String| GoldenError::Corrupt {
            path: path.to_path_buf(),
            reason,
        };
        if bytes.len() < MAGIC.len() + TRAILER || &bytes[..MAGIC.len()] != MAGIC {
            return Err(corrupt(format!(
                "not a VIPS golden vector file (expected the magic bytes {:?} and a checksum; the file has {} bytes)",
                std::str::from_utf8(MAGIC).unwrap_or_default(),
                bytes.len()
            )));
        }
        let body_end = bytes.len() - TRAILER;
        // One pass: the body's digest (the trailer check), then the whole
        // file's (what reports cite) by hashing on past the body.
        let mut hasher = Sha256::new();
        hasher.update(&bytes[..body_end]);
        let body_sha256: [u8; 32] = hasher.clone().finalize().into();
        hasher.update(&bytes[body_end..]);
        let file_sha256: [u8; 32] = hasher.finalize().into();
        if body_sha256[..] != bytes[body_end..] {
            return Err(corrupt(format!(
                "checksum mismatch: the last 32 bytes should be the SHA-256 of bytes 0..{body_end}; the file is truncated or corrupted"
            )));
        }
        let body = &bytes[..body_end];
        let mut at = MAGIC.len();
        let (header, rest): (Header, &[u8]) = postcard::take_from_bytes(&body[at..])
            .map_err(|e| corrupt(format!("header at byte {at}: {e}")))?;
        if header.format_version != FORMAT_VERSION {
            return Err(corrupt(format!(
                "format version {} (this SDK reads version {FORMAT_VERSION})",
                header.format_version
            )));
        }
        at = body_end - rest.len();
        let mut tensors: Vec<GoldenTensor> = Vec::new();
        let mut first_index: HashMap<String, u32> = HashMap::new();
        let mut seeded_bytes = 0u64;
        for i in 0..header.tensor_count {
            let (entry, rest): (Entry, &[u8]) =
                postcard::take_from_bytes(&body[at..]).map_err(|e| {
                    corrupt(format!(
                        "tensor #{i} of {} at byte {at}: {e}",
                        header.tensor_count
                    ))
                })?;
            let t = index_entry(path, &bytes, entry)?;
            let err = |reason: String| GoldenError::Tensor {
                path: path.to_path_buf(),
                tensor: t.name.clone(),
                reason,
            };
            if let Some(first) = first_index.insert(t.name.clone(), i) {
                return Err(err(format!(
                    "the name is used twice (tensor #{first} and tensor #{i} at byte {at}): \
                     names in a golden file are unique"
                )));
            }
            if matches!(t.source, Source::Seeded(_)) {
                seeded_bytes += t.spec.size_bytes() as u64;
                if seeded_bytes > MAX_SEEDED_TOTAL_BYTES {
                    return Err(err(format!(
                        "the seeded tensors up to this one total {seeded_bytes} bytes once \
                         generated, above the {MAX_SEEDED_TOTAL_BYTES}-byte limit for a golden file"
                    )));
                }
            }
            tensors.push(t);
            at = body_end - rest.len();
        }
        if at != body_end {
            return Err(corrupt(format!(
                "{} unexpected bytes after the last tensor (byte {at})",
                body_end - at
            )));
        }
        let file = GoldenFile {
            path: path.to_path_buf(),
            component: header.component.to_string(),
            component_version: header.component_version.to_string(),
            document_sha256: header.document_sha256,
            file_sha256,
            tensors,
            bytes,
        };
        // Raw tensors are verified now, in place, once (the bytes are held
        // and never change); seeded ones when they are generated.
        for t in &file.tensors {
            if let Source::Raw { .. } = t.source {
                let raw = file
                    .raw_bytes(t)
                    .ok_or_else(|| file.tensor_error(t, "raw bytes out of range".into()))?;
                file.check_hash(t, canonical_sha256_of(t.spec.dtype, raw))?;
            }
        }
        Ok(file)
    }

    pub fn tensor(&self, name: &str) -> Option<&GoldenTensor> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The stored bytes of a raw tensor, borrowed from the file.
    pub fn raw_bytes(&self, t: &GoldenTensor) -> Option<&[u8]> {
        match t.source {
            Source::Raw { offset, len } => self.bytes.get(offset..offset + len),
            Source::Seeded(_) => None,
        }
    }

    /// A tensor's values: raw bytes copied out (their hash was checked when
    /// the file was opened), or a seeded tensor generated and checked.
    pub fn materialize(&self, t: &GoldenTensor) -> Result<HostTensor, GoldenError> {
        match &t.source {
            Source::Raw { .. } => {
                let raw = self
                    .raw_bytes(t)
                    .ok_or_else(|| self.tensor_error(t, "raw bytes out of range".into()))?;
                HostTensor::from_bytes(t.spec.clone(), raw.to_vec())
                    .map_err(|e| self.tensor_error(t, e.to_string()))
            }
            Source::Seeded(s) => {
                let host = s
                    .generate(t.spec.dtype, &t.spec.shape)
                    .map_err(|e| self.tensor_error(t, e))?;
                self.check_hash(t, canonical_sha256(&host))?;
                Ok(host)
            }
        }
    }

    /// [`GoldenFile::materialize`] of a tensor that was materialised (and so
    /// checked) before: raw bytes are copied, a seeded tensor is generated
    /// again without hashing it (generation is deterministic).
    pub(crate) fn regenerate(&self, t: &GoldenTensor) -> Result<HostTensor, GoldenError> {
        match &t.source {
            Source::Raw { .. } => self.materialize(t),
            Source::Seeded(s) => s
                .generate(t.spec.dtype, &t.spec.shape)
                .map_err(|e| self.tensor_error(t, e)),
        }
    }

    fn tensor_error(&self, t: &GoldenTensor, reason: String) -> GoldenError {
        GoldenError::Tensor {
            path: self.path.clone(),
            tensor: t.name.clone(),
            reason,
        }
    }

    fn check_hash(&self, t: &GoldenTensor, got: [u8; 32]) -> Result<(), GoldenError> {
        if got == t.sha256 {
            return Ok(());
        }
        Err(self.tensor_error(
            t,
            format!(
                "SHA-256 mismatch: the file records {}, the values hash to {}",
                hex::encode(t.sha256),
                hex::encode(got)
            ),
        ))
    }
}

fn index_entry(path: &Path, file: &[u8], e: Entry<'_>) -> Result<GoldenTensor, GoldenError> {
    let err = |reason: String| GoldenError::Tensor {
        path: path.to_path_buf(),
        tensor: e.name.to_string(),
        reason,
    };
    let dtype = *DType::ALL
        .get(usize::from(e.dtype))
        .ok_or_else(|| err(format!("unknown dtype code {}", e.dtype)))?;
    let numel = e
        .shape
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|n| {
            n.checked_mul(dtype.size_bytes() as u64)
                .is_some_and(|b| b <= MAX_TENSOR_BYTES)
        })
        .ok_or_else(|| {
            err(format!(
                "shape {:?} of {dtype} declares more than the {MAX_TENSOR_BYTES}-byte limit",
                e.shape
            ))
        })?;
    let shape: Vec<usize> = e.shape.iter().map(|&d| d as usize).collect();
    let spec = TensorSpec::new(dtype, &shape);
    let source = match e.data {
        Data::Raw(raw) => {
            if raw.len() as u64 != numel * dtype.size_bytes() as u64 {
                return Err(err(format!(
                    "{} raw bytes stored for {dtype} {shape:?}, which needs {}",
                    raw.len(),
                    spec.size_bytes()
                )));
            }
            // `raw` borrows from `file`: its offset is the pointer difference.
            let offset = raw.as_ptr() as usize - file.as_ptr() as usize;
            Source::Raw {
                offset,
                len: raw.len(),
            }
        }
        Data::Seeded(s) => {
            s.distribution.validate().map_err(err)?;
            let bytes = numel * dtype.size_bytes() as u64;
            if bytes > MAX_SEEDED_TENSOR_BYTES {
                return Err(err(format!(
                    "a seeded {dtype} {:?} tensor is {bytes} bytes once generated, above the \
                     {MAX_SEEDED_TENSOR_BYTES}-byte limit for seeded tensors",
                    e.shape
                )));
            }
            // Test images are uint8; every other distribution is for floats.
            let is_image = s.distribution == Distribution::TestImage;
            if is_image != (dtype == DType::U8) || (!is_image && !dtype.is_float()) {
                return Err(err(format!(
                    "{dtype} tensors cannot be seeded with {:?}",
                    s.distribution
                )));
            }
            Source::Seeded(s)
        }
    };
    Ok(GoldenTensor {
        name: e.name.to_string(),
        spec,
        sha256: e.sha256,
        source,
    })
}

/// Builds a golden file.
#[derive(Debug, Default)]
pub struct GoldenWriter {
    component: String,
    component_version: String,
    document_sha256: [u8; 32],
    entries: Vec<(String, TensorSpec, [u8; 32], OwnedData)>,
}

#[derive(Debug)]
enum OwnedData {
    Raw(std::sync::Arc<Vec<u8>>),
    Seeded(Seeded),
}

impl GoldenWriter {
    pub fn new(component: &str, component_version: &str, document_sha256: [u8; 32]) -> Self {
        GoldenWriter {
            component: component.into(),
            component_version: component_version.into(),
            document_sha256,
            entries: Vec::new(),
        }
    }

    /// Adds a tensor stored verbatim.
    pub fn raw(&mut self, name: &str, t: &HostTensor) -> &mut Self {
        let hash = canonical_sha256(t);
        self.entries.push((
            name.into(),
            t.spec.clone(),
            hash,
            OwnedData::Raw(t.bytes.clone()),
        ));
        self
    }

    /// Adds a seeded tensor (generated once here to record its hash).
    pub fn seeded(
        &mut self,
        name: &str,
        dtype: DType,
        shape: &[usize],
        s: Seeded,
    ) -> Result<&mut Self, String> {
        let t = s.generate(dtype, shape)?;
        let hash = canonical_sha256(&t);
        self.entries
            .push((name.into(), t.spec, hash, OwnedData::Seeded(s)));
        Ok(self)
    }

    pub fn to_bytes(&self) -> Result<Vec<u8>, postcard::Error> {
        let mut out = MAGIC.to_vec();
        let header = Header {
            format_version: FORMAT_VERSION,
            component: &self.component,
            component_version: &self.component_version,
            document_sha256: self.document_sha256,
            tensor_count: self.entries.len() as u32,
        };
        out = postcard::to_extend(&header, out)?;
        for (name, spec, sha256, data) in &self.entries {
            let entry = Entry {
                name,
                dtype: dtype_code(spec.dtype),
                shape: spec.shape.iter().map(|&d| d as u64).collect(),
                sha256: *sha256,
                data: match data {
                    OwnedData::Raw(b) => Data::Raw(b),
                    OwnedData::Seeded(s) => Data::Seeded(*s),
                },
            };
            out = postcard::to_extend(&entry, out)?;
        }
        let checksum = Sha256::digest(&out);
        out.extend_from_slice(&checksum);
        Ok(out)
    }
}
