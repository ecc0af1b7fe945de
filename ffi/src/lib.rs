//! Raw bindings of the VIPS SDK provider ABI (`include/vips_sdk/provider.h`).
//!
//! The header is the source of truth. `src/bindings.rs` is bindgen's output,
//! committed so that a machine without libclang builds; `tests/bindings.rs`
//! regenerates it and fails on any drift, and `tests/layout.rs` pins sizes and
//! offsets so an accidental layout change fails CI.
#![allow(non_camel_case_types, non_upper_case_globals, non_snake_case)]
#![allow(clippy::all)]

#[rustfmt::skip]
mod bindings;
pub use bindings::*;

/// The entry symbol as a NUL-terminated byte string, for `dlsym`.
pub const ENTRY_SYMBOL: &[u8] = b"vsdk_get_provider_api\0";

/// Path of the header this crate was generated from.
pub const HEADER_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../include/vips_sdk/provider.h"
);
