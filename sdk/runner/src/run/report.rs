//! What a run reports: each stage's status and measurements, each tier's
//! rounds, the run's identity and settings (the results JSON, docs/report.md).

use super::*;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pass,
    Fail,
    NotSupported,
    /// The provider returned an error status, or the reference could not run.
    Error,
    /// The provider's process died while running the stage.
    Crashed,
    /// No answer within the stage's timeout.
    Timeout,
    /// Never run (the provider could not be loaded again, `--max-fails`).
    Missing,
    /// A kernel wrote into a guard region.
    OutOfBounds,
    /// A kernel left output elements unwritten.
    Unwritten,
    /// Failed, then passed on a retry: never a pass.
    Flaky,
    /// Failed, as the baseline expects.
    ExpectedFail,
    /// Passed where the baseline expects a failure (the baseline is stale:
    /// baselines only tighten).
    UnexpectedPass,
    /// The worker's processes used more memory than the sandbox allows and
    /// the kernel killed one (the OOM count of its cgroup).
    MemoryLimit,
    /// The driver left processes running after its kernels returned.
    ProcessesLeft,
    /// `check` only: the captures hold none of the stage's outputs (an
    /// engine that starts later, or computes it elsewhere). Not judged, not
    /// a failure; later stages are fed its golden outputs and say so.
    NotCaptured,
}

impl Status {
    pub const ALL: [Status; 15] = [
        Status::Pass,
        Status::Fail,
        Status::NotSupported,
        Status::Error,
        Status::Crashed,
        Status::Timeout,
        Status::Missing,
        Status::OutOfBounds,
        Status::Unwritten,
        Status::Flaky,
        Status::ExpectedFail,
        Status::UnexpectedPass,
        Status::MemoryLimit,
        Status::ProcessesLeft,
        Status::NotCaptured,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::NotSupported => "NOT SUPPORTED",
            Status::Error => "ERROR",
            Status::Crashed => "CRASHED",
            Status::Timeout => "TIMEOUT",
            Status::Missing => "MISSING",
            Status::OutOfBounds => "OUT OF BOUNDS",
            Status::Unwritten => "UNWRITTEN",
            Status::Flaky => "FLAKY",
            Status::ExpectedFail => "EXPECTED FAIL",
            Status::UnexpectedPass => "UNEXPECTED PASS",
            Status::MemoryLimit => "MEMORY LIMIT",
            Status::ProcessesLeft => "PROCESSES LEFT",
            Status::NotCaptured => "NOT CAPTURED",
        }
    }

    pub fn from_label(label: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.label() == label)
    }

    /// Counts against the verdict.
    pub fn is_failure(self) -> bool {
        !matches!(
            self,
            Status::Pass | Status::ExpectedFail | Status::NotCaptured
        )
    }
}

/// The main round runs the suite's inputs; the differential round fresh
/// ones from the run-time seed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Round {
    Main,
    Differential,
    /// The kernel contract: each kernel the component needs, called the
    /// way engines call it (`crate::contract`).
    Contract,
}

