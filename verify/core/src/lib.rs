//! The VIPS verdict without an operating system.
//!
//! A device (bring-up firmware, a test harness on the accelerator's own
//! controller) judges its outputs against a VIPS stage with nothing but this
//! crate: no `std`, no `alloc`, a buffer the caller gives. The host writes a
//! **replay pack** (`vips-conformance pack-replay`; docs/golden-format.md,
//! "Replay packs"): the stage inputs at the tier, and per output element the
//! float64 reference, the error model's bound and σ, with the verdict's
//! rules. The device streams the pack through [`replay::Replay`] frame by
//! frame, feeds its output bytes as they come, and gets a [`Verdict`]: the
//! element bounds, the rms and bias statistics and the NaN policy of the
//! host's judgement, with the same margins to the last bit, and the output's
//! SHA-256.
//!
//! The host's own judgement (`vips_sdk::error_model::judge`) is built on
//! [`tally`]: one definition of the normalised error and of the sums, in
//! the same order, so the two verdicts cannot drift apart.
//!
//! RAM: [`replay::Replay`] is a fixed-size value (`size_of::<Replay>()`,
//! documented in docs/embedded.md) plus one frame buffer of the pack's
//! largest frame (at most [`format::MAX_FRAME`]; the host writes frames of
//! at most [`format::CHUNK_BYTES`] of data).
#![no_std]
#![forbid(unsafe_code)]

#[cfg(feature = "std")]
extern crate std;

pub mod format;
pub mod replay;
pub mod tally;

pub use format::{DType, Frame, Header, Nan, Rules};
pub use replay::{Judge, Replay};
pub use tally::{element_error, Tally, TopErrors, Verdict};

/// What went wrong while reading a pack or judging an output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The pack does not start with the replay magic.
    Magic,
    /// A format version this crate does not read.
    Version(u16),
    /// A frame longer than the pack's own limit or than the buffer.
    FrameTooLong { len: u32, limit: u32 },
    /// A frame's payload did not decode.
    Decode,
    /// A frame where the pack's order does not allow it (an input outside a
    /// stage, expected values before their output, ...).
    Order(&'static str),
    /// A tensor's declared size disagrees with its shape, or data past it.
    Size(&'static str),
    /// More output bytes than the pending expected values cover.
    TooMuchOutput,
    /// The pack ended (or the verdict was asked for) before the output was
    /// complete.
    Incomplete,
    /// The pack's SHA-256 does not match its contents.
    Checksum,
    /// The caller's buffer is too small.
    Buffer { needed: usize, given: usize },
    /// A rule the device cannot apply within fixed memory (more elements
    /// allowed past their bound than [`tally::TOP`] keeps).
    Unsupported(&'static str),
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Error::Magic => write!(f, "not a VIPS replay pack (bad magic)"),
            Error::Version(v) => write!(f, "replay pack format version {v} is not supported"),
            Error::FrameTooLong { len, limit } => {
                write!(f, "a frame of {len} bytes exceeds the limit of {limit}")
            }
            Error::Decode => write!(f, "a frame's payload does not decode"),
            Error::Order(what) => write!(f, "frame out of order: {what}"),
            Error::Size(what) => write!(f, "size mismatch: {what}"),
            Error::TooMuchOutput => write!(f, "more output bytes than the expected values cover"),
            Error::Incomplete => write!(f, "the output is incomplete"),
            Error::Checksum => write!(f, "the pack's SHA-256 does not match its contents"),
            Error::Buffer { needed, given } => {
                write!(f, "buffer of {given} bytes, {needed} needed")
            }
            Error::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

#[cfg(feature = "std")]
impl std::error::Error for Error {}
