//! `pack`: a golden vector file from a document plus captured tensors.

use crate::capture::{self, CaptureError};
use crate::compare::NanPolicy;
use crate::document::{Document, Stage, TensorDecl, TensorSource};
use crate::golden::{GoldenFile, GoldenWriter, Seeded};
use crate::suite::{Suite, SuiteError};
use crate::{DType, HostTensor};
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
    #[error("{0}")]
    Budget(String),
    #[error("cannot encode: {0}")]
    Encode(String),
}

/// Captured tensors by name (or checkpoint key), with the file each came from.
pub type Captures = BTreeMap<String, (HostTensor, PathBuf)>;

/// Reads the tensors `wanted` selects from every capture file; also returns
/// the names of the others, whose data is not read.
pub fn read_captures(
    paths: &[PathBuf],
    wanted: &dyn Fn(&str) -> bool,
) -> Result<(Captures, Vec<String>), CaptureError> {
    let mut found = Captures::new();
    let mut skipped = Vec::new();
    for path in paths {
        let c = capture::read_selected(path, wanted)?;
        for (name, t) in c.tensors {
            found.insert(name, (t, path.clone()));
        }
        skipped.extend(c.skipped);
    }
    Ok((found, skipped))
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
    let (t, from) = captured(decl, found, paths)?;
    convert(decl, t, &from, Widening::Allowed)
}

/// The name a capture of `decl` goes by: its checkpoint key for `weights`
/// tensors, else its name.
pub(crate) fn capture_key(decl: &TensorDecl) -> &str {
    match &decl.source {
        TensorSource::Weights(key) => key.as_str(),
        _ => decl.name.as_str(),
    }
}

/// The capture of `decl` as found, with its file; its shape checked against
/// the declared one. Removes it from `found`.
fn captured(
    decl: &TensorDecl,
    found: &mut Captures,
    paths: &[PathBuf],
) -> Result<(HostTensor, PathBuf), String> {
    let key = capture_key(decl);
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
    Ok((t, from))
}

/// Whether a float capture narrower than the declared type may be widened.
#[derive(Clone, Copy, PartialEq)]
enum Widening {
    /// `generate`'s inputs: widening is exact, and the reference computes
    /// from exactly those values.
    Allowed,
    /// `pack`: the values must have been computed at the declared precision.
    Refused,
}

/// Significand bits (with the implicit one) of a float dtype: what decides
/// whether a capture is narrower than the declared type.
fn significand_bits(d: DType) -> u32 {
    match d {
        DType::F16 => 11,
        DType::BF16 => 8,
        DType::F32 => 24,
        DType::F64 => 53,
        _ => 0,
    }
}

/// `t`, captured for `decl` (from `from`), in the declared dtype: the same
/// dtype as is, a wider float rounded to nearest even; a narrower float
/// only where `widening` allows; anything else is an error.
fn convert(
    decl: &TensorDecl,
    t: HostTensor,
    from: &Path,
    widening: Widening,
) -> Result<HostTensor, String> {
    let key = capture_key(decl);
    match (t.spec.dtype, decl.dtype) {
        (a, b) if a == b => Ok(t),
        (a, b)
            if a.is_float()
                && b.is_float()
                && widening == Widening::Refused
                && significand_bits(a) < significand_bits(b) =>
        {
            Err(format!(
                "`{key}` in {} is {a}, narrower than the declared {b}: its values carry {a} rounding \
                 that {b} does not have; capture the reference's values in {b} or wider (float64 is \
                 rounded to {b})",
                from.display()
            ))
        }
        (a, b) if a.is_float() && b.is_float() => Ok(t.cast(b)),
        (a, b) => Err(format!(
            "`{key}` in {} is {a}, the document declares {b}",
            from.display()
        )),
    }
}

/// An expected output (`t`, the capture `raw` converted to the declared
/// dtype) must be comparable: ±Inf never, NaN only where `stage` declares
/// `nan: allow`. Names the first offending flat index.
fn check_expected(
    name: &str,
    stage: &Stage,
    raw: &HostTensor,
    t: &HostTensor,
    from: &Path,
) -> Result<(), String> {
    let Some((i, v)) = t
        .to_f64_vec()
        .into_iter()
        .enumerate()
        .find(|&(_, v)| v.is_infinite() || (v.is_nan() && stage.nan != NanPolicy::Allow))
    else {
        return Ok(());
    };
    let was = raw.to_f64_vec()[i];
    let overflow = if was.is_finite() {
        format!(
            " (captured as {} {was:e}, which overflows {})",
            raw.spec.dtype, t.spec.dtype
        )
    } else {
        String::new()
    };
    let rule = if v.is_nan() {
        "the stage declares `nan: fail` (the default); declare `nan: allow` if the reference \
         really outputs NaN there"
    } else {
        "expected outputs must be finite (`nan: allow` admits NaN, never ±Inf)"
    };
    Err(format!(
        "`{name}` in {}, an output of stage `{}`, holds {v} at flat index {i}{overflow}: {rule}",
        from.display(),
        stage.name
    ))
}