/// How far an output is from the golden value (not a verdict: in chained mode
/// the drift accumulates over stages; at fp16/bf16 it includes the rounding
/// of the inputs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Drift {
    #[serde(with = "vips_data::json_float")]
    pub max_abs_error: f64,
    #[serde(with = "vips_data::json_float")]
    pub max_rel_error: f64,
    /// Over finite pairs.
    #[serde(with = "vips_data::json_float")]
    pub rel_l2_error: f64,
    #[serde(with = "vips_data::json_float")]
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

    pub(super) fn of(
        actual: &HostTensor,
        golden: &HostTensor,
    ) -> Result<Drift, compare::CompareError> {
        Ok(Drift::from_metrics(&compare::compare(
            actual,
            golden,
            &Drift::CRITERIA,
        )?))
    }

    /// Drift and the canonical SHA-256 of `actual`, the hash computed beside
    /// the comparison.
    pub(super) fn with_hash(
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

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OutputResult {
    pub tensor: String,
    /// The verdict: the output against the float64 reference computed from
    /// the stage's own inputs, within the propagated bound; with its margin.
    pub judgement: Judgement,
    /// Against the golden value.
    pub drift: Drift,
    /// Canonical SHA-256 of the actual output.
    pub sha256: String,
    /// Failing and nearly failing outputs: where in the tensor the error lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_map: Option<ErrorMap>,
    /// A rasterizer's output: its pixels as the verdict counted them
    /// (docs/error-model.md, "Discrete outputs").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pixels: Option<vips_verdict::error_model::PixelCounts>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StageResult {
    pub stage: String,
    pub tier: Tier,
    pub status: Status,
    pub execution: Option<Execution>,
    pub outputs: Vec<OutputResult>,
    pub invariants: Vec<InvariantResult>,
    /// Why the stage did not pass (or, EXPECTED FAIL and FLAKY, what happened).
    pub reason: Option<String>,
    /// What the poison, the guards and the second run found.
    pub findings: Vec<Finding>,
    pub round: Round,
    /// Runs of the stage (more than one with `flake_retries`).
    pub attempts: u32,
    /// Decomposed runs: every operator judged by its own error, in graph order.
    pub nodes: Vec<NodeCheck>,
    /// Decomposed runs: the operator closest to (or furthest past) its bound.
    pub tightest_node: Option<NodeCheck>,
    /// A failing stage: the first operator whose own error is out of bounds,
    /// fed the provider's own inputs (its error map is in `nodes` when the
    /// stage ran decomposed).
    pub drill_down: Option<NodeCheck>,
    /// Set when a failing stage was drilled into and no operator failed alone.
    pub drill_down_note: Option<String>,
    /// How the stage was judged, where that is not the plain case (a
    /// capture rounded to the tier, an input taken from a capture).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the stage's data cannot show (benchdnn's MISTRUSTED): outputs
    /// mostly zero or saturated, a documented pitfall that would pass.
    /// Not a failure: a reason to trust a PASS less.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub coverage: Vec<String>,
    pub seconds: f64,
    /// The time the provider was given to run the stage (both runs).
    #[serde(default)]
    pub timeout_seconds: f64,
    /// Where `seconds` went (the table shows it with `--timings`).
    #[serde(default)]
    pub timings: Timings,
    /// The stage's reference came from the reference cache.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reference_cached: bool,
}

/// Where a stage's time went, in seconds (`--timings`; docs/runner.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Inside the provider's `execute` calls, both guarded runs (as the
    /// worker measured them, in isolated mode).
    pub provider: f64,
    /// The stage's float64 reference, bounds and σ.
    pub reference: f64,
    /// The verdict: every output, every node of a decomposed run (each
    /// node's float64 reference from the provider's own inputs included),
    /// the repeat, the invariants.
    pub judgement: f64,
    /// Running the program less the kernels: inputs placed, guards and
    /// poison written and checked, the worker's pipes.
    pub io: f64,
    /// The float64 work by operator family (`Op::family`): each node's part
    /// of the stage's reference, and its node check.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub families: BTreeMap<String, FamilyTime>,
}

impl Timings {
    /// The entry of `op`'s family.
    pub fn family(&mut self, op: vsdk_catalog::Op) -> &mut FamilyTime {
        self.families.entry(op.family().to_string()).or_default()
    }

    /// Every stage's families of `stages` summed.
    pub fn by_family<'a>(
        stages: impl IntoIterator<Item = &'a StageResult>,
    ) -> BTreeMap<String, FamilyTime> {
        let mut sum: BTreeMap<String, FamilyTime> = BTreeMap::new();
        for s in stages {
            for (family, t) in &s.timings.families {
                let e = sum.entry(family.clone()).or_default();
                e.reference += t.reference;
                e.judgement += t.judgement;
            }
        }
        sum
    }
}

/// One operator family's float64 seconds in a stage's verdict.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct FamilyTime {
    /// Its nodes' part of the stage's reference (value, bound, σ, propagation).
    pub reference: f64,
    /// Its node checks (each node's reference from the provider's inputs, judged).
    pub judgement: f64,
}

/// The least tolerance that would pass a stage (docs/error-model.md,
/// section 3): the largest factor its failing outputs and drill-down
/// operator need, or a bias, which no factor passes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Tolerance {
    /// Nothing judged failed.
    Met,
    Factor(f64),
    Bias,
}

impl std::fmt::Display for Tolerance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tolerance::Met => f.write_str("-"),
            Tolerance::Factor(k) if k.is_finite() && *k < 1e3 => write!(f, "×{k:.3}"),
            Tolerance::Factor(k) if k.is_finite() => write!(f, "×{k:.2e}"),
            Tolerance::Factor(_) => f.write_str("×inf"),
            Tolerance::Bias => f.write_str("bias"),
        }
    }
}

