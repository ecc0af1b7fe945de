//! `vsdk.rasterize` and `vsdk.interpolate` (docs/operators.md,
//! "Rasterization"): the catalog's float64 geometry (`vsdk_catalog::raster`)
//! over every pixel centre of each triangle's box, rows in bands across
//! threads; at float32 the positions are widened and the same float64 edge
//! functions decide coverage, so this provider's triangle ids are the
//! reference's. Interpolation in float64, rounded once. Outputs are written
//! a band or a row at a time: no float64 copy of a whole raster.

use super::view;
use half::{bf16, f16};
use ndarray::ArrayViewD;
use rayon::prelude::*;
use vsdk_catalog::raster;
use vsdk_catalog::rounding::{bf16_from_f64, f16_from_f64};
use vsdk_catalog::DType;
use vsdk_provider_kit::{ProviderError, TensorArg};

/// Rows per band of work.
const BAND: usize = 16;

/// The most (triangle, band) pairs the rasterizer lists: a scene of huge
/// triangles on a tall raster is refused rather than listed in gigabytes.
const MAX_BINNED: usize = 1 << 26;

/// A float tensor's values in logical order, widened.
///
/// # Safety
/// As `kernels::view`.
unsafe fn wide(t: &TensorArg) -> Result<Vec<f64>, ProviderError> {
    // SAFETY (each arm): forwarded; the arm's type is the tensor's dtype.
    unsafe {
        Ok(match t.dtype {
            DType::F64 => view::<f64>(t).iter().copied().collect(),
            DType::F32 => view::<f32>(t).iter().map(|&v| f64::from(v)).collect(),
            DType::F16 => view::<f16>(t).iter().map(|v| v.to_f64()).collect(),
            DType::BF16 => view::<bf16>(t).iter().map(|v| v.to_f64()).collect(),
            d => {
                return Err(ProviderError::internal(format!(
                    "{d} reached the raster kernels"
                )))
            }
        })
    }
}

/// The triangles, every index checked against `vertices`.
///
/// # Safety
/// As `kernels::view` (int32 `[F, 3]`).
unsafe fn triangles(t: &TensorArg, vertices: usize) -> Result<Vec<[usize; 3]>, ProviderError> {
    // SAFETY: forwarded.
    let tri: ArrayViewD<i32> = unsafe { view(t) };
    raster::triangles(tri.iter().map(|&i| i64::from(i)), vertices).map_err(ProviderError::invalid)
}

/// The compact output `out` of `n` elements, filled `chunk` elements at a
/// time (in parallel) by `f(chunk index, float64 values)`, each value
/// rounded once to the output's dtype.
///
/// # Safety
/// `out` is compact, of `n` elements of its dtype, written by no one else.
unsafe fn fill(
    out: &TensorArg,
    n: usize,
    chunk: usize,
    f: impl Fn(usize, &mut [f64]) -> Result<(), ProviderError> + Sync,
) -> Result<(), ProviderError> {
    fn typed<T: Send>(
        dst: &mut [T],
        chunk: usize,
        round: impl Fn(f64) -> T + Sync,
        f: &(impl Fn(usize, &mut [f64]) -> Result<(), ProviderError> + Sync),
    ) -> Result<(), ProviderError> {
        dst.par_chunks_mut(chunk.max(1))
            .enumerate()
            .try_for_each(|(i, d)| {
                let mut v = vec![0.0; d.len()];
                f(i, &mut v)?;
                d.iter_mut().zip(v).for_each(|(d, v)| *d = round(v));
                Ok(())
            })
    }
    // SAFETY (each arm): per the contract, the element type is the dtype's.
    unsafe {
        match out.dtype {
            DType::F64 => typed(
                std::slice::from_raw_parts_mut(out.ptr.cast::<f64>(), n),
                chunk,
                |v| v,
                &f,
            ),
            DType::F32 => typed(
                std::slice::from_raw_parts_mut(out.ptr.cast::<f32>(), n),
                chunk,
                |v| v as f32,
                &f,
            ),
            DType::F16 => typed(
                std::slice::from_raw_parts_mut(out.ptr.cast::<f16>(), n),
                chunk,
                f16_from_f64,
                &f,
            ),
            DType::BF16 => typed(
                std::slice::from_raw_parts_mut(out.ptr.cast::<bf16>(), n),
                chunk,
                bf16_from_f64,
                &f,
            ),
            d => Err(ProviderError::internal(format!(
                "{d} output of a raster kernel"
            ))),
        }
    }
}

