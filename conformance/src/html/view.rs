//! What the page shows, taken from either source: the results of a run
//! (every metric, error maps) or a certification report (the verdict and
//! margins a report records, signed).

use vips_sdk::certify::{Predicate, Verdict};
use vips_sdk::compare::Tier;
use vips_sdk::document::Document;
use vips_sdk::error_map::ErrorMap;
use vips_sdk::runner::{Execution, Mode, RunReport, Status, Tolerance};

/// The signature of the report the page was made from.
pub enum Signature {
    /// The page shows a run's results, which are not signed.
    Results,
    Unsigned,
    /// Signed by these key ids; no public key was given to check them.
    NotChecked(Vec<String>),
    Verified(String),
    /// Signed, and the signature or the statement does not verify.
    Invalid(String),
}

/// How the header looks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Standing {
    Pass,
    /// CERTIFIED, but the signature was not checked (or there is none).
    Unconfirmed,
    Fail,
}

impl Standing {
    pub fn class(self) -> &'static str {
        match self {
            Standing::Pass => "pass",
            Standing::Unconfirmed => "warn",
            Standing::Fail => "fail",
        }
    }
}

pub struct View {
    pub component: String,
    pub title: Option<String>,
    /// PASS / FAIL, or CERTIFIED / NOT CERTIFIED.
    pub verdict: String,
    pub standing: Standing,
    pub reasons: Vec<String>,
    pub facts: Vec<(&'static str, String)>,
    pub signature: Signature,
    pub tiers: Vec<TierView>,
    /// Said under the header (a report without error maps, notes not found).
    pub remarks: Vec<String>,
}

pub struct TierView {
    pub tier: Tier,
    pub mode: Mode,
    pub stages: Vec<StageView>,
    pub first_divergent: Option<String>,
    /// Chained mode: (tensor, ‖a − g‖/‖g‖, cosine, limit in words, passed).
    pub end_to_end: Vec<(String, f64, f64, String, bool)>,
    /// The differential round's stages that did not pass: (stage, status, reason).
    pub differential: Vec<(String, Status, String)>,
    /// The kernel contract: (cases passed, cases run) when it ran, and the
    /// cases that did not pass: (case, status, reason).
    pub contract: Option<(usize, usize)>,
    pub contract_failures: Failures,
}

/// Rows that did not pass: (name, status, reason).
pub type Failures = Vec<(String, Status, String)>;

/// (passed, run) and the failures of a kernel contract's records.
fn contract_view<'a>(
    cases: impl Iterator<Item = (&'a str, Status, Option<&'a str>)>,
) -> (Option<(usize, usize)>, Failures) {
    let (mut passed, mut run, mut failures) = (0, 0, Vec::new());
    for (name, status, reason) in cases {
        run += 1;
        if status == Status::Pass {
            passed += 1;
        } else {
            failures.push((name.to_string(), status, reason.unwrap_or("").to_string()));
        }
    }
    ((run > 0).then_some((passed, run)), failures)
}

pub struct StageView {
    pub name: String,
    pub status: Status,
    pub execution: Option<Execution>,
    pub seconds: f64,
    pub reason: Option<String>,
    pub findings: Vec<String>,
    pub outputs: Vec<OutputView>,
    /// Decomposed runs: every operator by its own error.
    pub nodes: Vec<NodeView>,
    pub drill_down: Option<NodeView>,
    pub drill_down_note: Option<String>,
    /// How the stage was judged (a rounded capture, a captured input).
    pub notes: Vec<String>,
    /// What the stage's data cannot show.
    pub coverage: Vec<String>,
    /// The least tolerance that would pass it (results only).
    pub tolerance: Option<Tolerance>,
}

pub struct OutputView {
    pub tensor: String,
    pub max_e: f64,
    /// The error's rms over a correct implementation's σ (results only).
    pub rms_t: Option<f64>,
    pub over_bound: u64,
    pub elements: u64,
    /// Against the golden value (results only).
    pub drift_rel_l2: Option<f64>,
    pub map: Option<ErrorMap>,
    /// A rasterizer's pixels as the verdict counted them (results only).
    pub pixels: Option<vips_sdk::error_model::PixelCounts>,
}

