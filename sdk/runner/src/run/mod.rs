//! The conformance runner: for each selected stage and tier, materialise the
//! inputs (golden, or in chained mode the provider's own), convert them to the
//! tier's dtype, run the stage on the provider (`execute`: fused if it has the
//! stage's kernel, else its graph node by node), and judge it with the error
//! model (`stage`): outputs within their propagated bounds, every operator of
//! a decomposed run within its own, invariants, drill-down. `check` judges
//! outputs computed outside the SDK the same way.

mod captured;
mod chain;
mod contract;
mod differential;
mod execute;
mod identity;
mod invariants;
pub mod results;
mod stage;
mod timeouts;

pub use captured::{captured_input_name, check_mode, is_captured_name};
pub use contract::{CONCURRENCY, THREADS as CONCURRENCY_THREADS};
pub use identity::{sha256_file, Host, Identity, Reference};
pub use invariants::InvariantResult;
pub use results::Baseline;

use crate::suite::{Suite, SuiteError};
use chain::Chain;
use serde::{Deserialize, Serialize};
use stage::StageContext;
use std::collections::{HashMap, HashSet};
use std::time::Duration;
use timeouts::TimedOut;
pub use timeouts::{
    FIRST_CALL_ALLOWANCE, FLOOR as TIMEOUT_FLOOR, MULTIPLIER as TIMEOUT_MULTIPLIER,
};
use vips_data::document::Stage;
pub use vips_data::tier::to_tier;
use vips_data::tier::{rounds, tier_spec};
use vips_data::HostTensor;
use vips_execution::backend::Backend;
use vips_execution::execution::{Finding, SplitMix};
use vips_execution::isolation::{worker_program, WorkerCommand};
use vips_execution::sandbox::Policy;
use vips_execution::Device;
use vips_verdict::compare::{self, Criteria, Tier};
use vips_verdict::error_map::ErrorMap;
use vips_verdict::error_model::{EndToEnd, Judgement, NodeCheck};
use vsdk_catalog::Op;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Every stage gets golden inputs.
    Isolated,
    /// Stages get the provider's own earlier outputs.
    Chained,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Isolated => "isolated",
            Mode::Chained => "chained",
        }
    }
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
    /// The run-time seed: the differential round's inputs and the guard
    /// layouts derive from it.
    pub seed: u64,
    /// Mixed into the differential round's inputs beside the seed, fresh for
    /// every run unless given: a seed can be chosen (shards share one), and a
    /// driver prepared for a chosen seed's inputs must not pass.
    pub nonce: u64,
    /// The nonce was given (to repeat a run exactly): no certification.
    pub nonce_given: bool,
    /// Run the differential round (fresh inputs, outputs that must change).
    pub differential: bool,
    /// Run the kernel contract (`crate::contract`) after each tier.
    pub contract: bool,
    /// Bitwise differences between the two runs of a stage fail it.
    pub require_deterministic: bool,
    /// Re-run a failing stage up to this many times; one that then passes
    /// is FLAKY (never a pass).
    pub flake_retries: u32,
    /// Stop after this many failing stages (the rest are MISSING).
    pub max_fails: Option<usize>,
    /// Per execution of a stage; default from the reference's cost
    /// (`timeouts`).
    pub timeout: Option<Duration>,
    /// After a kernel timed out, later stages using it are TIMEOUT without
    /// running (and say so); default: every stage is run (deqp-runner's way).
    pub skip_after_timeout: bool,
    /// Expected failures (see [`Baseline`]).
    pub baseline: Option<Baseline>,
    /// Where golden-fed stage references are kept between runs
    /// (`crate::reference_cache`); `None`: computed every time.
    pub reference_cache: Option<crate::reference_cache::ReferenceCache>,
    /// Return freed memory to the system after each stage
    /// ([`vips_execution::allocator`]): the CLI does; a library leaves its host's
    /// allocator alone.
    pub return_freed_memory: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            mode: Mode::Isolated,
            tiers: vec![Tier::Fp32],
            stage_glob: None,
            shard: None,
            seed: vips_execution::execution::runtime_seed(),
            nonce: vips_execution::execution::runtime_seed(),
            nonce_given: false,
            differential: true,
            contract: true,
            require_deterministic: false,
            flake_retries: 0,
            max_fails: None,
            timeout: None,
            skip_after_timeout: false,
            baseline: None,
            reference_cache: None,
            return_freed_memory: false,
        }
    }
}

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Execution {
    Fused,
    Decomposed,
    /// The outputs were computed outside the SDK and judged as they are.
    Captured,
}

