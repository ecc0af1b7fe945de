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

/// A fresh seed per test, printed with `what` so that a failure can be
/// reproduced.
fn rng(what: &str) -> rand_chacha::ChaCha8Rng {
    use rand::SeedableRng;
    let seed = rand::random();
    eprintln!("{what} test seed: {seed}");
    rand_chacha::ChaCha8Rng::seed_from_u64(seed)
}
