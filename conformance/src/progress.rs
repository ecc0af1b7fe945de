//! Progress on the terminal while a run works: a bar per tier with the
//! current stage, the elapsed time and an estimate, on stderr. indicatif
//! draws nothing when stderr is not a terminal (CI logs, pipes); `--json`
//! and `--quiet` hide it as well. The bars are cleared before the table.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{Event, Round};

pub struct Bars {
    multi: MultiProgress,
    bars: Vec<(Tier, ProgressBar)>,
}

impl Bars {
    /// One bar per tier; each round adds its stages as the runner plans it.
    pub fn new(tiers: &[Tier], hidden: bool) -> Bars {
        let target = if hidden {
            ProgressDrawTarget::hidden()
        } else {
            ProgressDrawTarget::stderr()
        };
        let multi = MultiProgress::with_draw_target(target);
        let style = ProgressStyle::with_template(
            "{prefix:>5} [{bar:28}] {pos:>3}/{len:3} {elapsed:>4} (eta {eta:>3}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bars = tiers
            .iter()
            .map(|&t| {
                // No length until the runner plans the tier's stages: an
                // empty bar at 0/0 (a length of 0 would draw a full one).
                let bar = multi.add(ProgressBar::no_length());
                bar.set_style(style.clone());
                bar.set_prefix(t.name());
                bar.set_message("waiting");
                (t, bar)
            })
            .collect();
        Bars { multi, bars }
    }

    fn bar(&self, tier: Tier) -> Option<&ProgressBar> {
        self.bars.iter().find(|(t, _)| *t == tier).map(|(_, b)| b)
    }

    pub fn event(&self, e: &Event) {
        match *e {
            Event::Planned { tier, stages, .. } => {
                if let Some(bar) = self.bar(tier) {
                    bar.set_length(bar.length().unwrap_or(0) + stages as u64);
                }
            }
            Event::Started { tier, round, stage } => {
                // Tiers run one after the other: an earlier one's clock stops.
                for (_, done) in self
                    .bars
                    .iter()
                    .filter(|(t, b)| *t != tier && b.position() > 0)
                {
                    if !done.is_finished() {
                        done.finish();
                    }
                }
                if let Some(bar) = self.bar(tier) {
                    if bar.position() == 0 && !bar.is_hidden() {
                        // A tier's clock starts with its first stage, and
                        // redraws while a long stage runs.
                        bar.reset_elapsed();
                        bar.reset_eta();
                        bar.enable_steady_tick(Duration::from_millis(250));
                    }
                    bar.set_message(match round {
                        Round::Main => stage.to_string(),
                        Round::Differential => format!("{stage} (fresh inputs)"),
                        Round::Contract => format!("kernel contract: {stage}"),
                    });
                }
            }
            Event::Finished(r) => {
                if let Some(bar) = self.bar(r.tier) {
                    bar.inc(1);
                }
            }
            Event::Outputs { .. } => {}
        }
    }

    /// Removes the bars from the terminal.
    pub fn clear(&self) {
        for (_, bar) in &self.bars {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
    }
}