impl Execution {
    pub fn name(self) -> &'static str {
        match self {
            Execution::Fused => "fused",
            Execution::Decomposed => "decomposed",
            Execution::Captured => "captured",
        }
    }
}

/// Where the stages' outputs come from.
#[derive(Clone, Copy)]
pub(crate) enum Source<'a> {
    /// A provider runs each stage.
    Provider(&'a Backend),
    /// Outputs computed elsewhere (an engine's own kernels, another
    /// framework), by tensor name.
    Captured(&'a HashMap<String, HostTensor>),
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
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
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
    fn of(opts: &RunOptions) -> Settings {
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

/// Now, as RFC 3339 in UTC (second precision).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now.replace_nanosecond(0).unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
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

/// Runs the suite on `device` in this process; `reference` (the CPU
/// provider) computes the float64 reference and the bounds every verdict is
/// made against.
pub fn run(
    suite: &Suite,
    device: &Device,
    reference: &Device,
    opts: &RunOptions,
) -> Result<RunReport, SuiteError> {
    run_on(
        suite,
        Backend::InProcess(device.clone()),
        reference,
        opts,
        &mut |_| {},
    )
}

/// What a run tells its observer as it goes (progress on a terminal, the
/// CSV row written as each stage finishes).
#[derive(Debug, Clone, Copy)]
pub enum Event<'a> {
    /// A round of a tier is about to run this many stages (the differential
    /// round only those the provider supports).
    Planned {
        tier: Tier,
        round: Round,
        stages: usize,
    },
    /// A stage starts (its retries included).
    Started {
        tier: Tier,
        round: Round,
        stage: &'a str,
    },
    /// A stage's result is known (a stage left MISSING has no `Started`).
    Finished(&'a StageResult),
    /// The outputs a main-round stage produced (by tensor name; none when
    /// it produced none), after its `Finished`.
    Outputs {
        tier: Tier,
        outputs: &'a HashMap<String, HostTensor>,
    },
}

/// Runs the suite on `backend` (in process or in a worker), telling
/// `observer` as each stage starts and finishes; releases the provider at
/// the end.
pub fn run_on(
    suite: &Suite,
    backend: Backend,
    reference: &Device,
    opts: &RunOptions,
    observer: &mut dyn FnMut(Event),
) -> Result<RunReport, SuiteError> {
    let started = now_rfc3339();
    // Hashed before the run: every restarted worker loads the file again.
    let library_sha256 = sha256_file(&backend.library()).ok();
    let (tiers, stopped_early) =
        run_tiers(suite, Source::Provider(&backend), reference, opts, observer)?;
    let claims = backend.claims();
    let identity = Identity::of(&backend, claims.clone(), reference);
    let mut teardown = backend.close().err().map(|f| f.to_string());
    // What held for every worker, the last one's end included.
    let identity = Identity {
        sandbox: backend.sandbox(),
        ..identity
    };
    if library_sha256.as_deref() != Some(identity.library_sha256.as_str()) {
        teardown.get_or_insert_with(|| {
            format!(
                "the provider library changed during the run (SHA-256 {} before, {} after): the stages may have run different code",
                library_sha256.as_deref().unwrap_or("unreadable"),
                identity.library_sha256
            )
        });
    }
    let (provider, device) = match claims {
        Some((p, d)) => ([p.name, p.version], d.name),
        None => (["-".into(), String::new()], "-".into()),
    };
    let mut report = report(
        suite,
        tiers,
        [
            provider[0].clone(),
            provider[1].clone(),
            identity.library.clone(),
            device,
        ],
        opts,
    );
    report.started = started;
    report.identity = Some(identity);
    report.stopped_early = stopped_early;
    report.teardown = teardown;
    report.passed &= report.teardown.is_none() && report.stopped_early.is_none();
    Ok(report)
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
    let opts = RunOptions {
        differential: false,
        contract: false,
        ..opts.clone()
    };
    if let Some(name) = captured
        .keys()
        .find(|n| n.contains('@') && !is_captured_name(suite, n))
    {
        return Err(SuiteError::Layout(format!(
            "the capture `{name}` names no input or intermediate of a stage (INPUT@STAGE or NODE@STAGE, with INPUT one of the stage's inputs, NODE the output of one of its graph's nodes)"
        )));
    }
    let started = now_rfc3339();
    let (tiers, _) = run_tiers(
        suite,
        Source::Captured(captured),
        reference,
        &opts,
        &mut |_| {},
    )?;
    if tiers
        .iter()
        .flat_map(|t| &t.stages)
        .all(|s| s.status == Status::NotCaptured)
    {
        return Err(SuiteError::Layout(format!(
            "no selected stage's outputs are among the {} captured tensor(s): name captures after the suite's tensors (`vips-conformance inspect` lists them)",
            captured.len()
        )));
    }
    let mut report = report(
        suite,
        tiers,
        [
            label.to_string(),
            String::new(),
            label.to_string(),
            "-".into(),
        ],
        &opts,
    );
    report.started = started;
    Ok(report)
}

/// `[provider, version, library, device]`.
fn report(suite: &Suite, tiers: Vec<TierReport>, who: [String; 4], opts: &RunOptions) -> RunReport {
    let [provider, provider_version, provider_library, device] = who;
    let passed = !tiers.is_empty()
        && tiers.iter().all(|t| {
            t.stages
                .iter()
                .chain(&t.differential)
                .chain(&t.contract)
                .all(|s| !s.status.is_failure())
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
        identity: None,
        seed: opts.seed,
        settings: Settings::of(opts),
        started: String::new(),
        finished: now_rfc3339(),
        tiers,
        teardown: None,
        stopped_early: None,
        passed,
    }
}

/// What the tier loop shares: the options, the failure count, the kernels
/// that timed out, the observer.
struct Progress<'a> {
    opts: &'a RunOptions,
    failures: usize,
    stopped: Option<String>,
    timed_out: TimedOut,
    observer: &'a mut dyn FnMut(Event),
}

impl Progress<'_> {
    /// Applies the baseline, counts failures, reports the result.
    fn record(&mut self, mut result: StageResult) -> StageResult {
        if result.status == Status::Timeout {
            if let Some(reason) = &result.reason {
                self.timed_out.record(&result.stage, reason);
            }
        }
        if let Some(baseline) = &self.opts.baseline {
            baseline.apply(&mut result);
        }
        // Stages, not rounds, count towards --max-fails.
        if result.round == Round::Main
            && result.status.is_failure()
            && result.status != Status::Missing
        {
            self.failures += 1;
            if let Some(max) = self.opts.max_fails.filter(|&m| self.failures >= m) {
                self.stopped.get_or_insert_with(|| {
                    format!("stopped after {max} failing stage(s) (--max-fails)")
                });
            }
        }
        (self.observer)(Event::Finished(&result));
        result
    }

    fn planned(&mut self, tier: Tier, round: Round, stages: usize) {
        (self.observer)(Event::Planned {
            tier,
            round,
            stages,
        });
    }

    fn started(&mut self, tier: Tier, round: Round, stage: &str) {
        (self.observer)(Event::Started { tier, round, stage });
    }

    /// A stage never run because the run stopped early.
    fn missing(&mut self, stage: &Stage, tier: Tier, round: Round) -> StageResult {
        let mut r = StageResult::empty(&stage.name, tier, round);
        r.status = Status::Missing;
        r.attempts = 0;
        r.reason = self.stopped.clone().map(|s| format!("not run: {s}"));
        self.record(r)
    }
}

/// The bytes of a stage's tensors as the document declares them: its
/// inputs and every node's output.
pub fn stage_bytes(suite: &Suite, stage: &Stage) -> usize {
    stage
        .inputs
        .iter()
        .chain(stage.graph.iter().map(|n| &n.output))
        .filter_map(|n| suite.spec_in(&stage.name, n))
        .map(|s| s.size_bytes())
        .sum()
}

/// The sandboxed worker for a run of `suite` on `library`, the same for the
/// CLI and the C library: the worker program, and a policy whose memory
/// limit follows the largest selected stage unless `memory` (bytes) is given.
pub fn worker_command(
    suite: &Suite,
    opts: &RunOptions,
    library: &std::path::Path,
    memory: Option<u64>,
) -> Result<WorkerCommand, String> {
    let largest = select(suite, opts)
        .into_iter()
        .map(|s| stage_bytes(suite, s))
        .max()
        .unwrap_or(0);
    Ok(WorkerCommand {
        program: worker_program()?,
        policy: Policy::for_library(library, largest as u64, memory),
    })
}

/// The kernels a stage may call: its graph's operators and its own kernel.
fn kernels_of(stage: &Stage) -> impl Iterator<Item = &str> {
    stage
        .graph
        .iter()
        .map(|n| n.op.name())
        .chain(stage.kernel.as_ref().map(|(k, _)| k.as_str()))
}

impl Progress<'_> {
    /// `--after-timeout skip`: a stage using a kernel that already timed out
    /// is TIMEOUT without running (and says so).
    fn skipped(&mut self, stage: &Stage, tier: Tier, round: Round) -> Option<StageResult> {
        if !self.opts.skip_after_timeout {
            return None;
        }
        let reason = self.timed_out.skip(kernels_of(stage))?;
        let mut r = StageResult::empty(&stage.name, tier, round);
        r.status = Status::Timeout;
        r.attempts = 0;
        r.reason = Some(reason);
        Some(self.record(r))
    }
}

fn run_tiers(
    suite: &Suite,
    source: Source,
    reference: &Device,
    opts: &RunOptions,
    observer: &mut dyn FnMut(Event),
) -> Result<(Vec<TierReport>, Option<String>), SuiteError> {
    let stages = select(suite, opts);
    // Anchored golden values come from the reference that judges the run.
    suite.use_reference(reference);
    if let Some(cache) = &opts.reference_cache {
        suite.use_cache(cache.clone());
    }
    let cache = opts
        .reference_cache
        .clone()
        .map(|cache| stage::CacheScope::new(cache, suite, reference));
    let mut progress = Progress {
        opts,
        failures: 0,
        stopped: None,
        timed_out: TimedOut::default(),
        observer,
    };
    let mut tiers = Vec::new();
    for (tier_index, &tier) in opts.tiers.iter().enumerate() {
        let tier_at = TierContext {
            suite,
            tier,
            tier_index,
            source,
            reference,
            opts,
            cache: cache.as_ref(),
        };
        let main = tier_at.main_round(&stages, &mut progress)?;
        let first_divergent_stage = (opts.mode == Mode::Chained)
            .then(|| {
                main.results
                    .iter()
                    .find(|r| r.status != Status::Pass)
                    .map(|r| r.stage.clone())
            })
            .flatten();
        let end_to_end = if opts.mode == Mode::Chained {
            end_to_end(suite, &stages, tier, &main.chain.produced)?
        } else {
            Vec::new()
        };
        let differential = if opts.differential {
            tier_at.differential_round(&stages, &main, &mut progress)?
        } else {
            Vec::new()
        };
        let contract = match source {
            Source::Provider(backend) if opts.contract && progress.stopped.is_none() => {
                tier_at.contract(backend, &stages, &mut progress)
            }
            _ => Vec::new(),
        };
        tiers.push(TierReport {
            tier,
            mode: opts.mode,
            stages: main.results,
            first_divergent_stage,
            end_to_end,
            differential,
            contract,
        });
    }
    Ok((tiers, progress.stopped))
}

/// What a tier's main round leaves for the rest of the tier.
struct MainRound {
    results: Vec<StageResult>,
    /// Whether the provider ran each stage (decided before a baseline turns
    /// NOT SUPPORTED into EXPECTED FAIL): the differential round runs those.
    supported: Vec<bool>,
    /// Each stage's output digests, for the differential round's replay check.
    digests: HashMap<String, differential::Digests>,
    /// In chained mode, what flowed from stage to stage.
    chain: Chain,
}

/// What every stage of one tier shares.
struct TierContext<'a> {
    suite: &'a Suite,
    tier: Tier,
    tier_index: usize,
    source: Source<'a>,
    reference: &'a Device,
    opts: &'a RunOptions,
    cache: Option<&'a stage::CacheScope>,
}

