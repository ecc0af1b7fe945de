//! The mutants, a module per operator family (and `contract`, for the
//! calling contract), registered in one table, [`MUTANTS`]: which mutation
//! changes which kernel's calls, and how. Kernels computed here run on the
//! target's host memory, in float32 (rounded once to a 16-bit output dtype):
//!
//! - *legitimate variants*, which a correct error model must accept: sums in
//!   another order (reversed, pairwise, onto the bias), contracted with FMA, attention with a
//!   streaming (online) softmax, LayerNorm with float32 sums in sequence;
//! - *subtle bugs*, which it must refuse: LayerNorm with the unbiased (N − 1)
//!   variance, bicubic resize with a = −0.5, a GEMM whose every output is
//!   rounded up by one ulp, a GEMM on TF32 inputs (10-bit mantissas, what
//!   tensor cores do to float32 unless told not to), a GEMM 1 % off on one
//!   element, GELU by its tanh approximation, attention whose softmax sums
//!   in bfloat16, RMSNorm with eps 1e-2 added under the root, RMSNorm that
//!   ignores γ.

mod attention;
pub(crate) mod contract;
mod elementwise;
mod linear;
mod movement;
mod normalization;
mod raster;
mod resize;

use half::{bf16, f16};
use linear::Sum;
use normalization::RmsBug;
use raster::RasterVariant;
use std::ffi::CStr;
use vsdk_catalog::{DType, Node, Op};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{KernelCall, ProviderError, TensorArg};

/// A kernel the mutant computes itself.
pub(crate) type Kernel = fn(&KernelCall) -> Result<(), ProviderError>;

/// How a mutant changes the calls of its kernel.
pub(crate) enum Action {
    /// The call's attributes rewritten before the target runs it (`false`:
    /// left as they are). Unsafe: `keep.attrs` and the inputs are a valid
    /// call's.
    Rewrite(unsafe fn(&mut Rewrite, &[vsdk_tensor_t]) -> bool),
    /// Computed here instead of by the target (host-memory targets).
    Compute(Kernel),
    /// Computed here where the test holds, else by the target.
    ComputeIf(fn(&KernelCall) -> bool, Kernel),
    /// Computed here from the call as given, unchecked. Unsafe: a valid call
    /// on host memory.
    ComputeRaw(unsafe fn(&vsdk_kernel_call_t)),
    /// The target's output changed after it ran (host-memory targets).
    After(Kernel),
}

/// A mutation (`VSDK_MUTATION`), the kernel whose calls it changes, and how.
pub(crate) struct Mutant(&'static str, &'static str, Action);

