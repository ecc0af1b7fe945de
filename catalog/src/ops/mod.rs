//! The catalog's operators: the one list of every op ([`ALL_OPS`]), what the
//! registry knows of each (name, dtypes, attribute names, input count) and
//! the resolved call ([`Node`]). Each op's shape rule and attribute types
//! live in its family's module, named by one table in `Node::infer_shapes`.

mod attention;
mod elementwise;
mod linear;
mod movement;
mod normalization;
mod raster;
mod reduction;
mod resize;
mod sparse;

pub use attention::{Rotary, Sdpa};
pub use elementwise::{Unary, SQRT_2_OVER_PI};
pub use linear::Conv2d;
pub use movement::{Crop, Pad, PadMode};
pub use reduction::{Pool2d, PoolAxis, PoolKind, Reduce, Window};
pub use resize::{Bilinear, Nearest, PilResize, Resize};
pub use sparse::{MAX_SPARSE_COORD, SPARSE_OFFSETS};

use crate::attrs::attr_err;
use crate::{Attrs, CatalogError, DType, TensorSpec};

/// The catalog version this crate implements.
pub const CATALOG_VERSION: u32 = 1;

/// The kernels of catalog v1. Each is versioned on its own (`name@1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    ResizePilBicubic,
    ResizePilLanczos,
    ResizeBicubic,
    Crop,
    Cast,
    Add,
    Sub,
    Mul,
    Div,
    Conv2d,
    Concat,
    Reshape,
    Permute,
    Linear,
    LayerNorm,
    RmsNorm,
    Softmax,
    Sdpa,
    Gelu,
    GeluTanh,
    Silu,
    Sin,
    Cos,
    SparseConv3d,
    SparseDownsampleCoords,
    SparseDownsampleIndex,
    SegmentMean,
    GatherRows,
    RepeatRows,
    SparseSubdivideCoords,
    Rasterize,
    Interpolate,
    Relu,
    Clamp,
    Sigmoid,
    Tanh,
    Exp,
    Sqrt,
    Rsqrt,
    HardSwish,
    HardSigmoid,
    BatchNorm,
    MaxPool2d,
    AvgPool2d,
    AdaptiveAvgPool2d,
    Mean,
    Sum,
    Rotary,
    Pad,
    ResizeBilinear,
    ResizeNearest,
    GroupNorm,
    Matmul,
}

