//! Chained mode's state across the stages of one tier: each stage is fed
//! what the stages before it produced (a provider's outputs, or an engine's
//! captures), or the golden value where nothing was produced.

use super::captured::{captured_input, fed_as_captured};
use super::{to_tier, Mode, Source, Status};
use crate::suite::{Suite, SuiteError};
use std::collections::HashMap;
use vips_data::document::Stage;
use vips_data::HostTensor;
use vips_verdict::compare::Tier;

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
            // `check`: an earlier stage's capture wider than the tier is what
            // the engine fed on (its verdict still flows as below).
            let wide = engine_value(suite, source, name)
                .filter(|_| chained)
                .and_then(|t| fed_as_captured(name, t, tier, &mut out.notes));
            let t = if let Some((own, from, passed)) = self.produced.get(name).filter(|_| chained) {
                if !passed {
                    out.diverged_upstream.get_or_insert_with(|| {
                        format!("its inputs come from `{from}`, which already diverged")
                    });
                }
                out.golden = false;
                wide.unwrap_or_else(|| to_tier(own, tier))
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
                wide.unwrap_or_else(|| to_tier(t, tier))
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

    /// After `stages[index]` ran: drops the outputs whose last reader it was
    /// (a full-size suite's block outputs would be held for the whole tier).
    /// What no later stage reads stays: the end-to-end comparison's; so do
    /// rasterizer outputs, whose ids say which pixels it leaves out.
    pub fn release(&mut self, stages: &[&Stage], index: usize) {
        let reads = |s: &[&Stage], name: &String| s.iter().any(|s| s.inputs.contains(name));
        let rasterized = |name: &String| {
            stages
                .iter()
                .flat_map(|s| &s.graph)
                .any(|n| n.op == vsdk_catalog::Op::Rasterize && n.output == *name)
        };
        self.produced.retain(|name, (_, from, _)| {
            if rasterized(name) {
                return true;
            }
            let after = stages
                .iter()
                .position(|s| s.name == *from)
                .map_or(index + 1, |p| p + 1);
            let read = after <= index && reads(&stages[after..=index], name);
            !read || reads(&stages[index + 1..], name)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use vips_data::document::Location;
    use vips_verdict::compare::NanPolicy;

    fn stage(name: &str, inputs: &[&str], outputs: &[&str]) -> Stage {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        Stage {
            name: name.into(),
            algorithm: String::new(),
            implementation: String::new(),
            paper: None,
            inputs: names(inputs),
            outputs: names(outputs),
            graph: Vec::new(),
            kernel: None,
            tolerances: BTreeMap::new(),
            mismatch_fraction: 0.0,
            nan: NanPolicy::Fail,
            precision: None,
            verify: Vec::new(),
            notes: Vec::new(),
            token_grid: None,
            at: Location::default(),
        }
    }

    /// A diamond (`a` read by two later stages) and a side output nobody
    /// reads: each value is dropped after its last reader, the unread ones
    /// (the end-to-end comparison's) stay to the end.
    #[test]
    fn produced_values_live_until_their_last_reader() {
        let stages = [
            stage("s0", &["in"], &["a", "side"]),
            stage("s1", &["a"], &["b"]),
            stage("s2", &["a", "b"], &["c"]),
            stage("s3", &["c"], &["out"]),
        ];
        let stages: Vec<&Stage> = stages.iter().collect();
        let value = HostTensor::from_vec(&[3], vec![0.25, -1.5, 2.0]).expect("3 values");
        let mut chain = Chain::default();
        let mut alive = Vec::new();
        for (i, s) in stages.iter().enumerate() {
            let outputs = s
                .outputs
                .iter()
                .map(|o| (o.clone(), value.clone()))
                .collect();
            chain.record(s, &outputs, Status::Pass);
            chain.release(&stages, i);
            let mut names: Vec<&str> = chain.produced.keys().map(String::as_str).collect();
            names.sort_unstable();
            alive.push(names.join(" "));
        }
        assert_eq!(alive, ["a side", "a b side", "c side", "out side"]);
    }
}
