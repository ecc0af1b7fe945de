//! The `vips-conformance` integration tests, one test program: each file here
//! is a module (its tests are named `<module>::<test>`, e.g. `cli::...`), so the
//! SDK and the CLI's dependencies are linked once for all of them rather than
//! once per file. A new test file is a new `mod` line below.

/// Shared helpers: running the CLI, the repository, suites and their runs.
mod common;

mod certify;
mod clean_room;
mod cli;
mod contract;
mod dinov2;
mod embedded_verifier;
mod engine_captures;
mod hostile_drivers;
mod hostile_files;
mod install;
mod llama_block;
mod mobilenetv3;
mod nix_flake;
mod report_html;
mod resnet50;
mod tampered_reports;
mod trellis_bake;
mod trellis_flow;
mod trellis_model;
mod trellis_slat;
