//! Linear layers and convolution: the backend's GEMM where it has one, else
//! the tiled `vips_linear` kernel; `vips_matmul`, batched with broadcast batch
//! axes, reading its operands through their strides; `vips_conv2d`, one
//! output per thread.

use super::{grid_for, int, ptr, strides, suffix, Arg, Call, MAX_GRID, TILE};
use crate::backend::{Backend, Gemm, GemmType};
use vsdk_catalog::{Conv2d, DType};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// `VipsConv`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Conv {
    n: i32,
    c: i32,
    h: i32,
    w: i32,
    oc: i32,
    oh: i32,
    ow: i32,
    kh: i32,
    kw: i32,
    stride_h: i32,
    stride_w: i32,
    pad_top: i32,
    pad_left: i32,
    dil_h: i32,
    dil_w: i32,
    groups: i32,
}

pub(super) fn linear<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (x, w) = (c.compact(&ins[0])?, c.compact(&ins[1])?);
    let bias = ins.get(2).map(|b| c.compact(b)).transpose()?;
    let (n, k) = (ins[1].shape[0], ins[1].shape[1]);
    let m = out.numel() / n;
    let dtype = match out.dtype {
        DType::F16 => GemmType::F16,
        DType::BF16 => GemmType::BF16,
        _ => GemmType::F32,
    };
    let gemm = Gemm {
        dtype,
        x,
        w,
        bias,
        out: ptr(out),
        m,
        n,
        k,
    };
    if let Some(done) = c.backend.gemm(&gemm) {
        return done;
    }
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(w),
        Arg::Ptr(bias.unwrap_or(0)),
        Arg::Ptr(ptr(out)),
        Arg::I32(int(m, "M")?),
        Arg::I32(int(n, "N")?),
        Arg::I32(int(k, "K")?),
    ];
    let row_tiles = m.div_ceil(TILE);
    if row_tiles as u64 > MAX_GRID {
        return Err(ProviderError::unsupported(format!(
            "vsdk.linear: {m} rows exceed the tiled kernel's grid"
        )));
    }
    let grid = [int(n.div_ceil(TILE), "N / 64")?, row_tiles as u32, 1];
    c.launch(
        &format!("vips_linear_{}", suffix(out.dtype)?),
        grid,
        0,
        args,
    )
}

/// `VIPS_MM_TILE`: the matmul kernel's output tile.
const MM_TILE: usize = 16;

/// `a [..., M, K] @ b [..., K, N]`, the batch axes broadcast: the operands
/// read in place (any view) through their strides, 0 over a batch axis that
/// an operand lacks or holds once, so a broadcast matrix repeats.
pub(super) fn matmul<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (a, b) = (&ins[0], &ins[1]);
    let (ra, rb, r) = (a.shape.len(), b.shape.len(), out.shape.len());
    let (m, k, n) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    let batch_dims = &out.shape[..r - 2];
    // An operand's element strides over the output's batch axes (aligned at
    // the right).
    let over = |t: &TensorArg| -> Vec<usize> {
        let rt = t.shape.len();
        (0..r - 2)
            .map(|d| match (d + rt).checked_sub(r) {
                Some(td) if t.shape[td] != 1 => t.strides[td],
                _ => 0,
            })
            .collect()
    };
    // The kernel counts tiles in `int` (`m + VIPS_MM_TILE − 1`): room for a tile more.
    int::<i32>(m.max(n) + MM_TILE, "M or N (with a tile to spare)")?;
    let batch = strides(batch_dims, &over(a), &over(b))?;
    let batches: usize = batch_dims.iter().product();
    let stride = |t: &TensorArg, d: usize| int::<i64>(t.strides[d], "a matrix stride");
    let args = vec![
        Arg::Ptr(ptr(a)),
        Arg::Ptr(ptr(b)),
        Arg::Ptr(ptr(out)),
        Arg::Strides(batch),
        Arg::I64(int(batches, "the number of matrices")?),
        Arg::I32(int(m, "M")?),
        Arg::I32(int(n, "N")?),
        Arg::I32(int(k, "K")?),
        Arg::I64(stride(a, ra - 2)?),
        Arg::I64(stride(a, ra - 1)?),
        Arg::I64(stride(b, rb - 2)?),
        Arg::I64(stride(b, rb - 1)?),
    ];
    // The kernel's blocks stride over tiles and matrices beyond the grid.
    let cap = |v: usize| v.clamp(1, MAX_GRID as usize) as u32;
    let grid = [
        cap(n.div_ceil(MM_TILE)),
        cap(m.div_ceil(MM_TILE)),
        cap(batches),
    ];
    c.launch(
        &format!("vips_matmul_{}", suffix(out.dtype)?),
        grid,
        0,
        args,
    )
}

pub(super) fn conv2d<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    conv: &Conv2d,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (xs, ws) = (&ins[0].shape, &ins[1].shape);
    let os = &out.shape;
    let i = |v: usize| int::<i32>(v, "a conv2d size");
    let p = Conv {
        n: i(xs[0])?,
        c: i(xs[1])?,
        h: i(xs[2])?,
        w: i(xs[3])?,
        oc: i(os[1])?,
        oh: i(os[2])?,
        ow: i(os[3])?,
        kh: i(ws[2])?,
        kw: i(ws[3])?,
        stride_h: i(conv.strides[0])?,
        stride_w: i(conv.strides[1])?,
        pad_top: i(conv.pads[0])?,
        pad_left: i(conv.pads[1])?,
        dil_h: i(conv.dilations[0])?,
        dil_w: i(conv.dilations[1])?,
        groups: i(conv.groups)?,
    };
    let args = vec![
        Arg::Ptr(c.compact(&ins[0])?),
        Arg::Ptr(c.compact(&ins[1])?),
        Arg::Ptr(ins.get(2).map(|b| c.compact(b)).transpose()?.unwrap_or(0)),
        Arg::Ptr(ptr(out)),
        Arg::Conv(p),
    ];
    let kernel = format!("vips_conv2d_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(out.numel()), 0, args)
}
