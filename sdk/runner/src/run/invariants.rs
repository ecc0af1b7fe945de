//! Declarative `verify` invariants, evaluated on a stage's actual outputs.

use serde::{Deserialize, Serialize};
use vips_data::document::Invariant;
use vips_data::HostTensor;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvariantResult {
    pub invariant: String,
    pub held: bool,
    /// What was measured, e.g. "min -0.17, max 3.2".
    pub detail: String,
}

pub fn check(inv: &Invariant, t: &HostTensor) -> InvariantResult {
    let v = t.to_f64_vec();
    let (name, held, detail) = match inv {
        Invariant::Finite { tensor } => {
            let bad = v.iter().filter(|x| !x.is_finite()).count();
            (
                format!("finite({tensor})"),
                bad == 0,
                format!("{bad} non-finite of {}", v.len()),
            )
        }
        Invariant::Range { tensor, min, max } => {
            let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
            let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let held = v.iter().all(|x| (*min..=*max).contains(x));
            (
                format!("range({tensor}, {min}, {max})"),
                held,
                format!("min {lo}, max {hi}"),
            )
        }
        Invariant::SumsToOne { tensor, axis, tol } => {
            let shape = &t.spec.shape;
            let rank = shape.len() as i64;
            let name = format!("sums_to_one({tensor}, axis {axis}, tol {tol})");
            if *axis < -rank || *axis >= rank {
                return InvariantResult {
                    invariant: name,
                    held: false,
                    detail: format!("axis {axis} out of range for rank {rank}"),
                };
            }
            let a = if *axis < 0 { axis + rank } else { *axis } as usize;
            let (len, inner) = (shape[a], shape[a + 1..].iter().product::<usize>());
            let lanes = v.len() / len.max(1);
            let worst = (0..lanes)
                .map(|l| {
                    let (o, i) = (l / inner, l % inner);
                    let sum: f64 = (0..len).map(|k| v[(o * len + k) * inner + i]).sum();
                    (sum - 1.0).abs()
                })
                .fold(0.0, f64::max);
            (
                name,
                worst <= *tol,
                format!("largest |sum - 1| = {worst:e}"),
            )
        }
        Invariant::NonzeroFraction { tensor, min, max } => {
            let frac = v.iter().filter(|x| **x != 0.0).count() as f64 / v.len().max(1) as f64;
            (
                format!("nonzero_fraction({tensor}, {min}, {max})"),
                (*min..=*max).contains(&frac),
                format!("{frac:.4}"),
            )
        }
    };
    InvariantResult {
        invariant: name,
        held,
        detail,
    }
}
