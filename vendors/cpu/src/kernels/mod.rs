//! The kernels, over ndarray views of the host's buffers. Float kernels are
//! generic over [`Real`] (f32, f64); f16 and bf16 run through f32 and are
//! rounded once, at the operator's output.

mod attention;
mod cast;
mod elementwise;
mod matmul;
mod movement;
mod raster;
mod reduction;
pub mod resize;
mod scratch;
mod sparse;

pub use matmul::linear;

// Public only for the crate's tests (tests/it), which check these kernels
// numerically: the crate then compiles once for its tests instead of a
// second time under `cfg(test)` (50 compile-seconds of CI, docs/benchmarks.md).
// Not an interface: nothing else may use them.
#[doc(hidden)]
pub mod blocked16;
#[doc(hidden)]
pub mod fast_f32;
#[cfg(target_arch = "x86_64")]
#[doc(hidden)]
pub mod linear_bf16;
#[doc(hidden)]
pub mod narrow;
#[doc(hidden)]
pub mod norm;

use half::{bf16, f16};
use narrow::Narrow;
use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn, ShapeBuilder, Zip};
use vsdk_catalog::{DType, Node};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// A float type the kernels compute in.
pub trait Real:
    num_traits::Float + Send + Sync + 'static + std::fmt::Debug + std::iter::Sum + Default
{
    /// The reference type: kernels keep the plain definitions and an order
    /// of summation that does not depend on the machine's thread count.
    const PLAIN: bool;
    fn lit(v: f64) -> Self;
    fn wide(self) -> f64;
    /// The row kernels: vectorised for f32, the plain definitions for the
    /// float64 reference (whose results golden files hold).
    fn gelu(x: &[Self], out: &mut [Self]);
    fn unary(f: elementwise::Unary, x: &[Self], out: &mut [Self]);
    fn softmax_row(row: &mut [Self]);
    fn layer_norm_row(row: &[Self], w: &[Self], b: &[Self], eps: f64, out: &mut [Self]);
    /// `gemm`'s kernel for this type, chosen for the machine's instruction set.
    fn gemm_fn() -> matmul::GemmFn<Self>;
}

impl Real for f32 {
    const PLAIN: bool = false;
    fn lit(v: f64) -> Self {
        v as f32
    }
    fn wide(self) -> f64 {
        f64::from(self)
    }
    fn gelu(x: &[Self], out: &mut [Self]) {
        fast_f32::gelu(x, out)
    }
    fn unary(f: elementwise::Unary, x: &[Self], out: &mut [Self]) {
        fast_f32::unary(f, x, out)
    }
    fn softmax_row(row: &mut [Self]) {
        fast_f32::softmax_row(row)
    }
    fn layer_norm_row(row: &[Self], w: &[Self], b: &[Self], eps: f64, out: &mut [Self]) {
        fast_f32::layer_norm_row(row, w, b, eps, out)
    }
    fn gemm_fn() -> matmul::GemmFn<Self> {
        gemm_f32::gemm::f32::get_gemm_fn()
    }
}

impl Real for f64 {
    const PLAIN: bool = true;
    fn lit(v: f64) -> Self {
        v
    }
    fn wide(self) -> f64 {
        self
    }
    fn gelu(x: &[Self], out: &mut [Self]) {
        elementwise::gelu_f64(x, out)
    }
    fn unary(f: elementwise::Unary, x: &[Self], out: &mut [Self]) {
        elementwise::unary_f64(f, x, out)
    }
    fn softmax_row(row: &mut [Self]) {
        norm::softmax_row_plain(row)
    }
    fn layer_norm_row(row: &[Self], w: &[Self], b: &[Self], eps: f64, out: &mut [Self]) {
        norm::layer_norm_row_plain(row, w, b, eps, out)
    }
    fn gemm_fn() -> matmul::GemmFn<Self> {
        gemm_f64::gemm::f64::get_gemm_fn()
    }
}

