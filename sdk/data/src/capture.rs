//! Reading captured tensors, as a PyTorch user dumps them: `.npy` (one array,
//! named after the file), `.npz` (named arrays) and `.safetensors`.
//!
//! Nothing a file declares is trusted: a `.npy` header is parsed and bounded
//! here before `npyz` sees it, an `.npz` member's declared sizes are checked
//! before it is inflated (and only the members asked for are inflated), and
//! a safetensors header length is checked against the file first
//! (`crate::limits` has the bounds).

mod npy_header;

use crate::limits::{
    open_regular_file, MAX_DEFLATE_RATIO, MAX_NPY_HEADER_BYTES, MAX_SAFETENSORS_HEADER_BYTES,
    MAX_TENSOR_BYTES,
};
use crate::{Element, HostTensor};
use half::f16;
use npyz::{NpyFile, TypeChar};
use std::collections::BTreeMap;
use std::io::{BufReader, Cursor, Read};
use std::path::Path;
use vsdk_catalog::DType;

#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct CaptureError {
    pub path: std::path::PathBuf,
    pub message: String,
}

/// The largest `.npy` file or `.npz` member: the magic, the version, the
/// header length, the largest header and the largest tensor.
const MAX_NPY_BYTES: u64 = 12 + MAX_NPY_HEADER_BYTES + MAX_TENSOR_BYTES;

/// What one capture file holds: the tensors asked for, and the names of the
/// others (whose data was not read).
#[derive(Debug, Default)]
pub struct Capture {
    pub tensors: BTreeMap<String, HostTensor>,
    pub skipped: Vec<String>,
}

/// Reads every tensor of a capture file, by name.
pub fn read(path: &Path) -> Result<BTreeMap<String, HostTensor>, CaptureError> {
    read_selected(path, &|_| true).map(|c| c.tensors)
}

/// Reads the tensors of a capture file that `wanted` selects, by name. The
/// others are only listed: their data is not read (an `.npz` member is not
/// inflated), though their headers are checked.
pub fn read_selected(path: &Path, wanted: &dyn Fn(&str) -> bool) -> Result<Capture, CaptureError> {
    let fail = |message: String| CaptureError {
        path: path.to_path_buf(),
        message,
    };
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => {
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("array")
                .to_string();
            let (file, size) = open_regular_file(path, MAX_NPY_BYTES).map_err(fail)?;
            let mut reader = BufReader::new(file);
            let header = npy_header::read(&mut reader, size).map_err(fail)?;
            let mut out = Capture::default();
            if wanted(&name) {
                let t =
                    npy_member(header, reader).map_err(|m| fail(format!("array `{name}`: {m}")))?;
                out.tensors.insert(name, t);
            } else {
                out.skipped.push(name);
            }
            Ok(out)
        }
        Some("npz") => read_npz(path, wanted).map_err(fail),
        Some("safetensors") => read_safetensors(path, wanted).map_err(fail),
        _ => Err(fail(
            "unknown capture format: expected .npy, .npz or .safetensors".into(),
        )),
    }
}

/// The array after a validated header: `npyz` is handed exactly the header
/// bytes read and at most the data bytes they declare.
fn npy_member(header: npy_header::NpyHeader, rest: impl Read) -> Result<HostTensor, String> {
    let data = rest.take(header.data_bytes);
    let npy = NpyFile::new(Cursor::new(header.raw).chain(data))
        .map_err(|e| format!("not a .npy file: {e}"))?;
    npy_tensor(npy, MAX_TENSOR_BYTES)
}

fn read_npz(path: &Path, wanted: &dyn Fn(&str) -> bool) -> Result<Capture, String> {
    let (file, _) = open_regular_file(path, u64::MAX)?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file))
        .map_err(|e| format!("not a .npz archive: {e}"))?;
    // Every member's declared sizes first, before anything is inflated.
    let mut members: Vec<(usize, String, u64)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for i in 0..zip.len() {
        let m = zip
            .by_index_raw(i)
            .map_err(|e| format!("not a .npz archive: member #{i}: {e}"))?;
        // NumPy names each member `<array>.npy` (a NUL ends a name early).
        let full = m.name();
        let Some(name) = full.split('\0').next().and_then(|n| n.strip_suffix(".npy")) else {
            continue;
        };
        let name = name.to_string();
        let (size, packed) = (m.size(), m.compressed_size());
        let bound = match m.compression() {
            zip::CompressionMethod::Stored => packed,
            zip::CompressionMethod::Deflated => packed.max(1).saturating_mul(MAX_DEFLATE_RATIO),
            other => {
                return Err(format!(
                    "array `{name}`: compression {other} (NumPy writes stored or deflated members)"
                ))
            }
        };
        if size > bound {
            return Err(format!(
                "array `{name}`: the member declares {size} bytes from {packed} compressed, more \
                 than its compression can give (at most {MAX_DEFLATE_RATIO} times): the archive \
                 is corrupt"
            ));
        }
        if size > MAX_NPY_BYTES {
            return Err(format!(
                "array `{name}`: the member declares {size} bytes, above the {MAX_NPY_BYTES}-byte \
                 limit for an array"
            ));
        }
        if !seen.insert(name.clone()) {
            return Err(format!(
                "array `{name}` is stored twice in the archive (member #{i} is `{}`)",
                m.name()
            ));
        }
        members.push((i, name, size));
    }
    let mut out = Capture::default();
    for (i, name, size) in members {
        let m = zip
            .by_index(i)
            .map_err(|e| format!("array `{name}`: {e}"))?;
        // Never more than the member declares, whatever the stream holds.
        let mut m = m.take(size);
        let header = npy_header::read(&mut m, size).map_err(|e| format!("array `{name}`: {e}"))?;
        if !wanted(&name) {
            out.skipped.push(name);
            continue;
        }
        let t = npy_member(header, m).map_err(|e| format!("array `{name}`: {e}"))?;
        out.tensors.insert(name, t);
    }
    Ok(out)
}

