//! The worker protocol: one request, one reply, in order, over the worker's
//! stdin and a private copy of its stdout.
//!
//! A message is a little-endian `u32` header length, a postcard header, and
//! the raw bytes of the tensors the header lists, in order (sizes follow
//! from their specs). Both sides bound what they read before allocating:
//! the header by [`MAX_HEADER_BYTES`], each tensor by its spec (itself under
//! `MAX_TENSOR_BYTES`), the tensor count by [`MAX_TENSORS`]; a tensor is
//! read incrementally, so a lying length costs no more than what arrives.

use crate::execution::{Finding, Program, Spec};
use crate::{DeviceInfo, ProviderInfo};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use std::io::{self, Read, Write};
use vips_data::HostTensor;

pub const MAX_HEADER_BYTES: u32 = 16 << 20;
pub const MAX_TENSORS: usize = 1 << 16;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Request {
    /// Load the library (a path as bytes: paths need not be UTF-8) and
    /// open the device.
    Open { library: Vec<u8>, device: u32 },
    /// `kernel_supports` for each (kernel, version, dtype name).
    Supports(Vec<(String, u32, String)>),
    /// Run a program on the inputs that follow the header.
    Run {
        program: Program,
        inputs: Vec<(String, Spec)>,
        seed: u64,
    },
    /// Destroy the instance and exit.
    Shutdown,
    /// The first message, read by the worker's launcher: how to confine it
    /// (answered by `Reply::Sandboxed` from inside, before any driver loads).
    Sandbox(crate::sandbox::Policy),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Opened {
        provider: ProviderInfo,
        device: DeviceInfo,
    },
    Supported(Vec<bool>),
    /// The outputs of both runs follow the header: every output of the
    /// first run, then every output of the second, in `outputs`' order,
    /// except those `repeated` marks.
    Ran {
        outputs: Vec<(String, Spec)>,
        /// Per output: the second run's is bit-identical to the first's and
        /// is not sent (no less trustworthy than its bytes, which come from
        /// the same process; a deterministic stage crosses the pipe once).
        repeated: Vec<bool>,
        findings: Vec<Finding>,
        /// Seconds inside the provider's `execute` calls (`--timings`).
        kernel_seconds: f64,
    },
    /// Sent before each step of a program runs (not a reply: the reply
    /// follows), so that a crash is blamed on its kernel.
    Running(u32),
    /// The provider returned an error (not a crash): the message.
    Failed(String),
    Closed,
    /// The first reply: what confines the worker, set up before any driver
    /// code ran; `init_pid`, its PID namespace's init as the runner sees it.
    Sandboxed {
        facts: crate::sandbox::Facts,
        init_pid: u32,
    },
}

/// A message with the tensors it carries.
#[derive(Debug, Clone)]
pub struct Message<T> {
    pub header: T,
    pub tensors: Vec<HostTensor>,
}

#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("the peer closed the channel")]
    Closed,
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("malformed message: {0}")]
    Malformed(String),
}

fn specs_of(tensors: &[(String, Spec)]) -> impl Iterator<Item = &Spec> {
    tensors.iter().map(|(_, s)| s)
}

/// The specs of the tensors a header announces.
pub trait Carries {
    fn specs(&self) -> Vec<&Spec>;
}

impl Carries for Request {
    fn specs(&self) -> Vec<&Spec> {
        match self {
            Request::Run { inputs, .. } => specs_of(inputs).collect(),
            _ => Vec::new(),
        }
    }
}

impl Carries for Reply {
    fn specs(&self) -> Vec<&Spec> {
        match self {
            Reply::Ran {
                outputs, repeated, ..
            } => specs_of(outputs)
                .chain(
                    specs_of(outputs)
                        .zip(repeated.iter().chain(std::iter::repeat(&false)))
                        .filter(|(_, &same)| !same)
                        .map(|(s, _)| s),
                )
                .collect(),
            _ => Vec::new(),
        }
    }
}

pub fn write<T: Serialize>(w: &mut impl Write, header: &T, tensors: &[&[u8]]) -> io::Result<()> {
    let bytes = postcard::to_stdvec(header).map_err(io::Error::other)?;
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|&l| l <= MAX_HEADER_BYTES)
        .ok_or_else(|| io::Error::other("header too large"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(&bytes)?;
    for t in tensors {
        w.write_all(t)?;
    }
    w.flush()
}

pub fn read<T: DeserializeOwned + Carries>(r: &mut impl Read) -> Result<Message<T>, ProtocolError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Err(ProtocolError::Closed),
        other => other?,
    }
    let len = u32::from_le_bytes(len);
    if len > MAX_HEADER_BYTES {
        return Err(ProtocolError::Malformed(format!(
            "header of {len} bytes (the limit is {MAX_HEADER_BYTES})"
        )));
    }
    let header_bytes = read_exactly(r, len as u64)?;
    let header: T = postcard::from_bytes(&header_bytes)
        .map_err(|e| ProtocolError::Malformed(format!("header: {e}")))?;
    let specs = header.specs();
    if specs.len() > MAX_TENSORS {
        return Err(ProtocolError::Malformed(format!(
            "{} tensors (the limit is {MAX_TENSORS})",
            specs.len()
        )));
    }
    let mut tensors = Vec::with_capacity(specs.len());
    for spec in specs {
        let spec = spec.to_spec().map_err(ProtocolError::Malformed)?;
        let bytes = read_exactly(r, spec.size_bytes() as u64)?;
        tensors.push(
            HostTensor::from_bytes(spec, bytes)
                .map_err(|e| ProtocolError::Malformed(e.to_string()))?,
        );
    }
    Ok(Message { header, tensors })
}

/// Reads `len` bytes, growing the buffer only as bytes arrive: by exact
/// steps of at most [`READ_STEP`], so a message up to that size is one
/// allocation of its size, a larger one grows in place (large blocks are
/// remapped, not copied), and a length the peer never sends costs at most
/// one step more than it sent.
fn read_exactly(r: &mut impl Read, len: u64) -> Result<Vec<u8>, ProtocolError> {
    let mut out = Vec::new();
    while (out.len() as u64) < len {
        let step = (len - out.len() as u64).min(READ_STEP);
        out.reserve_exact(step as usize);
        let got = r.by_ref().take(step).read_to_end(&mut out)?;
        if (got as u64) < step {
            return Err(ProtocolError::Malformed(format!(
                "message ends after {} of {len} bytes",
                out.len()
            )));
        }
    }
    Ok(out)
}

/// See [`read_exactly`].
const READ_STEP: u64 = 16 << 20;
