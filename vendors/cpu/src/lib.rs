//! The CPU reference provider: every kernel of operator catalog v1 for f64,
//! f32, f16 and bf16 (the last two computed in f32 and rounded at each
//! operator's output), plus uint8/int data movement and the uint8 Pillow
//! resize. It is a cdylib loaded through the same C ABI as any vendor's
//! library; the `rlib` exists for the benchmarks.

mod abi;
mod device;
pub mod kernels;
mod memory;

pub use abi::vsdk_get_provider_api;
