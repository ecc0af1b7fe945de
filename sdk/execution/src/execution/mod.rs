//! Running a stage's kernels on a provider so that it cannot hide what it
//! did ([`run_guarded`]: poisoned outputs, guard regions, two runs), either
//! in this process or in a worker process (the backend drives both).

mod guarded;
mod program;

pub use crate::loader::Layout;
pub use guarded::{run as run_guarded, two_runs};
pub use program::{Attr, Executed, Finding, Program, Side, Spec, Step};

/// splitmix64: guard sizes and patterns, the differential round's inputs.
/// Not for cryptography; only needs to be unpredictable to a driver that
/// has not seen the run-time seed.
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A seed for one part of a run, derived from the run's seed.
    pub fn derive(seed: u64, parts: &[u64]) -> u64 {
        parts
            .iter()
            .fold(seed, |acc, &p| SplitMix(acc ^ p).next_u64())
    }
}

/// A seed nobody can know before the run: the differential round's inputs
/// and the guards' layout come from it (and it is recorded in the results,
/// so a run can be repeated).
pub fn runtime_seed() -> u64 {
    let mut bytes = [0u8; 8];
    if getrandom::getrandom(&mut bytes).is_ok() {
        return u64::from_le_bytes(bytes);
    }
    // No OS random source: the hasher's keys, the time and the process.
    use std::hash::BuildHasher;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    std::collections::hash_map::RandomState::new().hash_one((now, std::process::id()))
}
