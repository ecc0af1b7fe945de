//! `pack`: a golden vector file from a document plus captured tensors.

use crate::capture::{self, CaptureError};
use crate::document::{Document, TensorDecl, TensorSource};
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

/// Captured tensors by name (or checkpoint key), with the file each came from.
pub type Captures = BTreeMap<String, (HostTensor, PathBuf)>;

/// Reads every capture file.
pub fn read_captures(paths: &[PathBuf]) -> Result<Captures, CaptureError> {
    let mut found = Captures::new();
    for path in paths {
        for (name, t) in capture::read(path)? {
            found.insert(name, (t, path.clone()));
        }
    }
    Ok(found)
}

/// The captured value of `decl`: found under its name, or under its
/// checkpoint key for `weights` tensors; checked against the declared shape
/// and converted to the declared float type (float64 goldens are stored as
/// float32). Removes it from `found`.
pub(crate) fn supplied(
    decl: &TensorDecl,
    found: &mut Captures,
    paths: &[PathBuf],
) -> Result<HostTensor, String> {
    let key = match &decl.source {
        TensorSource::Weights(key) => key.as_str(),
        _ => decl.name.as_str(),
    };
    let Some((t, from)) = found.remove(key) else {
        let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
        return Err(format!(
            "`{key}` is not in the captures ({})",
            files.join(", ")
        ));
    };
    if let Some(shape) = &decl.shape {
        if *shape != t.spec.shape {
            return Err(format!(
                "`{key}` in {} has shape {:?}, the document declares {shape:?}",
                from.display(),
                t.spec.shape
            ));
        }
    }
    match (t.spec.dtype, decl.dtype) {
        (a, b) if a == b => Ok(t),
        (a, b) if a.is_float() && b.is_float() => Ok(t.cast(b)),
        (a, b) => Err(format!(
            "`{key}` in {} is {a}, the document declares {b}",
            from.display()
        )),
    }
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
    let mut found = read_captures(captures)?;
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
                let t = supplied(decl, &mut found, captures).map_err(fail)?;
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
