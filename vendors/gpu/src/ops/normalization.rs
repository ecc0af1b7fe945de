//! Normalisation over an axis (layer norm, RMS norm, softmax) and group norm:
//! a block per row, the blocks striding over the rows; batch norm, a thread
//! per element.

use super::{grid_for, int, ptr, row_grid, suffix, Arg, Call};
use crate::backend::Backend;
use vsdk_provider_kit::{ProviderError, TensorArg};

pub(super) fn layer_norm<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    axis: &usize,
    eps: &f64,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let x = c.compact(&ins[0])?;
    let (w, b) = (c.compact(&ins[1])?, c.compact(&ins[2])?);
    let len: usize = ins[0].shape[*axis..].iter().product();
    let rows = n / len;
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(w),
        Arg::Ptr(b),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of rows")?),
        Arg::I64(int(len, "a row's length")?),
        Arg::F32(*eps as f32),
    ];
    let kernel = format!("vips_layer_norm_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), 0, args)
}

pub(super) fn rms_norm<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    eps: &f64,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let (x, g) = (c.compact(&ins[0])?, c.compact(&ins[1])?);
    let len = ins[0].shape.last().copied().unwrap_or(1);
    let rows = n / len.max(1);
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(g),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of rows")?),
        Arg::I64(int(len, "a row's length")?),
        Arg::I64(int(ins[1].numel(), "gamma's length")?),
        // An eps below float32's normal range would flush to 0 and
        // make an all-zero row 0/0.
        Arg::F32((*eps as f32).max(f32::MIN_POSITIVE)),
    ];
    let kernel = format!("vips_rms_norm_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), 0, args)
}

pub(super) fn batch_norm<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    eps: &f64,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let mut args = Vec::with_capacity(9);
    for t in ins {
        args.push(Arg::Ptr(c.compact(t)?));
    }
    let channels = ins[0].shape[1];
    let inner: usize = ins[0].shape[2..].iter().product();
    args.extend([
        Arg::Ptr(ptr(out)),
        Arg::I64(int(n, "size")?),
        Arg::I64(int(channels, "the number of channels")?),
        Arg::I64(int(inner, "a channel's plane")?),
        // Below float32's normal range eps would flush to 0 (var 0: 0/0).
        Arg::F32((*eps as f32).max(f32::MIN_POSITIVE)),
    ]);
    let kernel = format!("vips_batch_norm_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(n), 0, args)
}

pub(super) fn softmax<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    axis: &usize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let x = c.compact(&ins[0])?;
    let len = ins[0].shape[*axis];
    let inner: usize = ins[0].shape[axis + 1..].iter().product();
    let rows = n / len;
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of rows")?),
        Arg::I64(int(len, "a row's length")?),
        Arg::I64(int(inner, "a row's stride")?),
    ];
    let kernel = format!("vips_softmax_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), 0, args)
}

/// Group norm on [N, C, ...]: a block per (sample, group) row of C / groups
/// channels times the spatial size, contiguous once `x` is compact.
pub(super) fn group_norm<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    groups: &usize,
    eps: &f64,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let x = c.compact(&ins[0])?;
    let (w, b) = (c.compact(&ins[1])?, c.compact(&ins[2])?);
    let shape = &ins[0].shape;
    let per_group = shape[1] / groups;
    let inner: usize = shape[2..].iter().product();
    let rows = shape[0] * groups;
    // eps may be 0 (the catalog allows it); a positive one below float32's
    // normal range would flush to 0 and make a constant group 0/0.
    let eps = if *eps > 0.0 {
        (*eps as f32).max(f32::MIN_POSITIVE)
    } else {
        0.0
    };
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(w),
        Arg::Ptr(b),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of rows")?),
        Arg::I64(int(*groups, "the number of groups")?),
        Arg::I64(int(per_group, "a group's channels")?),
        Arg::I64(int(inner, "a channel's plane")?),
        Arg::F32(eps),
    ];
    let kernel = format!("vips_group_norm_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), 0, args)
}
