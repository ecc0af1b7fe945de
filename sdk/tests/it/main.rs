//! The SDK's integration tests, one test program: each file here is a module
//! (its tests are named `<module>::<test>`, e.g. `certify::...`), so the SDK is
//! linked once for all of them rather than once per file. A new test file is a
//! new `mod` line below. Test data stays in `tests/data/`.

/// Shared helpers: providers, random tensors, cases, sparse kernels.
mod common;
/// Builders of hostile files (also used by conformance/tests/it/hostile_files.rs).
mod hostile_builders;

mod activations;
mod anchored_goldens;
mod attention_masks;
mod batch_norm;
mod certify;
mod compare;
mod cpu_provider;
mod doc_formulas;
mod document;
mod error_model;
mod fuzz_corpus;
mod golden_format;
mod hostile_files;
mod isolation;
mod known_values;
mod loader_errors;
mod pack;
mod padding;
mod pillow_resize;
mod pooling;
mod reference_cache;
mod replay;
mod rotary;
mod runner;
mod sandbox;
mod simt_provider;
mod sparse_error_model;
mod stepped_slices;
mod template_c;
mod unary_ops;
mod unet_ops;
