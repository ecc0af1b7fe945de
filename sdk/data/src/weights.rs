//! Weights by reference (docs/vips-format.md, "`weights`: a pinned weights
//! file"): a document pins a `.safetensors` file by the SHA-256 of its bytes,
//! and its `weights` tensors are read from that file, one at a time, instead
//! of being stored in the golden file (which records their hashes).
//!
//! Nothing the file declares is trusted: it must be a regular file of at
//! most [`MAX_WEIGHTS_FILE_BYTES`] whose stream hash is the pinned one; its
//! header is at most [`MAX_SAFETENSORS_HEADER_BYTES`] and must describe
//! exactly the bytes that follow; a tensor's shape and dtype are checked
//! against the document's before its bytes are allocated.

use crate::document::{TensorDecl, TensorSource, WeightsPin};
use crate::limits::{open_regular_file, MAX_SAFETENSORS_HEADER_BYTES, MAX_WEIGHTS_FILE_BYTES};
use crate::HostTensor;
use safetensors::tensor::Metadata;
use sha2::{Digest, Sha256};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use vsdk_catalog::TensorSpec;

/// A pinned weights file, its hash checked and its header indexed; the file
/// stays open (the bytes hashed are the bytes read, even if the path is
/// replaced meanwhile).
#[derive(Debug)]
pub struct PinnedWeights {
    path: PathBuf,
    /// Where the data section starts: 8 + the header's length.
    data_start: u64,
    metadata: Metadata,
    file: Mutex<File>,
}

impl PinnedWeights {
    /// Opens `pin`, the weights file that `document` pins: a regular file,
    /// hashed as a stream and compared with the pinned SHA-256, then its
    /// safetensors header read within bounds. Errors name the file (and the
    /// document, or both hashes).
    pub fn open(document: &Path, pin: &WeightsPin) -> Result<PinnedWeights, String> {
        let path = &pin.path;
        let (mut file, size) = open_regular_file(path, MAX_WEIGHTS_FILE_BYTES).map_err(|e| {
            format!(
                "the weights file {} that {} pins: {e}",
                path.display(),
                document.display()
            )
        })?;
        let fail = |message: String| format!("the weights file {}: {message}", path.display());
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        let mut hashed = 0u64;
        let mut limited = (&mut file).take(size);
        loop {
            let n = limited
                .read(&mut buf)
                .map_err(|e| fail(format!("cannot read: {e}")))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
            hashed += n as u64;
        }
        if hashed != size {
            return Err(fail(format!(
                "shrank from {size} to {hashed} bytes while being read"
            )));
        }
        let got: [u8; 32] = hasher.finalize().into();
        if got != pin.sha256 {
            return Err(format!(
                "the weights file {} has sha256 {}, but {} pins sha256 {}: it is another file than the suite was made with",
                path.display(),
                hex::encode(got),
                document.display(),
                hex::encode(pin.sha256)
            ));
        }
        file.seek(SeekFrom::Start(0))
            .map_err(|e| fail(format!("cannot read: {e}")))?;
        if size < 8 {
            return Err(fail(format!(
                "not a safetensors file: {size} bytes, too short for the 8-byte header length"
            )));
        }
        let mut len = [0u8; 8];
        file.read_exact(&mut len)
            .map_err(|e| fail(format!("cannot read: {e}")))?;
        let header_len = u64::from_le_bytes(len);
        if header_len > MAX_SAFETENSORS_HEADER_BYTES || header_len > size - 8 {
            return Err(fail(format!(
                "not a safetensors file: the header declares {header_len} bytes (the limit is \
                 {MAX_SAFETENSORS_HEADER_BYTES}, the file has {size})"
            )));
        }
        let mut header = Vec::with_capacity(header_len as usize);
        (&mut file)
            .take(header_len)
            .read_to_end(&mut header)
            .map_err(|e| fail(format!("cannot read: {e}")))?;
        if header.len() as u64 != header_len {
            return Err(fail("the header is cut short".into()));
        }
        // Deserialising validates the index: offsets contiguous from 0,
        // each tensor's byte count its shape times its element size.
        let metadata: Metadata = serde_json::from_slice(&header)
            .map_err(|e| fail(format!("not a safetensors file: {e}")))?;
        let data = size - 8 - header_len;
        if metadata.data_len() as u64 != data {
            return Err(fail(format!(
                "not a safetensors file: the header describes {} data bytes, the file holds {data}",
                metadata.data_len()
            )));
        }
        Ok(PinnedWeights {
            path: path.clone(),
            data_start: 8 + header_len,
            metadata,
            file: Mutex::new(file),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The tensor of `decl` (a `weights` tensor): read under its key,
    /// checked against the declared shape (where given) and dtype before
    /// anything is allocated, and converted to the declared dtype (a float
    /// tensor to another float type, rounded to nearest even).
    pub fn read(&self, decl: &TensorDecl) -> Result<HostTensor, String> {
        let TensorSource::Weights(key) = &decl.source else {
            return Err(format!("tensor `{}` is not a `weights` tensor", decl.name));
        };
        let file = self.path.display();
        let info = self.metadata.info(key).ok_or_else(|| {
            format!(
                "key `{key}` is not in the weights file {file} ({} tensors)",
                self.metadata.offset_keys().len()
            )
        })?;
        let dtype = crate::capture::safetensors_dtype(info.dtype).ok_or_else(|| {
            format!(
                "`{key}` in {file} is {:?}, which is not in catalog v1",
                info.dtype
            )
        })?;
        if let Some(shape) = decl.shape.as_deref().filter(|s| *s != info.shape) {
            return Err(format!(
                "`{key}` in {file} has shape {:?}, the document declares {shape:?} for tensor `{}`",
                info.shape, decl.name
            ));
        }
        let convertible = dtype == decl.dtype || (dtype.is_float() && decl.dtype.is_float());
        if !convertible {
            return Err(format!(
                "`{key}` in {file} is {dtype}, the document declares {} for tensor `{}`",
                decl.dtype, decl.name
            ));
        }
        let spec = TensorSpec::new(dtype, &info.shape);
        let bytes = spec
            .bounded_size_bytes()
            .map_err(|e| format!("`{key}` in {file}: {e}"))?;
        let (start, end) = info.data_offsets;
        if end.checked_sub(start) != Some(bytes) {
            return Err(format!(
                "`{key}` in {file}: its offsets hold {} bytes, its shape needs {bytes}",
                end.saturating_sub(start)
            ));
        }
        let mut data = Vec::with_capacity(bytes);
        {
            let mut f = self.file.lock().unwrap_or_else(|p| p.into_inner());
            f.seek(SeekFrom::Start(self.data_start + start as u64))
                .map_err(|e| format!("{file}: cannot read: {e}"))?;
            (&mut *f)
                .take(bytes as u64)
                .read_to_end(&mut data)
                .map_err(|e| format!("{file}: cannot read: {e}"))?;
        }
        if data.len() != bytes {
            return Err(format!(
                "`{key}` in {file}: the file was cut short while being read"
            ));
        }
        let t =
            HostTensor::from_bytes(spec, data).map_err(|e| format!("`{key}` in {file}: {e}"))?;
        Ok(if dtype == decl.dtype {
            t
        } else {
            t.cast(decl.dtype)
        })
    }
}
