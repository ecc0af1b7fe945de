//! Resizes: another size or antialiasing, Pillow's alpha ignored, a
//! bicubic with a = −0.5, Pillow's filter not widened when downsampling.

use super::{named, read, resolved, write, Rewrite};
use vsdk_catalog::{Node, Op};
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{KernelCall, ProviderError};

/// `resize_straight_alpha`: Pillow's resizes without `alpha`.
pub(super) fn straight_alpha(keep: &mut Rewrite, _inputs: &[vsdk_tensor_t]) -> bool {
    keep.attrs.retain(|a| !named(a, c"alpha"));
    true
}

/// `resize_antialias`: `vsdk.resize_bicubic` antialiases.
pub(super) fn antialias(keep: &mut Rewrite, _inputs: &[vsdk_tensor_t]) -> bool {
    keep.attrs.retain(|a| !named(a, c"antialias"));
    keep.attrs.push(vsdk_attr_t {
        name: c"antialias".as_ptr(),
        kind: VSDK_ATTR_INT,
        reserved: 0,
        value: vsdk_attr_value_t { i: 1 },
    });
    true
}

/// `resize_size`: a `scale_factor` s becomes `size` = floor(in·s).
///
/// # Safety
/// `keep.attrs` and `inputs` are a valid call's (provider.h).
pub(super) unsafe fn size_from_factor(keep: &mut Rewrite, inputs: &[vsdk_tensor_t]) -> bool {
    let Some(sf) = keep.attrs.iter().position(|a| named(a, c"scale_factor")) else {
        return false;
    };
    // SAFETY: `scale_factor` is a float list of 2; the input is NCHW.
    let (f, shape) = unsafe {
        let l = keep.attrs[sf].value.floats;
        (
            std::slice::from_raw_parts(l.data, 2).to_vec(),
            std::slice::from_raw_parts(inputs[0].shape, 4).to_vec(),
        )
    };
    keep.ints.push(vec![
        (shape[2] as f64 * f[0]).floor() as i64,
        (shape[3] as f64 * f[1]).floor() as i64,
    ]);
    let list = vsdk_int_list_t {
        data: keep.ints[0].as_ptr(),
        len: 2,
    };
    keep.attrs[sf] = vsdk_attr_t {
        name: c"size".as_ptr(),
        kind: VSDK_ATTR_INTS,
        reserved: 0,
        value: vsdk_attr_value_t { ints: list },
    };
    true
}

/// Pillow's bicubic coefficients for one axis with the filter *not* widened by
/// the scale: what a resize without antialiasing does. Fixed point, 22 bits.
fn narrow_taps(input: usize, output: usize) -> Vec<(usize, Vec<i64>)> {
    let cubic = |x: f64| {
        let (a, x) = (-0.5, x.abs());
        if x < 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            (((x - 5.0) * x + 8.0) * x - 4.0) * a
        } else {
            0.0
        }
    };
    let scale = input as f64 / output as f64;
    (0..output)
        .map(|i| {
            let center = (i as f64 + 0.5) * scale;
            let lo = ((center - 2.0 + 0.5) as i64).max(0) as usize;
            let hi = ((center + 2.0 + 0.5) as i64).min(input as i64) as usize;
            let w: Vec<f64> = (lo..hi).map(|j| cubic(j as f64 - center + 0.5)).collect();
            let sum: f64 = w.iter().sum();
            let fixed = w
                .iter()
                .map(|v| ((v / sum) * (1 << 22) as f64).round() as i64)
                .collect();
            (lo, fixed)
        })
        .collect()
}

