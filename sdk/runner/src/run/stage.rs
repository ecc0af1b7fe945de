//! One stage at one tier: its outputs (from a provider, or captured outside
//! the SDK) judged by the error model, every operator of a decomposed run by
//! its own error, invariants, and drill-down.

use super::execute::{fused_program, graph_program, plan, run_program};
use super::{invariants, Drift, Execution, OutputResult, Round, Source, StageResult, Status};
use crate::reference_cache::{Key, Lookup, ReferenceCache};
use crate::suite::{Suite, SuiteError};
use std::collections::HashMap;
use std::time::{Duration, Instant};
use vips_data::document::Stage;
use vips_data::HostTensor;
use vips_execution::execution::Finding;
use vips_execution::isolation::Failure;
use vips_verdict::compare::Tier;
use vips_verdict::error_map::{self, ErrorMap};
use vips_verdict::error_model::{
    self, Expected, NodeCheck, Precision, Rules, StageReference, TierParams, Unkept,
};
use vsdk_catalog::DType;

type StageRun = (StageResult, HashMap<String, HostTensor>);

/// The reference cache and what its keys share within a run.
pub(super) struct CacheScope {
    cache: ReferenceCache,
    document_sha256: [u8; 32],
    golden_sha256: [u8; 32],
    reference: String,
}

impl CacheScope {
    pub fn new(
        cache: ReferenceCache,
        suite: &Suite,
        reference: &vips_execution::Device,
    ) -> CacheScope {
        let r = super::Reference::of(reference);
        CacheScope {
            cache,
            document_sha256: suite.document.sha256,
            golden_sha256: suite.golden.file_sha256,
            reference: format!("{} {} {}", r.name, r.version, r.library_sha256),
        }
    }

    fn key(&self, stage: &Stage, tier: Tier) -> Key {
        Key {
            document_sha256: self.document_sha256,
            golden_sha256: self.golden_sha256,
            stage: stage.name.clone(),
            tier: tier.name().to_string(),
            reference: self.reference.clone(),
        }
    }
}

pub(super) struct StageContext<'a> {
    pub suite: &'a Suite,
    pub stage: &'a Stage,
    pub tier: Tier,
    pub source: Source<'a>,
    pub reference: &'a vips_execution::Device,
    /// The inputs are the golden tensors (isolated mode, or a first stage).
    pub golden_inputs: bool,
    /// Where a golden-fed stage's reference may be kept between runs.
    pub cache: Option<&'a CacheScope>,
    pub round: Round,
    /// Sizes and patterns of the guard regions (fresh for every execution).
    pub seed: u64,
    /// Given (`--timeout`), else derived from the reference's cost (`Timeouts`).
    pub timeout: Option<Duration>,
    pub require_deterministic: bool,
}

/// A stage the provider did not run to the end: crashed, timed out, or
/// returned an error status.
pub(super) fn failed(result: &mut StageResult, failure: Failure) {
    result.status = match failure {
        Failure::Provider(_) => Status::Error,
        Failure::Crashed { .. } => Status::Crashed,
        Failure::Timeout { .. } => Status::Timeout,
        Failure::MemoryLimit { .. } => Status::MemoryLimit,
        Failure::ProcessesLeft { .. } => Status::ProcessesLeft,
        Failure::NotLoaded(_) => Status::Missing,
    };
    // The limit it ran out of, the first-call allowance included.
    if let Failure::Timeout { seconds, .. } = &failure {
        result.timeout_seconds = *seconds;
    }
    result.reason = Some(failure.to_string());
}