/// Every operator's mutants, by family: the one table a new mutant is
/// registered in. A mutation of several kernels has a row for each.
pub(crate) static MUTANTS: &[Mutant] = &[
    // Data movement.
    Mutant(
        "crop_off_by_one",
        "vsdk.crop",
        Action::Rewrite(movement::crop_off_by_one),
    ),
    // Element-wise.
    Mutant(
        "gelu_tanh",
        "vsdk.gelu",
        Action::Compute(elementwise::gelu_tanh),
    ),
    Mutant(
        "cast_truncate",
        "vsdk.cast",
        Action::ComputeIf(elementwise::truncating, elementwise::cast_truncate),
    ),
    // Linear and convolution.
    Mutant(
        "sum_reversed",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::Reversed)),
    ),
    Mutant(
        "sum_pairwise",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::Pairwise)),
    ),
    Mutant(
        "sum_bias_first",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::BiasFirst)),
    ),
    Mutant(
        "fma",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::Fma)),
    ),
    Mutant(
        "gemm_round_up",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::RoundUp)),
    ),
    Mutant(
        "tf32",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::Tf32)),
    ),
    Mutant(
        "one_element",
        "vsdk.linear",
        Action::Compute(|c| linear::linear(c, Sum::OneElement)),
    ),
    Mutant(
        "patch_grid_flip",
        "vsdk.conv2d",
        Action::After(linear::flip_rows),
    ),
    // Normalisation.
    Mutant(
        "layer_norm_eps",
        "vsdk.layer_norm",
        Action::Rewrite(normalization::layer_norm_eps),
    ),
    Mutant(
        "layer_norm_unbiased",
        "vsdk.layer_norm",
        Action::Compute(normalization::layer_norm_unbiased),
    ),
    Mutant(
        "layer_norm_sequential",
        "vsdk.layer_norm",
        Action::Compute(normalization::layer_norm_sequential),
    ),
    Mutant(
        "layer_norm_one_pass",
        "vsdk.layer_norm",
        Action::Compute(normalization::layer_norm_one_pass),
    ),
    Mutant(
        "rms_norm_eps_added",
        "vsdk.rms_norm",
        Action::Compute(|c| normalization::rms_norm(c, RmsBug::EpsAdded)),
    ),
    Mutant(
        "rms_norm_no_gamma",
        "vsdk.rms_norm",
        Action::Compute(|c| normalization::rms_norm(c, RmsBug::NoGamma)),
    ),
    Mutant(
        "softmax_no_max",
        "vsdk.softmax",
        Action::Compute(normalization::softmax_no_max),
    ),
    // Attention.
    Mutant(
        "attention_scale",
        "vsdk.sdpa",
        Action::Rewrite(attention::attention_scale),
    ),
    Mutant(
        "online_softmax",
        "vsdk.sdpa",
        Action::Compute(attention::sdpa_online),
    ),
    Mutant(
        "softmax_bf16_sum",
        "vsdk.sdpa",
        Action::Compute(attention::sdpa_bf16_sum),
    ),
    Mutant(
        "softmax_no_max",
        "vsdk.sdpa",
        Action::Compute(attention::sdpa_no_max),
    ),
    // Resize.
    Mutant(
        "resize_size",
        "vsdk.resize_bicubic",
        Action::Rewrite(resize::size_from_factor),
    ),
    Mutant(
        "resize_antialias",
        "vsdk.resize_bicubic",
        Action::Rewrite(resize::antialias),
    ),
    Mutant(
        "resize_straight_alpha",
        "vsdk.resize_pil_bicubic",
        Action::Rewrite(resize::straight_alpha),
    ),
    Mutant(
        "resize_straight_alpha",
        "vsdk.resize_pil_lanczos",
        Action::Rewrite(resize::straight_alpha),
    ),
    Mutant(
        "resize_no_antialias",
        "vsdk.resize_pil_bicubic",
        Action::ComputeRaw(resize::resize_without_antialias),
    ),
    Mutant(
        "resize_cubic_a05",
        "vsdk.resize_bicubic",
        Action::Compute(resize::resize_a05),
    ),
    // Rasterization.
    Mutant(
        "raster_snapped",
        "vsdk.rasterize",
        Action::Compute(|c| raster::rasterize(c, RasterVariant::Snapped)),
    ),
    Mutant(
        "raster_rows_top_down",
        "vsdk.rasterize",
        Action::Compute(|c| raster::rasterize(c, RasterVariant::RowsTopDown)),
    ),
    Mutant(
        "raster_ids_from_zero",
        "vsdk.rasterize",
        Action::Compute(|c| raster::rasterize(c, RasterVariant::IdsFromZero)),
    ),
    Mutant(
        "raster_half_pixel",
        "vsdk.rasterize",
        Action::Compute(|c| raster::rasterize(c, RasterVariant::HalfPixel)),
    ),
    Mutant(
        "raster_cull_back",
        "vsdk.rasterize",
        Action::Compute(|c| raster::rasterize(c, RasterVariant::CullBack)),
    ),
    Mutant(
        "raster_uv_swapped",
        "vsdk.rasterize",
        Action::Compute(|c| raster::rasterize(c, RasterVariant::UvSwapped)),
    ),
];