/// # Safety
/// `t` describes live memory of its dtype (checked by the caller against the
/// provider's allocations), which `T` matches in size and alignment, and which
/// is not written while the view lives.
unsafe fn view<'a, T>(t: &TensorArg) -> ArrayViewD<'a, T> {
    let shape = IxDyn(&t.shape).strides(IxDyn(&t.strides));
    // SAFETY: per the contract above.
    unsafe { ArrayViewD::from_shape_ptr(shape, t.ptr.cast::<T>().cast_const()) }
}

/// # Safety
/// As [`view`], and the tensor is compact and aliased by no other view.
unsafe fn view_mut<'a, T>(t: &TensorArg) -> ArrayViewMutD<'a, T> {
    let shape = IxDyn(&t.shape).strides(IxDyn(&t.strides));
    // SAFETY: per the contract above.
    unsafe { ArrayViewMutD::from_shape_ptr(shape, t.ptr.cast::<T>()) }
}

/// Runs a checked node. The caller has validated the call against the catalog
/// (dtypes, shapes, compact outputs) and every tensor against live buffers;
/// inputs and outputs never overlap (ABI rule).
pub fn run(node: &Node, inputs: &[TensorArg], outputs: &[TensorArg]) -> Result<(), ProviderError> {
    let out = &outputs[0];
    // An empty output has nothing to compute, and its other extents may be
    // huge (the catalog bounds bytes, not extents): no per-axis table or
    // batch loop is built for it. Sparse and raster nodes check their
    // coordinates and triangles even then (as the GPU providers do).
    let checks_indices = matches!(
        node,
        Node::SparseConv3d
            | Node::SparseDownsampleCoords { .. }
            | Node::SparseDownsampleIndex { .. }
            | Node::SegmentMean { .. }
            | Node::GatherRows
            | Node::RepeatRows { .. }
            | Node::SparseSubdivideCoords
            | Node::Rasterize { .. }
            | Node::Interpolate
    );
    if out.numel() == 0 && !checks_indices {
        return Ok(());
    }
    // SAFETY (every view below): the caller's checks give the `view` contract;
    // the output is compact and distinct from every input.
    unsafe {
        match node {
            Node::Crop(_)
            | Node::Pad(_)
            | Node::Concat { .. }
            | Node::Reshape
            | Node::Permute { .. } => movement::run(node, inputs, out),
            Node::Cast(_) => cast::run(&inputs[0], out),
            Node::SparseConv3d
            | Node::SparseDownsampleCoords { .. }
            | Node::SparseDownsampleIndex { .. }
            | Node::SegmentMean { .. }
            | Node::GatherRows
            | Node::RepeatRows { .. }
            | Node::SparseSubdivideCoords => sparse::run(node, inputs, out),
            Node::Rasterize { height, width } => raster::rasterize(inputs, (*height, *width), out),
            Node::Interpolate => raster::interpolate(inputs, out),
            Node::ResizePil(r) => {
                resize::pil_u8(view::<u8>(&inputs[0]), view_mut::<u8>(out), r);
                Ok(())
            }
            _ => match out.dtype {
                DType::F32 => float_node::<f32>(node, &views(inputs), view_mut(out)),
                DType::F64 => float_node::<f64>(node, &views(inputs), view_mut(out)),
                DType::F16 => via_f32::<f16>(node, inputs, out),
                #[cfg(target_arch = "x86_64")]
                DType::BF16 if *node == Node::Linear && linear_bf16::available() => {
                    let ins = views::<bf16>(inputs);
                    if linear_bf16::exact_on(&ins) {
                        linear_bf16::linear(&ins[0], &ins[1], ins.get(2), view_mut(out));
                        Ok(())
                    } else {
                        via_f32::<bf16>(node, inputs, out)
                    }
                }
                DType::BF16 => via_f32::<bf16>(node, inputs, out),
                d => Err(ProviderError::unsupported(format!("{node:?} on {d}"))),
            },
        }
    }
}

/// # Safety
/// As [`view`] for every tensor.
unsafe fn views<'a, T>(ts: &[TensorArg]) -> Vec<ArrayViewD<'a, T>> {
    // SAFETY: forwarded.
    ts.iter().map(|t| unsafe { view(t) }).collect()
}