impl StageContext<'_> {
    /// The tier the stage computes and is judged at (its `precision`, else
    /// the run's).
    fn arithmetic(&self) -> Tier {
        self.stage.arithmetic(self.tier)
    }

    pub fn run(&self, inputs: &HashMap<String, HostTensor>) -> Result<StageRun, SuiteError> {
        let start = Instant::now();
        let stage = self.stage;
        let mut result = StageResult::empty(&stage.name, self.tier, self.round);
        if self.arithmetic() != self.tier {
            result.notes.push(format!(
                "computed and judged at {} (the stage's `precision`): the model runs it at that precision whatever the tier",
                self.arithmetic().name()
            ));
        }
        let finish = |mut r: StageResult, outs| {
            r.seconds = start.elapsed().as_secs_f64();
            Ok((r, outs))
        };
        let backend = match self.source {
            Source::Provider(b) => b,
            Source::Captured(captured) => {
                if !stage.outputs.iter().any(|o| captured.contains_key(o)) {
                    result.status = Status::NotCaptured;
                    result.reason = Some(format!(
                        "the captures hold none of its outputs ({}): not judged",
                        stage.outputs.join(", ")
                    ));
                    return finish(result, HashMap::new());
                }
                result.execution = Some(Execution::Captured);
                return match self.captured(captured, inputs, &mut result.notes) {
                    Ok(values) => {
                        let outputs = stage
                            .outputs
                            .iter()
                            .map(|o| (o.clone(), values[o].clone()))
                            .collect();
                        let computed = Instant::now();
                        let judged =
                            self.reference_of(inputs, &mut result)
                                .and_then(|(reference, _)| {
                                    result.timings.reference = computed.elapsed().as_secs_f64();
                                    let judging = Instant::now();
                                    let judged = self.judge(
                                        &mut result,
                                        &reference,
                                        &values,
                                        None,
                                        Execution::Captured,
                                        Duration::ZERO,
                                    );
                                    result.timings.judgement = judging.elapsed().as_secs_f64();
                                    judged
                                });
                        if let Err(e) = judged {
                            result.status = Status::Error;
                            result.reason = Some(e);
                        }
                        finish(result, outputs)
                    }
                    Err(e) => {
                        result.reason = Some(e);
                        finish(result, HashMap::new())
                    }
                };
            }
        };
        let execution = match plan(self.suite, stage, self.arithmetic(), backend) {
            Ok(Ok(e)) => e,
            Ok(Err(lacks)) => {
                result.status = Status::NotSupported;
                result.reason = Some(lacks);
                return finish(result, HashMap::new());
            }
            Err(f) => {
                failed(&mut result, f);
                return finish(result, HashMap::new());
            }
        };
        result.execution = Some(execution);
        // The reference first: its cost on this host sets the timeout, and
        // the verdict reuses it.
        let computed = Instant::now();
        let (reference, cost) = match self.reference_of(inputs, &mut result) {
            Ok(r) => r,
            Err(e) => {
                result.reason = Some(e);
                return finish(result, HashMap::new());
            }
        };
        result.timings.reference = computed.elapsed().as_secs_f64();
        let program = match execution {
            Execution::Decomposed => graph_program(self.arithmetic().float_dtype(), stage),
            Execution::Fused => fused_program(self.suite, stage, self.arithmetic()),
            Execution::Captured => unreachable!("planned for a device"),
        };
        let timeout = self
            .timeout
            .unwrap_or_else(|| super::timeouts::of_reference(cost));
        result.timeout_seconds = timeout.as_secs_f64();
        let running = Instant::now();
        let ran = run_program(backend, &program, stage, inputs, self.seed, timeout);
        let ran_for = running.elapsed().as_secs_f64();
        let ran = match ran {
            Ok(ran) => ran,
            Err(f) => {
                result.timings.io = ran_for;
                failed(&mut result, f);
                return finish(result, HashMap::new());
            }
        };
        result.timeout_seconds = (timeout + ran.allowance).as_secs_f64();
        result.timings.provider = ran.kernel_seconds.min(ran_for);
        result.timings.io = ran_for - result.timings.provider;
        result.findings = ran.findings;
        let outputs: HashMap<String, HostTensor> = stage
            .outputs
            .iter()
            .map(|o| (o.clone(), ran.values[o].clone()))
            .collect();
        let judging = Instant::now();
        let judged = self.judge(
            &mut result,
            &reference,
            &ran.values,
            Some(&ran.repeat),
            execution,
            timeout,
        );
        result.timings.judgement = judging.elapsed().as_secs_f64();
        match judged {
            Ok(()) => self.apply_findings(&mut result),
            Err(e) => {
                result.status = Status::Error;
                result.reason = Some(e);
            }
        }
        finish(result, outputs)
    }

    /// What the guards saw outranks the error model: a kernel that wrote
    /// out of bounds or left outputs unwritten fails as such, whatever its
    /// outputs look like.
    fn apply_findings(&self, result: &mut StageResult) {
        let first = |pred: fn(&Finding) -> bool| result.findings.iter().find(|f| pred(f)).cloned();
        let verdict = if let Some(f) = first(Finding::scribbled) {
            Some((Status::OutOfBounds, f))
        } else if let Some(f) = first(|f| matches!(f, Finding::Unwritten { .. })) {
            Some((Status::Unwritten, f))
        } else {
            first(|f| matches!(f, Finding::Nondeterministic { .. }))
                .filter(|_| self.require_deterministic && result.status == Status::Pass)
                .map(|f| (Status::Fail, f))
        };
        if let Some((status, finding)) = verdict {
            result.status = status;
            result.reason = Some(finding.to_string());
        }
    }

    /// A captured stage's values: its inputs and its outputs, taken from the
    /// captures in the tier's dtype.
    fn captured(
        &self,
        captured: &HashMap<String, HostTensor>,
        inputs: &HashMap<String, HostTensor>,
        notes: &mut Vec<String>,
    ) -> Result<HashMap<String, HostTensor>, String> {
        let mut values = inputs.clone();
        for name in &self.stage.outputs {
            let t = captured
                .get(name)
                .ok_or_else(|| {
                    format!("`{name}` was not captured, though other outputs of the stage were: give every output")
                })?;
            let declared = self.suite.spec(name).expect("declared");
            if t.spec.shape != declared.shape {
                return Err(format!(
                    "`{name}` was captured with shape {:?}, the document declares {:?}",
                    t.spec.shape, declared.shape
                ));
            }
            let judged = super::to_tier(t, self.arithmetic());
            if super::rounds(t, self.arithmetic()) {
                notes.push(format!(
                    "output `{name}` was captured as {} and rounded to {} to be judged at {}",
                    t.spec.dtype,
                    judged.spec.dtype,
                    self.arithmetic().name()
                ));
            }
            values.insert(name.clone(), judged);
        }
        Ok(values)
    }

    fn params(&self) -> &TierParams {
        &self.stage.tolerances[&self.arithmetic()]
    }

    /// The verdict: outputs against the reference within the propagated
    /// bound; in a decomposed run every node against its own; invariants.
    /// `repeat`, the second run on the same inputs, is judged too: it holds
    /// the tensors whose bits differ from the first run's (the same bits,
    /// the same verdict).
    fn judge(
        &self,
        result: &mut StageResult,
        reference: &StageReference,
        values: &HashMap<String, HostTensor>,
        repeat: Option<&HashMap<String, HostTensor>>,
        execution: Execution,
        timeout: Duration,
    ) -> Result<(), String> {
        let (stage, tier) = (self.stage, self.arithmetic());
        // An output's mean is tested where its error includes a dot
        // product's (`StageReference::summed`).
        let rules =
            |name: &String| Rules::of_stage(stage, self.params(), reference.summed.contains(name));
        let mut passed = true;
        for name in &stage.outputs {
            let actual = &values[name];
            let ref_value = &reference.values[name];
            if ref_value.spec.shape != actual.spec.shape {
                return Err(format!(
                    "`{name}`: shape {:?} does not match the reference {:?}",
                    actual.spec.shape, ref_value.spec.shape
                ));
            }
            let golden = self.suite.tensor(name).map_err(|e| e.to_string())?;
            if self.golden_inputs && tier.float_dtype().is_none_or(|d| d == DType::F32) {
                check_golden(name, ref_value, &golden)?;
            }
            let x = Expected::of_output(stage, name, values, reference, self.params())
                .map_err(|e| e.to_string())?;
            let (expected, bound) = (&x.values, &x.bound);
            let judgement =
                error_model::judge(actual, expected, bound, Some(&x.sigma), rules(name));
            passed &= judgement.passed;
            // (The differential round's outputs are judged, not drawn.)
            let error_map = (self.round == Round::Main
                && (!judgement.passed || judgement.max_e >= error_map::NEAR_FAILING))
                .then(|| {
                    ErrorMap::of_stage_tensor(
                        name, actual, expected, bound, stage, values, stage.nan,
                    )
                });
            let (drift, hash) =
                Drift::with_hash(actual, &golden).map_err(|e| format!("`{name}`: {e}"))?;
            result.outputs.push(OutputResult {
                tensor: name.clone(),
                judgement,
                drift,
                sha256: hex::encode(hash),
                error_map,
                pixels: x.pixels,
            });
        }
        if self.round == Round::Main {
            result.coverage = reference.coverage.clone();
        }
        let first_passed = passed;
        let repeat_failed = match repeat {
            Some(r) => self.judge_repeat(result, reference, values, r, execution, &rules)?,
            None => Vec::new(),
        };
        if !repeat_failed.is_empty() {
            passed = false;
            result.findings.dedup();
            if first_passed {
                result.reason = Some(format!(
                    "run 2 of 2 (the repeat on the same inputs) is out of bounds although run 1 passed: {}",
                    repeat_failed.join(", ")
                ));
            }
        }
        for inv in stage.verify.iter().filter(|_| self.round == Round::Main) {
            let r = invariants::check(inv, &values[inv.tensor()]);
            passed &= r.held;
            result.invariants.push(r);
            // The repeat's invariants too, where its bits differ.
            let tensor = inv.tensor();
            if let Some(b) = repeat.and_then(|r| r.get(tensor)) {
                if !invariants::check(inv, b).held {
                    passed = false;
                    result.findings.push(Finding::RepeatOutOfBounds {
                        tensor: tensor.to_string(),
                    });
                }
            }
        }
        // Every operator by its own error: in a decomposed run always (its
        // intermediates are at hand); in a fused one, to locate a failure.
        let nodes = match execution {
            Execution::Decomposed => Some(self.check_nodes(values, Unkept::Error)),
            Execution::Fused if !passed => match self.source {
                Source::Provider(backend) => {
                    let program = graph_program(tier.float_dtype(), stage);
                    let inputs: HashMap<String, HostTensor> = stage
                        .inputs
                        .iter()
                        .map(|n| (n.clone(), values[n].clone()))
                        .collect();
                    Some(
                        run_program(backend, &program, stage, &inputs, self.seed, timeout)
                            .map_err(|f| f.to_string())
                            .and_then(|ran| self.check_nodes(&ran.values, Unkept::Error)),
                    )
                }
                Source::Captured(_) => None,
            },
            // The engine's intermediates, where it captured them.
            Execution::Captured if !passed => match self.source {
                Source::Captured(captured) => {
                    let found = super::captured::intermediates(stage, captured, tier);
                    if found.is_empty() {
                        result.drill_down_note = Some(format!(
                            "no intermediate of this stage was captured: capture them as NODE@STAGE (`{}@{}`) to name the operator that diverges",
                            stage.graph.first().map_or("n", |n| n.output.as_str()),
                            stage.name
                        ));
                        None
                    } else {
                        let mut all = values.clone();
                        all.extend(found);
                        Some(self.check_nodes(&all, Unkept::Reference))
                    }
                }
                Source::Provider(_) => None,
            },
            Execution::Fused | Execution::Captured => None,
        };
        match nodes {
            Some(Ok(checks)) => {
                for c in &checks {
                    result.timings.family(stage.graph[c.node].op).judgement += c.seconds;
                }
                let mut failed = checks.iter().find(|c| !c.judgement.passed).cloned();
                if execution == Execution::Decomposed {
                    passed &= failed.is_none();
                    // A node's error map is kept once, in `nodes`.
                    let unmapped = |c: &NodeCheck| NodeCheck {
                        error_map: None,
                        ..c.clone()
                    };
                    result.tightest_node = checks
                        .iter()
                        .filter(|c| c.judgement.max_e > 0.0 && c.judgement.max_e.is_finite())
                        .max_by(|a, b| a.judgement.max_e.total_cmp(&b.judgement.max_e))
                        .map(unmapped);
                    failed = failed.as_ref().map(unmapped);
                    result.nodes = checks;
                }
                // A failure of the repeat alone is said in the reason.
                let repeat_only = first_passed && !repeat_failed.is_empty();
                if !passed {
                    if failed.is_none() && !repeat_only {
                        result.drill_down_note = Some(match execution {
                            Execution::Fused => "every operator passes its own check when fed the provider's own inputs: the error of the fused kernel accumulates across operators",
                            Execution::Captured => "every captured intermediate passes its own check from the engine's own inputs: the error is in an operator whose output was not captured, or accumulates across operators",
                            Execution::Decomposed => "every operator passes its own check: the stage fails on its outputs (above)",
                        }.into());
                    }
                    result.drill_down = failed;
                }
            }
            Some(Err(e)) if execution == Execution::Decomposed => return Err(e),
            Some(Err(e)) => result.drill_down_note = Some(format!("drill-down could not run: {e}")),
            None => {}
        }
        result.status = if passed { Status::Pass } else { Status::Fail };
        if !passed && result.reason.is_none() {
            result.reason = Some(fail_reason(result));
        }
        Ok(())
    }

    /// Judges the repeat (run 2 of 2 on the same inputs) wherever its bits
    /// differ from the first run's: outputs against the same reference and
    /// bounds, and in a decomposed run each operator by its own error.
    /// Returns what failed, in words (a finding is recorded for each).
    fn judge_repeat(
        &self,
        result: &mut StageResult,
        reference: &StageReference,
        values: &HashMap<String, HostTensor>,
        repeat: &HashMap<String, HostTensor>,
        execution: Execution,
        rules: &dyn Fn(&String) -> Rules,
    ) -> Result<Vec<String>, String> {
        let stage = self.stage;
        let differs = |name: &String| repeat.contains_key(name);
        let mut failed = Vec::new();
        for name in stage.outputs.iter().filter(|n| differs(n)) {
            // A rasterizer's output is resolved against its own ids (the
            // stage's other values are the same): only then a copy.
            let rasterized = stage
                .graph
                .iter()
                .any(|n| n.output == *name && n.op == vsdk_catalog::Op::Rasterize);
            let second = rasterized.then(|| {
                let mut v = values.clone();
                v.insert(name.clone(), repeat[name].clone());
                v
            });
            let x = Expected::of_output(
                stage,
                name,
                second.as_ref().unwrap_or(values),
                reference,
                self.params(),
            )
            .map_err(|e| e.to_string())?;
            let j = error_model::judge(
                &repeat[name],
                &x.values,
                &x.bound,
                Some(&x.sigma),
                rules(name),
            );
            if !j.passed {
                failed.push(format!("`{name}` (|e| {:.3e})", j.max_e));
                result.findings.push(Finding::RepeatOutOfBounds {
                    tensor: name.clone(),
                });
            }
        }
        if execution == Execution::Decomposed && stage.graph.iter().any(|n| differs(&n.output)) {
            let mut second = values.clone();
            second.extend(repeat.iter().map(|(n, t)| (n.clone(), t.clone())));
            for c in self
                .check_nodes(&second, Unkept::Error)?
                .into_iter()
                .filter(|c| !c.judgement.passed)
            {
                failed.push(format!(
                    "operator {} `{}` (|e| {:.3e})",
                    c.node, c.op, c.judgement.max_e
                ));
                result
                    .findings
                    .push(Finding::RepeatOutOfBounds { tensor: c.output });
            }
        }
        Ok(failed)
    }

    /// The float64 reference and bounds of the stage from `inputs`.
    /// The stage's reference from `inputs`, and what computing it costs on
    /// this host; from the reference cache when they are the golden inputs
    /// (a function of the files and the tier).
    fn reference_of(
        &self,
        inputs: &HashMap<String, HostTensor>,
        result: &mut StageResult,
    ) -> Result<(StageReference, Duration), String> {
        let cache = self.cache.filter(|_| self.golden_inputs);
        let key = cache.map(|c| c.key(self.stage, self.tier));
        if let (Some(c), Some(key)) = (cache, &key) {
            match c.cache.get(key) {
                (Some((r, seconds)), _) => {
                    result.reference_cached = true;
                    return Ok((r, Duration::from_secs_f64(seconds)));
                }
                (None, Lookup::Damaged) => result.notes.push(format!(
                    "the reference cache's entry for this stage ({}) did not check out: dropped and recomputed",
                    c.cache.dir.display()
                )),
                (None, _) => {}
            }
        }
        let started = Instant::now();
        let r = error_model::stage_reference(
            self.stage,
            self.arithmetic(),
            inputs,
            self.reference,
            self.params(),
        )
        .map_err(|e| format!("the reference could not run: {e}"))?;
        let cost = started.elapsed();
        for (node, seconds) in self.stage.graph.iter().zip(&r.node_seconds) {
            result.timings.family(node.op).reference += seconds;
        }
        if let (Some(c), Some(key)) = (cache, &key) {
            c.cache.put(key, &r, cost.as_secs_f64());
        }
        Ok((r, cost))
    }

    /// Every node in `values` by its own error; `unkept`: whether every
    /// intermediate must be there (a provider's run) or only some (an
    /// engine's captures).
    fn check_nodes(
        &self,
        values: &HashMap<String, HostTensor>,
        unkept: Unkept,
    ) -> Result<Vec<NodeCheck>, String> {
        error_model::check_nodes(
            self.stage,
            self.arithmetic(),
            values,
            self.reference,
            self.params(),
            (self.stage.nan, self.stage.mismatch_fraction),
            unkept,
        )
        .map_err(|e| format!("the reference could not check the operators: {e}"))
    }
}