/// What `mutation` does to the calls of `kernel`, if anything.
pub(crate) fn find(mutation: &str, kernel: &[u8]) -> Option<&'static Action> {
    MUTANTS
        .iter()
        .find(|m| m.0 == mutation && m.1.as_bytes() == kernel)
        .map(|m| &m.2)
}

/// Storage for rewritten attributes, alive for one call.
#[derive(Default)]
pub(crate) struct Rewrite {
    pub(crate) attrs: Vec<vsdk_attr_t>,
    pub(crate) ints: Vec<Vec<i64>>,
}

/// Copies the call's attributes into `keep`, then applies `action` when it
/// is a rewrite. Returns whether anything changed.
///
/// # Safety
/// `call` is a valid call per provider.h.
pub(crate) unsafe fn rewrite(
    action: Option<&Action>,
    call: &vsdk_kernel_call_t,
    keep: &mut Rewrite,
) -> bool {
    // SAFETY: per the contract.
    let (attrs, inputs) = unsafe {
        (
            if call.num_attrs == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(call.attrs, call.num_attrs as usize)
            },
            std::slice::from_raw_parts(call.inputs, call.num_inputs as usize),
        )
    };
    keep.attrs = attrs.to_vec();
    match action {
        // SAFETY: `keep.attrs` and `inputs` are the valid call's.
        Some(Action::Rewrite(f)) => unsafe { f(keep, inputs) },
        _ => false,
    }
}

/// Whether attribute `a` (a valid call's) is named `n`.
fn named(a: &vsdk_attr_t, n: &CStr) -> bool {
    // SAFETY (name reads): attribute names are NUL-terminated strings.
    (unsafe { CStr::from_ptr(a.name) }) == n
}

pub(super) fn read(t: &TensorArg) -> Result<Vec<f32>, ProviderError> {
    let n = t.numel();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; t.shape.len()];
    for _ in 0..n {
        let off: usize = idx.iter().zip(&t.strides).map(|(i, s)| i * s).sum();
        // SAFETY: the host's descriptor: every index within shape is inside
        // the buffer it allocated, in host memory (the target is the CPU provider).
        let v = unsafe {
            let p = t.ptr.add(off * t.dtype.size_bytes());
            match t.dtype {
                DType::F32 => p.cast::<f32>().read_unaligned(),
                DType::F16 => f16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                DType::BF16 => bf16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                d => {
                    return Err(ProviderError::invalid(format!(
                        "mutant kernels: {d} inputs"
                    )))
                }
            }
        };
        out.push(v);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < t.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// Writes a compact output (the host allocates outputs compact).
pub(super) fn write(t: &TensorArg, v: &[f32], round_up: bool) {
    for (i, &x) in v.iter().enumerate() {
        // SAFETY: a compact output of `v.len()` elements, in host memory.
        unsafe {
            let p = t.ptr.add(i * t.dtype.size_bytes());
            match t.dtype {
                DType::F16 => {
                    let h = f16::from_f32(x);
                    p.cast::<u16>().write_unaligned(if round_up {
                        up16(h.to_bits())
                    } else {
                        h.to_bits()
                    })
                }
                DType::BF16 => {
                    let h = bf16::from_f32(x);
                    p.cast::<u16>().write_unaligned(if round_up {
                        up16(h.to_bits())
                    } else {
                        h.to_bits()
                    })
                }
                _ => p
                    .cast::<f32>()
                    .write_unaligned(if round_up { x.next_up() } else { x }),
            }
        }
    }
}

/// The next 16-bit float toward +∞ (for finite values).
fn up16(bits: u16) -> u16 {
    match bits {
        0x8000 | 0x0000 => 1,
        b if b & 0x8000 != 0 => b - 1,
        b => b + 1,
    }
}

pub(super) fn resolved(call: &KernelCall, op: Op) -> Result<Node, ProviderError> {
    let specs: Vec<_> = call.inputs.iter().map(TensorArg::spec).collect();
    Node::infer(op, &call.attrs, &specs)
        .map(|(n, _)| n)
        .map_err(|e| ProviderError::invalid(e.to_string()))
}