impl<'a> TierContext<'a> {
    /// Every stage in order, from golden inputs (isolated) or from the
    /// stages before (chained).
    fn main_round(
        &self,
        stages: &[&Stage],
        progress: &mut Progress,
    ) -> Result<MainRound, SuiteError> {
        let (suite, tier, source, opts) = (self.suite, self.tier, self.source, self.opts);
        let mut main = MainRound {
            results: Vec::new(),
            supported: Vec::new(),
            digests: HashMap::new(),
            chain: Chain::default(),
        };
        progress.planned(tier, Round::Main, stages.len());
        for (stage_index, stage) in stages.iter().enumerate() {
            if progress.stopped.is_some() {
                main.results
                    .push(progress.missing(stage, tier, Round::Main));
                main.supported.push(true);
                continue;
            }
            if let Some(skipped) = progress.skipped(stage, tier, Round::Main) {
                main.results.push(skipped);
                main.supported.push(false);
                continue;
            }
            // `check` judges an exact stage through what produced its input.
            let composed = match source {
                Source::Captured(c) if opts.mode == Mode::Chained => {
                    captured::through_producers(suite, stage, c)
                }
                _ => None,
            };
            let judged = composed.as_ref().map_or(*stage, |(s, _)| s);
            let mut inputs = main.chain.inputs(suite, judged, tier, opts.mode, source)?;
            inputs
                .notes
                .extend(composed.as_ref().map(|(_, n)| n.clone()));
            progress.started(tier, Round::Main, &stage.name);
            let (mut result, outputs) = with_retries(opts.flake_retries, |attempt| {
                self.stage(
                    judged,
                    inputs.golden,
                    Round::Main,
                    [stage_index as u64, attempt.into()],
                )
                .run(&inputs.values)
            })?;
            result.notes.splice(0..0, inputs.notes);
            if let Some(upstream) = inputs.diverged_upstream {
                // Whatever drill-down found, say first where the inputs came from.
                result.drill_down_note = Some(match result.drill_down_note.take() {
                    Some(n) => format!("{upstream}; {n}"),
                    None => upstream,
                });
            }
            if let Source::Captured(c) = source {
                captured::isolated_hint(suite, stage, opts.mode, c, &mut result);
            }
            if opts.mode == Mode::Chained {
                main.chain.record(stage, &outputs, result.status);
                main.chain.release(stages, stage_index);
            }
            main.supported.push(result.status != Status::NotSupported);
            main.results.push(progress.record(result));
            (progress.observer)(Event::Outputs {
                tier,
                outputs: &outputs,
            });
            if opts.differential {
                main.digests
                    .insert(stage.name.clone(), differential::digests(&outputs));
            }
            release_after(suite, opts, stages, stage_index);
        }
        Ok(main)
    }

