//! Separable resizes, one axis a pass: PyTorch's bicubic through a float32
//! buffer, Pillow's 8-bit filters with its alpha premultiplication; PyTorch's
//! bilinear and nearest, a thread per output over per-axis tables.

use super::{compact_strides, grid_for, int, ptr, suffix, Arg, Call};
use crate::backend::{Backend, DevicePtr};
use vsdk_catalog::{taps, Bilinear, Nearest, PilResize, Resize};
use vsdk_provider_kit::{ProviderError, TensorArg};

fn ne_bytes<T: Copy, const N: usize>(v: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| to(x)).collect()
}

/// One axis's taps in the kernels' form: source indices, weights, and each
/// output position's range of them.
struct AxisTaps<W> {
    index: Vec<i32>,
    weight: Vec<W>,
    offsets: Vec<i32>,
}

impl<W: Copy> AxisTaps<W> {
    fn new(per_output: impl Iterator<Item = Vec<(usize, W)>>) -> Result<Self, ProviderError> {
        let mut t = AxisTaps {
            index: Vec::new(),
            weight: Vec::new(),
            offsets: vec![0],
        };
        for taps in per_output {
            for (i, w) in taps {
                t.index.push(int(i, "a source index")?);
                t.weight.push(w);
            }
            t.offsets.push(int(t.index.len(), "the number of taps")?);
        }
        Ok(t)
    }
}

/// One pass of a separable resize along an axis of `[outer, len_in, inner]`.
struct Pass {
    outer: usize,
    len_in: usize,
    len_out: usize,
    inner: usize,
}

impl<B: Backend> Call<'_, B> {
    fn taps_pass<W: Copy>(
        &mut self,
        kernel: &str,
        (src, dst): (DevicePtr, DevicePtr),
        taps: &AxisTaps<W>,
        weight_bytes: impl Fn(W) -> [u8; 4],
        p: Pass,
    ) -> Result<(), ProviderError> {
        let index = self.upload(&ne_bytes(&taps.index, i32::to_ne_bytes))?;
        let weight = self.upload(&ne_bytes(&taps.weight, weight_bytes))?;
        let offsets = self.upload(&ne_bytes(&taps.offsets, i32::to_ne_bytes))?;
        let total = p.outer * p.len_out * p.inner;
        let args = vec![
            Arg::Ptr(src),
            Arg::Ptr(dst),
            Arg::Ptr(index),
            Arg::Ptr(weight),
            Arg::Ptr(offsets),
            Arg::I64(int(p.outer, "a resize's outer size")?),
            Arg::I32(int(p.len_in, "a resize's input length")?),
            Arg::I32(int(p.len_out, "a resize's output length")?),
            Arg::I64(int(p.inner, "a resize's inner size")?),
        ];
        self.launch(kernel, grid_for(total), 0, args)
    }
}

/// PyTorch-style bicubic on [N, C, H, W]: along W into a float32 buffer,
/// then along H into the output (the CPU reference's order).
pub(super) fn bicubic<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &Resize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (nc, h, w) = (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]);
    let float_taps = |taps: Vec<Vec<(usize, f64)>>| {
        AxisTaps::new(
            taps.into_iter()
                .map(|t| t.into_iter().map(|(i, w)| (i, w as f32)).collect()),
        )
    };
    let tx = float_taps(taps::axis_taps(w, r.out_w, r.scale_w, r.antialias))?;
    let ty = float_taps(taps::axis_taps(h, r.out_h, r.scale_h, r.antialias))?;
    let src = c.compact(x)?;
    let tmp = c.temporary(nc * h * r.out_w * 4)?;
    let t = suffix(out.dtype)?;
    let horizontal = Pass {
        outer: nc * h,
        len_in: w,
        len_out: r.out_w,
        inner: 1,
    };
    c.taps_pass(
        &format!("vips_taps_from_{t}"),
        (src, tmp),
        &tx,
        f32::to_ne_bytes,
        horizontal,
    )?;
    let vertical = Pass {
        outer: nc,
        len_in: h,
        len_out: r.out_h,
        inner: r.out_w,
    };
    c.taps_pass(
        &format!("vips_taps_to_{t}"),
        (tmp, ptr(out)),
        &ty,
        f32::to_ne_bytes,
        vertical,
    )
}

