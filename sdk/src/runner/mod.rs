//! The conformance runner: for each selected stage and tier, materialise the
//! inputs, convert them to the tier's dtype, run the stage on the provider
//! (fused if it has the stage's kernel, else its graph node by node with
//! intermediates on the device), compare, check invariants, and on a failure
//! drill down to the first operator that diverges from the CPU reference.

mod invariants;

pub use invariants::InvariantResult;

use crate::compare::{self, Criteria, Tier};
use crate::document::{GraphNode, Stage};
use crate::error_model::{self, EndToEnd, Judgement, NodeCheck, Precision, Rules, TierParams};
use crate::suite::{Suite, SuiteError};
use crate::{AttrValue, Attrs, DType, Device, DeviceTensor, Error, HostTensor, Op, TensorSpec};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Instant;

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
}

/// How far an output is from the golden value (not a verdict: in chained mode
/// the drift accumulates over stages; at fp16/bf16 it includes the rounding
/// of the inputs).
#[derive(Debug, Clone, Serialize)]
pub struct Drift {
    pub max_abs_error: f64,
    pub max_rel_error: f64,
    pub rel_l2_error: f64,
    pub cosine_similarity: f64,
}

impl Drift {
    fn of(actual: &HostTensor, golden: &HostTensor) -> Result<Drift, compare::CompareError> {
        let everything = Criteria {
            tolerance: compare::Tolerance::Close {
                rtol: 0.0,
                atol: f64::MAX,
            },
            nan: compare::NanPolicy::Allow,
            allowed_mismatch_fraction: 1.0,
        };
        let m = compare::compare(actual, golden, &everything)?;
        Ok(Drift {
            max_abs_error: m.max_abs_error,
            max_rel_error: m.max_rel_error,
            rel_l2_error: m.rel_l2_error,
            cosine_similarity: m.cosine_similarity,
        })
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
    let stages = select(suite, opts);
    let mut tiers = Vec::new();
    for &tier in &opts.tiers {
        // Chained mode: the provider's own outputs, and which stage made each.
        let mut produced: HashMap<String, (HostTensor, String, bool)> = HashMap::new();
        let mut results = Vec::new();
        for stage in &stages {
            let mut inputs = HashMap::new();
            let mut diverged_upstream = None;
            let mut golden_inputs = true;
            for name in &stage.inputs {
                let t = match (opts.mode, produced.get(name)) {
                    (Mode::Chained, Some((own, from, passed))) => {
                        if !passed {
                            diverged_upstream.get_or_insert_with(|| from.clone());
                        }
                        golden_inputs = false;
                        own.clone()
                    }
                    _ => to_tier(&*suite.tensor(name)?, tier),
                };
                inputs.insert(name.clone(), t);
            }
            let ctx = StageContext {
                suite,
                stage,
                tier,
                device,
                reference,
                golden_inputs,
            };
            let (mut result, outputs) = ctx.run(&inputs)?;
            if let (Some(from), true) = (&diverged_upstream, result.status != Status::Pass) {
                result.drill_down_note = Some(format!(
                    "its inputs come from `{from}`, which already diverged"
                ));
            }
            if opts.mode == Mode::Chained {
                let passed = result.status == Status::Pass;
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
    let info = device.provider_info();
    let passed = !tiers.is_empty()
        && tiers.iter().all(|t| {
            t.stages.iter().all(|s| s.status == Status::Pass)
                && t.end_to_end.iter().all(|e| e.passed)
        });
    Ok(RunReport {
        component: suite.document.component.id.clone(),
        component_version: suite.document.component.version.clone(),
        document_sha256: hex::encode(suite.document.sha256),
        golden_sha256: hex::encode(suite.golden.file_sha256),
        provider: info.name.clone(),
        provider_version: info.version.clone(),
        provider_library: info.library.display().to_string(),
        device: device.name().to_string(),
        tiers,
        passed,
    })
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
            let Ok(drift) = Drift::of(actual, &golden) else {
                continue;
            };
            let passed = drift.rel_l2_error <= criterion.rel_l2
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

/// A node's attributes when floats are computed in `float`: a cast to a float
/// type casts to that one instead (the graph says float32; the fp16 tier and
/// the float64 reference compute in their own type).
pub(crate) fn node_attrs(node: &GraphNode, float: Option<DType>) -> Attrs {
    let mut attrs = node.attrs.clone();
    if let (Op::Cast, Some(f)) = (node.op, float) {
        for (name, value) in &mut attrs.0 {
            if let AttrValue::Str(to) = value {
                if name == "dtype" && DType::from_name(to).is_some_and(DType::is_float) {
                    *to = f.name().to_string();
                }
            }
        }
    }
    attrs
}

fn tier_spec(s: &TensorSpec, tier: Tier) -> TensorSpec {
    match tier.float_dtype() {
        Some(d) if s.dtype.is_float() => TensorSpec::new(d, &s.shape),
        _ => s.clone(),
    }
}

/// Which way the provider can run the stage at this tier, or what it lacks.
fn plan(
    suite: &Suite,
    stage: &Stage,
    tier: Tier,
    device: &Device,
) -> Result<Result<Execution, String>, Error> {
    let dtype_of = |name: &str| suite.spec(name).map(|s| tier_spec(s, tier).dtype);
    if let Some((kernel, version)) = &stage.kernel {
        let dtype = dtype_of(&stage.inputs[0]).expect("suite checked every stage input");
        if device.supports(kernel, *version, dtype)? {
            return Ok(Ok(Execution::Fused));
        }
    }
    let mut missing = Vec::new();
    for node in &stage.graph {
        let dtype = dtype_of(&node.inputs[0]).expect("suite typed every graph tensor");
        if !device.supports(node.op.name(), node.op.version(), dtype)? {
            missing.push(format!(
                "{}@{} for {dtype}",
                node.op.name(),
                node.op.version()
            ));
        }
    }
    Ok(if missing.is_empty() {
        Ok(Execution::Decomposed)
    } else {
        missing.dedup();
        Err(format!("the provider lacks {}", missing.join(", ")))
    })
}

/// Runs the stage's graph node by node on `device`; returns the stage's
/// inputs and every node's output, downloaded (each node is judged by its
/// own error).
fn run_graph(
    float: Option<DType>,
    stage: &Stage,
    device: &Device,
    inputs: &HashMap<String, HostTensor>,
) -> Result<HashMap<String, HostTensor>, Error> {
    let mut on_device: HashMap<String, DeviceTensor> = HashMap::new();
    let mut host = inputs.clone();
    for (name, t) in inputs {
        on_device.insert(name.clone(), device.upload(t)?);
    }
    for node in &stage.graph {
        let args: Vec<&DeviceTensor> = node.inputs.iter().map(|i| &on_device[i]).collect();
        let attrs = node_attrs(node, float);
        let out = device.execute(node.op.name(), node.op.version(), &attrs, &args)?;
        let out = out.into_iter().next().expect("one output");
        host.insert(node.output.clone(), device.download(&out)?);
        on_device.insert(node.output.clone(), out);
    }
    Ok(host)
}

type StageRun = (StageResult, HashMap<String, HostTensor>);

struct StageContext<'a> {
    suite: &'a Suite,
    stage: &'a Stage,
    tier: Tier,
    device: &'a Device,
    reference: &'a Device,
    /// The inputs are the golden tensors (isolated mode, or a first stage).
    golden_inputs: bool,
}

impl StageContext<'_> {
    fn run(&self, inputs: &HashMap<String, HostTensor>) -> Result<StageRun, SuiteError> {
        let start = Instant::now();
        let stage = self.stage;
        let mut result = StageResult {
            stage: stage.name.clone(),
            tier: self.tier,
            status: Status::Error,
            execution: None,
            outputs: Vec::new(),
            invariants: Vec::new(),
            reason: None,
            nodes: Vec::new(),
            tightest_node: None,
            drill_down: None,
            drill_down_note: None,
            seconds: 0.0,
        };
        let finish = |mut r: StageResult, outs| {
            r.seconds = start.elapsed().as_secs_f64();
            Ok((r, outs))
        };
        let execution = match plan(self.suite, stage, self.tier, self.device) {
            Ok(Ok(e)) => e,
            Ok(Err(lacks)) => {
                result.status = Status::NotSupported;
                result.reason = Some(lacks);
                return finish(result, HashMap::new());
            }
            Err(e) => {
                result.reason = Some(e.to_string());
                return finish(result, HashMap::new());
            }
        };
        result.execution = Some(execution);
        let float = self.tier.float_dtype();
        let values = match execution {
            Execution::Decomposed => run_graph(float, stage, self.device, inputs),
            Execution::Fused => run_fused(self.suite, stage, self.tier, self.device, inputs),
        };
        let values = match values {
            Ok(v) => v,
            Err(e) => {
                result.reason = Some(e.to_string());
                return finish(result, HashMap::new());
            }
        };
        let outputs: HashMap<String, HostTensor> = stage
            .outputs
            .iter()
            .map(|o| (o.clone(), values[o].clone()))
            .collect();
        match self.judge(&mut result, inputs, &values, execution) {
            Ok(()) => {}
            Err(e) => {
                result.status = Status::Error;
                result.reason = Some(e);
            }
        }
        finish(result, outputs)
    }

    fn params(&self) -> &TierParams {
        &self.stage.tolerances[&self.tier]
    }

    /// The verdict: outputs against the reference within the propagated
    /// bound; in a decomposed run every node against its own; invariants.
    fn judge(
        &self,
        result: &mut StageResult,
        inputs: &HashMap<String, HostTensor>,
        values: &HashMap<String, HostTensor>,
        execution: Execution,
    ) -> Result<(), String> {
        let (stage, tier) = (self.stage, self.tier);
        let params = *self.params();
        let reference = error_model::stage_reference(stage, tier, inputs, self.reference, &params)
            .map_err(|e| format!("the reference could not run: {e}"))?;
        let rules = Rules {
            nan: stage.nan,
            allowed_over_fraction: stage.mismatch_fraction,
            bias_z: None,
        };
        let mut passed = true;
        for name in &stage.outputs {
            let actual = &values[name];
            let (ref_value, bound) = (&reference.values[name], &reference.bounds[name]);
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
            let judgement = error_model::judge(actual, &ref_value.to_f64_vec(), bound, rules);
            passed &= judgement.passed;
            let drift = Drift::of(actual, &golden).map_err(|e| format!("`{name}`: {e}"))?;
            result.outputs.push(OutputResult {
                tensor: name.clone(),
                judgement,
                drift,
                sha256: hex::encode(crate::golden::canonical_sha256(actual)),
            });
        }
        for inv in &stage.verify {
            let r = invariants::check(inv, &values[inv.tensor()]);
            passed &= r.held;
            result.invariants.push(r);
        }
        // Every operator by its own error: in a decomposed run always (its
        // intermediates are at hand); in a fused one, to locate a failure.
        let nodes = match execution {
            Execution::Decomposed => Some(self.check_nodes(values)),
            Execution::Fused if !passed => Some(
                run_graph(tier.float_dtype(), stage, self.device, inputs)
                    .map_err(|e| e.to_string())
                    .and_then(|v| self.check_nodes(&v)),
            ),
            Execution::Fused => None,
        };
        match nodes {
            Some(Ok(checks)) => {
                let failed = checks.iter().find(|c| !c.judgement.passed).cloned();
                if execution == Execution::Decomposed {
                    passed &= failed.is_none();
                    result.tightest_node = checks
                        .iter()
                        .filter(|c| c.judgement.max_e > 0.0 && c.judgement.max_e.is_finite())
                        .max_by(|a, b| a.judgement.max_e.total_cmp(&b.judgement.max_e))
                        .cloned();
                    result.nodes = checks;
                }
                if !passed {
                    if failed.is_none() {
                        result.drill_down_note = Some(
                            "every operator is within its own bound when fed the provider's own inputs: the error of the fused kernel accumulates across operators".into(),
                        );
                    }
                    result.drill_down = failed;
                }
            }
            Some(Err(e)) if execution == Execution::Decomposed => return Err(e),
            Some(Err(e)) => result.drill_down_note = Some(format!("drill-down could not run: {e}")),
            None => {}
        }
        result.status = if passed { Status::Pass } else { Status::Fail };
        Ok(())
    }

    fn check_nodes(&self, values: &HashMap<String, HostTensor>) -> Result<Vec<NodeCheck>, String> {
        error_model::check_nodes(
            self.stage,
            self.tier,
            values,
            self.reference,
            self.params(),
            self.stage.nan,
            self.stage.mismatch_fraction,
        )
        .map_err(|e| format!("the reference could not check the operators: {e}"))
    }
}

/// The golden values are what the reference computes from the golden inputs
/// (to float32 storage rounding): a reference provider or golden file that
/// disagrees makes every verdict meaningless, so the stage is an ERROR.
fn check_golden(name: &str, reference: &HostTensor, golden: &HostTensor) -> Result<(), String> {
    let (r, g) = (reference.to_f64_vec(), golden.to_f64_vec());
    let storage = Precision::of(golden.spec.dtype).map_or(0.0, |p| p.u);
    let bad = r.iter().zip(&g).position(|(&r, &g)| {
        let same = r == g || (r.is_nan() && g.is_nan());
        !same && (r - g).abs() > storage * r.abs() * (1.0 + 1e-9) + f64::from(f32::MIN_POSITIVE)
    });
    match bad {
        None => Ok(()),
        Some(i) => Err(format!(
            "the reference provider computes {} for `{name}` at flat index {i} where the golden file holds {}: the golden file was not generated by this reference (re-run `vips-conformance generate`) or the reference provider is broken",
            r[i], g[i]
        )),
    }
}

fn run_fused(
    suite: &Suite,
    stage: &Stage,
    tier: Tier,
    device: &Device,
    inputs: &HashMap<String, HostTensor>,
) -> Result<HashMap<String, HostTensor>, Error> {
    let (kernel, version) = stage.kernel.as_ref().expect("planned fused");
    let up: Vec<DeviceTensor> = stage
        .inputs
        .iter()
        .map(|i| device.upload(&inputs[i]))
        .collect::<Result<_, _>>()?;
    let refs: Vec<&DeviceTensor> = up.iter().collect();
    let specs = stage
        .outputs
        .iter()
        .map(|o| tier_spec(suite.spec(o).expect("declared"), tier))
        .collect();
    let outs = device.execute_kernel(kernel, *version, &crate::Attrs::new(), &refs, specs)?;
    stage
        .outputs
        .iter()
        .zip(&outs)
        .map(|(n, t)| Ok((n.clone(), device.download(t)?)))
        .collect()
}