    /// Every stage the provider ran, again on fresh inputs.
    fn differential_round(
        &self,
        stages: &[&Stage],
        main: &MainRound,
        progress: &mut Progress,
    ) -> Result<Vec<StageResult>, SuiteError> {
        let (suite, tier) = (self.suite, self.tier);
        let mut results = Vec::new();
        let runs = main.supported.iter().filter(|&&runs| runs).count();
        progress.planned(tier, Round::Differential, runs);
        for (stage_index, (stage, &runs)) in stages.iter().zip(&main.supported).enumerate() {
            if progress.stopped.is_some() {
                results.push(progress.missing(stage, tier, Round::Differential));
                continue;
            }
            if !runs {
                continue;
            }
            if let Some(skipped) = progress.skipped(stage, tier, Round::Differential) {
                results.push(skipped);
                continue;
            }
            let ctx = self.stage(
                stage,
                false,
                Round::Differential,
                [stage_index as u64, self.opts.nonce],
            );
            progress.started(tier, Round::Differential, &stage.name);
            let result = differential::round(&ctx, main.digests.get(&stage.name), |name| {
                Ok(to_tier(&*suite.tensor(name)?, stage.arithmetic(tier)))
            })?;
            results.push(progress.record(result));
            release_after(suite, self.opts, stages, stage_index);
        }
        Ok(results)
    }

