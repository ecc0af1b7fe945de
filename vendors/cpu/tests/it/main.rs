//! The CPU provider's tests in one program: the C ABI as a host sees it, and
//! the kernels' own numerical checks. The kernels are reached through the
//! (hidden) public `kernels` modules so that the crate is compiled once for
//! its tests, not a second time under `cfg(test)` (docs/benchmarks.md).

mod abi;
mod blocked16;
mod fast_f32;
#[cfg(target_arch = "x86_64")]
mod linear_bf16;
mod narrow;
mod norm;
