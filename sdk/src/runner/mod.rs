//! The conformance runner: for each selected stage and tier, materialise the
//! inputs, convert them to the tier's dtype, run the stage on the provider
//! (fused if it has the stage's kernel, else its graph node by node with
//! intermediates on the device), compare, check invariants, and on a failure
//! drill down to the first operator that diverges from the CPU reference.

mod invariants;

pub use invariants::InvariantResult;

use crate::compare::{self, Criteria, Metrics, Tier};
use crate::document::{GraphNode, Stage};
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

#[derive(Debug, Clone, Serialize)]
pub struct OutputResult {
    pub tensor: String,
    pub metrics: Metrics,
    /// Canonical SHA-256 of the actual output.
    pub sha256: String,
}

/// The first operator of a failing stage that diverges from the reference
/// when fed the reference's own inputs.
#[derive(Debug, Clone, Serialize)]
pub struct DrillDown {
    pub node: usize,
    pub op: String,
    pub output: String,
    pub metrics: Metrics,
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
    pub drill_down: Option<DrillDown>,
    /// Set when a failing stage was drilled into and no operator diverged alone.
    pub drill_down_note: Option<String>,
    pub seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct TierReport {
    pub tier: Tier,
    pub mode: Mode,
    pub stages: Vec<StageResult>,
    /// Chained mode: the first stage that did not pass.
    pub first_divergent_stage: Option<String>,
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
    /// Every selected stage passed at every tier.
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

/// Runs the suite on `device`; `reference` (the CPU provider) serves drill-down.
pub fn run(
    suite: &Suite,
    device: &Device,
    reference: Option<&Device>,
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
            for name in &stage.inputs {
                let t = match (opts.mode, produced.get(name)) {
                    (Mode::Chained, Some((own, from, passed))) => {
                        if !passed {
                            diverged_upstream.get_or_insert_with(|| from.clone());
                        }
                        own.clone()
                    }
                    _ => to_tier(&*suite.tensor(name)?, tier),
                };
                inputs.insert(name.clone(), t);
            }
            // Drilling into a stage fed wrong inputs would only find the symptom.
            let drill = if diverged_upstream.is_none() {
                reference
            } else {
                None
            };
            let (mut result, outputs) = run_stage(suite, stage, tier, &inputs, device, drill)?;
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
        tiers.push(TierReport {
            tier,
            mode: opts.mode,
            stages: results,
            first_divergent_stage,
        });
    }
    let info = device.provider_info();
    let passed = !tiers.is_empty()
        && tiers
            .iter()
            .all(|t| t.stages.iter().all(|s| s.status == Status::Pass));
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

fn criteria(stage: &Stage, tier: Tier) -> Criteria {
    Criteria {
        tolerance: stage
            .tolerances
            .get(&tier)
            .copied()
            .unwrap_or_else(|| tier.torch_default()),
        nan: stage.nan,
        allowed_mismatch_fraction: stage.mismatch_fraction,
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

/// Runs the stage's graph node by node on `device`; returns the named tensors.
fn run_graph(
    float: Option<DType>,
    stage: &Stage,
    device: &Device,
    inputs: &HashMap<String, HostTensor>,
    wanted: &[String],
) -> Result<HashMap<String, HostTensor>, Error> {
    let mut on_device: HashMap<String, DeviceTensor> = HashMap::new();
    for (name, t) in inputs {
        on_device.insert(name.clone(), device.upload(t)?);
    }
    for node in &stage.graph {
        let args: Vec<&DeviceTensor> = node.inputs.iter().map(|i| &on_device[i]).collect();
        let attrs = node_attrs(node, float);
        let out = device.execute(node.op.name(), node.op.version(), &attrs, &args)?;
        on_device.insert(
            node.output.clone(),
            out.into_iter().next().expect("one output"),
        );
    }
    wanted
        .iter()
        .map(|w| Ok((w.clone(), device.download(&on_device[w])?)))
        .collect()
}

type StageRun = (StageResult, HashMap<String, HostTensor>);

fn run_stage(
    suite: &Suite,
    stage: &Stage,
    tier: Tier,
    inputs: &HashMap<String, HostTensor>,
    device: &Device,
    reference: Option<&Device>,
) -> Result<StageRun, SuiteError> {
    let start = Instant::now();
    let mut result = StageResult {
        stage: stage.name.clone(),
        tier,
        status: Status::Error,
        execution: None,
        outputs: Vec::new(),
        invariants: Vec::new(),
        reason: None,
        drill_down: None,
        drill_down_note: None,
        seconds: 0.0,
    };
    let finish = |mut r: StageResult, outs| {
        r.seconds = start.elapsed().as_secs_f64();
        Ok((r, outs))
    };
    let execution = match plan(suite, stage, tier, device) {
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
    let actual = match execution {
        Execution::Decomposed => {
            run_graph(tier.float_dtype(), stage, device, inputs, &stage.outputs)
        }
        Execution::Fused => run_fused(suite, stage, tier, device, inputs),
    };
    let actual = match actual {
        Ok(a) => a,
        Err(e) => {
            result.reason = Some(e.to_string());
            return finish(result, HashMap::new());
        }
    };
    let c = criteria(stage, tier);
    let mut passed = true;
    for name in &stage.outputs {
        let expected = suite.tensor(name)?;
        match compare::compare_and_hash(&actual[name], &expected, &c) {
            Ok((metrics, hash)) => {
                passed &= metrics.passed;
                result.outputs.push(OutputResult {
                    tensor: name.clone(),
                    metrics,
                    sha256: hex::encode(hash),
                });
            }
            Err(e) => {
                result.reason = Some(format!("`{name}`: {e}"));
                return finish(result, actual);
            }
        }
    }
    for inv in &stage.verify {
        let r = invariants::check(inv, &actual[inv.tensor()]);
        passed &= r.held;
        result.invariants.push(r);
    }
    result.status = if passed { Status::Pass } else { Status::Fail };
    if !passed {
        match reference.map(|r| drill_down(stage, tier, inputs, device, r, &c)) {
            Some(Ok(Some(d))) => result.drill_down = Some(d),
            Some(Ok(None)) => {
                result.drill_down_note = Some("every operator agrees with the reference when fed the reference's inputs: the error accumulates across operators".into())
            }
            Some(Err(e)) => result.drill_down_note = Some(format!("drill-down could not run: {e}")),
            None => result.drill_down_note = Some("no reference provider for drill-down".into()),
        }
    }
    finish(result, actual)
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

/// How far past a correct implementation's own error a node may be before
/// drill-down calls it divergent.
const DRILL_DOWN_MARGIN: f64 = 4.0;

/// Feeds every node the reference's own inputs, on both sides, and returns
/// the first node whose output diverges from the reference's (float64): by
/// more than the stage's tolerance and more than `DRILL_DOWN_MARGIN` times the
/// error of the reference itself computing in the tier's dtype. Stage
/// tolerances are calibrated on stage outputs, whose scale intermediate
/// tensors need not share.
fn drill_down(
    stage: &Stage,
    tier: Tier,
    inputs: &HashMap<String, HostTensor>,
    device: &Device,
    reference: &Device,
    c: &Criteria,
) -> Result<Option<DrillDown>, Error> {
    // The reference computes in float64 (how golden values are made).
    let wide = |t: &HostTensor| {
        if t.spec.dtype.is_float() {
            t.cast(crate::DType::F64)
        } else {
            t.clone()
        }
    };
    let mut ref_values: HashMap<String, HostTensor> =
        inputs.iter().map(|(k, v)| (k.clone(), wide(v))).collect();
    for (i, node) in stage.graph.iter().enumerate() {
        let ref_in: Vec<HostTensor> = node.inputs.iter().map(|n| ref_values[n].clone()).collect();
        let run_on =
            |dev: &Device, ins: &[HostTensor], float: Option<DType>| -> Result<HostTensor, Error> {
                let up: Vec<DeviceTensor> = ins
                    .iter()
                    .map(|t| dev.upload(t))
                    .collect::<Result<_, _>>()?;
                let refs: Vec<&DeviceTensor> = up.iter().collect();
                let out = dev.execute(
                    node.op.name(),
                    node.op.version(),
                    &node_attrs(node, float),
                    &refs,
                )?;
                dev.download(&out[0])
            };
        let expected = run_on(reference, &ref_in, Some(DType::F64))?;
        let tier_in: Vec<HostTensor> = ref_in.iter().map(|t| to_tier(t, tier)).collect();
        let actual = run_on(device, &tier_in, tier.float_dtype())?;
        let node_criteria = match c.tolerance {
            compare::Tolerance::Close { rtol, atol } => {
                // What a correct implementation misses by at this tier: the
                // reference itself, computing in the tier's dtype.
                let control = run_on(reference, &tier_in, tier.float_dtype())?;
                let control_error = compare::compare(&control, &expected, c)
                    .map_err(|e| Error::Tensor(e.to_string()))?
                    .max_abs_error;
                let atol = atol.max(DRILL_DOWN_MARGIN * control_error);
                Criteria {
                    tolerance: compare::Tolerance::Close { rtol, atol },
                    ..*c
                }
            }
            compare::Tolerance::Exact { .. } => *c,
        };
        let metrics = compare::compare(&actual, &expected, &node_criteria)
            .map_err(|e| Error::Tensor(e.to_string()))?;
        if !metrics.passed {
            return Ok(Some(DrillDown {
                node: i,
                op: format!("{}@{}", node.op.name(), node.op.version()),
                output: node.output.clone(),
                metrics,
            }));
        }
        ref_values.insert(node.output.clone(), expected);
    }
    Ok(None)
}
