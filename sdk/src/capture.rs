//! Reading captured tensors, as a PyTorch user dumps them: `.npy` (one array,
//! named after the file), `.npz` (named arrays) and `.safetensors`.

use crate::golden::MAX_TENSOR_BYTES;
use crate::{DType, Element, HostTensor};
use half::f16;
use npyz::{NpyFile, TypeChar};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct CaptureError {
    pub path: std::path::PathBuf,
    pub message: String,
}

/// Deflate never expands data by more than about 1032 times.
const MAX_DEFLATE_RATIO: u64 = 1032;

/// Reads every tensor of a capture file, by name.
pub fn read(path: &Path) -> Result<BTreeMap<String, HostTensor>, CaptureError> {
    let fail = |message: String| CaptureError {
        path: path.to_path_buf(),
        message,
    };
    let size = std::fs::metadata(path)
        .map_err(|e| fail(format!("cannot read: {e}")))?
        .len();
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => {
            let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot read: {e}")))?;
            let name = path
                .file_stem()
                .and_then(|s| s.to_str())
                .unwrap_or("array")
                .to_string();
            let npy = NpyFile::new(std::io::BufReader::new(file))
                .map_err(|e| fail(format!("not a .npy file: {e}")))?;
            let t = npy_tensor(npy, size).map_err(|m| fail(format!("array `{name}`: {m}")))?;
            Ok(BTreeMap::from([(name, t)]))
        }
        Some("npz") => {
            let mut npz = npyz::npz::NpzArchive::open(path)
                .map_err(|e| fail(format!("not a .npz archive: {e}")))?;
            let names: Vec<String> = npz.array_names().map(str::to_string).collect();
            let mut out = BTreeMap::new();
            for name in names {
                let npy = npz
                    .by_name(&name)
                    .map_err(|e| fail(format!("array `{name}`: {e}")))?
                    .ok_or_else(|| fail(format!("array `{name}` vanished from the archive")))?;
                let t = npy_tensor(npy, size.saturating_mul(MAX_DEFLATE_RATIO))
                    .map_err(|m| fail(format!("array `{name}`: {m}")))?;
                out.insert(name, t);
            }
            Ok(out)
        }
        Some("safetensors") => {
            let mut bytes = Vec::new();
            std::fs::File::open(path)
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(|e| fail(format!("cannot read: {e}")))?;
            let st = safetensors::SafeTensors::deserialize(&bytes)
                .map_err(|e| fail(format!("not a safetensors file: {e}")))?;
            st.iter()
                .map(|(name, view)| {
                    let dtype = match view.dtype() {
                        safetensors::Dtype::F16 => DType::F16,
                        safetensors::Dtype::BF16 => DType::BF16,
                        safetensors::Dtype::F32 => DType::F32,
                        safetensors::Dtype::F64 => DType::F64,
                        safetensors::Dtype::U8 => DType::U8,
                        safetensors::Dtype::I32 => DType::I32,
                        safetensors::Dtype::I64 => DType::I64,
                        other => {
                            return Err(fail(format!(
                                "tensor `{name}`: dtype {other:?} is not in catalog v1"
                            )))
                        }
                    };
                    let spec = crate::TensorSpec::new(dtype, view.shape());
                    let t = HostTensor::from_bytes(spec, view.data().to_vec())
                        .map_err(|e| fail(format!("tensor `{name}`: {e}")))?;
                    Ok((name.to_string(), t))
                })
                .collect()
        }
        _ => Err(fail(
            "unknown capture format: expected .npy, .npz or .safetensors".into(),
        )),
    }
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
