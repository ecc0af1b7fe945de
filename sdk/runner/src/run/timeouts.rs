//! How long a provider gets to run a stage, by default: the float64
//! reference's cost for the same stage on this host, measured just before,
//! times a generous multiplier, plus a floor (docs/runner.md, "Timeouts").
//! A hanging kernel then costs seconds on a small suite, not minutes, while
//! a correct provider many times slower than the reference (the SIMT
//! emulation of the GPU kernels) keeps its headroom.

use std::collections::BTreeMap;
use std::time::Duration;

/// A call's fixed costs: a launch, a cold cache, a busy host.
pub const FLOOR: Duration = Duration::from_secs(2);
pub use vips_execution::isolation::FIRST_CALL_ALLOWANCE;
/// Both runs of the stage, at up to this many times the reference's speed.
pub const MULTIPLIER: u32 = 50;

pub fn of_reference(reference: Duration) -> Duration {
    FLOOR + reference.saturating_mul(MULTIPLIER)
}

/// Kernels that timed out, and where, for `--after-timeout skip`.
#[derive(Debug, Default)]
pub struct TimedOut {
    kernels: BTreeMap<String, String>,
}

impl TimedOut {
    /// Records the kernel a timeout's reason names (`` while running
    /// `vsdk.gelu`@1 ``, the runner's own words), if any.
    pub fn record(&mut self, stage: &str, reason: &str) {
        let named = reason
            .split_once("while running `")
            .and_then(|(_, rest)| rest.split_once('`'));
        if let Some((kernel, _)) = named {
            self.kernels
                .entry(kernel.to_string())
                .or_insert_with(|| stage.to_string());
        }
    }

    /// The reason a stage using one of `kernels` is not run, if one timed out.
    pub fn skip<'a>(&self, mut kernels: impl Iterator<Item = &'a str>) -> Option<String> {
        kernels.find_map(|k| {
            self.kernels.get(k).map(|stage| {
                format!("not run: `{k}` timed out in stage {stage} (--after-timeout skip)")
            })
        })
    }
}
