//! `check`'s side of a run: captures named after the suite's tensors (and
//! `INPUT@STAGE` for an input as the engine fed it, `NODE@STAGE` for an
//! intermediate, which locates a failure's operator), and the stages judged
//! through the stage that produced their input when the engine captured
//! only their outputs.

use super::{rounds, tier_spec, Mode, StageResult, Status};
use crate::suite::{Suite, SuiteError};
use std::collections::HashMap;
use vips_data::document::Stage;
use vips_data::HostTensor;
use vips_verdict::compare::Tier;

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
        .filter(|t| mode == Mode::Chained && rounds(t, tier) && !wider(t, tier))
    {
        notes.push(format!(
            "input `{name}` is its capture rounded from {} to {}: if the engine fed the unrounded value on, capture it as `{own}`",
            t.spec.dtype,
            tier_spec(&t.spec, tier).dtype,
        ));
    }
    Ok(None)
}

/// Whether `t` is a float capture wider than the tier's float type (float32
/// at bf16 or fp16, float64 at fp32).
fn wider(t: &HostTensor, tier: Tier) -> bool {
    tier.float_dtype()
        .is_some_and(|d| t.spec.dtype.is_float() && t.spec.dtype.size_bytes() > d.size_bytes())
}

/// Chained `check`: the engine's capture `t` of `name`, an earlier stage's
/// output, as the engine fed it on where it is wider than the tier's type
/// and rounding it would change it (an autocast engine hands float32 between
/// stages at bf16: its capture shows what it fed). `None` where the tier's
/// rounding is what the engine fed (a capture in the tier's dtype), or
/// changes nothing.
pub(super) fn fed_as_captured(
    name: &str,
    t: &HostTensor,
    tier: Tier,
    notes: &mut Vec<String>,
) -> Option<HostTensor> {
    if !(wider(t, tier) && rounds(t, tier)) {
        return None;
    }
    notes.push(format!(
        "input `{name}` is its capture as the engine fed it on ({}, wider than {}), not rounded to the tier",
        t.spec.dtype,
        tier_spec(&t.spec, tier).dtype,
    ));
    Some(t.clone())
}

/// The name under which `check` takes a stage's input as the engine fed it:
/// `x@stage`.
pub fn captured_input_name(input: &str, stage: &str) -> String {
    format!("{input}@{stage}")
}

/// The mode `check` judges `captured` in when none is asked for, and why in
/// one line: chained where the engine captured what fed a stage whose
/// outputs it captured (an earlier stage's output that the stage reads, or
/// an `INPUT@STAGE`): it computed end to end, and a stage is judged on what
/// it was fed. Isolated where it captured no such producer: every stage then
/// takes its golden inputs either way.
pub fn check_mode(
    suite: &Suite,
    captured: &HashMap<String, HostTensor>,
    stages: &[&Stage],
) -> (Mode, String) {
    let produced = |name: &str| {
        suite
            .document
            .stages
            .iter()
            .any(|s| s.outputs.iter().any(|o| o == name))
    };
    let fed = stages
        .iter()
        .filter(|s| s.outputs.iter().any(|o| captured.contains_key(o)))
        .find_map(|s| {
            s.inputs.iter().find_map(|i| {
                let own = captured_input_name(i, &s.name);
                if captured.contains_key(&own) {
                    Some(format!("`{own}`"))
                } else if produced(i) && captured.contains_key(i) {
                    Some(format!("`{i}`, which `{}` reads", s.name))
                } else {
                    None
                }
            })
        });
    match fed {
        Some(what) => (
            Mode::Chained,
            format!("chained mode: the captures hold what the engine fed its stages ({what}); `--mode isolated` feeds every stage its golden inputs instead"),
        ),
        None => (
            Mode::Isolated,
            "isolated mode: the captures hold no stage's input (no output of an earlier stage that a captured stage reads, no INPUT@STAGE), so every stage is judged from its golden inputs".into(),
        ),
    }
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

/// Isolated `check` of a stage that fails. Where the engine captured an
/// input of it that an earlier stage outputs, it fed the stage its own value,
/// not the golden one the reference was fed: the fix is chained mode, not
/// more captures (the drill-down's hint to capture intermediates is
/// replaced). An exact stage's outputs must be a data movement of the golden
/// inputs, which an engine computing end to end does not feed it.
pub(super) fn isolated_hint(
    suite: &Suite,
    stage: &Stage,
    mode: Mode,
    captured: &HashMap<String, HostTensor>,
    result: &mut StageResult,
) {
    if mode != Mode::Isolated || result.status != Status::Fail {
        return;
    }
    let own: Vec<String> = stage
        .inputs
        .iter()
        .filter(|i| {
            captured.contains_key(*i)
                && !captured.contains_key(&captured_input_name(i, &stage.name))
                && suite.document.stages.iter().any(|s| s.outputs.contains(i))
        })
        .map(|i| format!("`{i}`"))
        .collect();
    if !own.is_empty() {
        result.drill_down_note = Some(format!(
            "judged from golden inputs (isolated mode), and the captures hold the engine's own {}: if the engine computed end to end, judge it in chained mode (`check`'s default for such captures: drop `--mode isolated`), which feeds each stage what the engine fed it; more captures do not fix this",
            own.join(", ")
        ));
    } else if moves_data_only(stage) {
        result.notes.push(
            "this stage only moves data: in isolated mode its outputs must be exactly those of its golden inputs; an engine that computed its inputs itself is judged in chained mode (or captures them as INPUT@STAGE)".into(),
        );
    }
}
