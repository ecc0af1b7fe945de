//! The worker's sandbox (docs/runner.md, "The sandbox"): what confines a
//! provider's worker process so that a driver cannot reach the runner, its
//! files or its key, cannot outlive its run, and cannot take the host's
//! memory. The runner sends a [`Policy`]; the worker program's launcher
//! ([`launch`]) creates the namespaces; the server ([`enter`]) builds its
//! private root, limits itself and installs the seccomp filter ([`filter`])
//! before loading the driver, and answers with the [`Facts`]; the runner
//! ([`tree`]) limits memory with a cgroup, finds the worker's processes by
//! their PID namespace and confirms them gone.

mod enter;
mod facts;
pub mod filter;
mod launch;
mod policy;
pub mod tree;

pub use enter::enter;
pub use facts::{Facts, NAMESPACES, SECCOMP_FILTER};
pub use launch::{launch, read_init_args, InitArgs, PolicyReader, SERVE_ARG};
pub use policy::{
    worker_env, Bind, Policy, Setting, ENV_NAMES, ENV_PREFIXES, HIDDEN_SYSTEM_DIRS,
    PROVIDER_SETTINGS,
};
