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
mod report;
pub mod results;
mod stage;
mod timeouts;

pub use captured::{captured_input_name, check_mode, is_captured_name};
pub use contract::{CONCURRENCY, THREADS as CONCURRENCY_THREADS};
pub use identity::{sha256_file, Host, Identity, Reference};
pub use invariants::InvariantResult;
pub use report::{
    Drift, EndToEndResult, FamilyTime, OutputResult, Round, RunReport, Settings, StageResult,
    Status, TierReport, Timings, Tolerance,
};
pub use results::Baseline;

use crate::suite::{Suite, SuiteError};
use chain::Chain;
use serde::{Deserialize, Serialize};
use stage::StageContext;
use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// Suite tensors (weights, golden values) stay in memory after the
    /// stage that read them while all the run holds adds up to no more than
    /// this many bytes: a component this small is generated once per run,
    /// not once per stage, round and tier. Above it, each stage's are
    /// released after it (a full-size model is never held whole; what its
    /// first stages kept while they fitted stays, at most this much).
    pub keep_tensors_bytes: usize,
}

/// [`RunOptions::keep_tensors_bytes`]' default: every committed quick suite
/// and DINOv2 ViT-S/14 (92 MiB of float32 tensors) fit; ViT-L/14 and the
/// TRELLIS flows (1.3-2.5 GiB) are released stage by stage.
pub const KEEP_TENSORS_BYTES: usize = 128 << 20;

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
            keep_tensors_bytes: KEEP_TENSORS_BYTES,
        }
    }
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
/// golden values of its outputs) that no later stage of this pass reads,
/// unless all the suite holds fits in [`RunOptions::keep_tensors_bytes`]: a
/// run then holds about one stage's weights rather than a whole model's. A
/// later pass (the differential round, the next tier) and the chained
/// end-to-end comparison read them again: regenerating ViT-S/14's 22 M
/// seeded weights takes 0.4-0.8 s of this 2-core machine.
fn release_after(suite: &Suite, opts: &RunOptions, stages: &[&Stage], index: usize) {
    if suite.held_bytes() <= opts.keep_tensors_bytes {
        return;
    }
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