fn read_safetensors(path: &Path, wanted: &dyn Fn(&str) -> bool) -> Result<Capture, String> {
    let (mut file, size) = open_regular_file(path, u64::MAX)?;
    let mut len = [0u8; 8];
    if size < 8 {
        return Err(format!(
            "not a safetensors file: {size} bytes, too short for the 8-byte header length"
        ));
    }
    file.read_exact(&mut len)
        .map_err(|e| format!("cannot read: {e}"))?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_SAFETENSORS_HEADER_BYTES {
        return Err(format!(
            "not a safetensors file: the header declares {header_len} bytes, above the \
             {MAX_SAFETENSORS_HEADER_BYTES}-byte limit for a safetensors header"
        ));
    }
    if 8 + header_len > size {
        return Err(format!(
            "not a safetensors file: the header declares {header_len} bytes, past the end of the \
             file ({size} bytes)"
        ));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    bytes.extend_from_slice(&len);
    file.take(size - 8)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read: {e}"))?;
    let st = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| format!("not a safetensors file: {e}"))?;
    let mut out = Capture::default();
    for (name, view) in st.iter() {
        if !wanted(name) {
            out.skipped.push(name.to_string());
            continue;
        }
        let dtype = safetensors_dtype(view.dtype()).ok_or_else(|| {
            format!(
                "tensor `{name}`: dtype {:?} is not in catalog v1",
                view.dtype()
            )
        })?;
        let spec = vsdk_catalog::TensorSpec::new(dtype, view.shape());
        spec.bounded_size_bytes()
            .map_err(|e| format!("tensor `{name}`: {e}"))?;
        let t = HostTensor::from_bytes(spec, view.data().to_vec())
            .map_err(|e| format!("tensor `{name}`: {e}"))?;
        out.tensors.insert(name.to_string(), t);
    }
    out.skipped.sort();
    Ok(out)
}

fn npy_tensor<R: Read>(npy: NpyFile<R>, max_bytes: u64) -> Result<HostTensor, String> {
    if npy.order() == npyz::Order::Fortran {
        return Err("Fortran-order arrays are not supported: save np.ascontiguousarray(a)".into());
    }
    let npyz::DType::Plain(ts) = npy.dtype() else {
        return Err(format!(
            "dtype {:?} is not a plain numeric type",
            npy.dtype()
        ));
    };
    let dtype = match (ts.type_char(), ts.size_field()) {
        (TypeChar::Float, 2) => DType::F16,
        (TypeChar::Float, 4) => DType::F32,
        (TypeChar::Float, 8) => DType::F64,
        (TypeChar::Uint, 1) => DType::U8,
        (TypeChar::Int, 4) => DType::I32,
        (TypeChar::Int, 8) => DType::I64,
        _ => return Err(format!("dtype `{ts}` is not in catalog v1")),
    };
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let bytes = npy
        .shape()
        .iter()
        .try_fold(dtype.size_bytes() as u64, |a, &d| a.checked_mul(d));
    match bytes {
        Some(b) if b <= max_bytes.min(MAX_TENSOR_BYTES) => {}
        _ => {
            return Err(format!(
                "shape {shape:?} of {dtype} is larger than the file can hold"
            ))
        }
    }
    fn read<T: npyz::Deserialize + Element, R: Read>(
        npy: NpyFile<R>,
        shape: &[usize],
    ) -> Result<HostTensor, String> {
        let v: Vec<T> = npy
            .into_vec()
            .map_err(|e| format!("truncated or corrupt data: {e}"))?;
        HostTensor::from_vec(shape, v).map_err(|e| e.to_string())
    }
    match dtype {
        DType::F16 => read::<f16, R>(npy, &shape),
        DType::F32 => read::<f32, R>(npy, &shape),
        DType::F64 => read::<f64, R>(npy, &shape),
        DType::U8 => read::<u8, R>(npy, &shape),
        DType::I32 => read::<i32, R>(npy, &shape),
        DType::I64 => read::<i64, R>(npy, &shape),
        DType::BF16 => unreachable!("numpy has no bfloat16"),
    }
}

/// A safetensors dtype as the catalog's, where it has one.
pub(crate) fn safetensors_dtype(d: safetensors::Dtype) -> Option<DType> {
    Some(match d {
        safetensors::Dtype::F16 => DType::F16,
        safetensors::Dtype::BF16 => DType::BF16,
        safetensors::Dtype::F32 => DType::F32,
        safetensors::Dtype::F64 => DType::F64,
        safetensors::Dtype::U8 => DType::U8,
        safetensors::Dtype::I32 => DType::I32,
        safetensors::Dtype::I64 => DType::I64,
        _ => return None,
    })
}
