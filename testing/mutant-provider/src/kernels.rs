//! Kernels the mutant computes itself, on the target's host memory, in
//! float32 (rounded once to a 16-bit output dtype):
//!
//! - *legitimate variants*, which a correct error model must accept: sums in
//!   another order (reversed, pairwise, onto the bias), contracted with FMA, attention with a
//!   streaming (online) softmax, LayerNorm with float32 sums in sequence;
//! - *subtle bugs*, which it must refuse: LayerNorm with the unbiased (N − 1)
//!   variance, bicubic resize with a = −0.5, a GEMM whose every output is
//!   rounded up by one ulp, a GEMM on TF32 inputs (10-bit mantissas, what
//!   tensor cores do to float32 unless told not to), a GEMM 1 % off on one
//!   element, GELU by its tanh approximation, attention whose softmax sums
//!   in bfloat16, RMSNorm with eps 1e-2 added under the root, RMSNorm that
//!   ignores γ.

use half::{bf16, f16};
use vsdk_catalog::{raster, DType, Node, Op};
use vsdk_provider_kit::{KernelCall, ProviderError, TensorArg};

/// A kernel the mutant computes itself.
pub type Kernel = fn(&KernelCall) -> Result<(), ProviderError>;

/// How a mutant `vsdk.linear` accumulates `Σ x·w`.
#[derive(Clone, Copy, PartialEq)]
pub enum Sum {
    Reversed,
    /// Forward, accumulating onto the bias (what `addmm` and a GEMM with
    /// `beta = 1` over a broadcast bias do).
    BiasFirst,
    Pairwise,
    Fma,
    /// Forward in float64, rounded to the output dtype, then one ulp up.
    RoundUp,
    /// Inputs rounded to TF32 (10 explicit mantissa bits), summed in float32.
    Tf32,
    /// Forward in float64, and the middle output 1 % too large.
    OneElement,
}

/// `x` rounded to TF32: float32's exponent, 10 mantissa bits, to nearest even.
fn tf32(x: f32) -> f32 {
    let b = x.to_bits();
    let round = 0x0fff + ((b >> 13) & 1);
    f32::from_bits((b.wrapping_add(round)) & !0x1fff)
}

