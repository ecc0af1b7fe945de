//! How many multiply-adds a core does per second with AVX512_BF16's
//! `VDPBF16PS` against float32 FMAs (`VFMADD231PS`), both on 512-bit
//! registers with 12 independent accumulators: the ceiling of the bfloat16
//! linear (src/kernels/linear_bf16.rs) against the float32 one. Figures in
//! docs/benchmarks.md.
//!
//!     cargo run --release -p vsdk-provider-cpu --example bf16_throughput

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    const ACCUMULATORS: usize = 12;

    /// # Safety
    /// The CPU has AVX-512F and AVX512_BF16.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn dot_pairs(rounds: usize) -> f32 {
        let a = std::hint::black_box(_mm512_set1_epi16(0x3f80));
        let b = std::hint::black_box(_mm512_set1_epi16(0x3f81));
        // SAFETY: both are 64-byte vectors; the bits are bfloat16 pairs.
        let (a, b) = unsafe {
            (
                std::mem::transmute::<__m512i, __m512bh>(a),
                std::mem::transmute::<__m512i, __m512bh>(b),
            )
        };
        let mut acc = [_mm512_setzero_ps(); ACCUMULATORS];
        for _ in 0..rounds {
            for r in acc.iter_mut() {
                *r = _mm512_dpbf16_ps(*r, a, b);
            }
        }
        _mm512_reduce_add_ps(
            acc.iter()
                .fold(_mm512_setzero_ps(), |s, &r| _mm512_add_ps(s, r)),
        )
    }

    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn fma(rounds: usize) -> f32 {
        let a = std::hint::black_box(_mm512_set1_ps(1.0001));
        let b = std::hint::black_box(_mm512_set1_ps(0.9999));
        let mut acc = [_mm512_setzero_ps(); ACCUMULATORS];
        for _ in 0..rounds {
            for r in acc.iter_mut() {
                *r = _mm512_fmadd_ps(a, b, *r);
            }
        }
        _mm512_reduce_add_ps(
            acc.iter()
                .fold(_mm512_setzero_ps(), |s, &r| _mm512_add_ps(s, r)),
        )
    }

    pub fn main() {
        if !(is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bf16")) {
            eprintln!("this CPU has no AVX512_BF16");
            std::process::exit(1);
        }
        let rounds = 20_000_000;
        let instructions = (rounds * ACCUMULATORS) as f64;
        for _ in 0..3 {
            let t = std::time::Instant::now();
            // SAFETY: both features were detected above.
            std::hint::black_box(unsafe { dot_pairs(rounds) });
            let dp = t.elapsed().as_secs_f64();
            let t = std::time::Instant::now();
            // SAFETY: as above.
            std::hint::black_box(unsafe { fma(rounds) });
            let f = t.elapsed().as_secs_f64();
            println!(
                "one core: VDPBF16PS {:.1} G multiply-adds/s, VFMADD231PS {:.1} G multiply-adds/s ({:.2}x)",
                instructions * 32.0 / dp / 1e9,
                instructions * 16.0 / f / 1e9,
                (32.0 / dp) / (16.0 / f)
            );
        }
    }
}

fn main() {
    #[cfg(target_arch = "x86_64")]
    x86::main();
    #[cfg(not(target_arch = "x86_64"))]
    {
        eprintln!("AVX512_BF16 is an x86-64 extension");
        std::process::exit(1);
    }
}
