//! bfloat16 linear on AVX512_BF16, without widening the operands.
//!
//! `VDPBF16PS` multiplies two pairs of bfloat16 and adds both products, each
//! exact in float32, into a float32 lane: one instruction does 32
//! multiply-adds where a float32 FMA does 16 (1.85× the multiply-adds per
//! second on the machine of docs/benchmarks.md). The kernel is an outer product: a
//! broadcast pair of one input row against 64 output columns of packed weight
//! pairs, 6 rows × 64 columns of float32 accumulators in registers, started at
//! the bias. Each output is one float32 sum over k in a fixed order (pairs in
//! sequence, whatever the thread count), rounded once to bfloat16.
//!
//! The instruction treats subnormal inputs as zero, which the catalog's
//! semantics (widen exactly) do not allow: operands holding any take the
//! widening path instead ([`exact_on`]). It also flushes sums below the
//! smallest normal float32, which the error model allows (`Precision::tiny`).

use super::matmul::SendPtr;
use super::narrow::f32_to_bf16;
use half::bf16;
use ndarray::{ArrayViewD, ArrayViewMutD};
use rayon::prelude::*;
use std::arch::x86_64::*;

/// Output columns per panel: four registers of 16 lanes.
const NR: usize = 64;
/// Input rows per tile.
const MR: usize = 6;

/// Whether this CPU runs the kernel.
pub fn available() -> bool {
    is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512bf16")
}

/// Whether the kernel computes exactly what widening would on these
/// operands: none of them holds a subnormal.
pub fn exact_on(operands: &[ArrayViewD<bf16>]) -> bool {
    fn subnormal(v: &bf16) -> bool {
        let b = v.to_bits();
        b & 0x7f80 == 0 && b & 0x7f != 0
    }
    operands.iter().all(|t| match t.as_slice_memory_order() {
        Some(s) => !s
            .par_chunks(1 << 14)
            .any(|c| c.iter().fold(false, |any, v| any | subnormal(v))),
        None => !t.iter().any(subnormal),
    })
}

/// `out[..., N] = x[..., K] · w[N, K]ᵀ + b[N]`, rounded once to bfloat16.
///
/// # Panics
/// Where [`available`] is false (the caller checks it first).
pub fn linear(
    x: &ArrayViewD<bf16>,
    w: &ArrayViewD<bf16>,
    b: Option<&ArrayViewD<bf16>>,
    mut out: ArrayViewMutD<bf16>,
) {
    assert!(available(), "the bfloat16 linear needs AVX512_BF16");
    let k = x.shape()[x.ndim() - 1];
    let n = w.shape()[0];
    let m: usize = x.shape()[..x.ndim() - 1].iter().product();
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        // Empty sums: the bias (already a bfloat16), or zeros.
        let out = out.as_slice_mut().expect("outputs are compact");
        for row in out.chunks_exact_mut(n) {
            match b {
                Some(b) => row.iter_mut().zip(b.iter()).for_each(|(o, &v)| *o = v),
                None => row.fill(bf16::ZERO),
            }
        }
        return;
    }
    let kp = k.div_ceil(2);
    let x = x.as_standard_layout();
    let w = w.as_standard_layout();
    let (xs, ws) = (
        x.as_slice().expect("standard layout"),
        w.as_slice().expect("standard layout"),
    );
    // Each row of x as pairs (element 2p low, 2p + 1 high, as they lie in
    // memory on a little-endian machine), zero-padded when k is odd.
    let packed;
    let xp: &[u32] = match reinterpret_pairs(xs, k) {
        Some(p) => p,
        None => {
            packed = xs
                .par_chunks(k)
                .flat_map_iter(|row| row.chunks(2).map(pack))
                .collect::<Vec<u32>>();
            &packed
        }
    };
    let bias: Vec<f32> = match b {
        Some(b) => b.iter().map(|v| v.to_f32()).collect(),
        None => vec![0.0; n],
    };
    let out = out.as_slice_mut().expect("outputs are compact");
    let dst = SendPtr(out.as_mut_ptr());
    (0..n.div_ceil(NR)).into_par_iter().for_each(|panel| {
        let j0 = panel * NR;
        let cols = NR.min(n - j0);
        // The panel's weights as pairs: [kp][64 columns], zero-padded, in a
        // buffer the thread keeps for its next panel.
        let mut wp = PANEL.take();
        wp.clear();
        wp.resize(kp * NR, 0);
        for c in 0..cols {
            let row = &ws[(j0 + c) * k..][..k];
            match reinterpret_pairs(row, k) {
                Some(pairs) => pairs
                    .iter()
                    .enumerate()
                    .for_each(|(p, &v)| wp[p * NR + c] = v),
                None => row
                    .chunks(2)
                    .enumerate()
                    .for_each(|(p, pair)| wp[p * NR + c] = pack(pair)),
            }
        }
        let mut start = [0f32; NR];
        start[..cols].copy_from_slice(&bias[j0..j0 + cols]);
        let mut acc = [[0f32; NR]; MR];
        let mut rounded = [0u16; NR];
        for i0 in (0..m).step_by(MR) {
            let rows = MR.min(m - i0);
            let a = &xp[i0 * kp..(i0 + rows) * kp];
            // SAFETY: `available()` was checked by the caller; `a` holds
            // `rows` rows of `kp` pairs, `wp` `kp` rows of 64 columns.
            unsafe {
                match rows {
                    6 => tile::<6>(a, &wp, kp, &start, &mut acc),
                    5 => tile::<5>(a, &wp, kp, &start, &mut acc),
                    4 => tile::<4>(a, &wp, kp, &start, &mut acc),
                    3 => tile::<3>(a, &wp, kp, &start, &mut acc),
                    2 => tile::<2>(a, &wp, kp, &start, &mut acc),
                    _ => tile::<1>(a, &wp, kp, &start, &mut acc),
                }
            }
            for (r, acc) in acc.iter().enumerate().take(rows) {
                f32_to_bf16(&acc[..cols], &mut rounded[..cols]);
                // SAFETY: row i0 + r < m, columns j0..j0 + cols ≤ n of the
                // compact [m, n] output: this panel's columns, written by
                // this panel alone; bf16 is a transparent u16.
                unsafe {
                    let row = dst.get().add((i0 + r) * n + j0).cast::<u16>();
                    std::ptr::copy_nonoverlapping(rounded.as_ptr(), row, cols);
                }
            }
        }
        if wp.capacity() <= KEEP_PANEL {
            PANEL.set(wp);
        }
    });
}

