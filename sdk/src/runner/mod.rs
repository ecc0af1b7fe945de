//! The conformance runner: for each selected stage and tier, materialise the
//! inputs (golden, or in chained mode the provider's own), convert them to the
//! tier's dtype, run the stage on the provider (`execute`: fused if it has the
//! stage's kernel, else its graph node by node), and judge it with the error
//! model (`stage`): outputs within their propagated bounds, every operator of
//! a decomposed run within its own, invariants, drill-down. `check` judges
//! outputs computed outside the SDK the same way.

mod execute;
mod invariants;
mod stage;

pub use invariants::InvariantResult;

use crate::compare::{self, Criteria, Tier};
use crate::document::Stage;
use crate::error_model::{EndToEnd, Judgement, NodeCheck};
use crate::suite::{Suite, SuiteError};
use crate::{Device, HostTensor, TensorSpec};
use serde::Serialize;
use stage::StageContext;
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every stage gets golden inputs.
    Isolated,
    /// Stages get the provider's own earlier outputs.
    Chained,
}

/// What to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub mode: Mode,
    pub tiers: Vec<Tier>,
    /// Only stages whose name matches.
    pub stage_glob: Option<globset::GlobMatcher>,
    /// `(k, n)`: run the stages whose index i (among those selected) has
    /// `i % n == k - 1`.
    pub shard: Option<(usize, usize)>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            mode: Mode::Isolated,
            tiers: vec![Tier::Fp32],
            stage_glob: None,
            shard: None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    NotSupported,
    Error,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::NotSupported => "NOT SUPPORTED",
            Status::Error => "ERROR",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    Fused,
    Decomposed,
    /// The outputs were computed outside the SDK and judged as they are.
    Captured,
}

/// Where the stages' outputs come from.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A provider runs each stage.
    Device(&'a Device),
    /// Outputs computed elsewhere (an engine's own kernels, another
    /// framework), by tensor name.
    Captured(&'a HashMap<String, HostTensor>),
}

/// How far an output is from the golden value (not a verdict: in chained mode
/// the drift accumulates over stages; at fp16/bf16 it includes the rounding
/// of the inputs).
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub max_abs_error: f64,
    pub max_rel_error: f64,
    /// Over finite pairs.
    pub rel_l2_error: f64,
    pub cosine_similarity: f64,
    /// Elements where a NaN or ±Inf differs from the golden value.
    pub nonfinite_mismatches: u64,
}

impl Drift {
    /// The comparison that measures drift: every finite pair passes, so only
    /// NaN or ±Inf that differ count as mismatches.
    const CRITERIA: Criteria = Criteria {
        tolerance: compare::Tolerance::Close {
            rtol: 0.0,
            atol: f64::MAX,
        },
        nan: compare::NanPolicy::Allow,
        allowed_mismatch_fraction: 1.0,
    };

    fn of(actual: &HostTensor, golden: &HostTensor) -> Result<Drift, compare::CompareError> {
        Ok(Drift::from_metrics(&compare::compare(
            actual,
            golden,
            &Drift::CRITERIA,
        )?))
    }

    /// Drift and the canonical SHA-256 of `actual`, the hash computed beside
    /// the comparison.
    fn with_hash(
        actual: &HostTensor,
        golden: &HostTensor,
    ) -> Result<(Drift, [u8; 32]), compare::CompareError> {
        let (m, hash) = compare::compare_and_hash(actual, golden, &Drift::CRITERIA)?;
        Ok((Drift::from_metrics(&m), hash))
    }

