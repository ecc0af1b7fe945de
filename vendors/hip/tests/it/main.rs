//! The HIP provider's tests, one test program (each file a module, its tests
//! named `<module>::<test>`), except tests/no_library.rs, which needs a process
//! of its own, and tests/hip_sys_bindings.rs, built only with the `hip-sys`
//! feature (Cargo.toml says why).

mod identity;
mod kernels_compile;
mod no_device;
