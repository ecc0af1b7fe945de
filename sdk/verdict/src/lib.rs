//! The SDK's verdicts: whether a tensor a provider computed is what a correct
//! implementation could have computed. The error model ([`error_model`]: a
//! bound and a σ per element from each operator's rounding, propagated through
//! a stage's graph), plain comparison with tolerances ([`compare`]), the
//! element measure both share ([`element`]) and the maps that show where the
//! errors lie ([`error_map`]).
//!
//! Reads tensors and documents (`vips-data`) and computes float64 references
//! on the reference device it is handed (`vips-execution`'s `Device`); never
//! loads a provider, runs a suite or knows a report.
//!
//! ```
//! use vips_verdict::compare::{compare, Criteria, NanPolicy, Tolerance};
//! use vips_data::HostTensor;
//! let expected = HostTensor::from_vec(&[3], vec![1.0f32, 2.0, 3.0])?;
//! let actual = HostTensor::from_vec(&[3], vec![1.0f32, 2.0, 3.001])?;
//! let criteria = Criteria {
//!     tolerance: Tolerance::Close { rtol: 1e-3, atol: 0.0 },
//!     nan: NanPolicy::Fail,
//!     allowed_mismatch_fraction: 0.0,
//! };
//! assert!(compare(&actual, &expected, &criteria).unwrap().passed);
//! # Ok::<(), vips_data::Error>(())
//! ```

pub mod compare;
pub mod element;
pub mod error_map;
pub mod error_model;
