//! One element's error in units of its bound, and the element where it is largest:
//! the measure both the error model's verdicts and the error maps are made of.

use crate::compare::NanPolicy;
use serde::{Deserialize, Serialize};

/// The normalised error `e = (actual − reference) / bound` of one element:
/// 0 inside an infinite bound, ±∞ past a zero one, and ∞ where a NaN or ±Inf
/// differs from the reference (a NaN matches a NaN only under
/// `NanPolicy::Allow`). Never NaN, whose comparisons would pin the worst.
pub fn element_error(actual: f64, reference: f64, bound: f64, nan: NanPolicy) -> f64 {
    vips_verify_core::element_error(actual, reference, bound, nan.into())
}

/// The element whose normalised error is largest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorstElement {
    pub index: Vec<usize>,
    #[serde(with = "vips_data::json_float")]
    pub actual: f64,
    #[serde(with = "vips_data::json_float")]
    pub reference: f64,
    /// The allowed error there.
    #[serde(with = "vips_data::json_float")]
    pub bound: f64,
}
