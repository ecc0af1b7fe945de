//! Data movement (crop, reshape, permute, concat) as strided copies: one
//! `vips_copy_<bytes>` launch per input, nothing computed; pad as one
//! `vips_pad_<bytes>` launch.

use super::{compact_strides, grid_for, int, ptr, strides, Arg, Call};
use crate::backend::Backend;
use vsdk_catalog::{Crop, Pad, PadMode};
use vsdk_provider_kit::{ProviderError, TensorArg};

pub(super) fn crop<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    crop: &Crop,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let out_strides = compact_strides(&out.shape);
    let x = &ins[0];
    let offset: usize = crop
        .offsets
        .iter()
        .zip(&x.strides)
        .map(|(o, s)| o * s)
        .sum();
    let src = ptr(x) + (offset * x.dtype.size_bytes()) as u64;
    // Every steps[d]-th element: the source's strides scaled (an axis of
    // one element is never stepped, whatever its step: no overflow).
    let strides: Vec<usize> = x
        .strides
        .iter()
        .zip(&crop.steps)
        .zip(&crop.sizes)
        .map(|((&s, &k), &n)| if n > 1 { s * k } else { s })
        .collect();
    c.copy(x, src, &strides, ptr(out), &out_strides, &out.shape)
}

pub(super) fn reshape<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let x = &ins[0];
    c.copy(
        x,
        ptr(x),
        &x.strides,
        ptr(out),
        &compact_strides(&x.shape),
        &x.shape,
    )
}

pub(super) fn permute<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    perm: &[usize],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let out_strides = compact_strides(&out.shape);
    let x = &ins[0];
    let a: Vec<usize> = perm.iter().map(|&p| x.strides[p]).collect();
    c.copy(x, ptr(x), &a, ptr(out), &out_strides, &out.shape)
}

pub(super) fn concat<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    axis: &usize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let out_strides = compact_strides(&out.shape);
    let mut along = 0;
    for x in ins {
        let dst = ptr(out) + (along * out_strides[*axis] * out.dtype.size_bytes()) as u64;
        c.copy(x, ptr(x), &x.strides, dst, &out_strides, &x.shape)?;
        along += x.shape[*axis];
    }
    Ok(())
}

pub(super) fn pad<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    pad: &Pad,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    if n == 0 {
        return Ok(());
    }
    let x = &ins[0];
    let mode = match pad.mode {
        PadMode::Constant => 0,
        PadMode::Reflect => 1,
        PadMode::Replicate => 2,
        PadMode::Circular => 3,
    };
    let args = vec![
        Arg::Ptr(ptr(x)),
        Arg::Ptr(ptr(out)),
        Arg::Strides(strides(
            &out.shape,
            &x.strides,
            &compact_strides(&out.shape),
        )?),
        // The input's extents and the pads before: `b` unused.
        Arg::Strides(strides(&x.shape, &pad.begin, &vec![0; x.shape.len()])?),
        Arg::I32(mode),
        Arg::I64(pad.fill_bits(out.dtype) as i64),
        Arg::I64(int(n, "an element count")?),
    ];
    c.launch(
        &format!("vips_pad_{}", x.dtype.size_bytes()),
        grid_for(n),
        0,
        args,
    )
}