/// Pillow's BICUBIC on [H, W, C] uint8: two passes, each rounded and clipped
/// to uint8, in the order the node says.
pub(super) fn pil<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &PilResize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (h, w, ch) = (x.shape[0], x.shape[1], x.shape[2]);
    let (oh, ow) = (r.out_h, r.out_w);
    if r.is_copy(h, w) {
        return c.copy(
            x,
            ptr(x),
            &x.strides,
            ptr(out),
            &compact_strides(&out.shape),
            &x.shape,
        );
    }
    let fixed_taps = |(first, coeffs): (Vec<usize>, Vec<Vec<i32>>)| {
        AxisTaps::new(
            first
                .into_iter()
                .zip(coeffs)
                .map(|(f, k)| k.into_iter().enumerate().map(|(j, k)| (f + j, k)).collect()),
        )
    };
    let tx = fixed_taps(taps::pil_coeffs(w, ow, r.filter))?;
    let ty = fixed_taps(taps::pil_coeffs(h, oh, r.filter))?;
    let mut src = c.compact(x)?;
    let pixels = |n: usize| int::<i64>(n, "a resize's pixel count");
    let channels: i32 = int(ch, "a resize's channel count")?;
    if r.alpha {
        let premultiplied = c.temporary(h * w * ch)?;
        let args = vec![
            Arg::Ptr(src),
            Arg::Ptr(premultiplied),
            Arg::I64(pixels(h * w)?),
            Arg::I32(channels),
        ];
        c.launch("vips_premultiply_u8", grid_for(h * w), 0, args)?;
        src = premultiplied;
    }
    let kernel = "vips_taps_pil_u8";
    if r.vertical_first {
        let tmp = c.temporary(oh * w * ch)?;
        let v = Pass {
            outer: 1,
            len_in: h,
            len_out: oh,
            inner: w * ch,
        };
        c.taps_pass(kernel, (src, tmp), &ty, i32::to_ne_bytes, v)?;
        let hz = Pass {
            outer: oh,
            len_in: w,
            len_out: ow,
            inner: ch,
        };
        c.taps_pass(kernel, (tmp, ptr(out)), &tx, i32::to_ne_bytes, hz)?;
    } else {
        let tmp = c.temporary(h * ow * ch)?;
        let hz = Pass {
            outer: h,
            len_in: w,
            len_out: ow,
            inner: ch,
        };
        c.taps_pass(kernel, (src, tmp), &tx, i32::to_ne_bytes, hz)?;
        let v = Pass {
            outer: 1,
            len_in: h,
            len_out: oh,
            inner: ow * ch,
        };
        c.taps_pass(kernel, (tmp, ptr(out)), &ty, i32::to_ne_bytes, v)?;
    }
    if r.alpha {
        let args = vec![
            Arg::Ptr(ptr(out)),
            Arg::I64(pixels(oh * ow)?),
            Arg::I32(channels),
        ];
        c.launch("vips_unpremultiply_u8", grid_for(oh * ow), 0, args)?;
    }
    Ok(())
}

/// One axis of a bilinear resize as `vips_resize_bilinear` reads it: the two
/// source indices of each output position (i32 pairs) and the second one's
/// weight λ (f32), from the catalog's `Bilinear::taps`. Where both taps are
/// one pixel λ is 0, so that pixel is read alone, exactly.
fn bilinear_axis(
    r: &Bilinear,
    len: usize,
    out: usize,
    scale: f64,
) -> Result<(Vec<u8>, Vec<u8>), ProviderError> {
    let mut index = Vec::with_capacity(8 * out);
    let mut lambda = Vec::with_capacity(4 * out);
    for i in 0..out {
        let (i0, i1, l) = r.taps(i, len, out, scale);
        index.extend(int::<i32>(i0, "a source index")?.to_ne_bytes());
        index.extend(int::<i32>(i1, "a source index")?.to_ne_bytes());
        let l = if i0 == i1 { 0.0 } else { l as f32 };
        lambda.extend(l.to_ne_bytes());
    }
    Ok((index, lambda))
}

/// PyTorch's bilinear on [N, C, H, W] (`upsample_bilinear2d`): a thread per
/// output element, two taps per axis from the catalog's rule.
pub(super) fn bilinear<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &Bilinear,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (planes, h, w) = (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]);
    let (iy, ly) = bilinear_axis(r, h, r.out_h, r.scale_h)?;
    let (ix, lx) = bilinear_axis(r, w, r.out_w, r.scale_w)?;
    let src = c.compact(x)?;
    let (iy, ly) = (c.upload(&iy)?, c.upload(&ly)?);
    let (ix, lx) = (c.upload(&ix)?, c.upload(&lx)?);
    let size = |v: usize| int::<i32>(v, "a resize's side");
    let args = vec![
        Arg::Ptr(src),
        Arg::Ptr(ptr(out)),
        Arg::Ptr(iy),
        Arg::Ptr(ly),
        Arg::Ptr(ix),
        Arg::Ptr(lx),
        Arg::I64(int(planes, "a resize's planes")?),
        Arg::I32(size(h)?),
        Arg::I32(size(w)?),
        Arg::I32(size(r.out_h)?),
        Arg::I32(size(r.out_w)?),
    ];
    let kernel = format!("vips_resize_bilinear_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(out.numel()), 0, args)
}

/// One axis of a nearest resize: the source index of each output position
/// (i32), from the catalog's `Nearest::source` (PyTorch's float32 arithmetic).
fn nearest_axis(r: &Nearest, len: usize, out: usize, scale: f32) -> Result<Vec<u8>, ProviderError> {
    let mut index = Vec::with_capacity(4 * out);
    for i in 0..out {
        index.extend(int::<i32>(r.source(i, len, out, scale), "a source index")?.to_ne_bytes());
    }
    Ok(index)
}

/// PyTorch's `nearest` and `nearest-exact` on [N, C, H, W]: a copy of the
/// input elements the catalog's rule picks, a thread per output element.
pub(super) fn nearest<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &Nearest,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (planes, h, w) = (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]);
    let iy = nearest_axis(r, h, r.out_h, r.scale_h)?;
    let ix = nearest_axis(r, w, r.out_w, r.scale_w)?;
    let src = c.compact(x)?;
    let (iy, ix) = (c.upload(&iy)?, c.upload(&ix)?);
    let size = |v: usize| int::<i32>(v, "a resize's side");
    let args = vec![
        Arg::Ptr(src),
        Arg::Ptr(ptr(out)),
        Arg::Ptr(iy),
        Arg::Ptr(ix),
        Arg::I64(int(planes, "a resize's planes")?),
        Arg::I32(size(h)?),
        Arg::I32(size(w)?),
        Arg::I32(size(r.out_h)?),
        Arg::I32(size(r.out_w)?),
    ];
    let kernel = format!("vips_resize_nearest_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(out.numel()), 0, args)
}
