//! Reductions: 2-D pools (a thread per output, over window tables the host
//! computes from the catalog) and sums and means (the reduced axes copied
//! last, a block per row).

use super::{compact_strides, grid_for, int, ptr, row_grid, suffix, Arg, Call};
use crate::backend::Backend;
use vsdk_catalog::{Pool2d, PoolAxis, PoolKind, Reduce};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// One axis's windows: first index, tap count, step, and its share of an
/// average's divisor, 4 native-endian i32 per output.
fn windows(axis: &PoolAxis, include_pad: bool) -> Result<Vec<u8>, ProviderError> {
    let mut bytes = Vec::with_capacity(16 * axis.output());
    for o in 0..axis.output() {
        let w = axis.window(o);
        let share = if include_pad { w.padded } else { w.count };
        for v in [w.first, w.count, w.step, share] {
            bytes.extend(int::<i32>(v, "a pooling window")?.to_ne_bytes());
        }
    }
    Ok(bytes)
}

pub(super) fn pool2d<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    p: &Pool2d,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    if out.numel() == 0 {
        return Ok(());
    }
    let include_pad = matches!(
        p.kind,
        PoolKind::Avg {
            count_include_pad: true
        }
    );
    let rows = windows(&p.axes[0], include_pad)?;
    let cols = windows(&p.axes[1], include_pad)?;
    let xp = c.compact(x)?;
    let (rows, cols) = (c.upload(&rows)?, c.upload(&cols)?);
    let n = out.numel();
    let args = vec![
        Arg::Ptr(xp),
        Arg::Ptr(rows),
        Arg::Ptr(cols),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(x.shape[0] * x.shape[1], "the number of planes")?),
        Arg::I64(int(x.shape[2], "a plane's height")?),
        Arg::I64(int(x.shape[3], "a plane's width")?),
        Arg::I64(int(out.shape[2], "the output's height")?),
        Arg::I64(int(out.shape[3], "the output's width")?),
        Arg::I32(i32::from(p.kind == PoolKind::Max)),
    ];
    let kernel = format!("vips_pool2d_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(n), 0, args)
}

pub(super) fn reduce<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &Reduce,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let order: Vec<usize> = (0..x.shape.len())
        .filter(|a| !r.axes.contains(a))
        .chain(r.axes.iter().copied())
        .collect();
    let dims: Vec<usize> = order.iter().map(|&a| x.shape[a]).collect();
    let from: Vec<usize> = order.iter().map(|&a| x.strides[a]).collect();
    let len = r.terms(&x.shape);
    let rows = out.numel();
    let moved = c.temporary(rows * len * x.dtype.size_bytes())?;
    c.copy(x, ptr(x), &from, moved, &compact_strides(&dims), &dims)?;
    let divisor = if r.mean { len as f32 } else { 1.0 };
    let args = vec![
        Arg::Ptr(moved),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of rows")?),
        Arg::I64(int(len, "a row's length")?),
        Arg::F32(divisor),
    ];
    let kernel = format!("vips_reduce_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), 0, args)
}
