//! `pack`: a golden vector file from a document plus captured tensors.

use crate::capture::{self, CaptureError};
use crate::compare::Tier;
use crate::document::{Document, Stage, TensorDecl, TensorSource};
use crate::golden::{GoldenFile, Seeded};
use crate::runner::{self, RunOptions, Status};
use crate::suite::{Suite, SuiteError};
use crate::{DType, Device, HostTensor};
use std::collections::{BTreeMap, HashMap};
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
    #[error(transparent)]
    Generate(#[from] crate::generate::GenerateError),
    #[error("{0}")]
    Disagree(String),
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
    /// Tensors stored in full: inputs no stage produces and `weights`, from
    /// the captures, and literals.
    pub stored: Vec<String>,
    /// Stage outputs, computed by the float64 reference.
    pub computed: Vec<String>,
    pub seeded: Vec<String>,
    /// Seeded tensors that were also captured, and found identical to their
    /// regenerated values (still written as recipes).
    pub verified: Vec<String>,
    /// Captured tensors the document does not mention.
    pub unused: Vec<String>,
    /// How the captured stage outputs were judged against the reference
    /// (tier and mode, in words); `None` where no stage output was captured.
    pub judged: Option<String>,
    /// Stages whose captured outputs passed, and those none of whose outputs
    /// was captured.
    pub agreeing: Vec<String>,
    pub not_captured: Vec<String>,
    /// Where the captures disagree with the reference beyond the error
    /// model's bounds (with `allow_disagreement`; else an error).
    pub disagreeing: Vec<String>,
}

/// Builds the golden file of `document`: what the reference cannot compute
/// (inputs no stage produces, `weights`) from `captures`, every stage output
/// computed by the float64 reference on `reference` as `generate` does (a
/// golden output is the reference of its stage from the stored inputs, not a
/// model's capture). The captured stage outputs are then judged against it as
/// `check` judges an engine's (chained where the captures hold what fed each
/// stage): a stage that disagrees beyond the error model's bounds is an error
/// naming it (the document does not compute what the captured model does, or
/// the captures are not its outputs), or with `allow_disagreement` listed in
/// the summary.
pub fn pack(
    document: &Document,
    reference: &Device,
    captures: &[PathBuf],
    allow_disagreement: bool,
) -> Result<(Vec<u8>, PackSummary), PackError> {
    // Only what the document names is read (an unused .npz member is never
    // inflated), and stage inputs and intermediates as `check` takes them.
    let keys: Vec<&str> = document
        .tensors
        .iter()
        .flat_map(|t| [t.name.as_str(), capture_key(t)])
        .collect();
    let (mut found, skipped) =
        read_captures(captures, &|name| keys.contains(&name) || name.contains('@'))?;
    let produced = |name: &str| {
        document
            .stages
            .iter()
            .any(|s| s.outputs.iter().any(|o| o == name))
    };
    let mut summary = PackSummary::default();
    let mut outputs: HashMap<String, HostTensor> = HashMap::new();
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
                summary.seeded.push(decl.name.clone());
            }
            _ if produced(&decl.name) => {
                // Judged below, not stored: the reference computes it.
                if found.contains_key(&decl.name) {
                    let (t, _) = captured(decl, &mut found, captures).map_err(fail)?;
                    outputs.insert(decl.name.clone(), t);
                }
                summary.computed.push(decl.name.clone());
            }
            TensorSource::Values(_) => summary.stored.push(decl.name.clone()),
            TensorSource::Golden | TensorSource::Weights(_) => {
                // Read again by `generate`; checked here for a located error.
                captured(decl, &mut found, captures).map_err(fail)?;
                summary.stored.push(decl.name.clone());
            }
        }
    }
    let bytes = crate::generate::generate(document, reference, captures)?;
    let golden =
        GoldenFile::from_bytes(Path::new("(packed)"), bytes.clone()).map_err(SuiteError::from)?;
    let suite = Suite::new(document.clone(), golden)?;
    // What `check` reads beside the outputs: `INPUT@STAGE`, `NODE@STAGE`.
    let (named, unknown): (Vec<_>, Vec<_>) = found
        .into_iter()
        .partition(|(n, _)| n.contains('@') && runner::is_captured_name(&suite, n));
    outputs.extend(named.into_iter().map(|(n, (t, _))| (n, t)));
    summary.unused = unknown.into_iter().map(|(n, _)| n).chain(skipped).collect();
    summary.unused.sort();
    summary.unused.dedup();
    if outputs.keys().any(|n| produced(n)) {
        judge(&suite, reference, &outputs, captures, &mut summary)?;
    }
    if !summary.disagreeing.is_empty() && !allow_disagreement {
        return Err(PackError::Disagree(format!(
            "the captures disagree with the document's float64 reference beyond the error model's \
             bounds ({}): either the document's graph does not compute what the captured model \
             does (an eps, a GELU form, an operator's attributes: fix the document), or the \
             captures are not that model's outputs. `vips-conformance check` on the suite with \
             these captures shows every margin; pack with --allow-disagreement to write the \
             golden file anyway",
            summary.disagreeing.join("; ")
        )));
    }
    Ok((bytes, summary))
}

/// The captured outputs judged against the packed suite as `check` judges an
/// engine's: at the tier of their widest float type (fp32 for float32 and
/// float64 captures), chained where they hold what fed each stage.
fn judge(
    suite: &Suite,
    reference: &Device,
    captured: &HashMap<String, HostTensor>,
    paths: &[PathBuf],
    summary: &mut PackSummary,
) -> Result<(), PackError> {
    let widest = captured
        .values()
        .map(|t| t.spec.dtype)
        .filter(|d| d.is_float())
        .max_by_key(|d| (d.size_bytes(), significand_bits(*d)));
    let tier = match widest {
        Some(DType::F16) => Tier::Fp16,
        Some(DType::BF16) => Tier::Bf16,
        _ => Tier::Fp32,
    };
    let stages: Vec<&Stage> = suite.document.stages.iter().collect();
    let (mode, why) = runner::check_mode(suite, captured, &stages);
    let opts = RunOptions {
        mode,
        tiers: vec![tier],
        differential: false,
        contract: false,
        ..RunOptions::default()
    };
    let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let report = runner::check(suite, captured, &files.join(", "), reference, &opts)?;
    summary.judged = Some(format!("at {}, {why}", tier.name()));
    for t in &report.tiers {
        for s in &t.stages {
            match s.status {
                Status::Pass => summary.agreeing.push(s.stage.clone()),
                Status::NotCaptured => summary.not_captured.push(s.stage.clone()),
                status => summary.disagreeing.push(format!(
                    "`{}` {}: {}",
                    s.stage,
                    status.label(),
                    s.reason.as_deref().unwrap_or("out of bounds")
                )),
            }
        }
        for e in t.end_to_end.iter().filter(|e| !e.passed) {
            summary.disagreeing.push(format!(
                "`{}` end to end: relative L2 {:e}, cosine {}",
                e.tensor, e.drift.rel_l2_error, e.drift.cosine_similarity
            ));
        }
    }
    Ok(())
}