    /// The kernel contract for the kernels of `stages` (of every stage when
    /// the run is one shard: shard 1 runs it, for the whole component).
    fn contract(
        &self,
        backend: &Backend,
        stages: &[&Stage],
        progress: &mut Progress,
    ) -> Vec<StageResult> {
        let all: Vec<&Stage>;
        let stages = match self.opts.shard {
            Some((k, _)) if k != 1 => return Vec::new(),
            Some(_) => {
                all = self.suite.document.stages.iter().collect();
                &all[..]
            }
            None => stages,
        };
        let run = contract::Contract {
            suite: self.suite,
            tier: self.tier,
            backend,
            reference: self.reference,
            // The values, like the differential round's, from the nonce too.
            seed: SplitMix::derive(
                self.opts.seed,
                &[
                    self.tier_index as u64,
                    Round::Contract as u64,
                    self.opts.nonce,
                ],
            ),
            timeout: self.opts.timeout,
        };
        let tier = self.tier;
        let results = run.round(stages, &mut |tell| match tell {
            contract::Tell::Planned(n) => progress.planned(tier, Round::Contract, n),
            contract::Tell::Started(name) => progress.started(tier, Round::Contract, name),
        });
        results.into_iter().map(|r| progress.record(r)).collect()
    }

    /// `stage` run in `round`; `parts` seed its guard regions.
    fn stage<'s>(
        &self,
        stage: &'s Stage,
        golden_inputs: bool,
        round: Round,
        parts: [u64; 2],
    ) -> StageContext<'s>
    where
        'a: 's,
    {
        StageContext {
            suite: self.suite,
            stage,
            tier: self.tier,
            source: self.source,
            reference: self.reference,
            golden_inputs,
            cache: self.cache,
            round,
            seed: SplitMix::derive(
                self.opts.seed,
                &[self.tier_index as u64, parts[0], round as u64, parts[1]],
            ),
            timeout: self.opts.timeout,
            require_deterministic: self.opts.require_deterministic,
        }
    }
}

