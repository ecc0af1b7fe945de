//! The VIPS certification predicate (v1): what ran, on what, with which
//! results, and the verdict with its reasons. Every field is documented in
//! docs/report-format.md; this file and that page change together.

use serde::{Deserialize, Serialize};
use vips_runner::run::{
    Execution, Host, Mode, OutputResult, Reference, RunReport, StageResult, Status, TierReport,
};
use vips_runner::suite::Suite;
use vips_verdict::compare::Tier;

/// `CERTIFIED` or `NOT CERTIFIED`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    #[serde(rename = "CERTIFIED")]
    Certified,
    #[serde(rename = "NOT CERTIFIED")]
    NotCertified,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Verdict::Certified => "CERTIFIED",
            Verdict::NotCertified => "NOT CERTIFIED",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Predicate {
    pub verdict: Verdict,
    /// Empty when certified; otherwise every reason, one per kind.
    pub reasons: Vec<String>,
    pub component: ComponentRef,
    pub tier: Tier,
    pub mode: Mode,
    pub sdk: SdkRef,
    pub provider: ProviderRef,
    pub device: DeviceRef,
    /// The reference provider that computed every verdict's float64
    /// reference and bounds (the SDK's CPU provider).
    pub reference: Reference,
    pub host: Host,
    pub run: RunFacts,
    /// Merged reports: each shard's run.
    pub shards: Vec<ShardFacts>,
    /// The stages that must pass for the component to be certified: every
    /// stage of its document, in order.
    pub must_pass: Vec<String>,
    /// The main round, one record per stage run.
    pub stages: Vec<StageRecord>,
    pub differential: Differential,
    /// The kernel contract (`vips_runner::contract`); absent only in reports made
    /// before it existed, which said nothing about it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<Contract>,
    pub determinism: Determinism,
    /// Chained mode: the component's outputs against the golden values.
    pub end_to_end: Vec<EndToEndRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ComponentRef {
    pub id: String,
    pub version: String,
    pub document_sha256: String,
    /// The golden vector set (also a subject of the statement).
    pub golden: String,
    pub golden_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SdkRef {
    pub version: String,
    /// The runner binary that judged the run.
    pub runner_sha256: String,
    /// The worker program that confined the provider and reported the
    /// sandbox's facts (`None` in process).
    pub worker_sha256: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderRef {
    /// The library's file name (also a subject of the statement).
    pub library: String,
    pub library_sha256: String,
    /// What the library says it is.
    pub name: String,
    pub vendor: String,
    pub version: String,
    pub abi_version: u32,
    /// Set when the file is not the one its claimed name stands for.
    pub claim_note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeviceRef {
    pub name: String,
    pub driver_version: String,
    pub memory_bytes: u64,
    pub stable_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunFacts {
    /// The run-time seed: the guard layouts and, with the nonce, the
    /// differential round's inputs (`run --seed` repeats them).
    pub seed: u64,
    /// Mixed into the differential round's inputs: fresh for every run
    /// (each shard its own), so a chosen seed does not reveal them.
    pub nonce: u64,
    /// The nonce was given (`run --nonce`): the inputs were known before
    /// the run, so nothing is certified.
    pub nonce_given: bool,
    /// RFC 3339, UTC.
    pub started: String,
    pub finished: String,
    /// The provider ran in a worker process.
    pub isolated: bool,
    /// What confined the worker (docs/runner.md, "The sandbox"); `None` in
    /// process. CERTIFIED requires every protection of [`vips_execution::sandbox::Facts::lacking`].
    pub sandbox: Option<vips_execution::sandbox::Facts>,
    /// `--stage`: only the stages matching this glob ran.
    pub stage_glob: Option<String>,
    /// `--shard k/n`, when this report is one shard's.
    pub shard: Option<ShardId>,
    pub flake_retries: u32,
    /// A baseline of expected failures was applied.
    pub baseline: bool,
    /// Why stages were left MISSING (`--max-fails`).
    pub stopped_early: Option<String>,
    /// The provider failed while being released, or its file changed.
    pub teardown: Option<String>,
}

/// Shard `k` of `n` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardId {
    pub k: usize,
    pub n: usize,
}

impl std::fmt::Display for ShardId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardFacts {
    pub shard: ShardId,
    /// This shard's differential nonce.
    pub nonce: u64,
    pub host: Host,
    pub device_stable_id: String,
    pub runner_sha256: String,
    pub started: String,
    pub finished: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageRecord {
    pub stage: String,
    pub status: Status,
    pub execution: Option<Execution>,
    pub attempts: u32,
    pub seconds: f64,
    pub reason: Option<String>,
    pub outputs: Vec<OutputRecord>,
    /// What the poison, the guards and the second run found, in words.
    pub findings: Vec<String>,
    /// Decomposed runs: the operator closest to its bound.
    pub tightest_node: Option<NodeRecord>,
    /// Failing stages: the first operator out of bounds on its own.
    pub drill_down: Option<NodeRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeRecord {
    pub node: usize,
    pub op: String,
    pub output: String,
    #[serde(with = "vips_data::json_float")]
    pub max_e: f64,
}

/// One output's metrics. `e` is the normalised error (docs/error-model.md):
/// `|e| <= 1` everywhere passes; the margin is `1 - max_e`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputRecord {
    pub tensor: String,
    pub passed: bool,
    pub elements: u64,
    pub over_bound: u64,
    #[serde(with = "vips_data::json_float")]
    pub max_e: f64,
    #[serde(with = "vips_data::json_float")]
    pub margin: f64,
    #[serde(with = "vips_data::json_float")]
    pub p50_e: f64,
    #[serde(with = "vips_data::json_float")]
    pub p90_e: f64,
    #[serde(with = "vips_data::json_float")]
    pub p99_e: f64,
    #[serde(with = "vips_data::json_float")]
    pub rms_e: f64,
    /// The statistical criteria (docs/error-model.md, section 3): the
    /// error's rms over a correct implementation's σ, and where the mean is
    /// tested `mean t / rms t`; absent where not tested.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "vips_data::json_float::option"
    )]
    pub rms_t: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "vips_data::json_float::option"
    )]
    pub bias_ratio: Option<f64>,
    /// A failing output: the least factor by which its bound would have to
    /// grow to pass (absent for a bias, which no bound passes).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "vips_data::json_float::option"
    )]
    pub tolerance_factor: Option<f64>,
    #[serde(with = "vips_data::json_float")]
    pub max_abs_error: f64,
    /// Against the golden value (drift; not the verdict).
    #[serde(with = "vips_data::json_float")]
    pub golden_max_abs_error: f64,
    #[serde(with = "vips_data::json_float")]
    pub golden_rel_l2_error: f64,
    #[serde(with = "vips_data::json_float")]
    pub golden_cosine_similarity: f64,
    /// Canonical SHA-256 of the output.
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Differential {
    /// The round ran (`--no-differential` skips it; then nothing is certified).
    pub ran: bool,
    pub stages: Vec<StageRecord>,
}

