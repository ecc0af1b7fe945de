//! Where a provider's kernels run: in this process, or in a sandboxed worker
//! process (the default); the runner drives both the same way.

use crate::execution::{run_guarded, Executed, Program};
use crate::isolation::{Failure, Worker};
use crate::{Device, DeviceInfo, ProviderInfo};
use std::time::Duration;
use vips_data::HostTensor;
use vsdk_catalog::DType;

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