pub const ALL_OPS: [Op; 53] = [
    Op::ResizePilBicubic,
    Op::ResizePilLanczos,
    Op::ResizeBicubic,
    Op::Crop,
    Op::Cast,
    Op::Add,
    Op::Sub,
    Op::Mul,
    Op::Div,
    Op::Conv2d,
    Op::Concat,
    Op::Reshape,
    Op::Permute,
    Op::Linear,
    Op::LayerNorm,
    Op::RmsNorm,
    Op::Softmax,
    Op::Sdpa,
    Op::Gelu,
    Op::GeluTanh,
    Op::Silu,
    Op::Sin,
    Op::Cos,
    Op::SparseConv3d,
    Op::SparseDownsampleCoords,
    Op::SparseDownsampleIndex,
    Op::SegmentMean,
    Op::GatherRows,
    Op::RepeatRows,
    Op::SparseSubdivideCoords,
    Op::Rasterize,
    Op::Interpolate,
    Op::Relu,
    Op::Clamp,
    Op::Sigmoid,
    Op::Tanh,
    Op::Exp,
    Op::Sqrt,
    Op::Rsqrt,
    Op::HardSwish,
    Op::HardSigmoid,
    Op::BatchNorm,
    Op::MaxPool2d,
    Op::AvgPool2d,
    Op::AdaptiveAvgPool2d,
    Op::Mean,
    Op::Sum,
    Op::Rotary,
    Op::Pad,
    Op::ResizeBilinear,
    Op::ResizeNearest,
    Op::GroupNorm,
    Op::Matmul,
];

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::ResizePilBicubic => "vsdk.resize_pil_bicubic",
            Op::ResizePilLanczos => "vsdk.resize_pil_lanczos",
            Op::ResizeBicubic => "vsdk.resize_bicubic",
            Op::Crop => "vsdk.crop",
            Op::Cast => "vsdk.cast",
            Op::Add => "vsdk.add",
            Op::Sub => "vsdk.sub",
            Op::Mul => "vsdk.mul",
            Op::Div => "vsdk.div",
            Op::Conv2d => "vsdk.conv2d",
            Op::Concat => "vsdk.concat",
            Op::Reshape => "vsdk.reshape",
            Op::Permute => "vsdk.permute",
            Op::Linear => "vsdk.linear",
            Op::LayerNorm => "vsdk.layer_norm",
            Op::RmsNorm => "vsdk.rms_norm",
            Op::Softmax => "vsdk.softmax",
            Op::Sdpa => "vsdk.sdpa",
            Op::Gelu => "vsdk.gelu",
            Op::GeluTanh => "vsdk.gelu_tanh",
            Op::Silu => "vsdk.silu",
            Op::Sin => "vsdk.sin",
            Op::Cos => "vsdk.cos",
            Op::SparseConv3d => "vsdk.sparse_conv3d",
            Op::SparseDownsampleCoords => "vsdk.sparse_downsample_coords",
            Op::SparseDownsampleIndex => "vsdk.sparse_downsample_index",
            Op::SegmentMean => "vsdk.segment_mean",
            Op::GatherRows => "vsdk.gather_rows",
            Op::RepeatRows => "vsdk.repeat_rows",
            Op::SparseSubdivideCoords => "vsdk.sparse_subdivide_coords",
            Op::Rasterize => "vsdk.rasterize",
            Op::Interpolate => "vsdk.interpolate",
            Op::Relu => "vsdk.relu",
            Op::Clamp => "vsdk.clamp",
            Op::Sigmoid => "vsdk.sigmoid",
            Op::Tanh => "vsdk.tanh",
            Op::Exp => "vsdk.exp",
            Op::Sqrt => "vsdk.sqrt",
            Op::Rsqrt => "vsdk.rsqrt",
            Op::HardSwish => "vsdk.hardswish",
            Op::HardSigmoid => "vsdk.hardsigmoid",
            Op::BatchNorm => "vsdk.batch_norm",
            Op::MaxPool2d => "vsdk.max_pool2d",
            Op::AvgPool2d => "vsdk.avg_pool2d",
            Op::AdaptiveAvgPool2d => "vsdk.adaptive_avg_pool2d",
            Op::Mean => "vsdk.mean",
            Op::Sum => "vsdk.sum",
            Op::Rotary => "vsdk.rotary_embedding",
            Op::Pad => "vsdk.pad",
            Op::ResizeBilinear => "vsdk.resize_bilinear",
            Op::ResizeNearest => "vsdk.resize_nearest",
            Op::GroupNorm => "vsdk.group_norm",
            Op::Matmul => "vsdk.matmul",
        }
    }

    pub fn version(self) -> u32 {
        1
    }

    pub fn lookup(name: &str, version: u32) -> Result<Op, CatalogError> {
        ALL_OPS
            .into_iter()
            .find(|op| op.name() == name && op.version() == version)
            .ok_or_else(|| CatalogError::UnknownKernel {
                name: name.to_string(),
                version,
                known: ALL_OPS
                    .iter()
                    .map(|op| format!("{}@{}", op.name(), op.version()))
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Its family: the file each layer keeps it in (ARCHITECTURE.md, "Adding
    /// an operator"), and how `--timings` groups the verdict's time.
    pub fn family(self) -> &'static str {
        match self {
            Op::Crop | Op::Pad | Op::Concat | Op::Reshape | Op::Permute => "movement",
            Op::Cast | Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Gelu | Op::GeluTanh => {
                "elementwise"
            }
            Op::Silu | Op::Sin | Op::Cos | Op::Relu | Op::Clamp | Op::Sigmoid | Op::Tanh => {
                "elementwise"
            }
            Op::Exp | Op::Sqrt | Op::Rsqrt | Op::HardSwish | Op::HardSigmoid => "elementwise",
            Op::LayerNorm | Op::RmsNorm | Op::Softmax | Op::BatchNorm | Op::GroupNorm => {
                "normalization"
            }
            Op::MaxPool2d | Op::AvgPool2d | Op::AdaptiveAvgPool2d | Op::Mean | Op::Sum => {
                "reduction"
            }
            Op::Linear | Op::Conv2d | Op::Matmul => "linear",
            Op::Sdpa | Op::Rotary => "attention",
            Op::ResizePilBicubic | Op::ResizePilLanczos | Op::ResizeBicubic => "resize",
            Op::ResizeBilinear | Op::ResizeNearest => "resize",
            Op::SparseConv3d
            | Op::SparseDownsampleCoords
            | Op::SparseDownsampleIndex
            | Op::SegmentMean
            | Op::GatherRows
            | Op::RepeatRows
            | Op::SparseSubdivideCoords => "sparse",
            Op::Rasterize | Op::Interpolate => "raster",
        }
    }

    /// Only moves elements (no value is computed): exact at every tier.
    pub fn moves_data(self) -> bool {
        matches!(
            self,
            Op::Crop
                | Op::Pad
                | Op::Concat
                | Op::Reshape
                | Op::Permute
                | Op::GatherRows
                | Op::RepeatRows
        )
    }

    /// The dtypes this kernel is defined for (the dtype of its data tensors).
    pub fn dtypes(self) -> &'static [DType] {
        const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];
        match self {
            Op::ResizePilBicubic | Op::ResizePilLanczos => &[DType::U8],
            Op::Crop | Op::Pad | Op::Cast | Op::Concat | Op::Reshape | Op::Permute => &DType::ALL,
            Op::GatherRows | Op::RepeatRows => &DType::ALL,
            // Sparse coordinates in, coordinates or indices out.
            Op::SparseDownsampleCoords | Op::SparseDownsampleIndex | Op::SparseSubdivideCoords => {
                &[DType::I32]
            }
            // Window coordinates of a 16384-pixel side need float32's bits.
            Op::Rasterize => &[DType::F32, DType::F64],
            _ => FLOATS,
        }
    }

    fn attr_names(self) -> &'static [&'static str] {
        match self {
            Op::ResizePilBicubic | Op::ResizePilLanczos => &["size", "vertical_first", "alpha"],
            Op::ResizeBicubic => &["size", "scale_factor", "antialias"],
            Op::Crop => &["offsets", "sizes", "steps"],
            Op::Cast => &["dtype"],
            Op::Conv2d => &["strides", "pads", "dilations", "groups"],
            Op::Concat | Op::Softmax => &["axis"],
            Op::Reshape => &["shape"],
            Op::Permute => &["perm"],
            Op::LayerNorm => &["axis", "eps"],
            Op::RmsNorm | Op::BatchNorm => &["eps"],
            Op::Sdpa => &["scale", "causal_offset"],
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Linear => &[],
            Op::Gelu | Op::GeluTanh | Op::Silu | Op::Sin | Op::Cos => &[],
            Op::Clamp => &["min", "max"],
            Op::Relu | Op::Sigmoid | Op::Tanh | Op::Exp | Op::Sqrt | Op::Rsqrt => &[],
            Op::HardSwish | Op::HardSigmoid => &[],
            Op::SparseDownsampleCoords | Op::SparseDownsampleIndex => &["voxels"],
            Op::SegmentMean => &["segments"],
            Op::RepeatRows => &["times"],
            Op::Rasterize => &["height", "width"],
            Op::MaxPool2d => &["kernel", "strides", "pads", "dilations", "ceil_mode"],
            Op::AvgPool2d => &[
                "kernel",
                "strides",
                "pads",
                "ceil_mode",
                "count_include_pad",
            ],
            Op::AdaptiveAvgPool2d => &["output_size"],
            Op::Mean | Op::Sum => &["axes", "keepdims"],
            Op::Rotary => &["interleaved"],
            Op::Pad => &["pads", "mode", "value"],
            Op::ResizeBilinear => &["size", "scale_factor", "align_corners"],
            Op::ResizeNearest => &["size", "scale_factor", "exact"],
            Op::GroupNorm => &["groups", "eps"],
            Op::Matmul => &[],
            Op::SparseConv3d | Op::GatherRows | Op::SparseSubdivideCoords | Op::Interpolate => &[],
        }
    }
}

