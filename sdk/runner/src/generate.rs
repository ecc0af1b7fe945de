//! Golden values computed by the reference: every stage's graph run in
//! float64 on the CPU provider from the document's own inputs, stored in each
//! output's declared dtype. Deterministic, so a committed golden file can be
//! checked by regenerating it.

use crate::captures::{capture_key, read_captures, supplied};
pub use crate::reference::{stage_goldens, ReferenceFailed};
use crate::suite::{Suite, SuiteError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vips_data::document::{Document, TensorSource};
use vips_data::golden::{canonical_sha256, GoldenFile, GoldenWriter};
use vips_data::HostTensor;
use vips_execution::Device;

#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("tensor `{tensor}`: {message}")]
    Input { tensor: String, message: String },
    #[error(transparent)]
    Reference(#[from] ReferenceFailed),
    #[error("{0}")]
    Seeded(String),
    #[error(transparent)]
    Check(#[from] SuiteError),
    #[error("cannot encode: {0}")]
    Encode(String),
    #[error("{0}")]
    Budget(String),
    /// The document's pinned weights file cannot be used.
    #[error("{0}")]
    Weights(String),
}

/// A tensor the document defines by itself (seeded or literal), generated.
fn intrinsic(document: &Document, name: &str) -> Result<HostTensor, GenerateError> {
    document
        .tensor(name)
        .and_then(|t| t.intrinsic())
        .ok_or_else(|| GenerateError::Input {
            tensor: name.into(),
            message: "neither produced by a stage, nor seeded, literal or supplied".into(),
        })?
        .map_err(GenerateError::Seeded)
}

/// The golden file of `document`: seeded tensors as recipes, literals and
/// `values` in full, except the tensors `anchored` names; `weights` tensors
/// of a document that pins its weights file by their hashes. `hashed:
/// false` leaves seeded tensors ungenerated and pinned ones unhashed (their
/// hash zero): only to measure a file's size.
fn layout(
    document: &Document,
    values: &HashMap<String, Arc<HostTensor>>,
    anchored: &dyn Fn(&str) -> bool,
    hashed: bool,
) -> Result<GoldenWriter, GenerateError> {
    let mut w = GoldenWriter::new(
        &document.component.id,
        &document.component.version,
        document.sha256,
    );
    for t in &document.tensors {
        match &t.source {
            TensorSource::Seeded(s) => {
                let shape = t.shape.as_deref().expect("seeded tensors have shapes");
                if hashed {
                    w.seeded(&t.name, t.dtype, shape, *s)
                        .map_err(GenerateError::Seeded)?;
                } else {
                    w.seeded_unchecked(&t.name, t.dtype, shape, *s);
                }
            }
            TensorSource::Values(_) => {
                w.raw(&t.name, &intrinsic(document, &t.name)?);
            }
            TensorSource::Weights(_) if document.weights.is_some() => {
                let v = &values[&t.name];
                let hash = if hashed { canonical_sha256(v) } else { [0; 32] };
                w.pinned(&t.name, v.spec.clone(), hash);
            }
            _ if anchored(&t.name) => {
                w.anchored(&t.name, &values[&t.name]);
            }
            _ => {
                w.raw(&t.name, &values[&t.name]);
            }
        }
    }
    Ok(w)
}

/// Which stage outputs are stored anchored under the document's budget
/// (docs/golden-format.md, "Choosing what is anchored"): none without one;
/// else each is stored in full while the file stays within the budget,
/// last stage first (a run of the last stages then regenerates nothing),
/// and the rest are anchored.
fn anchored_under_budget<'d>(
    document: &'d Document,
    values: &HashMap<String, Arc<HostTensor>>,
) -> Result<Vec<&'d str>, GenerateError> {
    let Some(budget) = document.golden_budget else {
        return Ok(Vec::new());
    };
    let outputs: Vec<&str> = document
        .stages
        .iter()
        .flat_map(|s| s.outputs.iter().map(String::as_str))
        .collect();
    // The file with every output anchored: what the budget must hold first.
    let w = layout(document, values, &|n| outputs.contains(&n), false)?;
    let mut size = w
        .to_bytes()
        .map_err(|e| GenerateError::Encode(e.to_string()))?
        .len() as u64;
    let mut anchored = outputs.clone();
    for name in outputs.iter().rev() {
        // A raw entry costs its bytes and a length; the fingerprint it
        // replaces is left counted (a little under the budget, never over).
        let cost = values[*name].spec.size_bytes() as u64 + 10;
        if size + cost <= budget {
            size += cost;
            anchored.retain(|n| n != name);
        }
    }
    Ok(anchored)
}

