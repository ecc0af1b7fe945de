//! Chained mode's state across the stages of one tier: each stage is fed
//! what the stages before it produced (a provider's outputs, or an engine's
//! captures), or the golden value where nothing was produced.

use super::captured::captured_input;
use super::{to_tier, Mode, Source, Status};
use crate::compare::Tier;
use crate::document::Stage;
use crate::suite::{Suite, SuiteError};
use crate::HostTensor;
use std::collections::HashMap;

/// What the stages so far produced: the outputs (and which stage made each,
/// and whether it passed), the outputs a stage failed to produce, and the
/// outputs of stages `check` was given no captures for.
#[derive(Default)]
pub(super) struct Chain {
    pub produced: HashMap<String, (HostTensor, String, bool)>,
    missing: HashMap<String, String>,
    not_captured: HashMap<String, String>,
}

/// The engine's capture of `name` where some stage outputs it.
fn engine_value<'a>(suite: &Suite, source: Source<'a>, name: &str) -> Option<&'a HostTensor> {
    match source {
        Source::Captured(c) => c.get(name).filter(|_| {
            suite
                .document
                .stages
                .iter()
                .any(|s| s.outputs.iter().any(|o| o == name))
        }),
        Source::Provider(_) => None,
    }
}

/// A stage's inputs at a tier: golden, or in chained mode the provider's own.
pub(super) struct StageInputs {
    pub values: HashMap<String, HostTensor>,
    /// Every input is a golden tensor.
    pub golden: bool,
    /// Chained: why the inputs are not trustworthy (an upstream stage failed).
    pub diverged_upstream: Option<String>,
    /// Where inputs came from when that is not the plain case (`check`).
    pub notes: Vec<String>,
}

impl Chain {
    pub fn inputs(
        &self,
        suite: &Suite,
        stage: &Stage,
        tier: Tier,
        mode: Mode,
        source: Source,
    ) -> Result<StageInputs, SuiteError> {
        // Inputs take the dtypes the stage computes in (a stage with its own
        // `precision` may follow one without).
        let tier = stage.arithmetic(tier);
        let mut out = StageInputs {
            values: HashMap::new(),
            golden: true,
            diverged_upstream: None,
            notes: Vec::new(),
        };
        for name in &stage.inputs {
            if let Source::Captured(captured) = source {
                if let Some(t) =
                    captured_input(suite, stage, name, tier, mode, captured, &mut out.notes)?
                {
                    out.golden = false;
                    out.values.insert(name.clone(), t);
                    continue;
                }
            }
            let chained = mode == Mode::Chained;
            let t = if let Some((own, from, passed)) = self.produced.get(name).filter(|_| chained) {
                if !passed {
                    out.diverged_upstream.get_or_insert_with(|| {
                        format!("its inputs come from `{from}`, which already diverged")
                    });
                }
                out.golden = false;
                to_tier(own, tier)
            } else if let Some(t) = engine_value(suite, source, name).filter(|_| chained) {
                // `check` of a stage whose producer is not selected: the
                // engine's own value still flows on.
                let declared = suite.spec(name).map(|s| s.shape.clone());
                if declared.as_ref() != Some(&t.spec.shape) {
                    return Err(SuiteError::Layout(format!(
                        "`{name}` was captured with shape {:?}, the document declares {declared:?}",
                        t.spec.shape
                    )));
                }
                out.golden = false;
                to_tier(t, tier)
            } else {
                if chained {
                    if let Some(from) = self.missing.get(name) {
                        out.diverged_upstream.get_or_insert_with(|| {
                            format!("`{from}` produced no `{name}`: this stage was fed the golden value")
                        });
                    } else if let Some(from) = self.not_captured.get(name) {
                        out.notes.push(format!(
                            "input `{name}` is the golden value: `{from}` was not captured"
                        ));
                    }
                }
                to_tier(&*suite.tensor(name)?, tier)
            };
            out.values.insert(name.clone(), t);
        }
        Ok(out)
    }

    /// What `stage` produced, and its verdict.
    pub fn record(&mut self, stage: &Stage, outputs: &HashMap<String, HostTensor>, status: Status) {
        for name in &stage.outputs {
            if !outputs.contains_key(name) {
                let into = if status == Status::NotCaptured {
                    &mut self.not_captured
                } else {
                    &mut self.missing
                };
                into.insert(name.clone(), stage.name.clone());
            }
        }
        for (name, t) in outputs {
            self.produced.insert(
                name.clone(),
                (t.clone(), stage.name.clone(), status == Status::Pass),
            );
        }
    }
}