/// A kernel call checked against the catalog: the op, its attributes resolved
/// (defaults applied, negative axes normalised) and its output specs.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    ResizePil(PilResize),
    ResizeBicubic(Resize),
    Crop(Crop),
    Cast(DType),
    Add,
    Sub,
    Mul,
    Div,
    Conv2d(Conv2d),
    Concat {
        axis: usize,
    },
    Reshape,
    Permute {
        perm: Vec<usize>,
    },
    Linear,
    LayerNorm {
        axis: usize,
        eps: f64,
    },
    /// Over the last axis; the gamma input has a suffix shape of x's.
    RmsNorm {
        eps: f64,
    },
    Softmax {
        axis: usize,
    },
    /// Inference: inputs x [N, C, ...], running mean, running var, weight,
    /// bias (each [C]).
    BatchNorm {
        eps: f64,
    },
    Sdpa(Sdpa),
    Gelu,
    /// An element-wise function of one input besides GELU.
    Unary(Unary),
    /// Submanifold, 3x3x3: inputs feats, coords, w [27, Cin, Cout], b?.
    SparseConv3d,
    /// The `voxels` distinct parents, sorted.
    SparseDownsampleCoords {
        voxels: usize,
    },
    /// Each voxel's row among the sorted parents.
    SparseDownsampleIndex {
        voxels: usize,
    },
    SegmentMean {
        segments: usize,
    },
    GatherRows,
    RepeatRows {
        times: usize,
    },
    SparseSubdivideCoords,
    /// `[B, H, W, 4]` = (u, v, z/w, triangle id + 1) of clip-space positions.
    Rasterize {
        height: usize,
        width: usize,
    },
    /// Attributes `[B, V, A]` at each pixel of a rasterizer's output.
    Interpolate,
    /// Max, average or adaptive average pooling of `[N, C, H, W]`.
    Pool2d(Pool2d),
    /// A sum or mean over axes.
    Reduce(Reduce),
    /// Rotary position embedding by cos and sin tables.
    Rotary(Rotary),
    Pad(Pad),
    ResizeBilinear(Bilinear),
    ResizeNearest(Nearest),
    /// Inputs x [N, C, ...], weight [C], bias [C]; statistics per sample
    /// over each group of C / groups channels.
    GroupNorm {
        groups: usize,
        eps: f64,
    },
    /// `a [..., M, K] @ b [..., K, N]`, batch axes broadcast.
    Matmul,
}

