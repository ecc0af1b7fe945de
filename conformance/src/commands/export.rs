//! `export`: a suite's tensors as .safetensors, for a reference system (PyTorch)
//! to load the same weights and inputs and compare with the golden outputs.

use crate::suites;
use std::borrow::Borrow;
use std::path::Path;
use std::process::ExitCode;
use vips_sdk::{DType, HostTensor};

pub fn run(suite: &str, out: &Path) -> super::Outcome {
    let suite = suites::locate(suite)?.open()?;
    let tensors = suite
        .document
        .tensors
        .iter()
        .map(|t| suite.tensor(&t.name).map(|v| (t.name.clone(), v)))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    write(out, &tensors)?;
    println!("wrote {} ({} tensors)", out.display(), tensors.len());
    Ok(ExitCode::SUCCESS)
}

/// Writes named tensors as one .safetensors file.
pub fn write(out: &Path, tensors: &[(String, impl Borrow<HostTensor>)]) -> Result<(), String> {
    let views = tensors
        .iter()
        .map(|(name, t)| {
            let t: &HostTensor = t.borrow();
            let dtype = match t.spec.dtype {
                DType::F16 => safetensors::Dtype::F16,
                DType::BF16 => safetensors::Dtype::BF16,
                DType::F32 => safetensors::Dtype::F32,
                DType::F64 => safetensors::Dtype::F64,
                DType::U8 => safetensors::Dtype::U8,
                DType::I32 => safetensors::Dtype::I32,
                DType::I64 => safetensors::Dtype::I64,
            };
            safetensors::tensor::TensorView::new(dtype, t.spec.shape.clone(), &t.bytes)
                .map(|v| (name.as_str(), v))
                .map_err(|e| format!("tensor `{name}`: {e}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    safetensors::serialize_to_file(views, None, out)
        .map_err(|e| format!("{}: cannot write: {e}", out.display()))
}
