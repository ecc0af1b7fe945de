//! Data movement (crop, reshape, permute, concat) as strided copies: one
//! `vips_copy_<bytes>` launch per input, nothing computed.

use super::{compact_strides, ptr, Call};
use crate::backend::Backend;
use vsdk_catalog::Crop;
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
