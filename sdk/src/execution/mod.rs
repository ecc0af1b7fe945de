//! Running a stage's kernels on a provider so that it cannot hide what it
//! did ([`run_guarded`]: poisoned outputs, guard regions, two runs), either
//! in this process or in a worker process ([`Backend`]).

mod guarded;
mod program;

pub use guarded::{run as run_guarded, two_runs};
pub use program::{Attr, Executed, Finding, Layout, Program, Side, Spec, Step};

use crate::isolation::{Failure, Worker};
use crate::{DType, Device, DeviceInfo, HostTensor, ProviderInfo};
use std::time::Duration;

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

/// Where a provider's kernels run.
pub enum Backend {
    /// In this process (`--no-isolate`: a crashing driver takes the runner
    /// with it; for debugging a driver).
    InProcess(Device),
    /// In a worker process (the default).
    Isolated(Box<Worker>),
}

impl Backend {
    /// What the provider and its device say about themselves (`None`: an
    /// isolated provider that never loaded).
    pub fn claims(&self) -> Option<(ProviderInfo, DeviceInfo)> {
        match self {
            Backend::InProcess(d) => Some((d.provider_info().clone(), d.info().ok()?)),
            Backend::Isolated(w) => w.opened(),
        }
    }

    pub fn supports(&self, queries: &[(String, u32, DType)]) -> Result<Vec<bool>, Failure> {
        match self {
            Backend::InProcess(d) => queries
                .iter()
                .map(|(k, v, dt)| d.supports(k, *v, *dt))
                .collect::<Result<_, _>>()
                .map_err(|e| Failure::Provider(e.to_string())),
            Backend::Isolated(w) => w.supports(queries),
        }
    }

    /// Runs `program` (twice, guarded: see [`run_guarded`]) within
    /// `timeout`, plus the first-call allowance where its worker process
    /// has not run a kernel yet ([`Executed::allowance`]). In process the
    /// timeout cannot be enforced.
    pub fn run(
        &self,
        program: &Program,
        inputs: &[(&str, &HostTensor)],
        seed: u64,
        timeout: Duration,
    ) -> Result<Executed, Failure> {
        match self {
            Backend::InProcess(d) => run_guarded(d, program, inputs, seed, &mut |_| {})
                .map_err(|e| Failure::Provider(e.to_string())),
            Backend::Isolated(w) => w.run(program, inputs, seed, timeout),
        }
    }

    /// The library file that runs (not what it claims to be).
    pub fn library(&self) -> std::path::PathBuf {
        match self {
            Backend::InProcess(d) => d.provider_info().library.clone(),
            Backend::Isolated(w) => w.library().to_path_buf(),
        }
    }

    /// The worker program (`None` in process).
    pub fn worker_program(&self) -> Option<std::path::PathBuf> {
        match self {
            Backend::InProcess(_) => None,
            Backend::Isolated(w) => Some(w.program().to_path_buf()),
        }
    }

    /// What confined the worker (`None` in process).
    pub fn sandbox(&self) -> Option<crate::sandbox::Facts> {
        match self {
            Backend::InProcess(_) => None,
            Backend::Isolated(w) => w.sandbox(),
        }
    }

    pub fn isolated(&self) -> bool {
        matches!(self, Backend::Isolated(_))
    }

    /// Releases the provider (and ends its worker: after this, the sandbox
    /// facts say whether every worker's processes were confirmed gone); a
    /// crash in its `destroy` is an error.
    pub fn close(&self) -> Result<(), Failure> {
        match self {
            Backend::InProcess(_) => Ok(()),
            Backend::Isolated(w) => w.close(),
        }
    }
}