/// # Safety
/// As `kernels::run`.
pub unsafe fn rasterize(
    inputs: &[TensorArg],
    (height, width): (usize, usize),
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (batch, vertices) = (inputs[0].shape[0], inputs[0].shape[1]);
    // SAFETY: forwarded (pos is float32 or float64, tri int32).
    let (pos, tris) = unsafe { (wide(&inputs[0])?, triangles(&inputs[1], vertices)?) };
    let bands = height.div_ceil(BAND);
    // Each batch entry's triangles, and the ones whose box reaches each band.
    let mut scenes = Vec::with_capacity(batch);
    for b in 0..batch {
        let pos = &pos[b * vertices * 4..(b + 1) * vertices * 4];
        let setup =
            raster::setup(pos, &tris, (height, width), b).map_err(ProviderError::invalid)?;
        let boxes: Vec<_> = setup
            .iter()
            .map(|t| t.pixel_box(0.0, height, width))
            .collect();
        let pairs: usize = boxes
            .iter()
            .flatten()
            .map(|(r0, r1, _, _)| r1 / BAND - r0 / BAND + 1)
            .sum();
        if pairs > MAX_BINNED {
            return Err(ProviderError::out_of_memory(format!(
                "batch entry {b}: the triangles span {pairs} row bands in all (at most {MAX_BINNED})"
            )));
        }
        let mut binned: Vec<Vec<u32>> = vec![Vec::new(); bands];
        for (f, bx) in boxes.iter().enumerate() {
            if let Some((r0, r1, _, _)) = bx {
                for band in &mut binned[r0 / BAND..=r1 / BAND] {
                    band.push(f as u32);
                }
            }
        }
        scenes.push((setup, binned));
    }
    // Chunks of one band of one batch entry (a batch's last band may be short).
    let chunks: Vec<(usize, usize)> = (0..batch)
        .flat_map(|b| (0..bands).map(move |band| (b, band)))
        .collect();
    let n = batch * height * width * 4;
    // Chunks of one band when they never straddle two batch entries.
    if height % BAND == 0 || batch == 1 {
        // SAFETY: the output is [B, H, W, 4], compact.
        unsafe {
            fill(out, n, BAND * width * 4, |i, rows| {
                let (b, band) = chunks[i];
                let (setup, binned) = &scenes[b];
                let first = band * BAND;
                let last = first + rows.len() / (4 * width);
                raster::draw(setup, &binned[band], (height, width), first..last, rows);
                Ok(())
            })
        }
    } else {
        // Whole batch entries, their bands in sequence.
        // SAFETY: the output is [B, H, W, 4], compact.
        unsafe {
            fill(out, n, height * width * 4, |b, image| {
                let (setup, binned) = &scenes[b];
                for (band, rows) in image.chunks_mut(BAND * width * 4).enumerate() {
                    let first = band * BAND;
                    let last = first + rows.len() / (4 * width);
                    raster::draw(setup, &binned[band], (height, width), first..last, rows);
                }
                Ok(())
            })
        }
    }
}

/// # Safety
/// As `kernels::run`.
pub unsafe fn interpolate(inputs: &[TensorArg], out: &TensorArg) -> Result<(), ProviderError> {
    let [b, vertices, a] = inputs[0].shape[..] else {
        return Err(ProviderError::internal("attr is not [B, V, A]"));
    };
    let (h, w) = (inputs[1].shape[1], inputs[1].shape[2]);
    // SAFETY: forwarded (attr float, tri int32).
    let (attr, tris) = unsafe { (wide(&inputs[0])?, triangles(&inputs[2], vertices)?) };
    if a == 0 || b * h * w == 0 {
        return Ok(());
    }
    // The raster is read where it lies (float32 or float64, any strides).
    let rast = &inputs[1];
    // SAFETY: a float32 or float64 [B, H, W, 4] view (catalog-checked), read
    // while the call runs.
    let (r64, r32): (Option<ArrayViewD<f64>>, Option<ArrayViewD<f32>>) = unsafe {
        match rast.dtype {
            DType::F64 => (Some(view(rast)), None),
            _ => (None, Some(view(rast))),
        }
    };
    let texel = |bi: usize, r: usize, c: usize| -> [f64; 4] {
        match (&r64, &r32) {
            (Some(v), _) => std::array::from_fn(|k| v[[bi, r, c, k]]),
            (_, Some(v)) => std::array::from_fn(|k| f64::from(v[[bi, r, c, k]])),
            _ => [0.0; 4],
        }
    };
    // SAFETY: the output is [B, H, W, A], compact; a chunk is one row.
    unsafe {
        fill(out, b * h * w * a, w * a, |row, o| {
            let (bi, r) = (row / h, row % h);
            for (c, o) in o.chunks_exact_mut(a).enumerate() {
                let [u, v, _, id] = texel(bi, r, c);
                if id == 0.0 {
                    continue;
                }
                if !(id >= 1.0 && id <= tris.len() as f64 && id.fract() == 0.0) {
                    return Err(ProviderError::invalid(format!(
                        "rast[{bi}, {r}, {c}, 3] = {id}: a triangle id + 1 in [1, {}] or 0 (empty)",
                        tris.len()
                    )));
                }
                let t = &tris[id as usize - 1];
                let base = bi * vertices * a;
                let at = |k: usize, ch: usize| attr[base + t[k] * a + ch];
                for (ch, o) in o.iter_mut().enumerate() {
                    *o = u * at(0, ch) + v * at(1, ch) + (1.0 - u - v) * at(2, ch);
                }
            }
            Ok(())
        })
    }
}
