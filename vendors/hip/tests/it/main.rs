//! The HIP provider's tests, one test program (each file a module, its tests
//! named `<module>::<test>`), except tests/no_library.rs, which needs a process
//! of its own (Cargo.toml says why).

/// Only with `--features hip-sys` (tools/test: `--test it bindings_agree::`).
#[cfg(feature = "hip-sys")]
mod bindings_agree;
mod kernels_compile;
mod no_device;