/// A call's resolved node and its outputs.
type Inferred = Result<(Node, Vec<TensorSpec>), CatalogError>;

/// One family's shape rule for an op: the input count and dtype are checked.
type Infer = fn(Op, &Check, &Attrs, &[TensorSpec], DType) -> Inferred;

struct Check {
    kernel: &'static str,
}

impl Check {
    fn fail<T>(&self, reason: impl Into<String>) -> Result<T, CatalogError> {
        Err(CatalogError::Tensors {
            kernel: self.kernel,
            reason: reason.into(),
        })
    }

    fn attr<T>(&self, name: &str, reason: impl Into<String>) -> Result<T, CatalogError> {
        Err(attr_err(self.kernel, name, reason.into()))
    }

    fn arity(&self, inputs: &[TensorSpec], min: usize, max: usize) -> Result<(), CatalogError> {
        if inputs.len() < min || inputs.len() > max {
            let want = if min == max {
                format!("{min}")
            } else if max == usize::MAX {
                format!("at least {min}")
            } else {
                format!("{min} to {max}")
            };
            return self.fail(format!("takes {want} inputs, got {}", inputs.len()));
        }
        Ok(())
    }

    fn same_dtype(&self, inputs: &[TensorSpec]) -> Result<DType, CatalogError> {
        let d = inputs[0].dtype;
        if let Some((i, t)) = inputs.iter().enumerate().find(|(_, t)| t.dtype != d) {
            return self.fail(format!(
                "input {i} is {} but input 0 is {d}: inputs share one dtype",
                t.dtype
            ));
        }
        Ok(d)
    }

    fn rank(&self, what: &str, t: &TensorSpec, rank: usize) -> Result<(), CatalogError> {
        if t.shape.len() != rank {
            return self.fail(format!(
                "{what} must have rank {rank}, got shape {:?}",
                t.shape
            ));
        }
        Ok(())
    }

    fn axis(&self, name: &str, axis: i64, rank: usize) -> Result<usize, CatalogError> {
        let r = rank as i64;
        if axis < -r || axis >= r.max(1) {
            return self.attr(name, format!("axis {axis} is out of range for rank {rank}"));
        }
        Ok(if axis < 0 {
            (axis + r) as usize
        } else {
            axis as usize
        })
    }

