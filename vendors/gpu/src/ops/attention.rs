//! Scaled dot-product attention: a block per query row, its scores in
//! dynamic shared memory; a mask is first broadcast to the logits' shape.

use super::{compact_strides, grid_for, int, ptr, row_grid, suffix, Arg, Call, SHARED_BYTES};
use crate::backend::Backend;
use vsdk_catalog::{Rotary, Sdpa};
use vsdk_provider_kit::{ProviderError, TensorArg};

pub(super) fn sdpa<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    s: &Sdpa,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (q, k, v) = (&ins[0], &ins[1], &ins[2]);
    let r = q.shape.len();
    let (lq, d, lk, dv) = (
        q.shape[r - 2],
        q.shape[r - 1],
        k.shape[r - 2],
        v.shape[r - 1],
    );
    let shared = lk * 4;
    if shared > SHARED_BYTES - 1024 {
        return Err(ProviderError::unsupported(format!(
            "vsdk.sdpa: {lk} keys need {shared} bytes of shared memory for a query's scores"
        )));
    }
    let rows: usize = q.shape[..r - 1].iter().product();
    int::<i32>(rows / lq.max(1), "the query batch")?;
    // The mask broadcast to the logits [..., Lq, Lk], compact (stride 0 along
    // its broadcast axes).
    let mask = match ins.get(3) {
        None => 0,
        Some(m) => {
            let mut logits = q.shape.clone();
            logits[r - 1] = lk;
            let lead = r - m.shape.len();
            let from: Vec<usize> = (0..r)
                .map(|a| match a.checked_sub(lead) {
                    Some(i) if m.shape[i] != 1 => m.strides[i],
                    _ => 0,
                })
                .collect();
            let dst = c.temporary(rows * lk * m.dtype.size_bytes())?;
            c.copy(m, ptr(m), &from, dst, &compact_strides(&logits), &logits)?;
            dst
        }
    };
    let causal = match s.causal_offset {
        None => -1,
        // Past Lk − 1 every key is seen: clamped, so that i + offset fits the kernel's int.
        Some(o) => int(o.min(lk), "the causal offset")?,
    };
    let args = vec![
        Arg::Ptr(c.compact(q)?),
        Arg::Ptr(c.compact(k)?),
        Arg::Ptr(c.compact(v)?),
        Arg::Ptr(mask),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of query rows")?),
        Arg::I32(int(lq, "Lq")?),
        Arg::I32(int(lk, "Lk")?),
        Arg::I32(int(d, "D")?),
        Arg::I32(int(dv, "Dv")?),
        Arg::F32(s.scale as f32),
        Arg::I32(int(s.heads.0, "the query heads")?),
        Arg::I32(int(s.heads.1, "the key/value heads")?),
        Arg::I32(int(s.heads.0 / s.heads.1.max(1), "the heads per group")?),
        Arg::I32(causal),
    ];
    let kernel = format!("vips_sdpa_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), shared as u32, args)
}

pub(super) fn rotary<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    r: &Rotary,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let x = &ins[0];
    let rank = x.shape.len();
    let n = out.numel();
    let args = vec![
        Arg::Ptr(c.compact(x)?),
        Arg::Ptr(c.compact(&ins[1])?),
        Arg::Ptr(c.compact(&ins[2])?),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(n, "size")?),
        Arg::I64(int(x.shape[rank - 2], "L")?),
        Arg::I64(int(x.shape[rank - 1].max(1), "D")?),
        Arg::I64(int(r.dims / 2, "the pairs")?),
        Arg::I32(i32::from(r.interleaved)),
    ];
    let kernel = format!("vips_rotary_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(n), 0, args)
}