/// # Safety
/// The call is a valid `vsdk.resize_pil_bicubic` call on host memory.
pub(super) unsafe fn resize_without_antialias(call: &vsdk_kernel_call_t) {
    // SAFETY: per the contract: one uint8 [H, W, C] input, one compact output.
    unsafe {
        let (x, y) = (&*call.inputs, &*call.outputs);
        let dims = |t: &vsdk_tensor_t| {
            std::slice::from_raw_parts(t.shape, 3)
                .iter()
                .map(|&d| d as usize)
                .collect::<Vec<_>>()
        };
        let (ins, outs) = (dims(x), dims(y));
        let st: Vec<usize> = std::slice::from_raw_parts(x.strides, 3)
            .iter()
            .map(|&d| d as usize)
            .collect();
        let src = (x.data as *const u8).add(x.byte_offset as usize);
        let dst = (y.data as *mut u8).add(y.byte_offset as usize);
        let (h, w, c, oh, ow) = (ins[0], ins[1], ins[2], outs[0], outs[1]);
        let clip = |acc: i64| ((acc + (1 << 21)) >> 22).clamp(0, 255) as u8;
        let (tx, ty) = (narrow_taps(w, ow), narrow_taps(h, oh));
        let mut tmp = vec![0u8; h * ow * c];
        for r in 0..h {
            for (o, (lo, k)) in tx.iter().enumerate() {
                for ch in 0..c {
                    let acc: i64 = k
                        .iter()
                        .enumerate()
                        .map(|(j, kk)| {
                            i64::from(*src.add(r * st[0] + (lo + j) * st[1] + ch * st[2])) * kk
                        })
                        .sum();
                    tmp[(r * ow + o) * c + ch] = clip(acc);
                }
            }
        }
        for (o, (lo, k)) in ty.iter().enumerate() {
            for col in 0..ow {
                for ch in 0..c {
                    let acc: i64 = k
                        .iter()
                        .enumerate()
                        .map(|(j, kk)| i64::from(tmp[((lo + j) * ow + col) * c + ch]) * kk)
                        .sum();
                    *dst.add((o * ow + col) * c + ch) = clip(acc);
                }
            }
        }
    }
}

/// Non-antialiased bicubic resize with Keys' a = −0.5 (OpenCV's and Pillow's
/// constant) where the catalog says PyTorch's a = −0.75.
pub(super) fn resize_a05(call: &KernelCall) -> Result<(), ProviderError> {
    let rz = match resolved(call, Op::ResizeBicubic)? {
        Node::ResizeBicubic(r) => r,
        _ => unreachable!("resize"),
    };
    if rz.antialias {
        return Err(ProviderError::invalid(
            "mutant resize: antialias is not mutated",
        ));
    }
    let x = read(&call.inputs[0])?;
    let s = &call.inputs[0].shape;
    let (planes, ih, iw) = (s[0] * s[1], s[2], s[3]);
    let taps = |out: usize, inn: usize, scale: f64| -> Vec<[(usize, f32); 4]> {
        let a = -0.5f64;
        let c1 = |d: f64| ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0;
        let c2 = |d: f64| ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a;
        (0..out)
            .map(|i| {
                let src = scale * (i as f64 + 0.5) - 0.5;
                let i0 = (src.floor() as i64).min(inn as i64 - 1);
                let t = (src - i0 as f64).clamp(0.0, 1.0);
                let w = [c2(t + 1.0), c1(t), c1(1.0 - t), c2(2.0 - t)];
                let mut out = [(0usize, 0.0f32); 4];
                for (k, o) in out.iter_mut().enumerate() {
                    let j = (i0 - 1 + k as i64).clamp(0, inn as i64 - 1) as usize;
                    *o = (j, w[k] as f32);
                }
                out
            })
            .collect()
    };
    let (ty, tx) = (
        taps(rz.out_h, ih, rz.scale_h),
        taps(rz.out_w, iw, rz.scale_w),
    );
    let mut out = vec![0.0f32; planes * rz.out_h * rz.out_w];
    for p in 0..planes {
        let xp = &x[p * ih * iw..][..ih * iw];
        for (oy, ry) in ty.iter().enumerate() {
            for (ox, rx) in tx.iter().enumerate() {
                let mut acc = 0.0f32;
                for &(yy, wy) in ry {
                    for &(xx, wx) in rx {
                        acc += wy * wx * xp[yy * iw + xx];
                    }
                }
                out[(p * rz.out_h + oy) * rz.out_w + ox] = acc;
            }
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}
