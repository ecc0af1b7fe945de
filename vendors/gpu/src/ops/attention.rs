//! Scaled dot-product attention: a block per query row, its scores in
//! dynamic shared memory.

use super::{int, ptr, row_grid, suffix, Arg, Call, SHARED_BYTES};
use crate::backend::Backend;
use vsdk_catalog::Sdpa;
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
    let args = vec![
        Arg::Ptr(c.compact(q)?),
        Arg::Ptr(c.compact(k)?),
        Arg::Ptr(c.compact(v)?),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(rows, "the number of query rows")?),
        Arg::I32(int(lq, "Lq")?),
        Arg::I32(int(lk, "Lk")?),
        Arg::I32(int(d, "D")?),
        Arg::I32(int(dv, "Dv")?),
        Arg::F32(s.scale as f32),
    ];
    let kernel = format!("vips_sdpa_{}", suffix(out.dtype)?);
    c.launch(&kernel, row_grid(rows), shared as u32, args)
}
