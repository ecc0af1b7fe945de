//! `vsdk.rasterize` and `vsdk.interpolate` (docs/operators.md,
//! "Rasterization") as launches of the kernel source's rasterizer: a setup
//! kernel per (batch entry, triangle) snaps the window coordinates to 8
//! sub-pixel bits and writes exact 64-bit integer edge functions, then a
//! block per 16 × 16 tile of pixels, one thread per pixel, draws the
//! triangles whose box meets the tile (nearest `z/w`, ties to the lower id).
//! Ids differ from the float64 reference's only at centres within the
//! snapping of an edge, which the verdict accepts (docs/error-model.md,
//! "Discrete outputs"). Invalid input raises flag words that are read back
//! here and explained with the CPU provider's messages.

use super::{grid_for, int, ptr, suffix, Arg, Call, BLOCK, MAX_GRID};
use crate::backend::{Backend, DevicePtr};
use vsdk_catalog::raster;
use vsdk_catalog::DType;
use vsdk_provider_kit::{ProviderError, TensorArg};

/// `sizeof(VipsRasterTri)` (the source asserts it).
const TRIANGLE_BYTES: usize = 152;
/// `VIPS_RASTER_TILE`: a block draws this many pixels square, a thread each.
const TILE: usize = 16;
const _: () = assert!(TILE * TILE == BLOCK as usize);

/// Compact int32 triangles on the device, every index checked on the device.
struct Triangles {
    ptr: DevicePtr,
    faces: usize,
}

impl<B: Backend> Call<'_, B> {
    /// `tri [F, 3]`, compact, each entry checked to lie in `[0, vertices)`:
    /// the first one that does not is named as the CPU provider names it.
    fn triangles(&mut self, t: &TensorArg, vertices: usize) -> Result<Triangles, ProviderError> {
        let tris = Triangles {
            ptr: self.compact(t)?,
            faces: t.shape[0],
        };
        let n: i32 = int(3 * tris.faces, "a triangle count")?;
        if n == 0 {
            return Ok(tris);
        }
        let bad = self.flag(n)?;
        let args = vec![
            Arg::Ptr(tris.ptr),
            Arg::I64(n.into()),
            Arg::I32(int(vertices, "a vertex count")?),
            Arg::Ptr(bad),
        ];
        self.launch("vips_sparse_check_index", grid_for(3 * tris.faces), 0, args)?;
        let i = self.read_i32(bad)?;
        if i < n {
            let value = self.read_i32(tris.ptr + 4 * i as u64)?;
            let (f, k) = (i / 3, i % 3);
            return Err(ProviderError::invalid(format!(
                "tri[{f}, {k}] = {value}: vertex indices lie in [0, {vertices})"
            )));
        }
        Ok(tris)
    }

    /// `n` elements of 4 bytes from the device.
    fn read_words(&self, p: DevicePtr, n: usize) -> Result<Vec<[u8; 4]>, ProviderError> {
        let mut bytes = vec![0u8; 4 * n];
        if n > 0 {
            self.backend.copy_to_host(&mut bytes, p)?;
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|w| [w[0], w[1], w[2], w[3]])
            .collect())
    }

    /// The catalog's message for the vertex the device flagged in batch
    /// entry `b` (the first triangle there with an invalid vertex).
    fn explain_vertex(
        &self,
        pos: DevicePtr,
        tris: &Triangles,
        (b, vertices): (usize, usize),
        (height, width): (usize, usize),
    ) -> ProviderError {
        let read = || -> Result<(Vec<f64>, Vec<[usize; 3]>), ProviderError> {
            let at = pos + (16 * b * vertices) as u64;
            let pos = self.read_words(at, 4 * vertices)?;
            let tri = self.read_words(tris.ptr, 3 * tris.faces)?;
            let pos = pos.into_iter().map(|w| f64::from(f32::from_ne_bytes(w)));
            let index = |w: &[u8; 4]| i32::from_ne_bytes(*w) as usize;
            let tri = tri
                .chunks_exact(3)
                .map(|t| [index(&t[0]), index(&t[1]), index(&t[2])]);
            Ok((pos.collect(), tri.collect()))
        };
        match read() {
            Err(e) => e,
            Ok((pos, tri)) => match raster::setup(&pos, &tri, (height, width), b) {
                Err(why) => ProviderError::invalid(why),
                Ok(_) => ProviderError::internal(
                    "the device flagged a vertex, the host's check finds every vertex valid",
                ),
            },
        }
    }
}

