//! Rasterization: triangles to per-pixel (u, v, z/w, id) and attribute
//! interpolation over them.

use super::{Check, Inferred};
use crate::raster;
use crate::CatalogError;
use crate::{Attrs, DType, Node, Op, TensorSpec};

pub(super) fn rasterize(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let tri = &inputs[1];
    if x.shape.len() != 3 || x.shape[2] != 4 {
        return c.fail(format!(
            "pos must be [B, V, 4] clip-space (x, y, z, w), got {:?}",
            x.shape
        ));
    }
    triangles(c, tri)?;
    let side = |name: &str| match attrs.int(c.kernel, name)? {
        None => c.attr(name, "is required"),
        Some(v) if v >= 1 && v as usize <= raster::MAX_RASTER_SIDE => Ok(v as usize),
        Some(v) => c.attr(
            name,
            format!("must lie in [1, {}], got {v}", raster::MAX_RASTER_SIDE),
        ),
    };
    let (height, width) = (side("height")?, side("width")?);
    Ok((
        Node::Rasterize { height, width },
        out(vec![x.shape[0], height, width, 4]),
    ))
}

pub(super) fn interpolate(
    _op: Op,
    c: &Check,
    _attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    let (rast, tri) = (&inputs[1], &inputs[2]);
    if x.shape.len() != 3 {
        return c.fail(format!("attr must be [B, V, A], got {:?}", x.shape));
    }
    if ![DType::F32, DType::F64].contains(&rast.dtype)
        || rast.shape.len() != 4
        || rast.shape[3] != 4
        || rast.shape[0] != x.shape[0]
    {
        return c.fail(format!(
            "rast must be a rasterizer's output [B = {}, H, W, 4], float32 or float64 (ids need its bits), got {} {:?}",
            x.shape[0], rast.dtype, rast.shape
        ));
    }
    triangles(c, tri)?;
    Ok((
        Node::Interpolate,
        out(vec![x.shape[0], rast.shape[1], rast.shape[2], x.shape[2]]),
    ))
}

/// Triangles `[F, 3]` int32, few enough that `id + 1` is exact in float32.
fn triangles(c: &Check, tri: &TensorSpec) -> Result<(), CatalogError> {
    if tri.dtype != DType::I32 || tri.shape.len() != 2 || tri.shape[1] != 3 {
        return c.fail(format!(
            "tri must be [F, 3] int32 vertex indices, got {} {:?}",
            tri.dtype, tri.shape
        ));
    }
    if tri.shape[0] > raster::MAX_TRIANGLES {
        return c.fail(format!(
            "{} triangles: at most 2^24 (ids + 1 are stored in float32)",
            tri.shape[0]
        ));
    }
    Ok(())
}
