//! Progress on the terminal while a run works: a bar per tier with the
//! current stage, the elapsed time and an estimate, on stderr. indicatif
//! draws nothing when stderr is not a terminal (CI logs, pipes); `--json`
//! and `--quiet` hide it as well. The bars are cleared before the table.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Duration;
use vips_sdk::compare::Tier;
use vips_sdk::runner::{Event, Round, Status};

pub struct Bars {
    multi: MultiProgress,
    bars: Vec<(Tier, ProgressBar)>,
    /// The differential round runs every stage the provider supports again.
    differential: bool,
}

impl Bars {
    /// One bar per tier of `stages`, run twice with `differential`.
    pub fn new(tiers: &[Tier], stages: u64, differential: bool, hidden: bool) -> Bars {
        let steps = stages * if differential { 2 } else { 1 };
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
                let bar = multi.add(ProgressBar::new(steps));
                bar.set_style(style.clone());
                bar.set_prefix(t.name());
                bar.set_message("waiting");
                (t, bar)
            })
            .collect();
        Bars {
            multi,
            bars,
            differential,
        }
    }

    fn bar(&self, tier: Tier) -> Option<&ProgressBar> {
        self.bars.iter().find(|(t, _)| *t == tier).map(|(_, b)| b)
    }

    pub fn event(&self, e: &Event) {
        match *e {
            Event::Started { tier, round, stage } => {
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
                    });
                }
            }
            Event::Finished(r) => {
                if let Some(bar) = self.bar(r.tier) {
                    if self.differential
                        && r.round == Round::Main
                        && r.status == Status::NotSupported
                    {
                        // Not run again in the differential round.
                        bar.set_length(bar.length().unwrap_or(1).saturating_sub(1));
                    }
                    bar.inc(1);
                    if bar.position() >= bar.length().unwrap_or(0) {
                        bar.finish_with_message("done");
                    }
                }
            }
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
