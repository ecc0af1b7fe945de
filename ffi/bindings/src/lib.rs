//! Raw bindings of the VIPS SDK C headers: the provider ABI
//! (`include/vips_sdk/provider.h`, at the crate root) and the types of the
//! engine API (`include/vips_sdk/vips_sdk.h`, in [`engine`]).
//!
//! The header is the source of truth. `src/bindings.rs` is bindgen's output,
//! committed so that a machine without libclang builds; `tests/bindings/bindings.rs`
//! regenerates it and fails on any drift, and `tests/bindings/layout.rs` pins sizes and
//! offsets so an accidental layout change fails CI.

#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, clippy::all)]
mod bindings;
pub use bindings::*;

/// The engine API's types and constants (`vips_sdk.h`); its functions are
/// defined by the C library (`ffi/capi`).
#[rustfmt::skip]
#[allow(non_camel_case_types, non_upper_case_globals, non_snake_case, clippy::all)]
pub mod engine;

/// Path of the provider header.
pub const HEADER_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../include/vips_sdk/provider.h"
);

/// Path of the engine header.
pub const ENGINE_HEADER_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../include/vips_sdk/vips_sdk.h"
);

/// The directory to put on the include path (`#include "vips_sdk/provider.h"`).
pub const INCLUDE_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../include");