/// Releases the suite tensors `stages[index]` read (its inputs, and the
/// golden values of its outputs) that no later stage of this pass reads: a
/// run then holds about one stage's weights rather than a whole model's. A
/// later pass (the differential round, the next tier) and the chained
/// end-to-end comparison read them again: regenerating 22 M seeded weights
/// takes about 50 ms, holding them about 90 MB.
fn release_after(suite: &Suite, opts: &RunOptions, stages: &[&Stage], index: usize) {
    let later: HashSet<&String> = stages[index + 1..].iter().flat_map(|s| &s.inputs).collect();
    let stage = stages[index];
    suite.release(
        stage
            .inputs
            .iter()
            .chain(&stage.outputs)
            .filter(|n| !later.contains(n)),
    );
    if opts.return_freed_memory {
        vips_execution::allocator::return_freed_memory();
    }
}

/// Runs `attempt` (0, 1, ...) until it does not fail or `retries` re-runs
/// are spent; a failure that passes on a retry is FLAKY, never a pass.
fn with_retries(
    retries: u32,
    attempt: impl Fn(u32) -> Result<(StageResult, HashMap<String, HostTensor>), SuiteError>,
) -> Result<(StageResult, HashMap<String, HostTensor>), SuiteError> {
    let (mut result, mut outputs) = attempt(0)?;
    let mut n = 0;
    let retriable =
        |s: Status| s.is_failure() && !matches!(s, Status::NotSupported | Status::Missing);
    while retriable(result.status) && n < retries {
        n += 1;
        let (retry, retry_outputs) = attempt(n)?;
        let passed = !retry.status.is_failure();
        let first = format!(
            "{}{}",
            result.status.label(),
            result
                .reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
        (result, outputs) = (retry, retry_outputs);
        if passed {
            result.status = Status::Flaky;
            result.reason = Some(format!(
                "passed on attempt {} after failing ({first})",
                n + 1
            ));
            break;
        }
    }
    result.attempts = n + 1;
    Ok((result, outputs))
}

impl StageResult {
    fn empty(stage: &str, tier: Tier, round: Round) -> StageResult {
        StageResult {
            stage: stage.to_string(),
            tier,
            status: Status::Error,
            execution: None,
            outputs: Vec::new(),
            invariants: Vec::new(),
            reason: None,
            findings: Vec::new(),
            round,
            attempts: 1,
            nodes: Vec::new(),
            tightest_node: None,
            drill_down: None,
            drill_down_note: None,
            notes: Vec::new(),
            coverage: Vec::new(),
            seconds: 0.0,
            timeout_seconds: 0.0,
            timings: Timings::default(),
            reference_cached: false,
        }
    }
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
    let disagree = raster_disagreements(suite, stages, produced)?;
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
            // Pixels [B, H, W, ...] a rasterizer this output derives from
            // decided otherwise.
            let mask = disagree
                .iter()
                .find(|d| d.derived.contains(name) && actual.spec.shape.starts_with(&d.pixels));
            let mut pixels_left_out = 0;
            let drift = match mask {
                Some(d) => {
                    pixels_left_out = d.differs.iter().filter(|&&m| m).count() as u64;
                    let per = actual.spec.numel() / d.pixels.iter().product::<usize>().max(1);
                    let left_out = |t: &HostTensor| -> Result<HostTensor, SuiteError> {
                        let mut v = t.to_f64_vec();
                        for (px, &m) in v.chunks_mut(per.max(1)).zip(&d.differs) {
                            if m {
                                px.fill(0.0);
                            }
                        }
                        Ok(HostTensor::from_vec(&t.spec.shape, v)
                            .map_err(|e| SuiteError::Layout(e.to_string()))?
                            .cast(t.spec.dtype))
                    };
                    Drift::of(&left_out(actual)?, &left_out(&golden)?)
                }
                None => Drift::of(actual, &golden),
            }
            .map_err(|e| SuiteError::Layout(format!("end to end `{name}`: {e}")))?;
            let passed = drift.nonfinite_mismatches == 0
                && drift.rel_l2_error <= criterion.rel_l2
                && drift.cosine_similarity >= criterion.cosine;
            out.push(EndToEndResult {
                tensor: name.clone(),
                drift,
                criterion,
                passed,
                pixels_left_out,
            });
        }
    }
    Ok(out)
}

