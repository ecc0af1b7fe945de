//! The SDK's data: what a suite is made of and what a run reads, with every
//! bound checked before allocating. Tensors on the host ([`HostTensor`]), the
//! limits, documents (`suite.yaml`: tensors, stages, graphs, tolerances), golden
//! files (literal, seeded, anchored and pinned entries), engine captures
//! (`.npy`, `.npz`, `.safetensors`), pinned weights, and the precision tiers.
//!
//! Owns no computation beyond decoding and seeding: it may not use a provider,
//! the error model, the runner or the certification layer (they all build on it).
//!
//! ```
//! use vips_data::tier::{to_tier, Tier};
//! use vips_data::HostTensor;
//! let x = HostTensor::from_vec(&[2], vec![1.0f32, 1.0 + 1.0 / 4096.0])?;
//! let at_fp16 = to_tier(&x, Tier::Fp16);
//! assert_eq!(*at_fp16.f64_values(), [1.0, 1.0]); // below half a float16 step
//! # Ok::<(), vips_data::Error>(())
//! ```

pub mod capture;
pub mod document;
mod error;
pub mod golden;
#[doc(hidden)]
pub mod json_float;
pub mod limits;
mod tensor;
pub mod tier;
pub mod weights;

pub use error::{is_unsupported_execute, status_code_name, Error};
pub use tensor::{Element, HostTensor};