pub(super) fn rasterize<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    (height, width): (usize, usize),
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let pos = &ins[0];
    let (batch, vertices) = (pos.shape[0], pos.shape[1]);
    // Every row of tri is checked, drawn or not (and with no batch entry).
    let tris = c.triangles(&ins[1], vertices)?;
    if pos.dtype != DType::F32 {
        return Err(ProviderError::unsupported(format!(
            "vsdk.rasterize: the GPU kernels rasterize float32 positions, not {}",
            pos.dtype
        )));
    }
    if batch == 0 {
        return Ok(());
    }
    let setups = batch * tris.faces;
    let count: i32 = int(setups, "batch entries x triangles")?;
    let pos_ptr = c.compact(pos)?;
    let set_up = c.temporary(setups * TRIANGLE_BYTES)?;
    let bad = c.flag(count)?;
    let (h, w): (i32, i32) = (int(height, "height")?, int(width, "width")?);
    if setups > 0 {
        let args = vec![
            Arg::Ptr(pos_ptr),
            Arg::Ptr(tris.ptr),
            Arg::I64(int(batch, "the batch")?),
            Arg::I64(int(vertices, "a vertex count")?),
            Arg::I64(int(tris.faces, "a triangle count")?),
            Arg::I32(h),
            Arg::I32(w),
            Arg::Ptr(set_up),
            Arg::Ptr(bad),
        ];
        c.launch("vips_raster_setup", grid_for(setups), 0, args)?;
        let i = c.read_i32(bad)?;
        if i < count {
            let b = i as usize / tris.faces;
            return Err(c.explain_vertex(pos_ptr, &tris, (b, vertices), (height, width)));
        }
    }
    let tiles = height.div_ceil(TILE) * width.div_ceil(TILE) * batch;
    let args = vec![
        Arg::Ptr(set_up),
        Arg::I64(int(batch, "the batch")?),
        Arg::I64(int(tris.faces, "a triangle count")?),
        Arg::I32(h),
        Arg::I32(w),
        Arg::Ptr(ptr(out)),
    ];
    let grid = [(tiles as u64).clamp(1, MAX_GRID) as u32, 1, 1];
    c.launch("vips_rasterize", grid, 0, args)
}

pub(super) fn interpolate<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (attr, rast) = (&ins[0], &ins[1]);
    let (vertices, channels) = (attr.shape[1], attr.shape[2]);
    let (height, width) = (rast.shape[1], rast.shape[2]);
    let tris = c.triangles(&ins[2], vertices)?;
    let plane = height * width;
    let pixels = rast.shape[0] * plane;
    if pixels == 0 {
        return Ok(());
    }
    let r = match rast.dtype {
        DType::F32 => "f32",
        DType::F64 => "f64",
        other => {
            return Err(ProviderError::internal(format!(
                "vsdk.interpolate: rast is {other}"
            )))
        }
    };
    let count: i32 = int(pixels, "a pixel count")?;
    let rast_ptr = c.compact(rast)?;
    let bad = c.flag(count)?;
    let args = vec![
        Arg::Ptr(c.compact(attr)?),
        Arg::Ptr(rast_ptr),
        Arg::Ptr(tris.ptr),
        Arg::I64(int(plane, "a raster's size")?),
        Arg::I64(count.into()),
        Arg::I64(int(vertices, "a vertex count")?),
        Arg::I32(int(tris.faces, "a triangle count")?),
        Arg::I32(int(channels, "an attribute count")?),
        Arg::Ptr(ptr(out)),
        Arg::Ptr(bad),
    ];
    let kernel = format!("vips_interpolate_{}_{r}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(pixels), 0, args)?;
    let p = c.read_i32(bad)?;
    if p < count {
        let p = p as usize;
        let size = rast.dtype.size_bytes();
        let at = rast_ptr + ((4 * p + 3) * size) as u64;
        let mut bytes = vec![0u8; size];
        c.backend.copy_to_host(&mut bytes, at)?;
        let id = match rast.dtype {
            DType::F64 => f64::from_ne_bytes(bytes.try_into().unwrap_or_default()),
            _ => f64::from(f32::from_ne_bytes(bytes.try_into().unwrap_or_default())),
        };
        return Err(ProviderError::invalid(format!(
            "rast[{}, {}, {}, 3] = {id}: a triangle id + 1 in [1, {}] or 0 (empty)",
            p / plane,
            p % plane / width,
            p % width,
            tris.faces
        )));
    }
    Ok(())
}