    /// A 0-or-1 attribute, `default` when absent.
    fn flag(&self, attrs: &Attrs, name: &str, default: bool) -> Result<bool, CatalogError> {
        match attrs.int(self.kernel, name)? {
            None => Ok(default),
            Some(0) => Ok(false),
            Some(1) => Ok(true),
            Some(v) => self.attr(name, format!("expected 0 or 1, got {v}")),
        }
    }

    fn pair(
        &self,
        attrs: &Attrs,
        name: &str,
        default: i64,
        min: i64,
    ) -> Result<[usize; 2], CatalogError> {
        match attrs.ints(self.kernel, name)? {
            None => Ok([default as usize; 2]),
            Some(&[a, b]) if a >= min && b >= min => Ok([a as usize, b as usize]),
            Some(v) => self.attr(name, format!("expected 2 values >= {min}, got {v:?}")),
        }
    }
}

impl Node {
    /// Checks a call against the catalog: attribute names and types, input
    /// count, dtypes and shapes. Returns the resolved node and its outputs.
    /// Every input and output must fit [`MAX_TENSOR_BYTES`](crate::MAX_TENSOR_BYTES),
    /// and every shape is computed with overflow detection: a shape that
    /// does not fit is an error, never a wrapped size.
    pub fn infer(
        op: Op,
        attrs: &Attrs,
        inputs: &[TensorSpec],
    ) -> Result<(Node, Vec<TensorSpec>), CatalogError> {
        let c = Check { kernel: op.name() };
        for (i, t) in inputs.iter().enumerate() {
            if let Err(e) = t.bounded_size_bytes() {
                return c.fail(format!("input {i}: {e}"));
            }
        }
        let (node, outputs) = Node::infer_shapes(op, attrs, inputs)?;
        for t in &outputs {
            if let Err(e) = t.bounded_size_bytes() {
                return c.fail(format!("output: {e}"));
            }
        }
        Ok((node, outputs))
    }

