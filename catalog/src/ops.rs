use crate::attrs::attr_err;
use crate::raster;
use crate::shape::broadcast_shapes;
use crate::taps::PilFilter;
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
}

pub const ALL_OPS: [Op; 32] = [
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

    /// The Pillow filter of a `vsdk.resize_pil_*` kernel (uint8, bit-exact).
    pub fn pil_filter(self) -> Option<PilFilter> {
        match self {
            Op::ResizePilBicubic => Some(PilFilter::Bicubic),
            Op::ResizePilLanczos => Some(PilFilter::Lanczos),
            _ => None,
        }
    }

    /// Only moves elements (no value is computed): exact at every tier.
    pub fn moves_data(self) -> bool {
        matches!(
            self,
            Op::Crop | Op::Concat | Op::Reshape | Op::Permute | Op::GatherRows | Op::RepeatRows
        )
    }

    /// The dtypes this kernel is defined for (the dtype of its data tensors).
    pub fn dtypes(self) -> &'static [DType] {
        const FLOATS: &[DType] = &[DType::F16, DType::BF16, DType::F32, DType::F64];
        match self {
            Op::ResizePilBicubic | Op::ResizePilLanczos => &[DType::U8],
            Op::Crop | Op::Cast | Op::Concat | Op::Reshape | Op::Permute => &DType::ALL,
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
            Op::Crop => &["offsets", "sizes"],
            Op::Cast => &["dtype"],
            Op::Conv2d => &["strides", "pads", "dilations", "groups"],
            Op::Concat | Op::Softmax => &["axis"],
            Op::Reshape => &["shape"],
            Op::Permute => &["perm"],
            Op::LayerNorm => &["axis", "eps"],
            Op::RmsNorm => &["eps"],
            Op::Sdpa => &["scale"],
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Linear => &[],
            Op::Gelu | Op::GeluTanh | Op::Silu | Op::Sin | Op::Cos => &[],
            Op::SparseDownsampleCoords | Op::SparseDownsampleIndex => &["voxels"],
            Op::SegmentMean => &["segments"],
            Op::RepeatRows => &["times"],
            Op::Rasterize => &["height", "width"],
            Op::SparseConv3d | Op::GatherRows | Op::SparseSubdivideCoords | Op::Interpolate => &[],
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resize {
    pub out_h: usize,
    pub out_w: usize,
    /// Source pixels per output pixel, per axis (the value used in coordinate maps).
    pub scale_h: f64,
    pub scale_w: f64,
    pub antialias: bool,
}

/// A `vsdk.resize_pil_*` call: Pillow's 8-bit `Image.resize`.
#[derive(Debug, Clone, PartialEq)]
pub struct PilResize {
    pub filter: PilFilter,
    pub out_h: usize,
    pub out_w: usize,
    /// Run the vertical pass before the horizontal one (Pillow 13 does
    /// for some sizes).
    pub vertical_first: bool,
    /// The last channel is alpha (Pillow's modes LA and RGBA): the colour
    /// channels are premultiplied before the passes and divided after.
    pub alpha: bool,
}

impl PilResize {
    /// Pillow returns a copy when the size does not change (no pass, and
    /// no premultiplication round trip).
    pub fn is_copy(&self, in_h: usize, in_w: usize) -> bool {
        (self.out_h, self.out_w) == (in_h, in_w)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Crop {
    pub offsets: Vec<usize>,
    pub sizes: Vec<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Conv2d {
    pub strides: [usize; 2],
    /// top, left, bottom, right
    pub pads: [usize; 4],
    pub dilations: [usize; 2],
    pub groups: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Sdpa {
    pub scale: f64,
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
    Sdpa(Sdpa),
    Gelu,
    GeluTanh,
    Silu,
    Sin,
    Cos,
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
}

/// Offsets of `vsdk.sparse_conv3d`'s 3x3x3 neighbourhood, in weight order:
/// `k = 9·(dx+1) + 3·(dy+1) + (dz+1)`.
pub const SPARSE_OFFSETS: [[i32; 3]; 27] = {
    let mut o = [[0; 3]; 27];
    let mut k = 0;
    while k < 27 {
        o[k] = [
            (k / 9) as i32 - 1,
            (k / 3 % 3) as i32 - 1,
            (k % 3) as i32 - 1,
        ];
        k += 1;
    }
    o
};

/// Coordinates of sparse voxels lie in `[0, 2^30)` (docs/operators.md):
/// `2c + 1` and `c ± 1` stay inside int32.
pub const MAX_SPARSE_COORD: i32 = 1 << 30;

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

fn positive_size(c: &Check, attrs: &Attrs) -> Result<Option<[usize; 2]>, CatalogError> {
    match attrs.ints(c.kernel, "size")? {
        None => Ok(None),
        Some(&[h, w]) if h > 0 && w > 0 => Ok(Some([h as usize, w as usize])),
        Some(v) => c.attr("size", format!("expected [out_h, out_w] > 0, got {v:?}")),
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
            Op::RmsNorm => (2, 2),
            Op::LayerNorm | Op::Sdpa => (3, 3),
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
        let x = &inputs[0];
        let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
        Ok(match op {
            Op::ResizePilBicubic | Op::ResizePilLanczos => {
                c.rank("input [H, W, C]", x, 3)?;
                let Some([out_h, out_w]) = positive_size(&c, attrs)? else {
                    return c.attr("size", "is required");
                };
                if x.shape[0] == 0 || x.shape[1] == 0 {
                    return c.fail(format!("input image {:?} is empty", x.shape));
                }
                let flag = |name: &str| match attrs.int(c.kernel, name)? {
                    None | Some(0) => Ok(false),
                    Some(1) => Ok(true),
                    Some(v) => c.attr(name, format!("expected 0 or 1, got {v}")),
                };
                let vertical_first = flag("vertical_first")?;
                let alpha = flag("alpha")?;
                if alpha && ![2, 4].contains(&x.shape[2]) {
                    return c.attr(
                        "alpha",
                        format!(
                            "needs 2 (LA) or 4 (RGBA) channels, the last one alpha; the input has {}",
                            x.shape[2]
                        ),
                    );
                }
                (
                    Node::ResizePil(PilResize {
                        filter: op.pil_filter().expect("a Pillow resize"),
                        out_h,
                        out_w,
                        vertical_first,
                        alpha,
                    }),
                    out(vec![out_h, out_w, x.shape[2]]),
                )
            }
            Op::ResizeBicubic => {
                c.rank("input [N, C, H, W]", x, 4)?;
                let (in_h, in_w) = (x.shape[2], x.shape[3]);
                if in_h == 0 || in_w == 0 {
                    return c.fail(format!(
                        "input {:?} has an empty spatial dimension",
                        x.shape
                    ));
                }
                let size = positive_size(&c, attrs)?;
                let factor = attrs.floats(c.kernel, "scale_factor")?;
                let r = match (size, factor) {
                    (Some([oh, ow]), None) => Resize {
                        out_h: oh,
                        out_w: ow,
                        scale_h: in_h as f64 / oh as f64,
                        scale_w: in_w as f64 / ow as f64,
                        antialias: false,
                    },
                    (None, Some(&[sh, sw]))
                        if sh > 0.0 && sw > 0.0 && sh.is_finite() && sw.is_finite() =>
                    {
                        let (oh, ow) = ((in_h as f64 * sh).floor(), (in_w as f64 * sw).floor());
                        if oh < 1.0 || ow < 1.0 {
                            return c.attr(
                                "scale_factor",
                                format!("gives an empty output ({oh} x {ow})"),
                            );
                        }
                        Resize {
                            out_h: oh as usize,
                            out_w: ow as usize,
                            scale_h: 1.0 / sh,
                            scale_w: 1.0 / sw,
                            antialias: false,
                        }
                    }
                    (None, Some(v)) => {
                        return c.attr(
                            "scale_factor",
                            format!("expected [s_h, s_w], finite and > 0, got {v:?}"),
                        )
                    }
                    (Some(_), Some(_)) => {
                        return c.attr("size", "give `size` or `scale_factor`, not both")
                    }
                    (None, None) => {
                        return c.attr("size", "one of `size` or `scale_factor` is required")
                    }
                };
                let antialias = match attrs.int(c.kernel, "antialias")? {
                    None | Some(0) => false,
                    Some(1) => true,
                    Some(v) => return c.attr("antialias", format!("expected 0 or 1, got {v}")),
                };
                let shape = vec![x.shape[0], x.shape[1], r.out_h, r.out_w];
                (Node::ResizeBicubic(Resize { antialias, ..r }), out(shape))
            }
            Op::Crop => {
                let rank = x.shape.len();
                let (Some(offsets), Some(sizes)) = (
                    attrs.ints(c.kernel, "offsets")?,
                    attrs.ints(c.kernel, "sizes")?,
                ) else {
                    return c.attr("offsets", "`offsets` and `sizes` are required");
                };
                if offsets.len() != rank || sizes.len() != rank {
                    return c.attr(
                        "offsets",
                        format!("`offsets` and `sizes` need {rank} values each (the input's rank)"),
                    );
                }
                for d in 0..rank {
                    let (o, s) = (offsets[d], sizes[d]);
                    let end = o.checked_add(s).filter(|_| o >= 0 && s >= 0);
                    if end.is_none_or(|e| e as u64 > x.shape[d] as u64) {
                        return c.fail(format!(
                            "axis {d}: window [{o}, {o}+{s}) is outside the input's extent {}",
                            x.shape[d]
                        ));
                    }
                }
                let sizes: Vec<usize> = sizes.iter().map(|&s| s as usize).collect();
                let crop = Crop {
                    offsets: offsets.iter().map(|&o| o as usize).collect(),
                    sizes: sizes.clone(),
                };
                (Node::Crop(crop), out(sizes))
            }
            Op::Cast => {
                let Some(name) = attrs.string(c.kernel, "dtype")? else {
                    return c.attr("dtype", "is required");
                };
                let Some(to) = DType::from_name(name) else {
                    return c.attr("dtype", format!("unknown dtype `{name}`"));
                };
                (
                    Node::Cast(to),
                    vec![TensorSpec {
                        dtype: to,
                        shape: x.shape.clone(),
                    }],
                )
            }
            Op::Add | Op::Sub | Op::Mul | Op::Div => {
                let Some(shape) = broadcast_shapes(&x.shape, &inputs[1].shape) else {
                    return c.fail(format!(
                        "shapes {:?} and {:?} do not broadcast",
                        x.shape, inputs[1].shape
                    ));
                };
                let node = match op {
                    Op::Add => Node::Add,
                    Op::Sub => Node::Sub,
                    Op::Mul => Node::Mul,
                    _ => Node::Div,
                };
                (node, out(shape))
            }
            Op::Conv2d => {
                c.rank("input [N, C, H, W]", x, 4)?;
                let w = &inputs[1];
                c.rank("weight [O, C/groups, kH, kW]", w, 4)?;
                let strides = c.pair(attrs, "strides", 1, 1)?;
                let dilations = c.pair(attrs, "dilations", 1, 1)?;
                let pads = match attrs.ints(c.kernel, "pads")? {
                    None => [0; 4],
                    Some(&[t, l, b, r]) if t >= 0 && l >= 0 && b >= 0 && r >= 0 => {
                        [t as usize, l as usize, b as usize, r as usize]
                    }
                    Some(v) => {
                        return c.attr(
                            "pads",
                            format!("expected [top, left, bottom, right] >= 0, got {v:?}"),
                        )
                    }
                };
                let groups = match attrs.int(c.kernel, "groups")? {
                    None => 1,
                    Some(g) if g >= 1 => g as usize,
                    Some(g) => return c.attr("groups", format!("expected >= 1, got {g}")),
                };
                let (cin, cout) = (x.shape[1], w.shape[0]);
                if !cin.is_multiple_of(groups)
                    || !cout.is_multiple_of(groups)
                    || w.shape[1].checked_mul(groups) != Some(cin)
                {
                    return c.fail(format!(
                        "input channels {cin}, weight {:?} and groups {groups} do not agree",
                        w.shape
                    ));
                }
                if let Some(b) = inputs.get(2) {
                    if b.shape != [cout] {
                        return c.fail(format!("bias must have shape [{cout}], got {:?}", b.shape));
                    }
                }
                let mut spatial = [0usize; 2];
                for a in 0..2 {
                    let padded = x.shape[2 + a]
                        .checked_add(pads[a])
                        .and_then(|p| p.checked_add(pads[a + 2]));
                    let span = dilations[a]
                        .checked_mul(w.shape[2 + a].max(1) - 1)
                        .and_then(|s| s.checked_add(1));
                    let (Some(padded), Some(span)) = (padded, span) else {
                        return c.fail(format!(
                            "axis {a}: padding {pads:?} or dilation {dilations:?} overflows"
                        ));
                    };
                    if w.shape[2 + a] == 0 || padded < span {
                        return c.fail(format!(
                            "kernel {:?} (dilated span {span}) does not fit the padded input {:?}",
                            &w.shape[2..],
                            &x.shape[2..]
                        ));
                    }
                    spatial[a] = (padded - span) / strides[a] + 1;
                }
                let conv = Conv2d {
                    strides,
                    pads,
                    dilations,
                    groups,
                };
                (
                    Node::Conv2d(conv),
                    out(vec![x.shape[0], cout, spatial[0], spatial[1]]),
                )
            }
            Op::Concat => {
                let rank = x.shape.len();
                if rank == 0 {
                    return c.fail("cannot concatenate scalars");
                }
                let axis = c.axis("axis", attrs.int(c.kernel, "axis")?.unwrap_or(0), rank)?;
                let mut shape = x.shape.clone();
                for (i, t) in inputs.iter().enumerate().skip(1) {
                    let agrees = t.shape.len() == rank
                        && (0..rank).all(|d| d == axis || t.shape[d] == x.shape[d]);
                    if !agrees {
                        return c.fail(format!(
                            "input {i} has shape {:?}, input 0 has {:?}: they must agree except on axis {axis}",
                            t.shape, x.shape
                        ));
                    }
                    let Some(sum) = shape[axis].checked_add(t.shape[axis]) else {
                        return c.fail(format!("the size of axis {axis} overflows"));
                    };
                    shape[axis] = sum;
                }
                (Node::Concat { axis }, out(shape))
            }
            Op::Reshape => {
                let Some(target) = attrs.ints(c.kernel, "shape")? else {
                    return c.attr("shape", "is required");
                };
                let shape = reshape_target(&c, target, x.numel())?;
                (Node::Reshape, out(shape))
            }
            Op::Permute => {
                let Some(perm) = attrs.ints(c.kernel, "perm")? else {
                    return c.attr("perm", "is required");
                };
                let rank = x.shape.len();
                let mut seen = vec![false; rank];
                let valid = perm.len() == rank
                    && perm.iter().all(|&p| {
                        (0..rank as i64).contains(&p)
                            && !std::mem::replace(&mut seen[p as usize], true)
                    });
                if !valid {
                    return c.attr(
                        "perm",
                        format!("{perm:?} is not a permutation of 0..{rank}"),
                    );
                }
                let perm: Vec<usize> = perm.iter().map(|&p| p as usize).collect();
                let shape = perm.iter().map(|&p| x.shape[p]).collect();
                (Node::Permute { perm }, out(shape))
            }
            Op::Linear => {
                let w = &inputs[1];
                c.rank("weight [N, K]", w, 2)?;
                let Some(&k) = x.shape.last() else {
                    return c.fail("input must have rank >= 1");
                };
                if w.shape[1] != k {
                    return c.fail(format!(
                        "input {:?} has K = {k} but weight is {:?} (expected [N, {k}])",
                        x.shape, w.shape
                    ));
                }
                if let Some(b) = inputs.get(2) {
                    if b.shape != [w.shape[0]] {
                        return c.fail(format!(
                            "bias must have shape [{}], got {:?}",
                            w.shape[0], b.shape
                        ));
                    }
                }
                let mut shape = x.shape.clone();
                *shape.last_mut().expect("rank >= 1 checked") = w.shape[0];
                (Node::Linear, out(shape))
            }
            Op::LayerNorm => {
                let rank = x.shape.len();
                if rank == 0 {
                    return c.fail("input must have rank >= 1");
                }
                let axis = c.axis("axis", attrs.int(c.kernel, "axis")?.unwrap_or(-1), rank)?;
                let eps = attrs.float(c.kernel, "eps")?.unwrap_or(1e-5);
                if !(eps >= 0.0 && eps.is_finite()) {
                    return c.attr("eps", format!("expected a finite value >= 0, got {eps}"));
                }
                let normalized = &x.shape[axis..];
                for (i, name) in [(1, "weight"), (2, "bias")] {
                    if inputs[i].shape != normalized {
                        return c.fail(format!(
                            "{name} must have the normalized shape {normalized:?}, got {:?}",
                            inputs[i].shape
                        ));
                    }
                }
                (Node::LayerNorm { axis, eps }, out(x.shape.clone()))
            }
            Op::RmsNorm => {
                let rank = x.shape.len();
                if rank == 0 {
                    return c.fail("input must have rank >= 1");
                }
                let eps = attrs.float(c.kernel, "eps")?.unwrap_or(1e-12);
                // eps > 0 keeps an all-zero row defined (0 / eps = 0).
                if !(eps > 0.0 && eps.is_finite()) {
                    return c.attr("eps", format!("expected a finite value > 0, got {eps}"));
                }
                let g = &inputs[1].shape;
                if g.is_empty() || g.len() > rank || g[..] != x.shape[rank - g.len()..] {
                    return c.fail(format!(
                        "gamma must have a trailing shape of the input {:?} (at least its last axis), got {g:?}",
                        x.shape
                    ));
                }
                (Node::RmsNorm { eps }, out(x.shape.clone()))
            }
            Op::Softmax => {
                let rank = x.shape.len();
                if rank == 0 {
                    return c.fail("input must have rank >= 1");
                }
                let axis = c.axis("axis", attrs.int(c.kernel, "axis")?.unwrap_or(-1), rank)?;
                (Node::Softmax { axis }, out(x.shape.clone()))
            }
            Op::Sdpa => {
                let (q, k, v) = (&inputs[0], &inputs[1], &inputs[2]);
                let rank = q.shape.len();
                if rank < 2 || k.shape.len() != rank || v.shape.len() != rank {
                    return c.fail(format!(
                        "q, k, v must share a rank >= 2, got {:?}, {:?}, {:?}",
                        q.shape, k.shape, v.shape
                    ));
                }
                let b = rank - 2;
                let ok = q.shape[..b] == k.shape[..b]
                    && k.shape[..b] == v.shape[..b]
                    && q.shape[b + 1] == k.shape[b + 1]
                    && k.shape[b] == v.shape[b]
                    && k.shape[b] > 0;
                if !ok {
                    return c.fail(format!(
                        "expected q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv] with Lk > 0, got {:?}, {:?}, {:?}",
                        q.shape, k.shape, v.shape
                    ));
                }
                let d = q.shape[b + 1];
                let scale = attrs
                    .float(c.kernel, "scale")?
                    .unwrap_or(1.0 / (d.max(1) as f64).sqrt());
                if !scale.is_finite() {
                    return c.attr("scale", format!("must be finite, got {scale}"));
                }
                let mut shape = q.shape.clone();
                shape[b + 1] = v.shape[b + 1];
                (Node::Sdpa(Sdpa { scale }), out(shape))
            }
            Op::Gelu => (Node::Gelu, out(x.shape.clone())),
            Op::GeluTanh => (Node::GeluTanh, out(x.shape.clone())),
            Op::Silu => (Node::Silu, out(x.shape.clone())),
            Op::Sin => (Node::Sin, out(x.shape.clone())),
            Op::Cos => (Node::Cos, out(x.shape.clone())),
            Op::SparseConv3d => {
                let n = sparse_voxels(&c, x, &inputs[1])?;
                let w = &inputs[2];
                let cin = x.shape[1];
                if w.shape.len() != 3 || w.shape[0] != 27 || w.shape[1] != cin {
                    return c.fail(format!(
                        "w must be [27, Cin = {cin}, Cout], got {:?}",
                        w.shape
                    ));
                }
                let cout = w.shape[2];
                if let Some(b) = inputs.get(3) {
                    if b.shape != [cout] {
                        return c.fail(format!("b must be [Cout = {cout}], got {:?}", b.shape));
                    }
                }
                (Node::SparseConv3d, out(vec![n, cout]))
            }
            Op::SparseDownsampleCoords | Op::SparseDownsampleIndex => {
                let n = sparse_coords(&c, x)?;
                let Some(m) = attrs.int(c.kernel, "voxels")? else {
                    return c.attr("voxels", "is required (the number of distinct parents)");
                };
                if m < 0 || m as usize > n || (n > 0 && m == 0) {
                    return c.attr("voxels", format!("{m} parents cannot come from {n} voxels"));
                }
                let voxels = m as usize;
                if op == Op::SparseDownsampleCoords {
                    (
                        Node::SparseDownsampleCoords { voxels },
                        out(vec![voxels, 4]),
                    )
                } else {
                    (Node::SparseDownsampleIndex { voxels }, out(vec![n]))
                }
            }
            Op::SegmentMean => {
                let index = &inputs[1];
                rows_and_index(&c, x, index)?;
                let Some(m) = attrs.int(c.kernel, "segments")? else {
                    return c.attr("segments", "is required (the number of output rows)");
                };
                let Ok(segments) = usize::try_from(m) else {
                    return c.attr("segments", format!("must be >= 0, got {m}"));
                };
                if index.shape[0] != x.shape[0] {
                    return c.fail(format!(
                        "index must give one segment per row of x ({}), got {:?}",
                        x.shape[0], index.shape
                    ));
                }
                if segments == 0 && x.shape[0] > 0 {
                    return c.attr("segments", "0 segments cannot hold any row");
                }
                (
                    Node::SegmentMean { segments },
                    out(vec![segments, x.shape[1]]),
                )
            }
            Op::GatherRows => {
                let index = &inputs[1];
                rows_and_index(&c, x, index)?;
                if x.shape[0] == 0 && index.shape[0] > 0 {
                    return c.fail("an index into an empty x");
                }
                (Node::GatherRows, out(vec![index.shape[0], x.shape[1]]))
            }
            Op::RepeatRows => {
                c.rank("x [N, C]", x, 2)?;
                let Some(t) = attrs.int(c.kernel, "times")? else {
                    return c.attr("times", "is required");
                };
                let times = match usize::try_from(t) {
                    Ok(t) if t >= 1 => t,
                    _ => return c.attr("times", format!("must be >= 1, got {t}")),
                };
                let Some(rows) = x.shape[0].checked_mul(times) else {
                    return c.fail(format!("{} rows x {times} overflows", x.shape[0]));
                };
                (Node::RepeatRows { times }, out(vec![rows, x.shape[1]]))
            }
            Op::SparseSubdivideCoords => {
                let n = sparse_coords(&c, x)?;
                let Some(children) = n.checked_mul(8) else {
                    return c.fail(format!("{n} voxels have too many children"));
                };
                (Node::SparseSubdivideCoords, out(vec![children, 4]))
            }
            Op::Rasterize => {
                let tri = &inputs[1];
                if x.shape.len() != 3 || x.shape[2] != 4 {
                    return c.fail(format!(
                        "pos must be [B, V, 4] clip-space (x, y, z, w), got {:?}",
                        x.shape
                    ));
                }
                triangles(&c, tri)?;
                let side = |name: &str| match attrs.int(c.kernel, name)? {
                    None => c.attr(name, "is required"),
                    Some(v) if v >= 1 && v as usize <= raster::MAX_RASTER_SIDE => Ok(v as usize),
                    Some(v) => c.attr(
                        name,
                        format!("must lie in [1, {}], got {v}", raster::MAX_RASTER_SIDE),
                    ),
                };
                let (height, width) = (side("height")?, side("width")?);
                (
                    Node::Rasterize { height, width },
                    out(vec![x.shape[0], height, width, 4]),
                )
            }
            Op::Interpolate => {
                let (rast, tri) = (&inputs[1], &inputs[2]);
                if x.shape.len() != 3 {
                    return c.fail(format!("attr must be [B, V, A], got {:?}", x.shape));
                }
                if ![DType::F32, DType::F64].contains(&rast.dtype)
                    || rast.shape.len() != 4
                    || rast.shape[3] != 4
                    || rast.shape[0] != x.shape[0]
                {
                    return c.fail(format!(
                        "rast must be a rasterizer's output [B = {}, H, W, 4], float32 or float64 (ids need its bits), got {} {:?}",
                        x.shape[0], rast.dtype, rast.shape
                    ));
                }
                triangles(&c, tri)?;
                (
                    Node::Interpolate,
                    out(vec![x.shape[0], rast.shape[1], rast.shape[2], x.shape[2]]),
                )
            }
        })
    }
}

/// A sparse tensor's two halves agree: feats [N, C] and coords [N, 4] int32.
fn sparse_voxels(
    c: &Check,
    feats: &TensorSpec,
    coords: &TensorSpec,
) -> Result<usize, CatalogError> {
    if feats.shape.len() != 2
        || coords.dtype != DType::I32
        || coords.shape.len() != 2
        || coords.shape[1] != 4
        || coords.shape[0] != feats.shape[0]
    {
        return c.fail(format!(
            "expected feats [N, C] and coords [N, 4] int32 (b, x, y, z), got {:?} and {} {:?}",
            feats.shape, coords.dtype, coords.shape
        ));
    }
    Ok(feats.shape[0])
}

/// Sparse coordinates alone: [N, 4] (the dtype, int32, is the kernel's).
fn sparse_coords(c: &Check, coords: &TensorSpec) -> Result<usize, CatalogError> {
    if coords.shape.len() != 2 || coords.shape[1] != 4 {
        return c.fail(format!(
            "expected coords [N, 4] int32 (b, x, y, z), got {:?}",
            coords.shape
        ));
    }
    Ok(coords.shape[0])
}

/// Triangles `[F, 3]` int32, few enough that `id + 1` is exact in float32.
fn triangles(c: &Check, tri: &TensorSpec) -> Result<(), CatalogError> {
    if tri.dtype != DType::I32 || tri.shape.len() != 2 || tri.shape[1] != 3 {
        return c.fail(format!(
            "tri must be [F, 3] int32 vertex indices, got {} {:?}",
            tri.dtype, tri.shape
        ));
    }
    if tri.shape[0] > raster::MAX_TRIANGLES {
        return c.fail(format!(
            "{} triangles: at most 2^24 (ids + 1 are stored in float32)",
            tri.shape[0]
        ));
    }
    Ok(())
}

/// Rows to gather or reduce, and an int32 index of rank 1.
fn rows_and_index(c: &Check, x: &TensorSpec, index: &TensorSpec) -> Result<(), CatalogError> {
    if x.shape.len() != 2 || index.dtype != DType::I32 || index.shape.len() != 1 {
        return c.fail(format!(
            "expected x [rows, C] and index [N] int32, got {:?} and {} {:?}",
            x.shape, index.dtype, index.shape
        ));
    }
    Ok(())
}

fn reshape_target(c: &Check, target: &[i64], numel: usize) -> Result<Vec<usize>, CatalogError> {
    let inferred: Vec<usize> = (0..target.len()).filter(|&i| target[i] == -1).collect();
    if inferred.len() > 1 || target.iter().any(|&d| d < -1) {
        return c.attr(
            "shape",
            format!("{target:?}: dimensions are >= 0, with at most one -1"),
        );
    }
    let known: Vec<usize> = target
        .iter()
        .filter(|&&d| d >= 0)
        .map(|&d| d as usize)
        .collect();
    let Some(known) = crate::checked_numel(&known) else {
        return c.attr(
            "shape",
            format!("{target:?}: the element count overflows (the input has {numel})"),
        );
    };
    let mut shape: Vec<usize> = target.iter().map(|&d| d.max(0) as usize).collect();
    if let Some(&i) = inferred.first() {
        if known == 0 || !numel.is_multiple_of(known) {
            return c.attr("shape", format!("{target:?} cannot hold {numel} elements"));
        }
        shape[i] = numel / known;
    }
    if crate::checked_numel(&shape) != Some(numel) {
        return c.attr(
            "shape",
            format!("{target:?} holds a different number of elements than the input ({numel})"),
        );
    }
    Ok(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    #[test]
    fn unary_activations_keep_the_shape_and_take_no_attributes() {
        for (op, name, node) in [
            (Op::Gelu, "vsdk.gelu", Node::Gelu),
            (Op::GeluTanh, "vsdk.gelu_tanh", Node::GeluTanh),
            (Op::Silu, "vsdk.silu", Node::Silu),
            (Op::Sin, "vsdk.sin", Node::Sin),
            (Op::Cos, "vsdk.cos", Node::Cos),
        ] {
            assert_eq!(Op::lookup(name, 1).unwrap(), op);
            assert_eq!(
                op.dtypes(),
                &[DType::F16, DType::BF16, DType::F32, DType::F64]
            );
            for dtype in [DType::F16, DType::BF16, DType::F32, DType::F64] {
                let x = TensorSpec::new(dtype, &[2, 0, 5]);
                let (n, out) = Node::infer(op, &Attrs::new(), std::slice::from_ref(&x)).unwrap();
                assert_eq!((n, out), (node.clone(), vec![x]));
            }
            let i32s = TensorSpec::new(DType::I32, &[3]);
            assert!(Node::infer(op, &Attrs::new(), &[i32s]).is_err(), "{name}");
            let two = [f32s(&[3]), f32s(&[3])];
            assert!(Node::infer(op, &Attrs::new(), &two).is_err(), "{name}");
            let attr = Attrs::new().with("approximate", AttrValue::Str("tanh".into()));
            let err = Node::infer(op, &attr, &[f32s(&[3])]).unwrap_err();
            assert!(err.to_string().contains("`approximate`"), "{err}");
        }
    }

    #[test]
    fn pil_resizes_share_attributes_and_differ_in_filter() {
        let u8s = |c: usize| TensorSpec::new(DType::U8, &[5, 7, c]);
        let size = Attrs::new().with("size", AttrValue::Ints(vec![3, 9]));
        for (op, filter) in [
            (Op::ResizePilBicubic, PilFilter::Bicubic),
            (Op::ResizePilLanczos, PilFilter::Lanczos),
        ] {
            assert_eq!(Op::lookup(op.name(), 1).unwrap(), op);
            let (node, out) = Node::infer(op, &size, &[u8s(3)]).unwrap();
            assert_eq!(out[0], TensorSpec::new(DType::U8, &[3, 9, 3]));
            let want = PilResize {
                filter,
                out_h: 3,
                out_w: 9,
                vertical_first: false,
                alpha: false,
            };
            assert_eq!(node, Node::ResizePil(want.clone()));
            let attrs = size
                .clone()
                .with("vertical_first", AttrValue::Int(1))
                .with("alpha", AttrValue::Int(1));
            for c in [2, 4] {
                let (node, _) = Node::infer(op, &attrs, &[u8s(c)]).unwrap();
                let want = PilResize {
                    vertical_first: true,
                    alpha: true,
                    ..want.clone()
                };
                assert_eq!(node, Node::ResizePil(want));
            }
            for c in [1, 3, 5] {
                let err = Node::infer(op, &attrs, &[u8s(c)]).unwrap_err();
                assert!(err.to_string().contains("`alpha`"), "{err}");
            }
            let bad = size.clone().with("alpha", AttrValue::Int(2));
            assert!(Node::infer(op, &bad, &[u8s(4)]).is_err());
            assert!(Node::infer(op, &size, &[f32s(&[5, 7, 3])]).is_err());
        }
    }

    #[test]
    fn dinov2_position_embedding_resize_gives_16() {
        let attrs = Attrs::new().with("scale_factor", AttrValue::Floats(vec![16.1 / 37.0; 2]));
        let (node, out) =
            Node::infer(Op::ResizeBicubic, &attrs, &[f32s(&[1, 384, 37, 37])]).unwrap();
        assert_eq!(out[0].shape, vec![1, 384, 16, 16]);
        let Node::ResizeBicubic(r) = node else {
            panic!("wrong node")
        };
        assert!((r.scale_h - 37.0 / 16.1).abs() < 1e-12);
    }

    #[test]
    fn patch_embedding_conv_shape() {
        let attrs = Attrs::new().with("strides", AttrValue::Ints(vec![14, 14]));
        let inputs = [
            f32s(&[1, 3, 224, 224]),
            f32s(&[384, 3, 14, 14]),
            f32s(&[384]),
        ];
        let (_, out) = Node::infer(Op::Conv2d, &attrs, &inputs).unwrap();
        assert_eq!(out[0].shape, vec![1, 384, 16, 16]);
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
    fn rms_norm_takes_gamma_of_a_trailing_shape() {
        let x = f32s(&[2, 5, 4, 8]);
        for g in [&[8][..], &[4, 8], &[5, 4, 8], &[2, 5, 4, 8]] {
            let (node, out) = Node::infer(Op::RmsNorm, &Attrs::new(), &[x.clone(), f32s(g)])
                .unwrap_or_else(|e| panic!("{g:?}: {e}"));
            assert_eq!(node, Node::RmsNorm { eps: 1e-12 });
            assert_eq!(out[0], x);
        }
        for g in [&[][..], &[4], &[5, 8], &[1, 8], &[3, 2, 5, 4, 8]] {
            let err = Node::infer(Op::RmsNorm, &Attrs::new(), &[x.clone(), f32s(g)]).unwrap_err();
            assert!(err.to_string().contains("gamma"), "{g:?}: {err}");
        }
        for eps in [0.0, -1e-6, f64::INFINITY] {
            let attrs = Attrs::new().with("eps", AttrValue::Float(eps));
            assert!(Node::infer(Op::RmsNorm, &attrs, &[x.clone(), f32s(&[8])]).is_err());
        }
        let attrs = Attrs::new().with("eps", AttrValue::Float(1e-6));
        let (node, _) = Node::infer(Op::RmsNorm, &attrs, &[x.clone(), f32s(&[8])]).unwrap();
        assert_eq!(node, Node::RmsNorm { eps: 1e-6 });
        assert!(Node::infer(Op::RmsNorm, &Attrs::new(), &[f32s(&[]), f32s(&[])]).is_err());
    }

    #[test]
    fn reshape_infers_one_dimension() {
        let attrs = Attrs::new().with("shape", AttrValue::Ints(vec![-1, 384]));
        let (_, out) = Node::infer(Op::Reshape, &attrs, &[f32s(&[1, 384, 16, 16])]).unwrap();
        assert_eq!(out[0].shape, vec![256, 384]);
        let bad = Attrs::new().with("shape", AttrValue::Ints(vec![-1, 5]));
        assert!(Node::infer(Op::Reshape, &bad, &[f32s(&[4, 4])]).is_err());
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

#[cfg(test)]
mod sparse_tests {
    use super::*;
    use crate::AttrValue;

    fn spec(dtype: DType, shape: &[usize]) -> TensorSpec {
        TensorSpec::new(dtype, shape)
    }

    #[test]
    fn sparse_offsets_run_x_slowest_and_z_fastest() {
        assert_eq!(SPARSE_OFFSETS[0], [-1, -1, -1]);
        assert_eq!(SPARSE_OFFSETS[1], [-1, -1, 0]);
        assert_eq!(SPARSE_OFFSETS[3], [-1, 0, -1]);
        assert_eq!(SPARSE_OFFSETS[9], [0, -1, -1]);
        assert_eq!(SPARSE_OFFSETS[13], [0, 0, 0]);
        assert_eq!(SPARSE_OFFSETS[26], [1, 1, 1]);
    }

    #[test]
    fn sparse_conv3d_takes_feats_coords_and_a_27_offset_weight() {
        let (feats, coords) = (spec(DType::BF16, &[7, 8]), spec(DType::I32, &[7, 4]));
        let w = spec(DType::BF16, &[27, 8, 16]);
        let b = spec(DType::BF16, &[16]);
        let a = Attrs::new();
        let (node, out) = Node::infer(
            Op::SparseConv3d,
            &a,
            &[feats.clone(), coords.clone(), w.clone(), b],
        )
        .unwrap();
        assert_eq!(
            (node, out),
            (Node::SparseConv3d, vec![spec(DType::BF16, &[7, 16])])
        );
        let bad = [
            (
                vec![feats.clone(), spec(DType::I64, &[7, 4]), w.clone()],
                "coords [N, 4] int32",
            ),
            (
                vec![feats.clone(), spec(DType::I32, &[6, 4]), w.clone()],
                "coords [N, 4] int32",
            ),
            (
                vec![feats.clone(), spec(DType::I32, &[7, 3]), w.clone()],
                "coords [N, 4] int32",
            ),
            (
                vec![
                    feats.clone(),
                    coords.clone(),
                    spec(DType::BF16, &[8, 27, 16]),
                ],
                "w must be [27, Cin = 8, Cout]",
            ),
            (
                vec![
                    feats.clone(),
                    coords.clone(),
                    spec(DType::F32, &[27, 8, 16]),
                ],
                "inputs share one dtype",
            ),
            (
                vec![
                    feats.clone(),
                    coords.clone(),
                    w.clone(),
                    spec(DType::BF16, &[8]),
                ],
                "b must be [Cout = 16]",
            ),
            (
                vec![
                    spec(DType::I32, &[7, 8]),
                    coords.clone(),
                    spec(DType::I32, &[27, 8, 16]),
                ],
                "not defined for int32",
            ),
        ];
        for (inputs, want) in bad {
            let err = Node::infer(Op::SparseConv3d, &a, &inputs)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
    }

    #[test]
    fn sparse_downsample_kernels_need_their_parent_count() {
        let coords = [spec(DType::I32, &[10, 4])];
        let voxels = |m: i64| Attrs::new().with("voxels", AttrValue::Int(m));
        let (node, out) = Node::infer(Op::SparseDownsampleCoords, &voxels(4), &coords).unwrap();
        assert_eq!(
            (node, out),
            (
                Node::SparseDownsampleCoords { voxels: 4 },
                vec![spec(DType::I32, &[4, 4])]
            )
        );
        let (node, out) = Node::infer(Op::SparseDownsampleIndex, &voxels(4), &coords).unwrap();
        assert_eq!(
            (node, out),
            (
                Node::SparseDownsampleIndex { voxels: 4 },
                vec![spec(DType::I32, &[10])]
            )
        );
        for op in [Op::SparseDownsampleCoords, Op::SparseDownsampleIndex] {
            for (attrs, want) in [
                (Attrs::new(), "is required"),
                (voxels(11), "11 parents cannot come from 10 voxels"),
                (voxels(0), "0 parents"),
                (voxels(-1), "-1 parents"),
            ] {
                let err = Node::infer(op, &attrs, &coords).unwrap_err().to_string();
                assert!(err.contains(want), "{err}");
            }
            let err = Node::infer(op, &voxels(1), &[spec(DType::F32, &[10, 4])]).unwrap_err();
            assert!(err.to_string().contains("not defined for float32"), "{err}");
            let err = Node::infer(op, &voxels(1), &[spec(DType::I32, &[10, 3])]).unwrap_err();
            assert!(err.to_string().contains("coords [N, 4]"), "{err}");
            assert!(Node::infer(op, &voxels(0), &[spec(DType::I32, &[0, 4])]).is_ok());
        }
        let (_, out) = Node::infer(Op::SparseSubdivideCoords, &Attrs::new(), &coords).unwrap();
        assert_eq!(out, vec![spec(DType::I32, &[80, 4])]);
    }

    #[test]
    fn segment_mean_gather_and_repeat_take_rows() {
        let a = Attrs::new();
        let segments = |m: i64| Attrs::new().with("segments", AttrValue::Int(m));
        let (node, out) = Node::infer(
            Op::SegmentMean,
            &segments(3),
            &[spec(DType::BF16, &[9, 5]), spec(DType::I32, &[9])],
        )
        .unwrap();
        assert_eq!(
            (node, out),
            (
                Node::SegmentMean { segments: 3 },
                vec![spec(DType::BF16, &[3, 5])]
            )
        );
        for (attrs, ins, want) in [
            (
                segments(3),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[8])],
                "one segment per row",
            ),
            (
                segments(0),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[9])],
                "0 segments",
            ),
            (
                segments(-2),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[9])],
                "must be >= 0",
            ),
            (
                a.clone(),
                [spec(DType::F32, &[9, 5]), spec(DType::I32, &[9])],
                "is required",
            ),
            (
                segments(3),
                [spec(DType::I32, &[9, 5]), spec(DType::I32, &[9])],
                "not defined for int32",
            ),
            (
                segments(3),
                [spec(DType::F32, &[9, 5]), spec(DType::I64, &[9])],
                "index [N] int32",
            ),
        ] {
            let err = Node::infer(Op::SegmentMean, &attrs, &ins)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
        }
        let times = |t: i64| Attrs::new().with("times", AttrValue::Int(t));
        for dtype in DType::ALL {
            let (_, out) = Node::infer(
                Op::GatherRows,
                &a,
                &[spec(dtype, &[5, 3]), spec(DType::I32, &[9])],
            )
            .unwrap();
            assert_eq!(out, vec![spec(dtype, &[9, 3])]);
            let (node, out) =
                Node::infer(Op::RepeatRows, &times(8), &[spec(dtype, &[5, 3])]).unwrap();
            assert_eq!(
                (node, out),
                (Node::RepeatRows { times: 8 }, vec![spec(dtype, &[40, 3])])
            );
        }
        assert!(Op::GatherRows.moves_data() && Op::RepeatRows.moves_data());
        for t in [0, -1] {
            let err =
                Node::infer(Op::RepeatRows, &times(t), &[spec(DType::F32, &[5, 3])]).unwrap_err();
            assert!(err.to_string().contains("must be >= 1"), "{err}");
        }
        let err = Node::infer(
            Op::GatherRows,
            &a,
            &[spec(DType::F32, &[0, 3]), spec(DType::I32, &[2])],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("empty"), "{err}");
    }
}
