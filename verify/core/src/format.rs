//! The replay pack's layout (docs/golden-format.md, "Replay packs").
//!
//! ```text
//! header   16 bytes: magic "VSDKRPLY", format version u16 LE, 0u16,
//!          the largest frame payload in the pack u32 LE
//! frames   each: payload length u32 LE, payload (postcard `Frame`)
//!          Pack, then per stage: Stage, its Input chunks, then per output:
//!          Output and its Expected chunks; last: End
//! ```
//!
//! `End` carries the SHA-256 of every byte before it (header and frames,
//! length prefixes included): a verdict reached before it is provisional.

use heapless::{String, Vec};
use serde::{Deserialize, Serialize};

pub const MAGIC: [u8; 8] = *b"VSDKRPLY";
pub const VERSION: u16 = 1;
pub const HEADER_LEN: usize = 16;
/// The largest frame payload a reader accepts (a pack declares its own,
/// never more).
pub const MAX_FRAME: u32 = 1 << 20;
/// Elements per `Expected` frame the host writes (24 bytes each).
pub const CHUNK_ELEMENTS: usize = 1024;
/// Input bytes per `Input` frame the host writes.
pub const CHUNK_BYTES: usize = CHUNK_ELEMENTS * EXPECTED_STRIDE;
/// Bytes per element of an `Expected` frame: reference, bound and σ, each
/// float64 little-endian.
pub const EXPECTED_STRIDE: usize = 24;
/// Longest stage, tensor or suite name.
pub const NAME: usize = 64;
/// Largest rank.
pub const RANK: usize = 8;

pub type Name = String<NAME>;
pub type Shape = Vec<u64, RANK>;

/// The fixed start of a pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub version: u16,
    /// The largest frame payload that follows.
    pub max_frame: u32,
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(&MAGIC);
        h[8..10].copy_from_slice(&self.version.to_le_bytes());
        h[12..16].copy_from_slice(&self.max_frame.to_le_bytes());
        h
    }

    pub fn decode(h: &[u8; HEADER_LEN]) -> Result<Header, crate::Error> {
        if h[..8] != MAGIC {
            return Err(crate::Error::Magic);
        }
        if h[10..12] != [0, 0] {
            return Err(crate::Error::Decode);
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != VERSION {
            return Err(crate::Error::Version(version));
        }
        let max_frame = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        if max_frame > MAX_FRAME {
            return Err(crate::Error::FrameTooLong {
                len: max_frame,
                limit: MAX_FRAME,
            });
        }
        Ok(Header { version, max_frame })
    }
}

/// Element types, as the SDK's tensors hold them (little-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u32)]
pub enum DType {
    F16 = 0,
    BF16 = 1,
    F32 = 2,
    F64 = 3,
    U8 = 4,
    I32 = 5,
    I64 = 6,
}

impl DType {
    pub fn size(self) -> usize {
        match self {
            DType::U8 => 1,
            DType::F16 | DType::BF16 => 2,
            DType::F32 | DType::I32 => 4,
            DType::F64 | DType::I64 => 8,
        }
    }

    /// One element from its little-endian bytes (`b.len() == size()`), as
    /// the host's `HostTensor::f64_values` reads it.
    pub fn value(self, b: &[u8]) -> f64 {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        match self {
            DType::F16 => half::f16::from_le_bytes([w[0], w[1]]).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes([w[0], w[1]]).to_f64(),
            DType::F32 => f64::from(f32::from_le_bytes([w[0], w[1], w[2], w[3]])),
            DType::F64 => f64::from_le_bytes(w),
            DType::U8 => f64::from(w[0]),
            DType::I32 => f64::from(i32::from_le_bytes([w[0], w[1], w[2], w[3]])),
            DType::I64 => i64::from_le_bytes(w) as f64,
        }
    }
}

/// The NaN policy (the host's `NanPolicy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[repr(u32)]
pub enum Nan {
    /// Any NaN in the output is a mismatch.
    Fail = 0,
    /// A NaN matches a NaN at the same position (and only there).
    Allow = 1,
}

/// How one output is judged (the host's `error_model::Rules`, with the
/// allowed fraction already a count for this output's size).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rules {
    pub nan: Nan,
    /// Elements allowed outside their bound (at most [`TOP`](super::tally::TOP)).
    pub allowed_over: u64,
    /// Largest allowed `√(mean t²)`.
    pub rms_factor: f64,
    /// `(z, ratio)` limits of the bias test; None: the mean is not tested.
    pub bias: Option<(f64, f64)>,
}

/// One record of a pack. Byte fields borrow from the frame buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Frame<'a> {
    /// First: what the pack replays.
    Pack {
        suite: Name,
        suite_version: Name,
        tier: Name,
        /// SHA-256 of the suite's document and golden file.
        document_sha256: [u8; 32],
        golden_sha256: [u8; 32],
        stages: u32,
    },
    /// A stage: its inputs, then its outputs.
    Stage {
        name: Name,
        inputs: u32,
        outputs: u32,
    },
    /// Bytes `offset..offset + bytes.len()` of a stage input, in the tier's
    /// dtype (what the device computes from).
    Input {
        name: Name,
        dtype: DType,
        shape: Shape,
        offset: u64,
        #[serde(borrow)]
        bytes: &'a [u8],
    },
    /// An output to judge; its `Expected` frames follow.
    Output {
        name: Name,
        dtype: DType,
        shape: Shape,
        rules: Rules,
    },
    /// Elements `first..` of the current output: per element reference,
    /// bound and σ ([`EXPECTED_STRIDE`] bytes).
    Expected {
        first: u64,
        #[serde(borrow)]
        values: &'a [u8],
    },
    /// Last: frames before it, and the SHA-256 of every byte before it.
    End { frames: u32, sha256: [u8; 32] },
}

/// The number of elements of `shape`, None on overflow.
pub fn elements(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d))
}