    fn infer_shapes(
        op: Op,
        attrs: &Attrs,
        inputs: &[TensorSpec],
    ) -> Result<(Node, Vec<TensorSpec>), CatalogError> {
        let c = Check { kernel: op.name() };
        attrs.check_names(c.kernel, op.attr_names())?;
        let (min, max) = match op {
            Op::Add | Op::Sub | Op::Mul | Op::Div => (2, 2),
            Op::Conv2d | Op::Linear => (2, 3),
            Op::Matmul => (2, 2),
            Op::RmsNorm => (2, 2),
            Op::LayerNorm | Op::Rotary | Op::GroupNorm => (3, 3),
            Op::Sdpa => (3, 4),
            Op::BatchNorm => (5, 5),
            Op::SparseConv3d => (3, 4),
            Op::SegmentMean | Op::GatherRows => (2, 2),
            Op::Rasterize => (2, 2),
            Op::Interpolate => (3, 3),
            Op::Concat => (1, usize::MAX),
            _ => (1, 1),
        };
        c.arity(inputs, min, max)?;
        let dtype = match op {
            Op::Cast => inputs[0].dtype,
            // Data and int32 indices: checked below.
            Op::SegmentMean | Op::GatherRows => inputs[0].dtype,
            // Positions or attributes, then the rasterizer's output and int32 triangles.
            Op::Rasterize | Op::Interpolate => inputs[0].dtype,
            Op::SparseConv3d => {
                let data: Vec<TensorSpec> = [0, 2, 3]
                    .iter()
                    .filter_map(|&i| inputs.get(i).cloned())
                    .collect();
                c.same_dtype(&data)?
            }
            _ => c.same_dtype(inputs)?,
        };
        if !op.dtypes().contains(&dtype) {
            return c.fail(format!("not defined for {dtype}"));
        }
        // Each op's shape rule, in its family's module.
        let infer: Infer = match op {
            Op::ResizePilBicubic | Op::ResizePilLanczos => resize::pil,
            Op::ResizeBicubic => resize::bicubic,
            Op::Crop => movement::crop,
            Op::Pad => movement::pad,
            Op::ResizeBilinear => resize::bilinear,
            Op::ResizeNearest => resize::nearest,
            Op::GroupNorm => normalization::group_norm,
            Op::Matmul => linear::matmul,
            Op::Concat => movement::concat,
            Op::Reshape => movement::reshape,
            Op::Permute => movement::permute,
            Op::Cast => elementwise::cast,
            Op::Add | Op::Sub | Op::Mul | Op::Div => elementwise::binary,
            Op::GeluTanh | Op::Silu | Op::Sin | Op::Cos => elementwise::unary,
            Op::Relu | Op::Clamp | Op::Sigmoid | Op::Tanh | Op::Exp => elementwise::unary,
            Op::Sqrt | Op::Rsqrt | Op::HardSwish | Op::HardSigmoid => elementwise::unary,
            Op::Gelu => elementwise::unary,
            Op::LayerNorm => normalization::layer_norm,
            Op::RmsNorm => normalization::rms_norm,
            Op::BatchNorm => normalization::batch_norm,
            Op::Softmax => normalization::softmax,
            Op::Linear => linear::linear,
            Op::Conv2d => linear::conv2d,
            Op::Sdpa => attention::sdpa,
            Op::SparseConv3d => sparse::sparse_conv3d,
            Op::SparseDownsampleCoords | Op::SparseDownsampleIndex => sparse::sparse_downsample,
            Op::SegmentMean => sparse::segment_mean,
            Op::GatherRows => sparse::gather_rows,
            Op::RepeatRows => sparse::repeat_rows,
            Op::SparseSubdivideCoords => sparse::sparse_subdivide_coords,
            Op::Rasterize => raster::rasterize,
            Op::Interpolate => raster::interpolate,
            Op::MaxPool2d | Op::AvgPool2d | Op::AdaptiveAvgPool2d => reduction::pool2d,
            Op::Mean | Op::Sum => reduction::reduce,
            Op::Rotary => attention::rotary,
        };
        infer(op, &c, attrs, inputs, dtype)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    #[test]
    fn errors_name_kernel_and_attribute() {
        let attrs = Attrs::new().with("axes", AttrValue::Int(1));
        let err = Node::infer(Op::Softmax, &attrs, &[f32s(&[2, 3])]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "vsdk.softmax: attribute `axes`: not an attribute of this kernel (it has: axis)"
        );
        let err =
            Node::infer(Op::Linear, &Attrs::new(), &[f32s(&[2, 3]), f32s(&[4, 5])]).unwrap_err();
        assert!(err.to_string().contains("K = 3"), "{err}");
        let err = Op::lookup("vsdk.gelu_fast", 1).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown kernel `vsdk.gelu_fast@1`"),
            "{err}"
        );
        // A known kernel at an unknown version is unknown too.
        let err = Op::lookup("vsdk.gelu_tanh", 2).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("unknown kernel `vsdk.gelu_tanh@2`"),
            "{err}"
        );
    }

    #[test]
    fn shapes_that_overflow_are_errors_not_wraps() {
        // (2^62 + 1) * 128 wraps to 128 in 64 bits.
        let wraps = Attrs::new().with("shape", AttrValue::Ints(vec![4611686018427387905, 128]));
        let err = Node::infer(Op::Reshape, &wraps, &[f32s(&[128])]).unwrap_err();
        assert!(err.to_string().contains("overflows"), "{err}");
        let crop = Attrs::new()
            .with("offsets", AttrValue::Ints(vec![i64::MAX]))
            .with("sizes", AttrValue::Ints(vec![2]));
        assert!(Node::infer(Op::Crop, &crop, &[f32s(&[4])]).is_err());
        let huge = Attrs::new().with("size", AttrValue::Ints(vec![1 << 31, 1 << 31]));
        let err = Node::infer(
            Op::ResizePilBicubic,
            &huge,
            &[TensorSpec::new(DType::U8, &[4, 4, 3])],
        )
        .unwrap_err();
        assert!(err.to_string().contains("tensor limit"), "{err}");
        let err = Node::infer(Op::Gelu, &Attrs::new(), &[f32s(&[1 << 40, 1 << 40])]).unwrap_err();
        assert!(err.to_string().starts_with("vsdk.gelu: input 0:"), "{err}");
        let concat = [
            f32s(&[usize::MAX / 2 + 1, 0]),
            f32s(&[usize::MAX / 2 + 1, 0]),
        ];
        assert!(Node::infer(Op::Concat, &Attrs::new(), &concat).is_err());
    }
}