thread_local! {
    static PANEL: std::cell::Cell<Vec<u32>> = const { std::cell::Cell::new(Vec::new()) };
}

/// The largest panel buffer a thread keeps (4 MiB: K up to 16 Ki).
const KEEP_PANEL: usize = 1 << 20;

/// Rows of even length `k` that start 4-byte aligned are already pairs
/// (little-endian: the first of two in the low half).
fn reinterpret_pairs(s: &[bf16], k: usize) -> Option<&[u32]> {
    if !k.is_multiple_of(2) {
        return None;
    }
    // SAFETY: u32 has no invalid bit patterns; `align_to` only hands out the
    // aligned middle, which is all of `s` when the prefix and suffix are empty.
    let (pre, mid, post) = unsafe { s.align_to::<u32>() };
    (pre.is_empty() && post.is_empty()).then_some(mid)
}

/// One or two bfloat16 as a pair: the first in the low half.
fn pack(pair: &[bf16]) -> u32 {
    pair.iter()
        .enumerate()
        .fold(0, |p, (i, v)| p | u32::from(v.to_bits()) << (16 * i))
}

/// `acc[r] = start + Σ_p a[r][p] · w[p]` over pairs, for `R` rows.
///
/// # Safety
/// The CPU has AVX-512F and AVX512_BF16; `a` holds `R` rows of `kp` pairs and
/// `w` holds `kp` rows of `NR` pairs.
#[target_feature(enable = "avx512f,avx512bf16")]
unsafe fn tile<const R: usize>(
    a: &[u32],
    w: &[u32],
    kp: usize,
    start: &[f32; NR],
    acc_out: &mut [[f32; NR]; MR],
) {
    assert!(a.len() >= R * kp && w.len() >= kp * NR);
    // SAFETY (every load and store): inside the slices, per the contract
    // above; unaligned forms throughout.
    unsafe {
        let s = start.as_ptr();
        let init = [
            _mm512_loadu_ps(s),
            _mm512_loadu_ps(s.add(16)),
            _mm512_loadu_ps(s.add(32)),
            _mm512_loadu_ps(s.add(48)),
        ];
        let mut acc = [init; R];
        for p in 0..kp {
            let wrow = w.as_ptr().add(p * NR).cast::<__m512i>();
            let wv: [__m512bh; 4] = [
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(wrow)),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(wrow.add(1))),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(wrow.add(2))),
                std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(wrow.add(3))),
            ];
            for (r, acc) in acc.iter_mut().enumerate() {
                let pair = *a.get_unchecked(r * kp + p);
                let av = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair as i32));
                for q in 0..4 {
                    acc[q] = _mm512_dpbf16_ps(acc[q], av, wv[q]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            let o = acc_out[r].as_mut_ptr();
            for (q, v) in acc.iter().enumerate() {
                _mm512_storeu_ps(o.add(16 * q), *v);
            }
        }
    }
}
