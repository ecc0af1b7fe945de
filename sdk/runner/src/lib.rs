//! The SDK's runner: a suite ([`suite`]: a document, its golden file and the
//! tensors they name) run on a provider ([`run`]: stages isolated or chained,
//! the differential round, the kernel contract ([`contract`]), the reference
//! cache), golden files written by the reference ([`generate`]) and suites
//! made from an engine's captures ([`pack`]).
//!
//! Builds on data, verdicts and execution; knows nothing of signatures or
//! reports (`vips-certify` reads a run's results).
//!
//! ```no_run
//! use vips_execution::Provider;
//! use vips_runner::run::{run, RunOptions};
//! use vips_runner::suite::Suite;
//! let suite = Suite::open("suites/dinov2-vits14-quick/suite.yaml".as_ref())?;
//! let cpu = Provider::open_by_name("cpu")?.device(0)?;
//! // The CPU provider certified against itself as the float64 reference.
//! let report = run(&suite, &cpu, &cpu, &RunOptions::default())?;
//! assert!(report.passed);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod captures;
pub mod contract;
pub mod generate;
pub mod pack;
pub mod reference;
pub mod reference_cache;
pub mod run;
pub mod suite;
