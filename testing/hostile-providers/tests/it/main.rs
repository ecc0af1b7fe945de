//! The hostile libraries' tests, one test program (each file a module, its
//! tests named `<module>::<test>`), except tests/missing_target.rs, which needs
//! a process of its own (Cargo.toml says why).

/// The minimal C-ABI host, shared with tests/missing_target.rs.
#[path = "../common/mod.rs"]
mod common;

mod forwarding;
mod libraries;
