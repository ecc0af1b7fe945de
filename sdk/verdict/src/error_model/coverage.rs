//! What a stage's data cannot show (benchdnn calls such a result
//! MISTRUSTED): outputs that are mostly zero or saturated, and documented
//! pitfalls whose effect on the data stays inside what a correct
//! implementation may do. A PASS there proves less; the run says so instead
//! of failing.
//!
//! A pitfall is probed on the reference's own values: its difference from
//! the reference, judged against the operator's bound and σ as a provider's
//! output would be, node by node (the most a run can see).

use super::ops::{layer_norm_rows, rms_norm_rows, Evaluated, RmsRow, Row};
use super::TierParams;
use vips_data::HostTensor;
use vsdk_catalog::Node;

/// A documented pitfall of one operator and how far it moves each output.
struct Pitfall {
    what: &'static str,
    delta: Vec<f64>,
}

/// The pitfalls of `node` (inputs in float64) whose effect would pass.
pub(super) fn invisible_pitfalls(
    node: &Node,
    inputs: &[&HostTensor],
    ev: &Evaluated,
    params: &TierParams,
) -> Vec<String> {
    let pitfalls = match node {
        Node::LayerNorm { axis, eps } => vec![layer_norm_eps(inputs, *axis, *eps)],
        Node::RmsNorm { eps } => vec![rms_norm_eps_added(inputs, *eps)],
        Node::Gelu => vec![gelu_tanh(inputs[0], &ev.value)],
        _ => Vec::new(),
    };
    let bound = ev.local(params.lambda);
    pitfalls
        .into_iter()
        .filter_map(|p| {
            let (mut max_e, mut sumsq, mut n) = (0.0f64, 0.0, 0usize);
            for ((d, b), s) in p.delta.iter().zip(bound.iter()).zip(&ev.sigma) {
                if *d != 0.0 {
                    max_e = max_e.max(if *b > 0.0 { d.abs() / b } else { f64::INFINITY });
                }
                if *s > 0.0 {
                    sumsq += (d / s).powi(2);
                    n += 1;
                }
            }
            // (Nothing to say where nothing has a σ.)
            let rms_t = (sumsq / n.max(1) as f64).sqrt();
            (n > 0 && max_e <= 1.0 && rms_t <= params.rms_factor).then(|| {
                format!(
                    "{} would pass here (largest |e| {max_e:.2}, rms t {rms_t:.2}): the data cannot tell",
                    p.what
                )
            })
        })
        .collect()
}

/// eps ten times larger: `γ·(x − μ)·(1/√(σ² + eps) − 1/√(σ² + 10·eps))`. Rows
/// whose variance dwarfs eps make it invisible.
fn layer_norm_eps(inputs: &[&HostTensor], axis: usize, eps: f64) -> Pitfall {
    let x = inputs[0].f64_values();
    let gamma = inputs[1].f64_values();
    let d: usize = inputs[0].spec.shape[axis..].iter().product();
    let mut delta = Vec::with_capacity(x.len());
    for Row { x: row, mu, var, s } in layer_norm_rows(&x, d, eps) {
        let k = 1.0 / s - 1.0 / (var + 10.0 * eps).sqrt();
        delta.extend(row.iter().zip(gamma.iter()).map(|(v, g)| g * (v - mu) * k));
    }
    Pitfall {
        what: "LayerNorm with eps ten times larger",
        delta,
    }
}

/// eps added under the root, `√(‖x‖² + eps)` instead of `max(‖x‖, eps)`
/// (the RMSNorm of LLaMA and T5): `y·(m/√(Q + eps) − 1)`, invisible on rows
/// whose `‖x‖²` dwarfs eps.
fn rms_norm_eps_added(inputs: &[&HostTensor], eps: f64) -> Pitfall {
    let x = inputs[0].f64_values();
    let gamma = inputs[1].f64_values();
    let d = inputs[0].spec.shape.last().copied().unwrap_or(1);
    let (sd, gn) = ((d as f64).sqrt(), gamma.len().max(1));
    let mut delta = Vec::with_capacity(x.len());
    for (r, RmsRow { x: row, q, m }) in rms_norm_rows(&x, d, eps).enumerate() {
        let k = 1.0 / (q + eps).sqrt() - 1.0 / m;
        delta.extend(
            row.iter()
                .enumerate()
                .map(|(j, v)| v * sd * gamma[(r * d + j) % gn] * k),
        );
    }
    Pitfall {
        what: "RMSNorm with eps added under the root",
        delta,
    }
}

/// GELU by its tanh approximation instead of `x·Φ(x)`; invisible where every
/// input is small (the two agree to `O(x⁵)`) or large.
fn gelu_tanh(x: &HostTensor, exact: &HostTensor) -> Pitfall {
    let c = (2.0 / std::f64::consts::PI).sqrt();
    let delta = x
        .f64_values()
        .iter()
        .zip(exact.f64_values().iter())
        .map(|(&x, y)| 0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh()) - y)
        .collect();
    Pitfall {
        what: "GELU by its tanh approximation",
        delta,
    }
}

/// Outputs whose values hide errors: mostly exact zeros (a ReLU'd or
/// masked tensor), or mostly at the dtype's largest finite value or
/// infinite (saturated).
pub fn degenerate_output(name: &str, value: &HostTensor, max: f64) -> Option<String> {
    let v = value.f64_values();
    let n = v.len().max(1) as f64;
    let zeros = v.iter().filter(|x| **x == 0.0).count() as f64 / n;
    let saturated = v.iter().filter(|x| x.abs() >= max).count() as f64 / n;
    if zeros > 0.5 {
        Some(format!(
            "`{name}` is exactly 0 at {:.0} % of its elements: errors there cannot show",
            zeros * 100.0
        ))
    } else if saturated > 0.5 {
        Some(format!(
            "`{name}` is saturated (at the dtype's largest value or infinite) at {:.0} % of its elements",
            saturated * 100.0
        ))
    } else {
        None
    }
}
