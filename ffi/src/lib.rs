//! Raw bindings of the VIPS SDK provider ABI (`include/vips_sdk/provider.h`).
//!
//! The header is the source of truth. `src/bindings.rs` is bindgen's output,
//! committed so that a machine without libclang builds; `tests/bindings.rs`
//! regenerates it and fails on any drift, and `tests/layout.rs` pins sizes and
//! offsets so an accidental layout change fails CI.

#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, clippy::all)]
mod bindings;
pub use bindings::*;

/// Path of the header this crate was generated from.
pub const HEADER_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../include/vips_sdk/provider.h"
);
