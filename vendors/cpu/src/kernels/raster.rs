//! `vsdk.rasterize` and `vsdk.interpolate` (docs/operators.md,
//! "Rasterization"): the catalog's float64 geometry (`vsdk_catalog::raster`)
//! over every pixel centre of each triangle's box, rows in bands across
//! threads; at float32 the positions are widened and the same float64 edge
//! functions decide coverage, so this provider's triangle ids are the
//! reference's. Interpolation in float64, rounded once.

use super::view;
use half::{bf16, f16};
use ndarray::ArrayViewD;
use rayon::prelude::*;
use vsdk_catalog::raster::{self, Triangle};
use vsdk_catalog::rounding::{bf16_from_f64, f16_from_f64};
use vsdk_catalog::DType;
use vsdk_provider_kit::{ProviderError, TensorArg};

/// Rows per band of work.
const BAND: usize = 16;

/// A float tensor's values in logical order, widened.
///
/// # Safety
/// As `kernels::view`.
unsafe fn wide(t: &TensorArg) -> Vec<f64> {
    // SAFETY (each arm): forwarded; the arm's type is the tensor's dtype.
    unsafe {
        match t.dtype {
            DType::F64 => view::<f64>(t).iter().copied().collect(),
            DType::F32 => view::<f32>(t).iter().map(|&v| f64::from(v)).collect(),
            DType::F16 => view::<f16>(t).iter().map(|v| v.to_f64()).collect(),
            _ => view::<bf16>(t).iter().map(|v| v.to_f64()).collect(),
        }
    }
}

/// The triangles, every index checked against `vertices`.
///
/// # Safety
/// As `kernels::view` (int32 `[F, 3]`).
unsafe fn triangles(t: &TensorArg, vertices: usize) -> Result<Vec<[usize; 3]>, ProviderError> {
    // SAFETY: forwarded.
    let tri: ArrayViewD<i32> = unsafe { view(t) };
    tri.outer_iter()
        .enumerate()
        .map(|(f, row)| {
            let mut out = [0usize; 3];
            for (k, (&i, o)) in row.iter().zip(&mut out).enumerate() {
                *o = usize::try_from(i)
                    .ok()
                    .filter(|&i| i < vertices)
                    .ok_or_else(|| {
                        ProviderError::invalid(format!(
                            "tri[{f}, {k}] = {i}: vertex indices lie in [0, {vertices})"
                        ))
                    })?;
            }
            Ok(out)
        })
        .collect()
}

/// Stores float64 values rounded once to `out`'s dtype.
///
/// # Safety
/// `out` is compact, of `values.len()` elements, written by no one else.
unsafe fn store(out: &TensorArg, values: &[f64]) {
    let n = values.len();
    // SAFETY (each arm): per the contract, the element type is the dtype's.
    unsafe {
        match out.dtype {
            DType::F64 => {
                std::slice::from_raw_parts_mut(out.ptr.cast::<f64>(), n).copy_from_slice(values)
            }
            DType::F32 => {
                let d = std::slice::from_raw_parts_mut(out.ptr.cast::<f32>(), n);
                d.iter_mut().zip(values).for_each(|(d, &v)| *d = v as f32);
            }
            DType::F16 => {
                let d = std::slice::from_raw_parts_mut(out.ptr.cast::<f16>(), n);
                d.iter_mut()
                    .zip(values)
                    .for_each(|(d, &v)| *d = f16_from_f64(v));
            }
            _ => {
                let d = std::slice::from_raw_parts_mut(out.ptr.cast::<bf16>(), n);
                d.iter_mut()
                    .zip(values)
                    .for_each(|(d, &v)| *d = bf16_from_f64(v));
            }
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
    let (pos, tris) = unsafe { (wide(&inputs[0]), triangles(&inputs[1], vertices)?) };
    let mut image = vec![0.0f64; batch * height * width * 4];
    for (b, image) in image.chunks_exact_mut(height * width * 4).enumerate() {
        let pos = &pos[b * vertices * 4..(b + 1) * vertices * 4];
        let setup =
            raster::setup(pos, &tris, (height, width), b).map_err(ProviderError::invalid)?;
        rasterize_into(&setup, (height, width), image);
    }
    // SAFETY: the output is [B, H, W, 4], compact.
    unsafe { store(out, &image) };
    Ok(())
}

/// Rasterizes into `image` ([H, W, 4] float64), bands of rows in parallel,
/// each drawing the triangles whose box reaches it.
fn rasterize_into(tris: &[Triangle], (height, width): (usize, usize), image: &mut [f64]) {
    let mut binned: Vec<Vec<u32>> = vec![Vec::new(); height.div_ceil(BAND)];
    for (f, t) in tris.iter().enumerate() {
        if let Some((r0, r1, _, _)) = t.pixel_box(0.0, height, width) {
            for band in &mut binned[r0 / BAND..=r1 / BAND] {
                band.push(f as u32);
            }
        }
    }
    image
        .par_chunks_mut(BAND * width * 4)
        .zip(binned)
        .enumerate()
        .for_each(|(band, (rows, ids))| {
            let first = band * BAND;
            let last = first + rows.len() / (4 * width);
            raster::draw(tris, &ids, (height, width), first..last, rows);
        });
}

/// # Safety
/// As `kernels::run`.
pub unsafe fn interpolate(inputs: &[TensorArg], out: &TensorArg) -> Result<(), ProviderError> {
    let [b, vertices, a] = inputs[0].shape[..] else {
        return Err(ProviderError::internal("attr is not [B, V, A]"));
    };
    let (h, w) = (inputs[1].shape[1], inputs[1].shape[2]);
    // SAFETY: forwarded (attr float, rast float32/float64, tri int32).
    let (attr, rast, tris) = unsafe {
        (
            wide(&inputs[0]),
            wide(&inputs[1]),
            triangles(&inputs[2], vertices)?,
        )
    };
    let pixels = h * w;
    let mut values = vec![0.0f64; b * pixels * a];
    values
        .par_chunks_mut(a)
        .zip(rast.par_chunks_exact(4))
        .enumerate()
        .try_for_each(|(p, (o, px))| {
            let id = px[3];
            if id == 0.0 {
                return Ok(());
            }
            if !(id >= 1.0 && id <= tris.len() as f64 && id.fract() == 0.0) {
                return Err(ProviderError::invalid(format!(
                    "rast[{}, {}, {}, 3] = {id}: a triangle id + 1 in [1, {}] or 0 (empty)",
                    p / pixels,
                    p % pixels / w,
                    p % w,
                    tris.len()
                )));
            }
            let t = &tris[id as usize - 1];
            let (u, v) = (px[0], px[1]);
            let base = p / pixels * vertices * a;
            let at = |k: usize, ch: usize| attr[base + t[k] * a + ch];
            for (ch, o) in o.iter_mut().enumerate() {
                *o = u * at(0, ch) + v * at(1, ch) + (1.0 - u - v) * at(2, ch);
            }
            Ok(())
        })?;
    // SAFETY: the output is [B, H, W, A], compact.
    unsafe { store(out, &values) };
    Ok(())
}
