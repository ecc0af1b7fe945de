//! A stage computed by the reference: its graph run in float64 on the CPU
//! provider. What `generate` writes as golden values and what a suite
//! regenerates for an anchored tensor: the same computation.

use std::collections::HashMap;
use std::sync::Arc;
use vips_data::document::{Document, Stage};
use vips_data::{Error, HostTensor};
use vips_execution::{Device, DeviceTensor};
use vsdk_catalog::DType;

/// The reference provider failed on one of a stage's kernels.
#[derive(Debug, thiserror::Error)]
#[error("stage `{stage}`: {source}")]
pub struct ReferenceFailed {
    pub stage: String,
    // Boxed: it rides in `SuiteError`, which every suite call returns.
    #[source]
    pub source: Box<Error>,
}

/// The golden values of `stage`'s outputs: its graph run in float64 on
/// `reference` from `input`'s values, each output stored in its declared
/// dtype. What `generate` writes, and what a suite regenerates for an
/// anchored tensor (`Suite::tensor`): the same computation.
pub fn stage_goldens<E: From<ReferenceFailed>>(
    document: &Document,
    reference: &Device,
    stage: &Stage,
    input: &dyn Fn(&str) -> Result<Arc<HostTensor>, E>,
) -> Result<Vec<(String, HostTensor)>, E> {
    let fail = |source| {
        E::from(ReferenceFailed {
            stage: stage.name.clone(),
            source: Box::new(source),
        })
    };
    // Inputs are uploaded (widened) when first read and every tensor is
    // freed after its last read: a block's float64 weights and
    // intermediates are several times its float32 working set.
    let last_read = stage.last_reads();
    let mut on_device: HashMap<&str, DeviceTensor> = HashMap::new();
    for (i, node) in stage.graph.iter().enumerate() {
        for name in &node.inputs {
            if on_device.contains_key(name.as_str()) {
                continue;
            }
            let v = input(name)?;
            let wide = if v.spec.dtype.is_float() && v.spec.dtype != DType::F64 {
                reference.upload(&v.cast(DType::F64))
            } else {
                reference.upload(&v)
            };
            on_device.insert(name, wide.map_err(fail)?);
        }
        let args: Vec<&DeviceTensor> = node.inputs.iter().map(|i| &on_device[i.as_str()]).collect();
        let out = reference
            .execute(
                node.op.name(),
                node.op.version(),
                &node.attrs_at(Some(DType::F64)),
                &args,
            )
            .map_err(fail)?;
        on_device.insert(&node.output, out.into_iter().next().expect("one output"));
        for n in &node.inputs {
            if last_read[n.as_str()] == i && !stage.outputs.contains(n) {
                on_device.remove(n.as_str());
            }
        }
    }
    // A stage output that is one of its inputs (no node writes it).
    for name in &stage.outputs {
        if !on_device.contains_key(name.as_str()) {
            let v = input(name)?;
            on_device.insert(name, reference.upload(&v).map_err(fail)?);
        }
    }
    stage
        .outputs
        .iter()
        .map(|name| {
            let decl = document.tensor(name).expect("outputs are declared");
            let t = reference
                .download(&on_device[name.as_str()])
                .map_err(fail)?;
            Ok((name.clone(), t.cast(decl.dtype)))
        })
        .collect()
}
