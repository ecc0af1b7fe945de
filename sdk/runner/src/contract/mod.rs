//! The kernel contract (docs/runner.md, "The kernel contract"): what every
//! kernel a component needs must do beyond the component's own data. The
//! suites call each kernel with compact tensors of one model's magnitudes;
//! an engine hands it transposed and padded views, broadcasts with stride 0,
//! logits of 100 and more, rows whose mean dwarfs their spread, subnormals,
//! ±0, NaN and Inf, and casts on rounding ties. Each case here is one kernel
//! call of that kind, generated at run time from the document (which
//! kernels, which attributes) and a seed: nothing is stored.
//!
//! This module only says what the cases are; `runner::contract` runs them
//! in the worker and judges them.

mod cases;
mod values;

use crate::suite::Suite;
use vips_data::document::{GraphNode, Stage};
use vips_data::HostTensor;
use vips_execution::execution::Layout;
use vips_verdict::compare::Tier;
use vsdk_catalog::{DType, Op, TensorSpec};

/// One kernel call of the contract.
#[derive(Debug, Clone)]
pub struct Case {
    /// `kernel@version dtype variant`, e.g. `vsdk.sdpa@1 float32 large-logits`.
    pub name: String,
    /// The call: inputs named `in0`, `in1`, ..., the output `out`.
    pub node: GraphNode,
    /// The inputs' values, compact, in their dtypes.
    pub inputs: Vec<HostTensor>,
    /// How each input lies in its buffer (`None`: compact).
    pub layouts: Vec<Option<Layout>>,
    /// Judged bit for bit against the reference provider running the same
    /// call (casts, data movement, uint8 resizing: the catalog defines every
    /// bit); otherwise by the error model, as a stage's operator.
    pub exact: bool,
    /// What the case exercises, in words (the reason of a failure starts
    /// with it).
    pub about: String,
    /// The component calls the kernel this way (its dtypes, a cast's
    /// target): NOT SUPPORTED fails. Other cases run where the provider
    /// claims the kernel for the input dtype (`kernel_supports` cannot name
    /// a cast's target): what it computes must be right, and UNSUPPORTED
    /// from `execute` is only noted.
    pub required: bool,
}

/// A kernel the component needs at a tier.
#[derive(Debug, Clone)]
pub struct Needed {
    pub op: Op,
    /// Its first node in the document: attributes that do not depend on
    /// shapes (eps, scale, antialias, a resize's size) are taken from it.
    pub template: GraphNode,
    /// The specs of that node's inputs at the tier.
    pub template_specs: Vec<TensorSpec>,
    /// The dtypes its data takes at the tier (the first input's).
    pub dtypes: Vec<DType>,
    /// A cast's targets at the tier.
    pub cast_targets: Vec<DType>,
    /// The attributes any of its nodes sets (a case for an optional
    /// feature, such as a crop's steps, is required only where it is used).
    pub attr_names: Vec<String>,
    /// The int and string values its nodes give an attribute, each
    /// `(name, value)` once (a case for a mode, such as pad's `reflect` or a
    /// resize's `align_corners = 1`, is required only where it is used).
    pub values: Vec<(String, vsdk_catalog::AttrValue)>,
    /// The attributes of `attr_names` that some node leaves to its default
    /// (then the default's cases are required too).
    pub defaulted: Vec<String>,
}

impl Needed {
    /// Whether some node gives `name` the value `value`, or leaves it to
    /// its default when `value` is that default.
    pub fn uses(&self, name: &str, value: &vsdk_catalog::AttrValue, default: bool) -> bool {
        self.values.iter().any(|(n, v)| n == name && v == value)
            || default
                && (!self.attr_names.iter().any(|a| a == name)
                    || self.defaulted.iter().any(|a| a == name))
    }
}

/// The kernels `stages` use at `tier`, in document order (a stage with its
/// own `precision` uses its kernels at that precision).
pub fn needed(suite: &Suite, stages: &[&Stage], tier: Tier) -> Vec<Needed> {
    let mut out: Vec<Needed> = Vec::new();
    for (stage, node, tier) in stages
        .iter()
        .flat_map(|s| s.graph.iter().map(move |n| (s, n, s.arithmetic(tier))))
    {
        let specs: Vec<TensorSpec> = node
            .inputs
            .iter()
            .filter_map(|n| suite.spec_in(&stage.name, n))
            .map(|s| vips_data::tier::tier_spec(s, tier))
            .collect();
        let Some(dtype) = specs.first().map(|s| s.dtype) else {
            continue;
        };
        let target = match node.attrs_at(tier.float_dtype()).get("dtype") {
            Some(vsdk_catalog::AttrValue::Str(t)) if node.op == Op::Cast => DType::from_name(t),
            _ => None,
        };
        let n = match out.iter_mut().position(|n| n.op == node.op) {
            Some(i) => &mut out[i],
            None => {
                out.push(Needed {
                    op: node.op,
                    template: node.clone(),
                    template_specs: specs,
                    dtypes: Vec::new(),
                    cast_targets: Vec::new(),
                    attr_names: Vec::new(),
                    values: Vec::new(),
                    defaulted: Vec::new(),
                });
                out.last_mut().expect("just pushed")
            }
        };
        for (name, value) in &node.attrs.0 {
            if !n.attr_names.contains(name) {
                n.attr_names.push(name.clone());
            }
            let kept = matches!(
                value,
                vsdk_catalog::AttrValue::Str(_) | vsdk_catalog::AttrValue::Int(_)
            );
            let pair = (name.clone(), value.clone());
            if kept && !n.values.contains(&pair) {
                n.values.push(pair);
            }
        }
        if !n.dtypes.contains(&dtype) {
            n.dtypes.push(dtype);
        }
        if let Some(t) = target.filter(|t| !n.cast_targets.contains(t)) {
            n.cast_targets.push(t);
        }
    }
    // Once every node's attribute names are known: the ones a node leaves out.
    for node in stages.iter().flat_map(|s| &s.graph) {
        if let Some(n) = out.iter_mut().find(|n| n.op == node.op) {
            for name in &n.attr_names {
                if node.attrs.get(name).is_none() && !n.defaulted.contains(name) {
                    n.defaulted.push(name.clone());
                }
            }
        }
    }
    out
}

/// The (kernel, dtype) pairs worth asking the provider about at `tier`:
/// each needed kernel at the dtypes the component uses; casts also from the
/// tier's float dtype (to every dtype, integers included); data movement
/// also at every integer dtype.
pub fn candidates(needed: &[Needed], tier: Tier) -> Vec<(Op, DType)> {
    let mut out = Vec::new();
    for n in needed {
        let mut dtypes = n.dtypes.clone();
        if n.op == Op::Cast || n.op.moves_data() {
            dtypes.extend(tier.float_dtype());
        }
        if n.op.moves_data() {
            dtypes.extend([DType::U8, DType::I32, DType::I64]);
        }
        for d in dtypes {
            if n.op.dtypes().contains(&d) && !out.contains(&(n.op, d)) {
                out.push((n.op, d));
            }
        }
    }
    out
}

/// The cases for every (kernel, dtype) the provider claims among
/// [`candidates`], from `seed`.
pub fn cases(needed: &[Needed], claimed: &[(Op, DType)], seed: u64) -> Vec<Case> {
    let mut out = Vec::new();
    for n in needed {
        for &(op, dtype) in claimed.iter().filter(|(op, _)| *op == n.op) {
            let seed = vips_execution::execution::SplitMix::derive(seed, &[out.len() as u64]);
            out.extend(cases::of(op, dtype, n, seed));
        }
    }
    out
}
