//! Rasterization: nvdiffrast's snapping, and a port's classic mistakes.

use super::{read, resolved, write};
use vsdk_catalog::{raster, Node, Op};
use vsdk_provider_kit::{KernelCall, ProviderError, TensorArg};

/// How a mutant `vsdk.rasterize` differs: nvdiffrast's CUDA snapping (a
/// correct rasterizer that disagrees with the reference at edges), or one
/// of a port's classic mistakes (docs/validation.md, "Rasterization").
#[derive(Clone, Copy, PartialEq)]
pub(super) enum RasterVariant {
    /// Vertices snapped to 4 sub-pixel bits (round to nearest), then exact
    /// coverage: correct.
    Snapped,
    /// Row 0 at the top: the V axis not flipped, or flipped twice.
    RowsTopDown,
    /// Triangle ids without the + 1 (the first triangle looks empty).
    IdsFromZero,
    /// Pixel centres at integer coordinates: half a pixel off.
    HalfPixel,
    /// Clockwise triangles culled as back faces.
    CullBack,
    /// (v, u) written for (u, v).
    UvSwapped,
}

/// `vsdk.rasterize` as `bug` draws it, by the catalog's own geometry.
pub(super) fn rasterize(call: &KernelCall, bug: RasterVariant) -> Result<(), ProviderError> {
    let Node::Rasterize { height, width } = resolved(call, Op::Rasterize)? else {
        return Err(ProviderError::internal("not a rasterize call"));
    };
    let (pos, tri) = (&call.inputs[0], &call.inputs[1]);
    let positions: Vec<f64> = read(pos)?.into_iter().map(f64::from).collect();
    let vertices = pos.shape[1];
    let tris = raster::triangles(read_i32(tri).into_iter().map(i64::from), vertices)
        .map_err(ProviderError::invalid)?;
    let mut image = vec![0.0f64; pos.shape[0] * height * width * 4];
    for (b, img) in image.chunks_exact_mut(height * width * 4).enumerate() {
        let mut t = raster::setup(
            &positions[b * vertices * 4..(b + 1) * vertices * 4],
            &tris,
            (height, width),
            b,
        )
        .map_err(ProviderError::invalid)?;
        for t in &mut t {
            if bug == RasterVariant::HalfPixel {
                // Sampling at (col, row) is the geometry moved by half a pixel.
                for v in &mut t.v {
                    (v.x, v.y) = (v.x + 0.5, v.y + 0.5);
                }
                *t = raster::Triangle::new(t.v);
            }
            if bug == RasterVariant::Snapped {
                for v in &mut t.v {
                    (v.x, v.y) = ((v.x * 16.0).round() / 16.0, (v.y * 16.0).round() / 16.0);
                }
                *t = raster::Triangle::new(t.v);
            }
            if bug == RasterVariant::CullBack && t.area < 0.0 {
                t.area = 0.0;
            }
        }
        let all: Vec<u32> = (0..t.len() as u32).collect();
        raster::draw(&t, &all, (height, width), 0..height, img);
        for px in img.chunks_exact_mut(4) {
            match bug {
                RasterVariant::IdsFromZero if px[3] > 0.0 => px[3] -= 1.0,
                RasterVariant::UvSwapped => px.swap(0, 1),
                _ => {}
            }
        }
        if bug == RasterVariant::RowsTopDown {
            let row = width * 4;
            for r in 0..height / 2 {
                let (top, bottom) = img.split_at_mut((height - 1 - r) * row);
                top[r * row..(r + 1) * row].swap_with_slice(&mut bottom[..row]);
            }
        }
    }
    let v: Vec<f32> = image.iter().map(|&x| x as f32).collect();
    write(&call.outputs[0], &v, false);
    Ok(())
}

fn read_i32(t: &TensorArg) -> Vec<i32> {
    let n = t.numel();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; t.shape.len()];
    for _ in 0..n {
        let off: usize = idx.iter().zip(&t.strides).map(|(i, s)| i * s).sum();
        // SAFETY: as in `read`: an index within shape, host memory, int32.
        out.push(unsafe { t.ptr.add(off * 4).cast::<i32>().read_unaligned() });
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < t.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}
