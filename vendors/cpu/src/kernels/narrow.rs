//! The 16-bit float types in memory, computed in float32: widening is exact,
//! narrowing rounds to nearest even, once, at an operator's output.
//!
//! float16 uses `half`'s slice conversions (F16C where the CPU has it).
//! bfloat16 has no SIMD path in `half` (one scalar call per element), so its
//! conversions are written here for the auto-vectoriser and compiled per
//! instruction set: both are a few integer operations on the bits (a
//! bfloat16 is the top half of a float32), bit-identical to `half`'s scalar
//! ones, NaN payloads included.

use half::{bf16, f16, slice::HalfFloatSliceExt};
use multiversion::multiversion;
use rayon::prelude::*;

/// A 16-bit float stored in memory and computed in f32.
pub trait Narrow: Copy + Send + Sync {
    fn widen(self) -> f32;
    fn widen_slice(src: &[Self], dst: &mut [f32]);
    fn narrow_slice(src: &[f32], dst: &mut [Self]);
}

impl Narrow for f16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst)
    }
    fn narrow_slice(src: &[f32], dst: &mut [Self]) {
        dst.convert_from_f32_slice(src)
    }
}

impl Narrow for bf16 {
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn widen_slice(src: &[Self], dst: &mut [f32]) {
        bf16_to_f32(src.reinterpret_cast(), dst)
    }
    fn narrow_slice(src: &[f32], dst: &mut [Self]) {
        f32_to_bf16(src, dst.reinterpret_cast_mut())
    }
}

/// Elements per parallel task of the whole-tensor conversions.
const CHUNK: usize = 1 << 14;

/// [`Narrow::widen_slice`] in parallel tasks.
pub fn widen_par<N: Narrow>(src: &[N], dst: &mut [f32]) {
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| N::widen_slice(s, d));
}

/// [`Narrow::narrow_slice`] in parallel tasks.
pub fn narrow_par<N: Narrow>(src: &[f32], dst: &mut [N]) {
    dst.par_chunks_mut(CHUNK)
        .zip(src.par_chunks(CHUNK))
        .for_each(|(d, s)| N::narrow_slice(s, d));
}

/// bfloat16 bits to float32: the bits become the top half; a NaN gets its
/// quiet bit set (as `half` does).
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2"))]
fn bf16_to_f32(src: &[u16], dst: &mut [f32]) {
    for (d, &b) in dst.iter_mut().zip(src) {
        let nan = u32::from(b & 0x7fff > 0x7f80);
        *d = f32::from_bits((u32::from(b) | (nan << 6)) << 16);
    }
}

/// float32 to bfloat16 bits, to nearest, ties to even: add one to the top half
/// when the cut-off half is above the midpoint, or at it with the kept last
/// bit odd. A NaN keeps its top half with the quiet bit set.
#[multiversion(targets("x86_64+avx512f+avx512bw+avx512vl", "x86_64+avx2"))]
pub(super) fn f32_to_bf16(src: &[f32], dst: &mut [u16]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        let x = v.to_bits();
        let nan = x & 0x7fff_ffff > 0x7f80_0000;
        let up = (x >> 15) & 1 & u32::from(x & 0x1_7fff != 0);
        let rounded = (x >> 16) + up;
        *d = if nan { (x >> 16) | 0x40 } else { rounded } as u16;
    }
}