impl Tolerance {
    /// Over the `tolerance_factor`s of failing judgements (None: a bias).
    pub fn of(failing: impl IntoIterator<Item = Option<f64>>) -> Tolerance {
        failing
            .into_iter()
            .fold(Tolerance::Met, |least, k| match (least, k) {
                (Tolerance::Factor(a), Some(b)) => Tolerance::Factor(a.max(b)),
                (_, Some(b)) => Tolerance::Factor(b),
                (Tolerance::Met, None) => Tolerance::Bias,
                (l, None) => l,
            })
    }
}

impl StageResult {
    pub fn least_tolerance(&self) -> Tolerance {
        Tolerance::of(
            self.outputs
                .iter()
                .map(|o| &o.judgement)
                .chain(self.drill_down.as_ref().map(|d| &d.judgement))
                .filter(|j| !j.passed)
                .map(|j| j.tolerance_factor),
        )
    }
}

/// Chained mode: one of the component's final outputs against its golden value.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EndToEndResult {
    pub tensor: String,
    pub drift: Drift,
    pub criterion: EndToEnd,
    pub passed: bool,
    /// Pixels left out: where the provider's rasterizer wrote another id than
    /// the golden one (its stage judged each: ambiguous edges, when it
    /// passed), so what this output holds there is another triangle's value.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pixels_left_out: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TierReport {
    pub tier: Tier,
    pub mode: Mode,
    pub stages: Vec<StageResult>,
    /// Chained mode: the first stage whose own error is out of bounds.
    pub first_divergent_stage: Option<String>,
    /// Chained mode: the component's outputs (stage outputs no later stage
    /// consumes) against the golden values.
    pub end_to_end: Vec<EndToEndResult>,
    /// The differential round: each stage on fresh inputs, judged by the
    /// error model alone, whose outputs must differ from the main round's.
    pub differential: Vec<StageResult>,
    /// The kernel contract: one result per case, then the concurrency pass
    /// ([`CONCURRENCY`]); empty where it did not run.
    #[serde(default)]
    pub contract: Vec<StageResult>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunReport {
    pub component: String,
    pub component_version: String,
    pub document_sha256: String,
    pub golden_sha256: String,
    pub provider: String,
    pub provider_version: String,
    pub provider_library: String,
    pub device: String,
    /// What ran, pinned: `None` for captured outputs.
    pub identity: Option<Identity>,
    /// The run-time seed (see [`RunOptions::seed`]).
    pub seed: u64,
    /// How the run was asked for: what a certificate must know beyond the
    /// results (a filtered run certifies nothing).
    pub settings: Settings,
    /// RFC 3339, UTC.
    pub started: String,
    pub finished: String,
    pub tiers: Vec<TierReport>,
    /// The provider crashed while being released after the run, or its
    /// library file changed during the run.
    pub teardown: Option<String>,
    /// Why stages were left MISSING (`--max-fails`).
    pub stopped_early: Option<String>,
    /// Every selected stage passed (or failed as the baseline expects) at
    /// every tier, in both rounds and, chained, end to end; the provider was
    /// released cleanly.
    pub passed: bool,
}

/// The options of a run that a report records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Settings {
    /// `--stage`: only stages matching this glob ran.
    pub stage_glob: Option<String>,
    /// `--shard k/n`.
    pub shard: Option<(usize, usize)>,
    pub differential: bool,
    /// The kernel contract ran (not `--no-contract`).
    #[serde(default)]
    pub contract: bool,
    /// See [`RunOptions::nonce`].
    pub nonce: u64,
    pub nonce_given: bool,
    pub require_deterministic: bool,
    pub flake_retries: u32,
    pub max_fails: Option<usize>,
    /// A baseline of expected failures was applied.
    pub baseline: bool,
    /// `--after-timeout skip` (see [`RunOptions::skip_after_timeout`]).
    #[serde(default)]
    pub skip_after_timeout: bool,
}

impl Settings {
    pub(super) fn of(opts: &RunOptions) -> Settings {
        Settings {
            stage_glob: opts
                .stage_glob
                .as_ref()
                .map(|g| g.glob().glob().to_string()),
            shard: opts.shard,
            differential: opts.differential,
            contract: opts.contract,
            nonce: opts.nonce,
            nonce_given: opts.nonce_given,
            require_deterministic: opts.require_deterministic,
            flake_retries: opts.flake_retries,
            max_fails: opts.max_fails,
            baseline: opts.baseline.is_some(),
            skip_after_timeout: opts.skip_after_timeout,
        }
    }
}
