//! Linear layers and convolution: `vsdk.linear` summed in other orders or
//! rounded wrongly, and `vsdk.conv2d`'s patch grid upside down.

use super::{read, write};
use vsdk_provider_kit::{KernelCall, ProviderError};

/// How a mutant `vsdk.linear` accumulates `Σ x·w`.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Sum {
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

fn pairwise(v: &[f32]) -> f32 {
    if v.len() <= 8 {
        return v.iter().fold(0.0, |a, &x| a + x);
    }
    let (l, r) = v.split_at(v.len() / 2);
    pairwise(l) + pairwise(r)
}

pub(super) fn linear(call: &KernelCall, sum: Sum) -> Result<(), ProviderError> {
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

/// Reverses the rows (axis −2) of the output the target just computed:
/// `vsdk.conv2d`'s output then holds the patch grid upside down.
pub(super) fn flip_rows(call: &KernelCall) -> Result<(), ProviderError> {
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