/// Why a stage failed on its own data, in one line: the first failing output
/// (how far, where), else the first failing invariant, and the operator
/// drill-down names. (Guards' findings and a failing repeat set their own.)
fn fail_reason(result: &StageResult) -> String {
    let mut parts = Vec::new();
    if let Some(o) = result.outputs.iter().find(|o| !o.judgement.passed) {
        let j = &o.judgement;
        let at = j
            .worst
            .as_ref()
            .map(|w| format!(", worst at {:?}", w.index))
            .unwrap_or_default();
        parts.push(format!(
            "`{}`: {}{at}",
            o.tensor,
            j.reason.as_deref().unwrap_or("out of bounds")
        ));
    } else if let Some(i) = result.invariants.iter().find(|i| !i.held) {
        parts.push(format!(
            "invariant {} does not hold: {}",
            i.invariant, i.detail
        ));
    }
    match &result.drill_down {
        Some(d) if parts.is_empty() => parts.push(format!(
            "first failing operator: node {} `{}` -> `{}`: {}",
            d.node,
            d.op,
            d.output,
            d.judgement.reason.as_deref().unwrap_or("out of bounds")
        )),
        Some(d) => parts.push(format!(
            "first failing operator: node {} `{}` -> `{}`",
            d.node, d.op, d.output
        )),
        None if parts.is_empty() => parts.push("an operator failed its own check".into()),
        None => {}
    }
    parts.join("; ")
}

/// The golden values are what the reference computes from the golden inputs
/// (to float32 storage rounding): a reference provider or golden file that
/// disagrees makes every verdict meaningless, so the stage is an ERROR.
fn check_golden(name: &str, reference: &HostTensor, golden: &HostTensor) -> Result<(), String> {
    let (r, g) = (reference.f64_values(), golden.f64_values());
    let storage = Precision::of(golden.spec.dtype).map_or(0.0, |p| p.u);
    // Storage rounding: half an ulp of the stored dtype (with slack for the
    // rounding of this comparison), or flushed below the smallest normal.
    let bad = r.iter().zip(g.iter()).position(|(&r, &g)| {
        let same = r == g || (r.is_nan() && g.is_nan());
        let within =
            (r - g).abs() <= storage * r.abs() * (1.0 + 1e-9) + f64::from(f32::MIN_POSITIVE);
        !same && !within
    });
    match bad {
        None => Ok(()),
        Some(i) => Err(format!(
            "the reference provider computes {} for `{name}` at flat index {i} where the golden file holds {}: the golden file was not generated by this reference (re-run `vips-conformance generate`) or the reference provider is broken",
            r[i], g[i]
        )),
    }
}