/// The kernel contract of the tier: every kernel the component needs, called
/// with views, broadcasts, odd and large sizes and adversarial values, then
/// all at once from several threads (its last record, `concurrency`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Contract {
    /// It ran (`--no-contract` skips it; then nothing is certified).
    pub ran: bool,
    /// The kernels the component needs at the tier (`name@version`): each
    /// must have cases, and every case must pass.
    pub kernels: Vec<String>,
    pub cases: Vec<StageRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Determinism {
    /// `--require-deterministic`: bitwise differences failed their stage.
    pub required: bool,
    /// Stages whose two runs differed bitwise.
    pub nondeterministic_stages: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EndToEndRecord {
    pub tensor: String,
    pub passed: bool,
    #[serde(with = "vips_data::json_float")]
    pub rel_l2_error: f64,
    #[serde(with = "vips_data::json_float")]
    pub cosine_similarity: f64,
    #[serde(with = "vips_data::json_float")]
    pub max_rel_l2: f64,
    #[serde(with = "vips_data::json_float")]
    pub min_cosine: f64,
}

impl StageRecord {
    fn of(r: &StageResult) -> StageRecord {
        let node = |n: &vips_verdict::error_model::NodeCheck| NodeRecord {
            node: n.node,
            op: n.op.clone(),
            output: n.output.clone(),
            max_e: n.judgement.max_e,
        };
        StageRecord {
            stage: r.stage.clone(),
            status: r.status,
            execution: r.execution,
            attempts: r.attempts,
            seconds: r.seconds,
            reason: r.reason.clone(),
            outputs: r.outputs.iter().map(OutputRecord::of).collect(),
            findings: r.findings.iter().map(|f| f.to_string()).collect(),
            tightest_node: r.tightest_node.as_ref().map(node),
            drill_down: r.drill_down.as_ref().map(node),
        }
    }
}

impl OutputRecord {
    fn of(o: &OutputResult) -> OutputRecord {
        let j = &o.judgement;
        OutputRecord {
            tensor: o.tensor.clone(),
            passed: j.passed,
            elements: j.elements,
            over_bound: j.over_bound,
            max_e: j.max_e,
            margin: 1.0 - j.max_e,
            p50_e: j.p50_e,
            p90_e: j.p90_e,
            p99_e: j.p99_e,
            rms_e: j.rms_e,
            rms_t: j.rms_t,
            bias_ratio: j.bias_ratio,
            tolerance_factor: j.tolerance_factor,
            max_abs_error: j.max_abs_error,
            golden_max_abs_error: o.drift.max_abs_error,
            golden_rel_l2_error: o.drift.rel_l2_error,
            golden_cosine_similarity: o.drift.cosine_similarity,
            sha256: o.sha256.clone(),
        }
    }
}

/// The golden set's name in reports: its directory and file name.
pub fn golden_name(suite: &Suite) -> String {
    let path = &suite.golden.path;
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    match path.parent().and_then(|p| p.file_name()) {
        Some(dir) => format!("{}/{file}", dir.to_string_lossy()),
        None => file,
    }
}

impl Predicate {
    /// The predicate of one tier of a provider run, with its verdict.
    /// `None` when the report has no identity (outputs judged with `check`
    /// certify no provider).
    pub fn of_run(suite: &Suite, report: &RunReport, tier: &TierReport) -> Option<Predicate> {
        let id = report.identity.as_ref()?;
        let library = std::path::Path::new(&id.library)
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        let provider = match &id.claimed {
            Some(p) => ProviderRef {
                library,
                library_sha256: id.library_sha256.clone(),
                name: p.name.clone(),
                vendor: p.vendor.clone(),
                version: p.version.clone(),
                abi_version: p.abi_version,
                claim_note: id.claim_note.clone(),
            },
            None => ProviderRef {
                library,
                library_sha256: id.library_sha256.clone(),
                name: "-".into(),
                vendor: String::new(),
                version: String::new(),
                abi_version: 0,
                claim_note: Some("the library never loaded".into()),
            },
        };
        let device = match &id.device {
            Some(d) => DeviceRef {
                name: d.name.clone(),
                driver_version: d.driver_version.clone(),
                memory_bytes: d.memory_bytes,
                stable_id: d.stable_id.clone(),
            },
            None => DeviceRef {
                name: "-".into(),
                driver_version: String::new(),
                memory_bytes: 0,
                stable_id: String::new(),
            },
        };
        let s = &report.settings;
        let mut nondeterministic: Vec<String> = tier
            .stages
            .iter()
            .chain(&tier.differential)
            .filter(|r| {
                r.findings.iter().any(|f| {
                    matches!(
                        f,
                        vips_execution::execution::Finding::Nondeterministic { .. }
                    )
                })
            })
            .map(|r| r.stage.clone())
            .collect();
        // A stage of both rounds once, in document order.
        let mut seen = std::collections::HashSet::new();
        nondeterministic.retain(|s| seen.insert(s.clone()));
        let mut p = Predicate {
            verdict: Verdict::NotCertified,
            reasons: Vec::new(),
            component: ComponentRef {
                id: report.component.clone(),
                version: report.component_version.clone(),
                document_sha256: report.document_sha256.clone(),
                golden: golden_name(suite),
                golden_sha256: report.golden_sha256.clone(),
            },
            tier: tier.tier,
            mode: tier.mode,
            sdk: SdkRef {
                version: id.sdk_version.clone(),
                runner_sha256: id.runner_sha256.clone(),
                worker_sha256: id.worker_sha256.clone(),
            },
            provider,
            device,
            reference: id.reference.clone(),
            host: id.host.clone(),
            run: RunFacts {
                seed: report.seed,
                nonce: s.nonce,
                nonce_given: s.nonce_given,
                started: report.started.clone(),
                finished: report.finished.clone(),
                isolated: id.isolated,
                sandbox: id.sandbox.clone(),
                stage_glob: s.stage_glob.clone(),
                shard: s.shard.map(|(k, n)| ShardId { k, n }),
                flake_retries: s.flake_retries,
                baseline: s.baseline,
                stopped_early: report.stopped_early.clone(),
                teardown: report.teardown.clone(),
            },
            shards: Vec::new(),
            must_pass: suite
                .document
                .stages
                .iter()
                .map(|s| s.name.clone())
                .collect(),
            stages: tier.stages.iter().map(StageRecord::of).collect(),
            differential: Differential {
                ran: s.differential,
                stages: tier.differential.iter().map(StageRecord::of).collect(),
            },
            contract: Some(Contract {
                ran: s.contract && s.shard.is_none_or(|(k, _)| k == 1),
                kernels: vips_runner::contract::needed(
                    suite,
                    &suite.document.stages.iter().collect::<Vec<_>>(),
                    tier.tier,
                )
                .iter()
                .map(|n| format!("{}@{}", n.op.name(), n.op.version()))
                .collect(),
                cases: tier.contract.iter().map(StageRecord::of).collect(),
            }),
            determinism: Determinism {
                required: s.require_deterministic,
                nondeterministic_stages: nondeterministic,
            },
            end_to_end: tier
                .end_to_end
                .iter()
                .map(|e| EndToEndRecord {
                    tensor: e.tensor.clone(),
                    passed: e.passed,
                    rel_l2_error: e.drift.rel_l2_error,
                    cosine_similarity: e.drift.cosine_similarity,
                    max_rel_l2: e.criterion.rel_l2,
                    min_cosine: e.criterion.cosine,
                })
                .collect(),
        };
        p.assess();
        Some(p)
    }

    /// Sets the verdict and its reasons from the records: CERTIFIED only when
    /// every must-pass stage passed in the main and the differential round,
    /// in an isolated run that was not filtered to a subset (or merged shards
    /// covering all), chained end to end too, released cleanly.
    pub fn assess(&mut self) {
        let mut reasons = Vec::new();
        // A merge certifies only whole: 1/n … n/n (n as its first shard
        // says; `merge` refuses mixed counts and more than MAX_SHARDS).
        if let Some(first) = self.shards.first() {
            let n = first.shard.n;
            let absent: Vec<String> = (1..=n.min(super::merge::MAX_SHARDS))
                .map(|k| ShardId { k, n })
                .filter(|id| !self.shards.iter().any(|s| s.shard == *id))
                .map(|id| id.to_string())
                .collect();
            if !absent.is_empty() {
                reasons.push(format!(
                    "incomplete merge: no report for shard(s) {}",
                    absent.join(", ")
                ));
            }
        }
        if self.must_pass.is_empty() {
            reasons.push("the must-pass list is empty: nothing was certified".to_string());
        }
        if self.reference.name != "cpu" {
            reasons.push(format!(
                "the reference was provider `{}`, not the SDK's CPU reference provider `cpu`",
                self.reference.name
            ));
        }
        if self.run.nonce_given {
            reasons.push("the differential round's nonce was given (--nonce): its inputs were known before the run".to_string());
        }
        if !self.run.isolated {
            reasons.push("the provider ran inside the runner's process (--no-isolate): it could have altered the runner".to_string());
        } else {
            match &self.run.sandbox {
                None => reasons.push("the worker's sandbox is not recorded".to_string()),
                Some(facts) => {
                    let lacking = facts.lacking();
                    if !lacking.is_empty() {
                        reasons.push(format!(
                            "the worker was not fully sandboxed: {}",
                            lacking.join("; ")
                        ));
                    }
                }
            }
        }
        if let Some(glob) = &self.run.stage_glob {
            reasons.push(format!(
                "the run was filtered to the stages matching `{glob}`"
            ));
        }
        if let Some(shard) = &self.run.shard {
            reasons.push(format!(
                "shard {shard} of the suite only: merge every shard's report (`vips-conformance merge`)"
            ));
        }
        if let Some(s) = &self.run.stopped_early {
            reasons.push(format!("stopped early: {s}"));
        }
        if let Some(t) = &self.run.teardown {
            reasons.push(t.clone());
        }
        round_reasons(&self.must_pass, &self.stages, "", &mut reasons);
        if self.differential.ran {
            round_reasons(
                &self.must_pass,
                &self.differential.stages,
                "in the differential round (fresh inputs)",
                &mut reasons,
            );
        } else {
            reasons.push("the differential round (fresh inputs from a run-time seed) did not run: nothing shows the outputs were computed rather than replayed".to_string());
        }
        if let Some(c) = &self.contract {
            c.reasons(&mut reasons);
        }
        let e2e: Vec<&str> = self
            .end_to_end
            .iter()
            .filter(|e| !e.passed)
            .map(|e| e.tensor.as_str())
            .collect();
        if !e2e.is_empty() {
            reasons.push(format!("end to end out of bounds: {}", e2e.join(", ")));
        }
        self.verdict = if reasons.is_empty() {
            Verdict::Certified
        } else {
            Verdict::NotCertified
        };
        self.reasons = reasons;
    }
}

impl Contract {
    /// Why the contract does not hold: it did not run, a kernel has no case,
    /// cases failed (one reason per status, naming them), no concurrency
    /// pass. (A merge takes shard 1's record: shard 1 runs it.)
    fn reasons(&self, out: &mut Vec<String>) {
        if !self.ran {
            out.push("the kernel contract did not run (--no-contract, or a shard other than 1): nothing shows the kernels keep the calling contract (strides, broadcasts, concurrency, extreme values)".to_string());
            return;
        }
        let uncovered: Vec<&str> = self
            .kernels
            .iter()
            .filter(|k| {
                !self
                    .cases
                    .iter()
                    .any(|c| c.stage.starts_with(&format!("{k} ")))
            })
            .map(String::as_str)
            .collect();
        if !uncovered.is_empty() {
            out.push(format!(
                "kernel contract: no case ran for {} (the provider claims none of its dtypes, or the run was filtered to stages that do not use it)",
                uncovered.join(", ")
            ));
        }
        let mut by_status: Vec<(Status, Vec<&str>)> = Vec::new();
        for c in self.cases.iter().filter(|c| c.status != Status::Pass) {
            match by_status.iter_mut().find(|(s, _)| *s == c.status) {
                Some((_, names)) => names.push(&c.stage),
                None => by_status.push((c.status, vec![&c.stage])),
            }
        }
        for (status, names) in by_status {
            out.push(format!(
                "kernel contract {}: {}",
                status.label(),
                names.join(", ")
            ));
        }
        if !self.cases.is_empty()
            && !self
                .cases
                .iter()
                .any(|c| c.stage == vips_runner::run::CONCURRENCY)
        {
            out.push("kernel contract: the concurrency pass has no record".to_string());
        }
    }
}

/// One reason per status (FAIL, CRASHED, FLAKY...) listing its stages, and
/// one for must-pass stages with no record at all.
fn round_reasons(
    must_pass: &[String],
    records: &[StageRecord],
    round: &str,
    out: &mut Vec<String>,
) {
    let suffix = if round.is_empty() {
        String::new()
    } else {
        format!(" {round}")
    };
    let mut never = Vec::new();
    let mut by_status: Vec<(Status, Vec<&str>)> = Vec::new();
    for name in must_pass {
        let mut found = false;
        for r in records.iter().filter(|r| &r.stage == name) {
            found = true;
            if r.status == Status::Pass {
                continue;
            }
            match by_status.iter_mut().find(|(s, _)| *s == r.status) {
                Some((_, names)) => names.push(name),
                None => by_status.push((r.status, vec![name])),
            }
        }
        if !found {
            never.push(name.as_str());
        }
    }
    for (status, names) in by_status {
        out.push(format!(
            "{}{suffix}: {}",
            status_phrase(status),
            names.join(", ")
        ));
    }
    if !never.is_empty() {
        out.push(format!("never run{suffix}: {}", never.join(", ")));
    }
}

fn status_phrase(status: Status) -> String {
    match status {
        Status::Fail => "failing stages".into(),
        Status::Flaky => "flaky stages (failed, then passed on a retry: never a pass)".into(),
        Status::ExpectedFail => "stages failing as the baseline expects (a baseline tracks failures; it does not excuse them)".into(),
        other => format!("stages {}", other.label()),
    }
}
