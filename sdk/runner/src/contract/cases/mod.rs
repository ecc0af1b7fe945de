//! The cases of each kernel: layouts (transposed, padded with an offset,
//! stride-0 broadcast), odd and large sizes, and the values that break
//! naive kernels (docs/runner.md, "The kernel contract", lists them).

mod attention;
mod elementwise;
mod linear;
mod movement;
mod normalization;
mod raster;
mod reduction;
mod resize;
mod sparse;

use super::values::{self, broadcast, padded, specials, tensor, transposed, Rng};
use super::{Case, Needed};
use attention::*;
use elementwise::*;
use linear::*;
use movement::*;
use normalization::*;
use raster::*;
use reduction::*;
use resize::*;
use sparse::*;
use vips_data::document::{GraphNode, Location};
use vips_data::HostTensor;
use vips_execution::execution::Layout;
use vsdk_catalog::{AttrValue, Attrs, DType, Op};

/// One input: its values in their dtype and how they lie in memory.
#[derive(Clone)]
struct Input {
    t: HostTensor,
    layout: Option<Layout>,
}

/// `values` in `dtype`, made consistent with `layout` (a stride-0 axis
/// repeats its first slice).
fn input(shape: &[usize], values: Vec<f64>, dtype: DType, layout: Option<Layout>) -> Input {
    let values = match &layout {
        Some(l) => values::through(l, shape, values),
        None => values,
    };
    Input {
        t: tensor(shape, values, dtype),
        layout,
    }
}

struct Cases<'a> {
    op: Op,
    dtype: DType,
    needed: &'a Needed,
    rng: Rng,
    out: Vec<Case>,
}

impl Cases<'_> {
    fn add(&mut self, variant: &str, about: &str, attrs: Attrs, inputs: Vec<Input>) {
        let exact = self.op == Op::Cast || self.op.moves_data() || self.op.pil_filter().is_some();
        let used = self.needed.dtypes.contains(&self.dtype);
        let required = match attrs.get("dtype") {
            Some(AttrValue::Str(to)) if self.op == Op::Cast => {
                used && DType::from_name(to).is_some_and(|t| self.needed.cast_targets.contains(&t))
            }
            _ => used,
        };
        let node = GraphNode {
            op: self.op,
            attrs,
            inputs: (0..inputs.len()).map(|i| format!("in{i}")).collect(),
            output: "out".into(),
            at: Location::default(),
        };
        let (inputs, layouts) = inputs.into_iter().map(|i| (i.t, i.layout)).unzip();
        self.out.push(Case {
            name: format!(
                "{}@{} {} {variant}",
                self.op.name(),
                self.op.version(),
                self.dtype.name()
            ),
            node,
            inputs,
            layouts,
            exact,
            about: about.to_string(),
            required,
        });
    }

    /// The template's attributes among `names`.
    fn kept(&self, names: &[&str]) -> Attrs {
        Attrs(
            self.needed
                .template
                .attrs
                .0
                .iter()
                .filter(|(n, _)| names.contains(&n.as_str()))
                .cloned()
                .collect(),
        )
    }

    fn normals(&mut self, shape: &[usize], scale: f64) -> Vec<f64> {
        self.rng.normals(shape.iter().product(), scale)
    }

    /// Normals with a special value (of the case's dtype) in about one
    /// element of eight.
    fn with_specials(&mut self, shape: &[usize], scale: f64, allowed: &[f64]) -> Vec<f64> {
        let n = shape.iter().product();
        (0..n)
            .map(|_| {
                if self.rng.below(8) == 0 {
                    self.rng.pick(allowed)
                } else {
                    scale * self.rng.normal()
                }
            })
            .collect()
    }

    /// The three layouts every kernel meets, on one input of `shape`
    /// (`at` of `n` inputs, the others compact).
    fn layouts(&mut self, shape: &[usize]) -> [(&'static str, &'static str, Layout); 3] {
        let pad = 1 + self.rng.below(13) as u64;
        let offset = 1 + self.rng.below(7) as u64;
        let axis = (0..shape.len()).find(|&a| shape[a] > 1).unwrap_or(0);
        [
            (
                "transposed",
                "an input stored transposed (non-unit stride on its last axis)",
                transposed(shape),
            ),
            (
                "padded",
                "an input with padded rows and an element offset (the padding holds NaN)",
                padded(shape, pad, offset),
            ),
            (
                "broadcast",
                "an input broadcast with stride 0 along an axis",
                broadcast(shape, axis),
            ),
        ]
    }
}

/// The cases of `op` at `dtype`.
pub(super) fn of(op: Op, dtype: DType, needed: &Needed, seed: u64) -> Vec<Case> {
    let mut c = Cases {
        op,
        dtype,
        needed,
        rng: Rng::new(seed),
        out: Vec::new(),
    };
    match op {
        Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise(&mut c),
        Op::Gelu => gelu(&mut c),
        Op::GeluTanh | Op::Silu => activation(&mut c),
        Op::Sin | Op::Cos => trig(&mut c),
        Op::Relu | Op::Clamp | Op::Sigmoid | Op::Tanh | Op::Exp => unary(&mut c),
        Op::Sqrt | Op::Rsqrt | Op::HardSwish | Op::HardSigmoid => unary(&mut c),
        Op::Softmax => softmax(&mut c),
        Op::LayerNorm => layer_norm(&mut c),
        Op::RmsNorm => rms_norm(&mut c),
        Op::BatchNorm => batch_norm(&mut c),
        Op::Linear => linear(&mut c),
        Op::Sdpa => sdpa(&mut c),
        Op::Rotary => rotary(&mut c),
        Op::Conv2d => conv2d(&mut c),
        Op::Cast => cast(&mut c),
        Op::ResizePilBicubic | Op::ResizePilLanczos => resize_pil(&mut c),
        Op::ResizeBicubic => resize(&mut c),
        Op::ResizeBilinear | Op::ResizeNearest => resize_2d(&mut c),
        Op::GroupNorm => group_norm(&mut c),
        Op::Matmul => matmul(&mut c),
        Op::Crop | Op::Concat | Op::Reshape | Op::Permute => movement(&mut c),
        Op::Pad => pad(&mut c),
        Op::SparseConv3d
        | Op::SparseDownsampleCoords
        | Op::SparseDownsampleIndex
        | Op::SegmentMean
        | Op::GatherRows
        | Op::RepeatRows
        | Op::SparseSubdivideCoords => sparse(&mut c),
        Op::Rasterize | Op::Interpolate => raster(&mut c),
        Op::MaxPool2d | Op::AvgPool2d | Op::AdaptiveAvgPool2d => pool(&mut c),
        Op::Mean | Op::Sum => reduce(&mut c),
    }
    c.out
}

/// One case per layout of the first input, the others compact.
fn layout_cases(c: &mut Cases, attrs: &Attrs, shapes: &[Vec<usize>], scale: f64) {
    let d = c.dtype;
    for (variant, about, layout) in c.layouts(&shapes[0]) {
        let mut inputs = Vec::new();
        for (i, shape) in shapes.iter().enumerate() {
            let v = c.normals(shape, scale);
            inputs.push(input(shape, v, d, (i == 0).then(|| layout.clone())));
        }
        c.add(variant, about, attrs.clone(), inputs);
    }
}
