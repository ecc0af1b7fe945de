//! `pack`: a golden vector file from a document plus captured tensors.

use crate::captures::{
    capture_key, captured, check_seeded_copy, convert, significand_bits, Widening,
};
pub use crate::captures::{read_captures, Captures};
use crate::run::{self, RunOptions, Status};
use crate::suite::{Suite, SuiteError};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use vips_data::capture::CaptureError;
use vips_data::document::{Document, Stage, TensorSource};
use vips_data::golden::GoldenFile;
use vips_data::HostTensor;
use vips_execution::Device;
use vips_verdict::compare::Tier;
use vsdk_catalog::DType;

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
        .partition(|(n, _)| n.contains('@') && run::is_captured_name(&suite, n));
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
    let (mode, why) = run::check_mode(suite, captured, &stages);
    let opts = RunOptions {
        mode,
        tiers: vec![tier],
        differential: false,
        contract: false,
        ..RunOptions::default()
    };
    let files: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    let report = run::check(suite, captured, &files.join(", "), reference, &opts)?;
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
