//! Golden values computed by the reference: every stage's graph run in
//! float64 on the CPU provider from the document's own inputs, stored in each
//! output's declared dtype. Deterministic, so a committed golden file can be
//! checked by regenerating it.

use crate::document::{Document, TensorSource};
use crate::golden::{GoldenFile, GoldenWriter};
use crate::pack::{capture_key, read_captures, supplied};
use crate::suite::{Suite, SuiteError};
use crate::{DType, Device, DeviceTensor, Error, HostTensor};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("tensor `{tensor}`: {message}")]
    Input { tensor: String, message: String },
    #[error("stage `{stage}`: {source}")]
    Reference {
        stage: String,
        #[source]
        source: Error,
    },
    #[error("{0}")]
    Seeded(String),
    #[error(transparent)]
    Check(#[from] SuiteError),
    #[error("cannot encode: {0}")]
    Encode(String),
}

/// Computes the golden file of `document` on `reference` (the CPU provider).
/// Inputs no stage produces and `weights` tensors come from `captures`
/// (e.g. a real photo, or a checkpoint under its official key names); they
/// are stored in the golden file, pinned by their hashes.
pub fn generate(
    document: &Document,
    reference: &Device,
    captures: &[PathBuf],
) -> Result<Vec<u8>, GenerateError> {
    let produced: Vec<&str> = document
        .stages
        .iter()
        .flat_map(|s| s.outputs.iter().map(String::as_str))
        .collect();
    // Only the tensors taken from captures are read.
    let keys: Vec<&str> = document
        .tensors
        .iter()
        .filter(|t| {
            matches!(t.source, TensorSource::Golden | TensorSource::Weights(_))
                && !produced.contains(&t.name.as_str())
        })
        .map(capture_key)
        .collect();
    let (mut found, _) = read_captures(captures, &|name| keys.contains(&name)).map_err(|e| {
        GenerateError::Input {
            tensor: "(captures)".into(),
            message: e.to_string(),
        }
    })?;
    // Inputs: seeded tensors, regenerated as the document says.
    let mut values: HashMap<String, HostTensor> = HashMap::new();
    for t in &document.tensors {
        match t.intrinsic() {
            Some(v) => {
                values.insert(t.name.clone(), v.map_err(GenerateError::Seeded)?);
            }
            None if produced.contains(&t.name.as_str()) => {}
            None => {
                let v =
                    supplied(t, &mut found, captures).map_err(|message| GenerateError::Input {
                        tensor: t.name.clone(),
                        message,
                    })?;
                values.insert(t.name.clone(), v);
            }
        }
    }
    let wide = |t: &HostTensor| {
        if t.spec.dtype.is_float() {
            t.cast(DType::F64)
        } else {
            t.clone()
        }
    };
    for stage in &document.stages {
        let fail = |source| GenerateError::Reference {
            stage: stage.name.clone(),
            source,
        };
        let mut on_device: HashMap<&str, DeviceTensor> = HashMap::new();
        for name in &stage.inputs {
            on_device.insert(name, reference.upload(&wide(&values[name])).map_err(fail)?);
        }
        for node in &stage.graph {
            let args: Vec<&DeviceTensor> =
                node.inputs.iter().map(|i| &on_device[i.as_str()]).collect();
            let out = reference
                .execute(
                    node.op.name(),
                    node.op.version(),
                    &node.attrs_at(Some(DType::F64)),
                    &args,
                )
                .map_err(fail)?;
            on_device.insert(&node.output, out.into_iter().next().expect("one output"));
        }
        for name in &stage.outputs {
            let decl = document.tensor(name).expect("outputs are declared");
            let t = reference
                .download(&on_device[name.as_str()])
                .map_err(fail)?;
            values.insert(name.clone(), t.cast(decl.dtype));
        }
    }
    let mut w = GoldenWriter::new(
        &document.component.id,
        &document.component.version,
        document.sha256,
    );
    for t in &document.tensors {
        match &t.source {
            TensorSource::Seeded(s) => {
                w.seeded(
                    &t.name,
                    t.dtype,
                    t.shape.as_deref().expect("seeded tensors have shapes"),
                    *s,
                )
                .map_err(GenerateError::Seeded)?;
            }
            _ => {
                w.raw(&t.name, &values[&t.name]);
            }
        }
    }
    let bytes = w
        .to_bytes()
        .map_err(|e| GenerateError::Encode(e.to_string()))?;
    let golden = GoldenFile::from_bytes(Path::new("(generated)"), bytes.clone())
        .map_err(SuiteError::from)?;
    Suite::new(document.clone(), golden)?;
    Ok(bytes)
}
