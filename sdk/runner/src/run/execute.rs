//! Running a stage on a provider: the plan (fused kernel, the graph node by
//! node, or NOT SUPPORTED) and the program each way runs.

use super::{tier_spec, Execution};
use crate::suite::Suite;
use std::collections::HashMap;
use std::time::Duration;
use vips_data::document::Stage;
use vips_data::HostTensor;
use vips_execution::backend::Backend;
use vips_execution::execution::{Finding, Program, Spec, Step};
use vips_execution::isolation::Failure;
use vips_verdict::compare::Tier;
use vsdk_catalog::DType;

/// Which way the provider can run the stage at this tier, or what it lacks.
pub(super) fn plan(
    suite: &Suite,
    stage: &Stage,
    tier: Tier,
    backend: &Backend,
) -> Result<Result<Execution, String>, Failure> {
    let dtype_of = |name: &str| {
        suite
            .spec_in(&stage.name, name)
            .map(|s| tier_spec(s, tier).dtype)
            .expect("suite typed every stage and graph tensor")
    };
    let mut queries: Vec<(String, u32, DType)> = stage
        .graph
        .iter()
        .map(|n| {
            (
                n.op.name().to_string(),
                n.op.version(),
                dtype_of(&n.inputs[0]),
            )
        })
        .collect();
    if let Some((kernel, version)) = &stage.kernel {
        queries.push((kernel.clone(), *version, dtype_of(&stage.inputs[0])));
    }
    let answers = backend.supports(&queries)?;
    if stage.kernel.is_some() && answers.last() == Some(&true) {
        return Ok(Ok(Execution::Fused));
    }
    let mut missing: Vec<String> = queries
        .iter()
        .zip(&answers)
        .take(stage.graph.len())
        .filter(|(_, &ok)| !ok)
        .map(|((k, v, d), _)| format!("{k}@{v} for {d}"))
        .collect();
    Ok(if missing.is_empty() {
        Ok(Execution::Decomposed)
    } else {
        missing.dedup();
        Err(format!("the provider lacks {}", missing.join(", ")))
    })
}

/// The stage's graph node by node: every node's output comes back (each
/// node is judged by its own error).
pub(super) fn graph_program(float: Option<DType>, stage: &Stage) -> Program {
    Program {
        steps: stage
            .graph
            .iter()
            .map(|node| Step {
                inputs: node.inputs.clone(),
                outputs: vec![node.output.clone()],
                ..Step::new(node.op.name(), node.op.version(), &node.attrs_at(float))
            })
            .collect(),
        ..Program::default()
    }
}

/// The stage's own kernel.
pub(super) fn fused_program(suite: &Suite, stage: &Stage, tier: Tier) -> Program {
    let (kernel, version) = stage.kernel.as_ref().expect("planned fused");
    let specs = stage
        .outputs
        .iter()
        .map(|o| Spec::of(&tier_spec(suite.spec(o).expect("declared"), tier)))
        .collect();
    Program {
        steps: vec![Step {
            inputs: stage.inputs.clone(),
            outputs: stage.outputs.clone(),
            out_specs: Some(specs),
            ..Step::new(kernel, *version, &vsdk_catalog::Attrs::new())
        }],
        ..Program::default()
    }
}

/// What a stage's program gave: every value by name (the inputs too) of the
/// first run and of the repeat, and what the guards found.
pub(super) struct Ran {
    pub values: HashMap<String, HostTensor>,
    /// The second run's outputs that differ from the first's, bit for bit.
    pub repeat: HashMap<String, HostTensor>,
    pub findings: Vec<Finding>,
    /// Seconds inside the provider's kernels ([`vips_execution::execution::Executed`]).
    pub kernel_seconds: f64,
    /// The first-call allowance it was given beside its timeout.
    pub allowance: Duration,
}

/// Runs `program` from the stage's inputs, within `timeout` plus the first
/// call allowance where it calls a kernel its worker has not run.
pub(super) fn run_program(
    backend: &Backend,
    program: &Program,
    stage: &Stage,
    inputs: &HashMap<String, HostTensor>,
    seed: u64,
    timeout: Duration,
) -> Result<Ran, Failure> {
    let args: Vec<(&str, &HostTensor)> = stage
        .inputs
        .iter()
        .map(|n| (n.as_str(), &inputs[n]))
        .collect();
    let executed = backend.run(program, &args, seed, timeout)?;
    let with_inputs = |outputs: Vec<(String, HostTensor)>| {
        let mut values = inputs.clone();
        values.extend(outputs);
        values
    };
    let values = with_inputs(executed.values);
    // The repeat keeps only the tensors whose bits differ from the first
    // run's (only those are judged again): a deterministic provider's second
    // copy of a large stage is dropped here.
    let repeat = executed
        .repeat
        .into_iter()
        .filter(|(n, t)| values.get(n).is_none_or(|v| v.bytes != t.bytes))
        .collect();
    Ok(Ran {
        values,
        repeat,
        findings: executed.findings,
        kernel_seconds: executed.kernel_seconds,
        allowance: executed.allowance,
    })
}