fn read(t: &TensorArg) -> Result<Vec<f32>, ProviderError> {
    let n = t.numel();
    let mut out = Vec::with_capacity(n);
    let mut idx = vec![0usize; t.shape.len()];
    for _ in 0..n {
        let off: usize = idx.iter().zip(&t.strides).map(|(i, s)| i * s).sum();
        // SAFETY: the host's descriptor: every index within shape is inside
        // the buffer it allocated, in host memory (the target is the CPU provider).
        let v = unsafe {
            let p = t.ptr.add(off * t.dtype.size_bytes());
            match t.dtype {
                DType::F32 => p.cast::<f32>().read_unaligned(),
                DType::F16 => f16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                DType::BF16 => bf16::from_bits(p.cast::<u16>().read_unaligned()).to_f32(),
                d => {
                    return Err(ProviderError::invalid(format!(
                        "mutant kernels: {d} inputs"
                    )))
                }
            }
        };
        out.push(v);
        for d in (0..idx.len()).rev() {
            idx[d] += 1;
            if idx[d] < t.shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    Ok(out)
}

/// Writes a compact output (the host allocates outputs compact).
fn write(t: &TensorArg, v: &[f32], round_up: bool) {
    for (i, &x) in v.iter().enumerate() {
        // SAFETY: a compact output of `v.len()` elements, in host memory.
        unsafe {
            let p = t.ptr.add(i * t.dtype.size_bytes());
            match t.dtype {
                DType::F16 => {
                    let h = f16::from_f32(x);
                    p.cast::<u16>().write_unaligned(if round_up {
                        up16(h.to_bits())
                    } else {
                        h.to_bits()
                    })
                }
                DType::BF16 => {
                    let h = bf16::from_f32(x);
                    p.cast::<u16>().write_unaligned(if round_up {
                        up16(h.to_bits())
                    } else {
                        h.to_bits()
                    })
                }
                _ => p
                    .cast::<f32>()
                    .write_unaligned(if round_up { x.next_up() } else { x }),
            }
        }
    }
}

/// The next 16-bit float toward +∞ (for finite values).
fn up16(bits: u16) -> u16 {
    match bits {
        0x8000 | 0x0000 => 1,
        b if b & 0x8000 != 0 => b - 1,
        b => b + 1,
    }
}

fn pairwise(v: &[f32]) -> f32 {
    if v.len() <= 8 {
        return v.iter().fold(0.0, |a, &x| a + x);
    }
    let (l, r) = v.split_at(v.len() / 2);
    pairwise(l) + pairwise(r)
}

pub fn linear(call: &KernelCall, sum: Sum) -> Result<(), ProviderError> {
    let (x, w) = (read(&call.inputs[0])?, read(&call.inputs[1])?);
    let b = call.inputs.get(2).map(read).transpose()?;
    let k = *call.inputs[1].shape.last().unwrap_or(&0);
    let n = call.inputs[1].shape[0];
    let rows = x.len().checked_div(k).unwrap_or(0);
    let mut out = vec![0.0f32; rows * n];
    for r in 0..rows {
        let xr = &x[r * k..][..k];
        for j in 0..n {
            let wj = &w[j * k..][..k];
            let bias = b.as_ref().map_or(0.0, |b| b[j]);
            out[r * n + j] = match sum {
                Sum::Reversed => (0..k).rev().fold(0.0f32, |a, i| a + xr[i] * wj[i]) + bias,
                Sum::BiasFirst => xr.iter().zip(wj).fold(bias, |a, (x, w)| a + x * w),
                Sum::Pairwise => {
                    let p: Vec<f32> = xr.iter().zip(wj).map(|(a, b)| a * b).collect();
                    pairwise(&p) + bias
                }
                Sum::Fma => xr.iter().zip(wj).fold(0.0f32, |a, (x, w)| x.mul_add(*w, a)) + bias,
                Sum::RoundUp | Sum::OneElement => {
                    (xr.iter()
                        .zip(wj)
                        .map(|(a, b)| f64::from(*a) * f64::from(*b))
                        .sum::<f64>()
                        + f64::from(bias)) as f32
                }
                Sum::Tf32 => {
                    xr.iter()
                        .zip(wj)
                        .fold(0.0f32, |a, (x, w)| a + tf32(*x) * tf32(*w))
                        + bias
                }
            };
        }
    }
    if sum == Sum::OneElement {
        if let Some(v) = out.get_mut(rows * n / 2) {
            *v *= 1.01;
        }
    }
    write(&call.outputs[0], &out, sum == Sum::RoundUp);
    Ok(())
}

/// An attention call's operands in float32, its sizes (batch, queries, key
/// width, keys, value width) and its scale.
struct Attention {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    sizes: [usize; 5],
    scale: f32,
}

impl Attention {
    fn read(call: &KernelCall) -> Result<Attention, ProviderError> {
        let qs = &call.inputs[0].shape;
        let r = qs.len();
        let scale = match resolved(call, Op::Sdpa)? {
            Node::Sdpa(s) => s.scale as f32,
            _ => unreachable!("sdpa"),
        };
        Ok(Attention {
            q: read(&call.inputs[0])?,
            k: read(&call.inputs[1])?,
            v: read(&call.inputs[2])?,
            sizes: [
                qs[..r - 2].iter().product(),
                qs[r - 2],
                qs[r - 1],
                call.inputs[1].shape[r - 2],
                call.inputs[2].shape[r - 1],
            ],
            scale,
        })
    }
}

/// Attention with a streaming softmax (FlashAttention's recurrence): one pass
/// over the keys, rescaling the running sum and output at each new maximum.
pub fn sdpa_online(call: &KernelCall) -> Result<(), ProviderError> {
    let Attention {
        q,
        k,
        v,
        sizes: [batch, lq, d, lk, dv],
        scale,
    } = Attention::read(call)?;
    let mut out = vec![0.0f32; batch * lq * dv];
    for b in 0..batch {
        for i in 0..lq {
            let qi = &q[(b * lq + i) * d..][..d];
            let (mut m, mut l) = (f32::NEG_INFINITY, 0.0f32);
            let acc = &mut out[(b * lq + i) * dv..][..dv];
            for j in 0..lk {
                let kj = &k[(b * lk + j) * d..][..d];
                let s = scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>();
                let m_new = m.max(s);
                let corr = (m - m_new).exp();
                let p = (s - m_new).exp();
                l = l * corr + p;
                let vj = &v[(b * lk + j) * dv..][..dv];
                for (a, vv) in acc.iter_mut().zip(vj) {
                    *a = *a * corr + p * vv;
                }
                m = m_new;
            }
            acc.iter_mut().for_each(|a| *a /= l);
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// GELU by its tanh approximation, `x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`,
/// where the catalog's `vsdk.gelu` is the exact `x·Φ(x)`.
pub fn gelu_tanh(call: &KernelCall) -> Result<(), ProviderError> {
    let x = read(&call.inputs[0])?;
    let c = (2.0f32 / std::f32::consts::PI).sqrt();
    let y: Vec<f32> = x
        .iter()
        .map(|&x| 0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh()))
        .collect();
    write(&call.outputs[0], &y, false);
    Ok(())
}

/// Attention in float32 whose softmax weights come from `weights`: a row's
/// logits in, its exponentials and their sum out (the mutants differ there).
fn attention_with(
    call: &KernelCall,
    weights: impl Fn(&[f32]) -> (Vec<f32>, f32),
) -> Result<(), ProviderError> {
    let Attention {
        q,
        k,
        v,
        sizes: [batch, lq, d, lk, dv],
        scale,
    } = Attention::read(call)?;
    let mut out = vec![0.0f32; batch * lq * dv];
    for b in 0..batch {
        for i in 0..lq {
            let qi = &q[(b * lq + i) * d..][..d];
            let s: Vec<f32> = (0..lk)
                .map(|j| {
                    let kj = &k[(b * lk + j) * d..][..d];
                    scale * qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>()
                })
                .collect();
            let (e, z) = weights(&s);
            let acc = &mut out[(b * lq + i) * dv..][..dv];
            for (j, ej) in e.iter().enumerate() {
                let vj = &v[(b * lk + j) * dv..][..dv];
                for (a, vv) in acc.iter_mut().zip(vj) {
                    *a += ej / z * vv;
                }
            }
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// Attention whose softmax adds its exponentials in bfloat16 (each partial
/// sum rounded to 8 bits), the rest in float32.
pub fn sdpa_bf16_sum(call: &KernelCall) -> Result<(), ProviderError> {
    attention_with(call, |s| {
        let m = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let e: Vec<f32> = s.iter().map(|x| (x - m).exp()).collect();
        let z = e
            .iter()
            .fold(bf16::ZERO, |a, &x| bf16::from_f32(a.to_f32() + x))
            .to_f32();
        (e, z)
    })
}

/// Attention whose softmax exponentiates the logits as they are, without
/// subtracting the row's maximum: `exp` overflows to Inf past 88.7 in
/// float32, and Inf/Inf is NaN.
pub fn sdpa_no_max(call: &KernelCall) -> Result<(), ProviderError> {
    attention_with(call, |s| {
        let e: Vec<f32> = s.iter().map(|x| x.exp()).collect();
        let z = e.iter().sum();
        (e, z)
    })
}

/// Softmax over the last axis without subtracting the maximum (as above).
pub fn softmax_no_max(call: &KernelCall) -> Result<(), ProviderError> {
    let x = read(&call.inputs[0])?;
    let d = *call.inputs[0].shape.last().unwrap_or(&1);
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(d.max(1)) {
        let e: Vec<f32> = row.iter().map(|v| v.exp()).collect();
        let z: f32 = e.iter().sum();
        out.extend(e.iter().map(|v| v / z));
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// LayerNorm with the one-pass variance `E[x²] − μ²` in float32: it cancels
/// catastrophically when the mean is large next to the spread.
pub fn layer_norm_one_pass(call: &KernelCall) -> Result<(), ProviderError> {
    let (x, g, b) = (
        read(&call.inputs[0])?,
        read(&call.inputs[1])?,
        read(&call.inputs[2])?,
    );
    let (axis, eps) = match resolved(call, Op::LayerNorm)? {
        Node::LayerNorm { axis, eps } => (axis, eps as f32),
        _ => unreachable!("layer_norm"),
    };
    let d: usize = call.inputs[0].shape[axis..].iter().product();
    let mut out = vec![0.0f32; x.len()];
    for (row, o) in x.chunks(d.max(1)).zip(out.chunks_mut(d.max(1))) {
        let (s1, s2) = row
            .iter()
            .fold((0.0f32, 0.0f32), |(a, b), &v| (a + v, b + v * v));
        let mu = s1 / d as f32;
        let var = (s2 / d as f32 - mu * mu).max(0.0);
        let s = (var + eps).sqrt();
        for (j, (o, v)) in o.iter_mut().zip(row).enumerate() {
            *o = (v - mu) / s * g[j] + b[j];
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// How a mutant `vsdk.rms_norm` goes wrong.
#[derive(Clone, Copy, PartialEq)]
pub enum RmsBug {
    /// `x·γ/√(mean(x²) + 1e-2)`: the LLaMA/T5 form, eps added under the
    /// root, with an eps large enough to show on rows of unit scale.
    EpsAdded,
    /// `x/max(‖x‖, eps)·√d`, γ never read.
    NoGamma,
}

/// `vsdk.rms_norm` in float32 with one of [`RmsBug`].
pub fn rms_norm(call: &KernelCall, bug: RmsBug) -> Result<(), ProviderError> {
    let (x, g) = (read(&call.inputs[0])?, read(&call.inputs[1])?);
    let eps = match resolved(call, Op::RmsNorm)? {
        Node::RmsNorm { eps } => eps as f32,
        _ => unreachable!("rms_norm"),
    };
    let d = call.inputs[0].shape.last().copied().unwrap_or(1).max(1);
    let mut out = vec![0.0f32; x.len()];
    for (r, (row, o)) in x.chunks(d).zip(out.chunks_mut(d)).enumerate() {
        let q = row.iter().map(|v| v * v).sum::<f32>();
        let scale = match bug {
            RmsBug::EpsAdded => 1.0 / (q / d as f32 + 1e-2).sqrt(),
            RmsBug::NoGamma => (d as f32).sqrt() / q.sqrt().max(eps),
        };
        let at = (r * d) % g.len().max(1);
        for (j, (o, v)) in o.iter_mut().zip(row).enumerate() {
            *o = match bug {
                RmsBug::EpsAdded => v * scale * g[at + j],
                RmsBug::NoGamma => v * scale,
            };
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// A float-to-integer `vsdk.cast` by truncation toward zero (C's and Rust's
/// `as`, saturating, NaN to 0) where the catalog rounds half to even.
pub fn cast_truncate(call: &KernelCall) -> Result<(), ProviderError> {
    let (x, out) = (read(&call.inputs[0])?, &call.outputs[0]);
    for (i, &v) in x.iter().enumerate() {
        // SAFETY: a compact integer output of `x.len()` elements, in host memory.
        unsafe {
            let p = out.ptr.add(i * out.dtype.size_bytes());
            match out.dtype {
                DType::U8 => p.write(v as u8),
                DType::I32 => p.cast::<i32>().write_unaligned(v as i32),
                DType::I64 => p.cast::<i64>().write_unaligned(v as i64),
                d => return Err(ProviderError::invalid(format!("cast_truncate: to {d}"))),
            }
        }
    }
    Ok(())
}

/// LayerNorm dividing the squared deviations by N − 1 (Bessel's correction,
/// `torch.var`'s default) instead of N.
pub fn layer_norm_unbiased(call: &KernelCall) -> Result<(), ProviderError> {
    layer_norm_f32(call, true)
}

/// LayerNorm in float32 with plain loops: the mean and the centred variance
/// summed one element after the other (the largest error of the orders a
/// correct kernel uses), `(x − μ)/s·γ + β`.
pub fn layer_norm_sequential(call: &KernelCall) -> Result<(), ProviderError> {
    layer_norm_f32(call, false)
}

/// LayerNorm in float32 as above; with `unbiased`, dividing by N − 1.
fn layer_norm_f32(call: &KernelCall, unbiased: bool) -> Result<(), ProviderError> {
    let (x, g, b) = (
        read(&call.inputs[0])?,
        read(&call.inputs[1])?,
        read(&call.inputs[2])?,
    );
    let (axis, eps) = match resolved(call, Op::LayerNorm)? {
        Node::LayerNorm { axis, eps } => (axis, eps as f32),
        _ => unreachable!("layer_norm"),
    };
    let d: usize = call.inputs[0].shape[axis..].iter().product();
    let mut out = vec![0.0f32; x.len()];
    for (row, o) in x.chunks(d.max(1)).zip(out.chunks_mut(d.max(1))) {
        let mu = row.iter().sum::<f32>() / d as f32;
        let n = if unbiased { d as f32 - 1.0 } else { d as f32 };
        let var = row.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / n;
        let s = (var + eps).sqrt();
        for (j, (o, v)) in o.iter_mut().zip(row).enumerate() {
            *o = (v - mu) / s * g[j] + b[j];
        }
    }
    write(&call.outputs[0], &out, false);
    Ok(())
}

/// Non-antialiased bicubic resize with Keys' a = −0.5 (OpenCV's and Pillow's
/// constant) where the catalog says PyTorch's a = −0.75.
pub fn resize_a05(call: &KernelCall) -> Result<(), ProviderError> {
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

fn resolved(call: &KernelCall, op: Op) -> Result<Node, ProviderError> {
    let specs: Vec<_> = call.inputs.iter().map(TensorArg::spec).collect();
    Node::infer(op, &call.attrs, &specs)
        .map(|(n, _)| n)
        .map_err(|e| ProviderError::invalid(e.to_string()))
}

/// Reverses the rows (axis −2) of the output the target just computed:
/// `vsdk.conv2d`'s output then holds the patch grid upside down.
pub fn flip_rows(call: &KernelCall) -> Result<(), ProviderError> {
    let out = &call.outputs[0];
    let rank = out.shape.len();
    if rank < 2 {
        return Ok(());
    }
    let (h, w) = (out.shape[rank - 2], out.shape[rank - 1]);
    if h * w == 0 {
        return Ok(());
    }
    let v = read(out)?;
    let mut flipped = v.clone();
    for (plane, dst) in v.chunks(h * w).zip(flipped.chunks_mut(h * w)) {
        for r in 0..h {
            dst[r * w..(r + 1) * w].copy_from_slice(&plane[(h - 1 - r) * w..(h - r) * w]);
        }
    }
    write(out, &flipped, false);
    Ok(())
}

/// How a mutant `vsdk.rasterize` differs: nvdiffrast's CUDA snapping (a
/// correct rasterizer that disagrees with the reference at edges), or one
/// of a port's classic mistakes (docs/validation.md, "Rasterization").
#[derive(Clone, Copy, PartialEq)]
pub enum RasterVariant {
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
pub fn rasterize(call: &KernelCall, bug: RasterVariant) -> Result<(), ProviderError> {
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