#[derive(Clone)]
pub struct NodeView {
    pub node: usize,
    pub op: String,
    pub output: String,
    pub max_e: f64,
    pub passed: bool,
    pub map: Option<ErrorMap>,
}

impl StageView {
    /// The largest `|e|` of the stage's outputs (None: nothing was judged).
    pub fn max_e(&self) -> Option<f64> {
        self.outputs.iter().map(|o| o.max_e).reduce(f64::max)
    }

    pub fn has_maps(&self) -> bool {
        self.outputs.iter().any(|o| o.map.is_some())
            || self.drill_down.as_ref().is_some_and(|d| d.map.is_some())
    }
}

/// Who computed the outputs, said once: a provider's name, version and
/// library, or the files `check` read (its name and its library).
fn provider_line(r: &RunReport) -> String {
    let mut line = r.provider.clone();
    if !r.provider_version.is_empty() {
        line = format!("{line} {}", r.provider_version);
    }
    if !r.provider_library.is_empty() && r.provider_library != r.provider {
        line = format!("{line} ({})", r.provider_library);
    }
    line
}

/// A normalised error for a sentence.
fn e_short(e: f64) -> String {
    if e.is_finite() {
        format!("{e:.3}")
    } else {
        "∞".into()
    }
}

impl TierView {
    /// The first stage that did not pass (in chained mode, the first whose
    /// own error is out of bounds) and, where the drill-down found it, the
    /// first operator out of its own bound: for the banner.
    pub fn first_failure(&self) -> Option<String> {
        let stage = self
            .first_divergent
            .as_ref()
            .and_then(|name| self.stages.iter().find(|s| &s.name == name))
            .or_else(|| self.stages.iter().find(|s| s.status.is_failure()))?;
        let at = match &stage.drill_down {
            Some(d) => format!(
                ", at operator node {} {} → {} (largest |e| {} against its own bound)",
                d.node,
                d.op,
                d.output,
                e_short(d.max_e)
            ),
            None if stage.status == Status::Fail => {
                " (no single operator is out of its own bound)".into()
            }
            None => format!(" ({})", stage.status.label()),
        };
        Some(format!("the first divergent stage is {}{at}", stage.name))
    }
}

fn short(hash: &str) -> String {
    hash.chars().take(16).collect()
}