/// # Safety
/// As [`run`].
unsafe fn via_f32<N: Narrow>(
    node: &Node,
    inputs: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    {
        // SAFETY: forwarded.
        let (ins, mut o) = unsafe { (views::<N>(inputs), view_mut::<N>(out)) };
        if blocked16::run(node, &ins, &mut o).is_some() {
            return Ok(());
        }
    }
    let mut buffers = Vec::with_capacity(inputs.len() + 1);
    for t in inputs {
        // SAFETY: forwarded.
        let narrow = unsafe { view::<N>(t) };
        let mut wide = scratch::take(narrow.len());
        let dst = &mut wide[..narrow.len()];
        match narrow.as_slice() {
            Some(src) => narrow::widen_par(src, dst),
            None => Zip::from(
                ArrayViewMutD::from_shape(narrow.raw_dim(), dst).expect("sized to the view"),
            )
            .and(&narrow)
            .par_for_each(|w, &v| *w = v.widen()),
        }
        buffers.push(wide);
    }
    let n = out.shape.iter().product::<usize>();
    let mut result = scratch::take(n);
    let computed = {
        let views: Vec<ArrayViewD<f32>> = inputs
            .iter()
            .zip(&buffers)
            .map(|(t, b)| {
                ArrayViewD::from_shape(t.shape.clone(), &b[..t.shape.iter().product::<usize>()])
                    .expect("sized to the shape")
            })
            .collect();
        let out_view = ArrayViewMutD::from_shape(out.shape.clone(), &mut result[..n])
            .expect("sized to the shape");
        float_node(node, &views, out_view)
    };
    if computed.is_ok() {
        // SAFETY: forwarded.
        let mut out = unsafe { view_mut::<N>(out) };
        narrow::narrow_par(
            &result[..n],
            out.as_slice_mut().expect("outputs are compact"),
        );
    }
    buffers.into_iter().chain([result]).for_each(scratch::give);
    computed
}

fn float_node<T: Real>(
    node: &Node,
    ins: &[ArrayViewD<T>],
    out: ArrayViewMutD<T>,
) -> Result<(), ProviderError> {
    match node {
        Node::Add => elementwise::binary(&ins[0], &ins[1], out, |a, b| a + b),
        Node::Sub => elementwise::binary(&ins[0], &ins[1], out, |a, b| a - b),
        Node::Mul => elementwise::binary(&ins[0], &ins[1], out, |a, b| a * b),
        Node::Div => elementwise::binary(&ins[0], &ins[1], out, |a, b| a / b),
        Node::Gelu => elementwise::gelu(&ins[0], out),
        &Node::Unary(f) => elementwise::unary(f, &ins[0], out),
        Node::Linear => matmul::linear(&ins[0], &ins[1], ins.get(2), out),
        Node::Conv2d(c) => matmul::conv2d(&ins[0], &ins[1], ins.get(2), c, out),
        Node::LayerNorm { axis, eps } => {
            norm::layer_norm(&ins[0], &ins[1], &ins[2], *axis, *eps, out)
        }
        Node::RmsNorm { eps } => norm::rms_norm(&ins[0], &ins[1], *eps, out),
        Node::BatchNorm { eps } => norm::batch_norm(ins, *eps, out),
        Node::Softmax { axis } => norm::softmax(&ins[0], *axis, out),
        Node::Sdpa(s) => attention::sdpa(ins, s, out),
        Node::Rotary(r) => attention::rotary(ins, r, out),
        Node::ResizeBicubic(r) => resize::bicubic(&ins[0], r, out),
        Node::ResizeBilinear(b) => resize::bilinear(&ins[0], b, out),
        Node::ResizeNearest(n) => resize::nearest(&ins[0], n, out),
        Node::GroupNorm { groups, eps } => norm::group_norm(ins, *groups, *eps, out),
        Node::Matmul => matmul::matmul(&ins[0], &ins[1], out),
        Node::Pool2d(p) => reduction::pool2d(&ins[0], p, out),
        Node::Reduce(r) => reduction::reduce(&ins[0], r, out),
        other => {
            return Err(ProviderError::internal(format!(
                "{other:?} reached the float path"
            )))
        }
    }
    Ok(())
}
