//! `pack`: a golden vector file from a document plus captured tensors.

use crate::capture::{self, CaptureError};
use crate::document::{Document, TensorSource};
use crate::golden::{GoldenFile, GoldenWriter};
use crate::suite::{Suite, SuiteError};
use crate::HostTensor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error(transparent)]
    Capture(#[from] CaptureError),
    #[error("{}:{line}:{column}: tensor `{tensor}`: {message}", document.display())]
    Tensor {
        document: PathBuf,
        line: usize,
        column: usize,
        tensor: String,
        message: String,
    },
    #[error("the packed file does not check out against the document: {0}")]
    Check(#[from] SuiteError),
    #[error("cannot encode: {0}")]
    Encode(String),
}

/// What `pack` did, for the user.
#[derive(Debug, Default)]
pub struct PackSummary {
    pub stored: Vec<String>,
    pub seeded: Vec<String>,
    /// Captured tensors the document does not mention.
    pub unused: Vec<String>,
}

/// Builds the golden file bytes for `document` from `captures`, and checks
/// the result against the document (shapes of every graph included).
pub fn pack(
    document: &Document,
    captures: &[PathBuf],
) -> Result<(Vec<u8>, PackSummary), PackError> {
    let mut found: BTreeMap<String, (HostTensor, PathBuf)> = BTreeMap::new();
    for path in captures {
        for (name, t) in capture::read(path)? {
            found.insert(name, (t, path.clone()));
        }
    }
    let mut w = GoldenWriter::new(
        &document.component.id,
        &document.component.version,
        document.sha256,
    );
    let mut summary = PackSummary::default();
    for decl in &document.tensors {
        let fail = |message: String| PackError::Tensor {
            document: document.path.clone(),
            line: decl.at.line,
            column: decl.at.column,
            tensor: decl.name.clone(),
            message,
        };
        match &decl.source {
            TensorSource::Seeded(s) => {
                let shape = decl
                    .shape
                    .as_ref()
                    .expect("the document requires shapes of seeded tensors");
                w.seeded(&decl.name, decl.dtype, shape, *s).map_err(fail)?;
                summary.seeded.push(decl.name.clone());
            }
            TensorSource::Values(_) => {
                let t = decl
                    .intrinsic()
                    .expect("values are intrinsic")
                    .map_err(fail)?;
                w.raw(&decl.name, &t);
                summary.stored.push(decl.name.clone());
            }
            TensorSource::Golden | TensorSource::Weights(_) => {
                let Some((t, from)) = found.remove(&decl.name) else {
                    return Err(fail(format!(
                        "not found in the captures ({})",
                        captures
                            .iter()
                            .map(|p| p.display().to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    )));
                };
                if let Some(shape) = &decl.shape {
                    if *shape != t.spec.shape {
                        return Err(fail(format!(
                            "{} holds shape {:?}, the document declares {shape:?}",
                            from.display(),
                            t.spec.shape
                        )));
                    }
                }
                // Goldens computed in float64 are stored in the declared float type.
                let t = match (t.spec.dtype, decl.dtype) {
                    (a, b) if a == b => t,
                    (a, b) if a.is_float() && b.is_float() => t.cast(b),
                    (a, b) => {
                        return Err(fail(format!(
                            "{} holds {a}, the document declares {b}",
                            from.display()
                        )))
                    }
                };
                w.raw(&decl.name, &t);
                summary.stored.push(decl.name.clone());
            }
        }
    }
    summary.unused = found.into_keys().collect();
    let bytes = w.to_bytes().map_err(|e| PackError::Encode(e.to_string()))?;
    let golden =
        GoldenFile::from_bytes(Path::new("(packed)"), bytes.clone()).map_err(SuiteError::from)?;
    Suite::new(document.clone(), golden)?;
    Ok((bytes, summary))
}
