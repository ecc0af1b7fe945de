//! Running a stage on a provider: the plan (fused kernel, the graph node by
//! node, or NOT SUPPORTED) and the two ways of executing it.

use super::{tier_spec, Execution};
use crate::compare::Tier;
use crate::document::Stage;
use crate::suite::Suite;
use crate::{DType, Device, DeviceTensor, Error, HostTensor};
use std::collections::HashMap;

/// Which way the provider can run the stage at this tier, or what it lacks.
pub(super) fn plan(
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
pub(super) fn run_graph(
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
        let attrs = node.attrs_at(float);
        let out = device.execute(node.op.name(), node.op.version(), &attrs, &args)?;
        let out = out.into_iter().next().expect("one output");
        host.insert(node.output.clone(), device.download(&out)?);
        on_device.insert(node.output.clone(), out);
    }
    Ok(host)
}

pub(super) fn run_fused(
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