/// A captured copy of a seeded tensor must be the regenerated tensor: the
/// captured outputs were computed from it. Both are in the declared dtype.
fn check_seeded_copy(
    decl: &TensorDecl,
    s: &Seeded,
    captured: &HostTensor,
    from: &Path,
    regenerated: &HostTensor,
) -> Result<(), String> {
    let (a, b) = (captured.to_f64_vec(), regenerated.to_f64_vec());
    let mut worst: Option<(usize, f64)> = None;
    let mut differ = 0usize;
    for (i, (&x, &y)) in a.iter().zip(&b).enumerate() {
        if x == y || (x.is_nan() && y.is_nan()) {
            continue;
        }
        differ += 1;
        let d = (x - y).abs();
        let d = if d.is_nan() { f64::INFINITY } else { d };
        if worst.is_none_or(|(_, w)| d > w) {
            worst = Some((i, d));
        }
    }
    let Some((i, d)) = worst else {
        return Ok(());
    };
    Err(format!(
        "`{}` in {} differs from the document's seeded recipe (seed {}, {:?}): largest difference \
         {d:e} at flat index {i} (captured {}, regenerated {}), {differ} of {} elements differ. The \
         captured outputs were computed from other values than the document's: feed the reference \
         the regenerated tensor (docs/golden-format.md, tools/seeded_reference.py), or declare \
         `{}` with `source: golden`",
        decl.name,
        from.display(),
        s.seed,
        s.distribution,
        a[i],
        b[i],
        a.len(),
        decl.name
    ))
}

/// What `pack` did, for the user.
#[derive(Debug, Default)]
pub struct PackSummary {
    pub stored: Vec<String>,
    pub seeded: Vec<String>,
    /// Seeded tensors that were also captured, and found identical to their
    /// regenerated values (still written as recipes).
    pub verified: Vec<String>,
    /// Captured tensors the document does not mention.
    pub unused: Vec<String>,
}

/// Builds the golden file bytes for `document` from `captures`, and checks
/// the result against the document (shapes of every graph included).
pub fn pack(
    document: &Document,
    captures: &[PathBuf],
) -> Result<(Vec<u8>, PackSummary), PackError> {
    // Only what the document names is read (an unused .npz member is never
    // inflated).
    let keys: Vec<&str> = document
        .tensors
        .iter()
        .flat_map(|t| [t.name.as_str(), capture_key(t)])
        .collect();
    let (mut found, skipped) = read_captures(captures, &|name| keys.contains(&name))?;
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
                if found.contains_key(&decl.name) {
                    let (t, from) = captured(decl, &mut found, captures).map_err(fail)?;
                    let t = convert(decl, t, &from, Widening::Refused).map_err(fail)?;
                    let regenerated = s.generate(decl.dtype, shape).map_err(fail)?;
                    check_seeded_copy(decl, s, &t, &from, &regenerated).map_err(fail)?;
                    summary.verified.push(decl.name.clone());
                }
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
                let (raw, from) = captured(decl, &mut found, captures).map_err(fail)?;
                // An expected output: a golden tensor some stage produces.
                let producer = match decl.source {
                    TensorSource::Golden => document
                        .stages
                        .iter()
                        .find(|s| s.outputs.contains(&decl.name)),
                    _ => None,
                };
                let t = match producer {
                    Some(stage) => {
                        let t =
                            convert(decl, raw.clone(), &from, Widening::Refused).map_err(fail)?;
                        check_expected(&decl.name, stage, &raw, &t, &from).map_err(fail)?;
                        t
                    }
                    None => convert(decl, raw, &from, Widening::Refused).map_err(fail)?,
                };
                w.raw(&decl.name, &t);
                summary.stored.push(decl.name.clone());
            }
        }
    }
    summary.unused = found.into_keys().chain(skipped).collect();
    summary.unused.sort();
    summary.unused.dedup();
    let bytes = w.to_bytes().map_err(|e| PackError::Encode(e.to_string()))?;
    // A capture cannot be anchored: the reference would not regenerate it.
    if let Some(budget) = document.golden_budget.filter(|&b| bytes.len() as u64 > b) {
        return Err(PackError::Budget(format!(
            "{}: the packed golden file takes {} bytes, above the document's budget of {budget} \
             (golden.budget_bytes): captured values are stored in full (only values the reference \
             computes can be anchored); raise the budget, or compute the expected values with \
             `vips-conformance generate`",
            document.path.display(),
            bytes.len()
        )));
    }
    let golden =
        GoldenFile::from_bytes(Path::new("(packed)"), bytes.clone()).map_err(SuiteError::from)?;
    Suite::new(document.clone(), golden)?;
    Ok((bytes, summary))
}
