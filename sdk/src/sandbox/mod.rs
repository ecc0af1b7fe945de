//! The worker's sandbox (docs/runner.md, "The sandbox").

mod facts;

pub use facts::{Facts, NAMESPACES, SECCOMP_FILTER};
