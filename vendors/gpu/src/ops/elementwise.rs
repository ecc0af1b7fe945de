//! Element-wise operators (cast, the binary operators with broadcasting,
//! the activations): grid-stride launches, one thread per element.

use super::{grid_for, int, ptr, strides, suffix, Arg, Call};
use crate::backend::Backend;
use vsdk_catalog::{DType, Node, Unary};
use vsdk_provider_kit::{ProviderError, TensorArg};

pub(super) fn cast<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    to: &DType,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    // int32 only to the float types (sparse coordinates as numbers).
    let from = match ins[0].dtype {
        DType::I32 if *to != DType::U8 => "i32",
        d => suffix(d)?,
    };
    let x = c.compact(&ins[0])?;
    let kernel = format!("vips_cast_{from}_{}", suffix(*to)?);
    let args = vec![Arg::Ptr(x), Arg::Ptr(ptr(out)), Arg::I64(int(n, "size")?)];
    c.launch(&kernel, grid_for(n), 0, args)
}

pub(super) fn binary<B: Backend>(
    c: &mut Call<B>,
    node: &Node,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let op = match node {
        Node::Add => 0,
        Node::Sub => 1,
        Node::Mul => 2,
        _ => 3,
    };
    let broadcast = |t: &TensorArg| -> Vec<usize> {
        let lead = out.shape.len() - t.shape.len();
        (0..out.shape.len())
            .map(|d| match d.checked_sub(lead) {
                Some(i) if t.shape[i] != 1 => t.strides[i],
                _ => 0,
            })
            .collect()
    };
    let s = strides(&out.shape, &broadcast(&ins[0]), &broadcast(&ins[1]))?;
    let args = vec![
        Arg::Ptr(ptr(&ins[0])),
        Arg::Ptr(ptr(&ins[1])),
        Arg::Ptr(ptr(out)),
        Arg::Strides(s),
        Arg::I64(int(n, "size")?),
        Arg::I32(op),
    ];
    c.launch(
        &format!("vips_binary_{}", suffix(out.dtype)?),
        grid_for(n),
        0,
        args,
    )
}

pub(super) fn gelu<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let x = c.compact(&ins[0])?;
    let args = vec![Arg::Ptr(x), Arg::Ptr(ptr(out)), Arg::I64(int(n, "size")?)];
    c.launch(
        &format!("vips_gelu_{}", suffix(out.dtype)?),
        grid_for(n),
        0,
        args,
    )
}

pub(super) fn unary<B: Backend>(
    c: &mut Call<B>,
    f: Unary,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    // The source's `vips_unary` op codes; clamp's bounds in float32, where
    // the kernel compares (∓∞ stay infinite).
    let (mut lo, mut hi) = (0.0, 0.0);
    let op = match f {
        Unary::Silu => 0,
        Unary::GeluTanh => 1,
        Unary::Sin => 2,
        Unary::Cos => 3,
        Unary::Relu => 4,
        Unary::Clamp { min, max } => {
            (lo, hi) = (min as f32, max as f32);
            5
        }
        Unary::Sigmoid => 6,
        Unary::Tanh => 7,
        Unary::Exp => 8,
        Unary::Sqrt => 9,
        Unary::Rsqrt => 10,
        Unary::HardSwish => 11,
        Unary::HardSigmoid => 12,
    };
    let x = c.compact(&ins[0])?;
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(n, "size")?),
        Arg::I32(op),
        Arg::F32(lo),
        Arg::F32(hi),
    ];
    c.launch(
        &format!("vips_unary_{}", suffix(out.dtype)?),
        grid_for(n),
        0,
        args,
    )
}
