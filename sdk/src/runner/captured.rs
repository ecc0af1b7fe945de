//! `check`'s side of a run: captures named after the suite's tensors (and
//! `INPUT@STAGE` for an input as the engine fed it, `NODE@STAGE` for an
//! intermediate, which locates a failure's operator), and the stages judged
//! through the stage that produced their input when the engine captured
//! only their outputs.

use super::{rounds, tier_spec, Mode, StageResult, Status};
use crate::compare::Tier;
use crate::document::Stage;
use crate::suite::{Suite, SuiteError};
use crate::HostTensor;
use std::collections::HashMap;

/// `check`: the input `name` of `stage` as the engine fed it, captured as
/// `name@stage`, which overrides the golden value or, in chained mode, the
/// previous stage's capture rounded to the tier to be judged (an engine that
/// keeps float32 values or parameters at bf16, as autocast does). Notes where
/// each input came from when that is not the plain case.
pub(super) fn captured_input(
    suite: &Suite,
    stage: &Stage,
    name: &str,
    tier: Tier,
    mode: Mode,
    captured: &HashMap<String, HostTensor>,
    notes: &mut Vec<String>,
) -> Result<Option<HostTensor>, SuiteError> {
    let own = captured_input_name(name, &stage.name);
    if let Some(t) = captured.get(&own) {
        let declared = suite.spec(name).map(|s| s.shape.clone());
        if declared.as_ref() != Some(&t.spec.shape) {
            return Err(SuiteError::Layout(format!(
                "`{own}` was captured with shape {:?}, the document declares {:?} for `{name}`",
                t.spec.shape, declared
            )));
        }
        notes.push(format!(
            "input `{name}` is the capture `{own}` ({}), as the engine fed it",
            t.spec.dtype
        ));
        return Ok(Some(t.clone()));
    }
    if let Some(t) = captured
        .get(name)
        .filter(|t| mode == Mode::Chained && rounds(t, tier))
    {
        notes.push(format!(
            "input `{name}` is its capture rounded from {} to {}: if the engine fed the unrounded value on, capture it as `{own}`",
            t.spec.dtype,
            tier_spec(&t.spec, tier).dtype,
        ));
    }
    Ok(None)
}

/// The name under which `check` takes a stage's input as the engine fed it:
/// `x@stage`.
pub fn captured_input_name(input: &str, stage: &str) -> String {
    format!("{input}@{stage}")
}

/// Whether `check` reads a captured tensor of this name: a suite tensor,
/// `x@stage` for an input `x` of a stage, or `n@stage` for an intermediate
/// `n` of its graph.
pub fn is_captured_name(suite: &Suite, name: &str) -> bool {
    suite.spec(name).is_some()
        || name.split_once('@').is_some_and(|(tensor, stage)| {
            suite.document.stages.iter().any(|s| {
                s.name == stage
                    && (s.inputs.iter().any(|i| i == tensor) || is_intermediate(s, tensor))
            })
        })
}

/// A tensor the stage's graph computes on the way to its outputs.
fn is_intermediate(stage: &Stage, name: &str) -> bool {
    !stage.outputs.iter().any(|o| o == name) && stage.graph.iter().any(|n| n.output == name)
}

/// The stage's intermediates the engine captured as `n@stage`, by node
/// output name, rounded to the tier as its outputs are: what the drill-down
/// of a failing captured stage judges operator by operator.
pub(super) fn intermediates(
    stage: &Stage,
    captured: &HashMap<String, HostTensor>,
    tier: Tier,
) -> HashMap<String, HostTensor> {
    stage
        .graph
        .iter()
        .filter(|n| is_intermediate(stage, &n.output))
        .filter_map(|n| {
            let t = captured.get(&captured_input_name(&n.output, &stage.name))?;
            Some((n.output.clone(), super::to_tier(t, tier)))
        })
        .collect()
}

/// Whether every node of `stage` only moves data (a slice, a reshape): its
/// outputs are exact functions of its inputs.
fn moves_data_only(stage: &Stage) -> bool {
    !stage.graph.is_empty() && stage.graph.iter().all(|n| n.op.moves_data())
}

/// Chained `check`: an exact stage (slices, reshapes) whose input the
/// engine did not capture is judged through the stages that produced that
/// input, from their own inputs: the reference computes the missing tensor
/// and its error model bounds the engine's, rather than a zero bound on the
/// difference between the engine's value and the golden one. The stage to
/// judge (named as `stage`) and a note saying so.
pub(super) fn through_producers(
    suite: &Suite,
    stage: &Stage,
    captured: &HashMap<String, HostTensor>,
) -> Option<(Stage, String)> {
    if !moves_data_only(stage) {
        return None;
    }
    let fed = |input: &String| {
        captured.contains_key(input)
            || captured.contains_key(&captured_input_name(input, &stage.name))
    };
    let earlier = suite
        .document
        .stages
        .iter()
        .take_while(|s| s.name != stage.name);
    let produced = |i: &String| earlier.clone().any(|p| p.outputs.contains(i));
    let missing: Vec<&String> = stage
        .inputs
        .iter()
        .filter(|i| !fed(i) && produced(i))
        .collect();
    let producers: Vec<&Stage> = earlier
        .filter(|p| missing.iter().any(|m| p.outputs.contains(m)))
        .collect();
    let first = producers.first()?;
    // One arithmetic for the composed graph.
    if producers.iter().any(|p| p.precision != stage.precision) {
        return None;
    }
    let mut inputs: Vec<String> = Vec::new();
    for name in producers
        .iter()
        .flat_map(|p| &p.inputs)
        .chain(stage.inputs.iter().filter(|i| !missing.contains(i)))
    {
        if !inputs.contains(name) {
            inputs.push(name.clone());
        }
    }
    let quoted = |names: &mut dyn Iterator<Item = &String>| {
        names
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let by = quoted(&mut producers.iter().map(|p| &p.name));
    let note = format!(
        "judged through {by} (its input {} was not captured): the reference computes it from {by}'s inputs and bounds the engine's value by that stage's error model",
        quoted(&mut missing.iter().copied()),
    );
    let composed = Stage {
        inputs,
        graph: producers
            .iter()
            .flat_map(|p| p.graph.iter().cloned())
            .chain(stage.graph.iter().cloned())
            .collect(),
        kernel: None,
        tolerances: first.tolerances.clone(),
        ..stage.clone()
    };
    Some((composed, note))
}

/// Isolated `check` of an exact stage that fails: its outputs must be a
/// data movement of the golden inputs, which an engine computing end to end
/// does not feed it.
pub(super) fn isolated_hint(stage: &Stage, mode: Mode, result: &mut StageResult) {
    if mode == Mode::Isolated && result.status == Status::Fail && moves_data_only(stage) {
        result.notes.push(
            "this stage only moves data: in isolated mode its outputs must be exactly those of its golden inputs; an engine that computed its inputs itself is judged in chained mode (or captures them as INPUT@STAGE)".into(),
        );
    }
}