/// A rasterizer output of the run (`[B, H, W, 4]`, ids last): where the
/// provider's ids differ from the golden ones, and the tensors computed from
/// it (itself included) in the run's stages.
struct RasterDisagreement {
    /// `[B, H, W]`.
    pixels: Vec<usize>,
    differs: Vec<bool>,
    derived: HashSet<String>,
}

fn raster_disagreements(
    suite: &Suite,
    stages: &[&Stage],
    produced: &HashMap<String, (HostTensor, String, bool)>,
) -> Result<Vec<RasterDisagreement>, SuiteError> {
    let mut out = Vec::new();
    for node in stages.iter().flat_map(|s| &s.graph) {
        let Some((actual, _, _)) = produced.get(&node.output) else {
            continue;
        };
        if node.op != Op::Rasterize || actual.spec.shape.len() != 4 {
            continue;
        }
        let golden = suite.tensor(&node.output)?;
        let (a, g) = (actual.to_f64_vec(), golden.to_f64_vec());
        let mut derived = HashSet::from([node.output.clone()]);
        for n in stages.iter().flat_map(|s| &s.graph) {
            if n.inputs.iter().any(|i| derived.contains(i)) {
                derived.insert(n.output.clone());
            }
        }
        out.push(RasterDisagreement {
            derived,
            pixels: actual.spec.shape[..3].to_vec(),
            differs: a
                .chunks_exact(4)
                .zip(g.chunks_exact(4))
                .map(|(a, g)| a[3] != g[3])
                .collect(),
        });
    }
    Ok(out)
}
