//! Separable resizes, one axis a pass: PyTorch's bicubic through a float32
//! buffer, Pillow's 8-bit filters with its alpha premultiplication.

use super::{compact_strides, grid_for, int, ptr, suffix, Arg, Call};
use crate::backend::{Backend, DevicePtr};
use vsdk_catalog::{taps, PilResize, Resize};
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