impl View {
    pub fn of_results(r: &RunReport) -> View {
        let mut facts = vec![
            (
                "component",
                format!("{} {}", r.component, r.component_version),
            ),
            (
                "tiers",
                r.tiers
                    .iter()
                    .map(|t| t.tier.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "mode",
                r.tiers.first().map_or("-", |t| t.mode.name()).to_string(),
            ),
            ("provider", provider_line(r)),
        ];
        // Captured tensors (`check`) ran on no device.
        if !r.device.is_empty() && r.device != "-" {
            facts.push(("device", r.device.clone()));
        }
        if let Some(id) = &r.identity {
            facts.push(("library sha256", short(&id.library_sha256)));
            facts.push((
                "SDK",
                format!("{} (runner {})", id.sdk_version, short(&id.runner_sha256)),
            ));
            facts.push(("isolated", id.isolated.to_string()));
        }
        facts.extend([
            ("seed", r.seed.to_string()),
            ("started", r.started.clone()),
            ("finished", r.finished.clone()),
            ("document sha256", short(&r.document_sha256)),
            ("golden sha256", short(&r.golden_sha256)),
        ]);
        let mut reasons: Vec<String> = r.teardown.iter().chain(&r.stopped_early).cloned().collect();
        let tiers = r
            .tiers
            .iter()
            .map(|t| {
                let contract = contract_view(
                    t.contract
                        .iter()
                        .map(|s| (s.stage.as_str(), s.status, s.reason.as_deref())),
                );
                TierView {
                    tier: t.tier,
                    mode: t.mode,
                    first_divergent: t.first_divergent_stage.clone(),
                    end_to_end: t
                        .end_to_end
                        .iter()
                        .map(|e| {
                            (
                                e.tensor.clone(),
                                e.drift.rel_l2_error,
                                e.drift.cosine_similarity,
                                format!(
                                    "rel L2 ≤ {:e}, cosine ≥ {}",
                                    e.criterion.rel_l2, e.criterion.cosine
                                ),
                                e.passed,
                            )
                        })
                        .collect(),
                    contract: contract.0,
                    contract_failures: contract.1,
                    differential: t
                        .differential
                        .iter()
                        .filter(|s| s.status.is_failure())
                        .map(|s| {
                            (
                                s.stage.clone(),
                                s.status,
                                s.reason.clone().unwrap_or_default(),
                            )
                        })
                        .collect(),
                    stages: t
                        .stages
                        .iter()
                        .map(|s| {
                            let node = |n: &vips_sdk::error_model::NodeCheck| NodeView {
                                node: n.node,
                                op: n.op.clone(),
                                output: n.output.clone(),
                                max_e: n.judgement.max_e,
                                passed: n.judgement.passed,
                                map: n.error_map.clone(),
                            };
                            StageView {
                                name: s.stage.clone(),
                                status: s.status,
                                execution: s.execution,
                                seconds: s.seconds,
                                reason: s.reason.clone(),
                                findings: s.findings.iter().map(|f| f.to_string()).collect(),
                                outputs: s
                                    .outputs
                                    .iter()
                                    .map(|o| OutputView {
                                        tensor: o.tensor.clone(),
                                        max_e: o.judgement.max_e,
                                        rms_t: o.judgement.rms_t,
                                        over_bound: o.judgement.over_bound,
                                        elements: o.judgement.elements,
                                        drift_rel_l2: Some(o.drift.rel_l2_error),
                                        map: o.error_map.clone(),
                                        pixels: o.pixels.clone(),
                                    })
                                    .collect(),
                                nodes: s.nodes.iter().map(node).collect(),
                                // Its map, in a decomposed run, is in `nodes`.
                                drill_down: s.drill_down.as_ref().map(|d| NodeView {
                                    map: d.error_map.clone().or_else(|| {
                                        let n = s.nodes.iter().find(|n| n.node == d.node);
                                        n.and_then(|n| n.error_map.clone())
                                    }),
                                    ..node(d)
                                }),
                                drill_down_note: s.drill_down_note.clone(),
                                notes: s.notes.clone(),
                                coverage: s.coverage.clone(),
                                tolerance: Some(s.least_tolerance()),
                            }
                        })
                        .collect(),
                }
            })
            .collect::<Vec<TierView>>();
        for t in &tiers {
            let failing = t.stages.iter().filter(|s| s.status.is_failure()).count();
            if failing > 0 {
                let first = t
                    .first_failure()
                    .map_or(String::new(), |f| format!("; {f}"));
                reasons.push(format!(
                    "{}: {failing} stage(s) did not pass{first}",
                    t.tier.name()
                ));
            }
        }
        View {
            component: r.component.clone(),
            title: None,
            verdict: if r.passed { "PASS" } else { "FAIL" }.into(),
            standing: if r.passed {
                Standing::Pass
            } else {
                Standing::Fail
            },
            reasons,
            facts,
            signature: Signature::Results,
            tiers,
            remarks: Vec::new(),
        }
    }

    pub fn of_report(p: &Predicate, signature: Signature) -> View {
        let facts = vec![
            (
                "component",
                format!("{} {}", p.component.id, p.component.version),
            ),
            ("tier", p.tier.name().to_string()),
            ("mode", p.mode.name().to_string()),
            (
                "provider",
                format!(
                    "{} {} by {} ({})",
                    p.provider.name, p.provider.version, p.provider.vendor, p.provider.library
                ),
            ),
            ("library sha256", short(&p.provider.library_sha256)),
            (
                "device",
                format!("{} (driver {})", p.device.name, p.device.driver_version),
            ),
            (
                "SDK",
                format!("{} (runner {})", p.sdk.version, short(&p.sdk.runner_sha256)),
            ),
            ("isolated", p.run.isolated.to_string()),
            ("seed", p.run.seed.to_string()),
            ("started", p.run.started.clone()),
            ("finished", p.run.finished.clone()),
            ("document sha256", short(&p.component.document_sha256)),
            ("golden sha256", short(&p.component.golden_sha256)),
        ];
        let node = |n: &vips_sdk::certify::predicate::NodeRecord| NodeView {
            node: n.node,
            op: n.op.clone(),
            output: n.output.clone(),
            max_e: n.max_e,
            passed: n.max_e <= 1.0,
            map: None,
        };
        let stages = p
            .stages
            .iter()
            .map(|s| StageView {
                name: s.stage.clone(),
                status: s.status,
                execution: s.execution,
                seconds: s.seconds,
                reason: s.reason.clone(),
                findings: s.findings.clone(),
                outputs: s
                    .outputs
                    .iter()
                    .map(|o| OutputView {
                        tensor: o.tensor.clone(),
                        max_e: o.max_e,
                        rms_t: o.rms_t,
                        over_bound: o.over_bound,
                        elements: o.elements,
                        drift_rel_l2: None,
                        map: None,
                        pixels: None,
                    })
                    .collect(),
                nodes: Vec::new(),
                drill_down: s.drill_down.as_ref().map(node),
                drill_down_note: None,
                notes: Vec::new(),
                coverage: Vec::new(),
                tolerance: Some(Tolerance::of(
                    s.outputs
                        .iter()
                        .filter(|o| !o.passed)
                        .map(|o| o.tolerance_factor),
                )),
            })
            .collect();
        let mut tier = TierView {
            tier: p.tier,
            mode: p.mode,
            stages,
            first_divergent: None,
            end_to_end: p
                .end_to_end
                .iter()
                .map(|e| {
                    (
                        e.tensor.clone(),
                        e.rel_l2_error,
                        e.cosine_similarity,
                        format!("rel L2 ≤ {:e}, cosine ≥ {}", e.max_rel_l2, e.min_cosine),
                        e.passed,
                    )
                })
                .collect(),
            differential: Vec::new(),
            contract: None,
            contract_failures: Vec::new(),
        };
        if let Some(c) = &p.contract {
            (tier.contract, tier.contract_failures) = contract_view(
                c.cases
                    .iter()
                    .map(|r| (r.stage.as_str(), r.status, r.reason.as_deref())),
            );
        }
        // A certificate is only as good as its signature.
        let mut reasons = p.reasons.clone();
        if let Some(first) = tier.first_failure() {
            reasons.push(format!("{}: {first}", p.tier.name()));
        }
        let standing = match (&signature, p.verdict) {
            (Signature::Invalid(why), _) => {
                reasons.insert(0, format!("the signature does not verify: {why}"));
                Standing::Fail
            }
            (_, Verdict::NotCertified) => Standing::Fail,
            (Signature::Verified(_), Verdict::Certified) => Standing::Pass,
            (Signature::Unsigned, Verdict::Certified) => {
                reasons.insert(
                    0,
                    "the report is not signed: anyone could have written it".into(),
                );
                Standing::Unconfirmed
            }
            (_, Verdict::Certified) => {
                reasons.insert(0, "the signature was not checked (give --pubkey)".into());
                Standing::Unconfirmed
            }
        };
        View {
            component: p.component.id.clone(),
            title: None,
            verdict: p.verdict.label().to_string(),
            standing,
            reasons,
            facts,
            signature,
            tiers: vec![tier],
            remarks: vec![
                "Made from a certification report, which records each stage's verdict and margin but not where in the tensors the error lives: render the run's results file (`run --output results.json`) for heatmaps.".into(),
            ],
        }
    }

    /// Takes the document's title when it is the document the run used
    /// (its notes and graphs then belong on the page: true); otherwise
    /// adds a remark saying why not.
    pub fn with_document(&mut self, doc: Result<&Document, String>, sha256: &str) -> bool {
        match doc {
            Ok(d) if hex::encode(d.sha256) == sha256 => {
                self.title = Some(d.component.title.clone());
                true
            }
            Ok(d) => {
                self.remarks.push(format!(
                    "The document found for `{}` ({}) is not the one the run used (sha256 {} there, {} here): stage notes and graphs are left out.",
                    self.component,
                    d.path.display(),
                    short(sha256),
                    short(&hex::encode(d.sha256))
                ));
                false
            }
            Err(e) => {
                self.remarks.push(format!(
                    "Stage notes and graphs are left out: the suite's document was not found ({e}); give it with --suite."
                ));
                false
            }
        }
    }
}