    fn from_metrics(m: &compare::Metrics) -> Drift {
        Drift {
            max_abs_error: m.max_abs_error,
            max_rel_error: m.max_rel_error,
            rel_l2_error: m.rel_l2_error,
            cosine_similarity: m.cosine_similarity,
            nonfinite_mismatches: m.mismatches,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct OutputResult {
    pub tensor: String,
    /// The verdict: the output against the float64 reference computed from
    /// the stage's own inputs, within the propagated bound; with its margin.
    pub judgement: Judgement,
    /// Against the golden value.
    pub drift: Drift,
    /// Canonical SHA-256 of the actual output.
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct StageResult {
    pub stage: String,
    pub tier: Tier,
    pub status: Status,
    pub execution: Option<Execution>,
    pub outputs: Vec<OutputResult>,
    pub invariants: Vec<InvariantResult>,
    /// Why the stage is NOT SUPPORTED or ERROR.
    pub reason: Option<String>,
    /// Decomposed runs: every operator judged by its own error, in graph order.
    pub nodes: Vec<NodeCheck>,
    /// Decomposed runs: the operator closest to (or furthest past) its bound.
    pub tightest_node: Option<NodeCheck>,
    /// A failing stage: the first operator whose own error is out of bounds,
    /// fed the provider's own inputs.
    pub drill_down: Option<NodeCheck>,
    /// Set when a failing stage was drilled into and no operator failed alone.
    pub drill_down_note: Option<String>,
    pub seconds: f64,
}

/// Chained mode: one of the component's final outputs against its golden value.
#[derive(Debug, Clone, Serialize)]
pub struct EndToEndResult {
    pub tensor: String,
    pub drift: Drift,
    pub criterion: EndToEnd,
    pub passed: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct TierReport {
    pub tier: Tier,
    pub mode: Mode,
    pub stages: Vec<StageResult>,
    /// Chained mode: the first stage whose own error is out of bounds.
    pub first_divergent_stage: Option<String>,
    /// Chained mode: the component's outputs (stage outputs no later stage
    /// consumes) against the golden values.
    pub end_to_end: Vec<EndToEndResult>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub component: String,
    pub component_version: String,
    pub document_sha256: String,
    pub golden_sha256: String,
    pub provider: String,
    pub provider_version: String,
    pub provider_library: String,
    pub device: String,
    pub tiers: Vec<TierReport>,
    /// Every selected stage passed at every tier (and, chained, end to end).
    pub passed: bool,
}

/// The stages `opts` selects, in document order.
pub fn select<'a>(suite: &'a Suite, opts: &RunOptions) -> Vec<&'a Stage> {
    suite
        .document
        .stages
        .iter()
        .filter(|s| opts.stage_glob.as_ref().is_none_or(|g| g.is_match(&s.name)))
        .enumerate()
        .filter(|(i, _)| opts.shard.is_none_or(|(k, n)| i % n == k - 1))
        .map(|(_, s)| s)
        .collect()
}

/// Runs the suite on `device`; `reference` (the CPU provider) computes the
/// float64 reference and the bounds every verdict is made against.
pub fn run(
    suite: &Suite,
    device: &Device,
    reference: &Device,
    opts: &RunOptions,
) -> Result<RunReport, SuiteError> {
    let info = device.provider_info();
    let tiers = run_tiers(suite, Source::Device(device), reference, opts)?;
    Ok(report(
        suite,
        tiers,
        [
            info.name.clone(),
            info.version.clone(),
            info.library.display().to_string(),
            device.name().to_string(),
        ],
    ))
}

/// Judges stage outputs computed outside the SDK (`captured`, by tensor name:
/// an engine's own kernels, PyTorch) with the same error model as `run`. In
/// chained mode each stage's inputs are the captured outputs of the stages
/// before it. `label` names where they come from in the report.
pub fn check(
    suite: &Suite,
    captured: &HashMap<String, HostTensor>,
    label: &str,
    reference: &Device,
    opts: &RunOptions,
) -> Result<RunReport, SuiteError> {
    let tiers = run_tiers(suite, Source::Captured(captured), reference, opts)?;
    Ok(report(
        suite,
        tiers,
        [
            label.to_string(),
            String::new(),
            label.to_string(),
            "-".into(),
        ],
    ))
}

/// `[provider, version, library, device]`.
fn report(suite: &Suite, tiers: Vec<TierReport>, who: [String; 4]) -> RunReport {
    let [provider, provider_version, provider_library, device] = who;
    let passed = !tiers.is_empty()
        && tiers.iter().all(|t| {
            t.stages.iter().all(|s| s.status == Status::Pass)
                && t.end_to_end.iter().all(|e| e.passed)
        });
    RunReport {
        component: suite.document.component.id.clone(),
        component_version: suite.document.component.version.clone(),
        document_sha256: hex::encode(suite.document.sha256),
        golden_sha256: hex::encode(suite.golden.file_sha256),
        provider,
        provider_version,
        provider_library,
        device,
        tiers,
        passed,
    }
}

fn run_tiers(
    suite: &Suite,
    source: Source,
    reference: &Device,
    opts: &RunOptions,
) -> Result<Vec<TierReport>, SuiteError> {
    let stages = select(suite, opts);
    let mut tiers = Vec::new();
    for &tier in &opts.tiers {
        // Chained mode: the provider's own outputs, and which stage made each;
        // and the outputs of stages that errored or were not supported.
        let mut produced: HashMap<String, (HostTensor, String, bool)> = HashMap::new();
        let mut missing: HashMap<String, String> = HashMap::new();
        let mut results = Vec::new();
        for stage in &stages {
            let mut inputs = HashMap::new();
            let mut diverged_upstream = None;
            let mut golden_inputs = true;
            for name in &stage.inputs {
                let t = match (opts.mode, produced.get(name)) {
                    (Mode::Chained, Some((own, from, passed))) => {
                        if !passed {
                            diverged_upstream.get_or_insert_with(|| {
                                format!("its inputs come from `{from}`, which already diverged")
                            });
                        }
                        golden_inputs = false;
                        own.clone()
                    }
                    _ => {
                        if let (Mode::Chained, Some(from)) = (opts.mode, missing.get(name)) {
                            diverged_upstream.get_or_insert_with(|| {
                                format!("`{from}` produced no `{name}`: this stage was fed the golden value")
                            });
                        }
                        to_tier(&*suite.tensor(name)?, tier)
                    }
                };
                inputs.insert(name.clone(), t);
            }
            let ctx = StageContext {
                suite,
                stage,
                tier,
                source,
                reference,
                golden_inputs,
            };
            let (mut result, outputs) = ctx.run(&inputs)?;
            if let Some(upstream) = diverged_upstream {
                // Whatever drill-down found, say first where the inputs came from.
                result.drill_down_note = Some(match result.drill_down_note.take() {
                    Some(n) => format!("{upstream}; {n}"),
                    None => upstream,
                });
            }
            if opts.mode == Mode::Chained {
                let passed = result.status == Status::Pass;
                for name in &stage.outputs {
                    if !outputs.contains_key(name) {
                        missing.insert(name.clone(), stage.name.clone());
                    }
                }
                for (name, t) in outputs {
                    produced.insert(name, (t, stage.name.clone(), passed));
                }
            }
            results.push(result);
        }
        let first_divergent_stage = (opts.mode == Mode::Chained)
            .then(|| {
                results
                    .iter()
                    .find(|r| r.status != Status::Pass)
                    .map(|r| r.stage.clone())
            })
            .flatten();
        let end_to_end = if opts.mode == Mode::Chained {
            end_to_end(suite, &stages, tier, &produced)?
        } else {
            Vec::new()
        };
        tiers.push(TierReport {
            tier,
            mode: opts.mode,
            stages: results,
            first_divergent_stage,
            end_to_end,
        });
    }
    Ok(tiers)
}

/// The component's outputs (stage outputs no later selected stage consumes),
/// as the provider computed them from its own earlier outputs, against the
/// golden values, with the criterion of the last stage producing each.
fn end_to_end(
    suite: &Suite,
    stages: &[&Stage],
    tier: Tier,
    produced: &HashMap<String, (HostTensor, String, bool)>,
) -> Result<Vec<EndToEndResult>, SuiteError> {
    let mut out = Vec::new();
    for (i, stage) in stages.iter().enumerate() {
        for name in &stage.outputs {
            let consumed = stages[i + 1..].iter().any(|s| s.inputs.contains(name));
            let Some((actual, _, _)) = produced.get(name) else {
                continue;
            };
            if consumed {
                continue;
            }
            let criterion = stage.tolerances[&tier].end_to_end;
            let golden = suite.tensor(name)?;
            let drift = Drift::of(actual, &golden)
                .map_err(|e| SuiteError::Layout(format!("end to end `{name}`: {e}")))?;
            let passed = drift.nonfinite_mismatches == 0
                && drift.rel_l2_error <= criterion.rel_l2
                && drift.cosine_similarity >= criterion.cosine;
            out.push(EndToEndResult {
                tensor: name.clone(),
                drift,
                criterion,
                passed,
            });
        }
    }
    Ok(out)
}

/// Float tensors take the tier's dtype; integer tensors stay as they are.
pub fn to_tier(t: &HostTensor, tier: Tier) -> HostTensor {
    match tier.float_dtype() {
        Some(d) if t.spec.dtype.is_float() => t.cast(d),
        _ => t.clone(),
    }
}

pub(super) fn tier_spec(s: &TensorSpec, tier: Tier) -> TensorSpec {
    match tier.float_dtype() {
        Some(d) if s.dtype.is_float() => TensorSpec::new(d, &s.shape),
        _ => s.clone(),
    }
}