/// Computes the golden file of `document` on `reference` (the CPU provider).
/// Inputs no stage produces come from `captures` (e.g. a real photo), and
/// are stored in the golden file, pinned by their hashes. So do `weights`
/// tensors (a checkpoint under its official key names), unless the document
/// pins a weights file: they are then read from it (its SHA-256 checked
/// first) and the golden file records only their hashes.
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
    let pinned = match &document.weights {
        Some(pin) => Some(
            vips_data::weights::PinnedWeights::open(&document.path, pin)
                .map_err(GenerateError::Weights)?,
        ),
        None => None,
    };
    let from_pinned = |t: &vips_data::document::TensorDecl| {
        pinned.is_some() && matches!(t.source, TensorSource::Weights(_))
    };
    // Only the tensors taken from captures are read.
    let keys: Vec<&str> = document
        .tensors
        .iter()
        .filter(|t| {
            matches!(t.source, TensorSource::Golden | TensorSource::Weights(_))
                && !produced.contains(&t.name.as_str())
                && !from_pinned(t)
        })
        .map(capture_key)
        .collect();
    let (mut found, _) = read_captures(captures, &|name| keys.contains(&name)).map_err(|e| {
        GenerateError::Input {
            tensor: "(captures)".into(),
            message: e.to_string(),
        }
    })?;
    // Inputs no stage produces and that the document does not define itself
    // (seeded and literal tensors are generated when a stage reads them).
    let mut values: HashMap<String, Arc<HostTensor>> = HashMap::new();
    for t in &document.tensors {
        if t.intrinsic_source() || produced.contains(&t.name.as_str()) {
            continue;
        }
        let v = match &pinned {
            Some(file) if from_pinned(t) => file.read(t),
            _ => supplied(t, &mut found, captures),
        }
        .map_err(|message| GenerateError::Input {
            tensor: t.name.clone(),
            message,
        })?;
        values.insert(t.name.clone(), Arc::new(v));
    }
    for stage in &document.stages {
        let outputs = stage_goldens(document, reference, stage, &|name| match values.get(name) {
            Some(v) => Ok(Arc::clone(v)),
            None => intrinsic(document, name).map(Arc::new),
        })?;
        values.extend(outputs.into_iter().map(|(n, t)| (n, Arc::new(t))));
    }
    let anchored = anchored_under_budget(document, &values)?;
    let w = layout(document, &values, &|n| anchored.contains(&n), true)?;
    let bytes = w
        .to_bytes()
        .map_err(|e| GenerateError::Encode(e.to_string()))?;
    if let Some(budget) = document.golden_budget.filter(|&b| bytes.len() as u64 > b) {
        return Err(GenerateError::Budget(format!(
            "the golden file takes {} bytes, above the document's budget of {budget} \
             (golden.budget_bytes) with every stage output the reference computes anchored: \
             what is left is seeds, literals, weights and captured inputs{}",
            bytes.len(),
            if document.weights.is_none() {
                " (pin the weights file in the document, `weights: { file, sha256 }`, to store \
                 weights by reference)"
            } else {
                ""
            }
        )));
    }
    let golden = GoldenFile::from_bytes(Path::new("(generated)"), bytes.clone())
        .map_err(SuiteError::from)?;
    Suite::new(document.clone(), golden)?;
    Ok(bytes)
}
