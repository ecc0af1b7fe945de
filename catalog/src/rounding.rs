//! Rounding float64 to the 16-bit float types, to nearest with ties to even
//! (the catalog's `vsdk.cast`, and every tier conversion of the host).
//!
//! `half`'s own `from_f64` misrounds values just above a rounding tie when it
//! falls back to its software path (half-rs#151; for bfloat16 always: about
//! 45 in a million random float32 values come out one ulp low). Rounding to
//! float32 *to odd* first and then to the 16-bit type to nearest is exact: the
//! odd last bit keeps the information that something was cut off, and float32
//! has more than two bits to spare over either type.

use half::{bf16, f16};

/// `v` rounded to float32 toward zero, with the last bit set if inexact.
fn f32_round_to_odd(v: f64) -> f32 {
    let t = v as f32;
    if !t.is_finite() || f64::from(t) == v {
        return t;
    }
    let toward_zero = if f64::from(t).abs() > v.abs() {
        f32::from_bits(t.to_bits() - 1)
    } else {
        t
    };
    f32::from_bits(toward_zero.to_bits() | 1)
}

/// `v` as bfloat16, to nearest, ties to even.
pub fn bf16_from_f64(v: f64) -> bf16 {
    bf16::from_f32(f32_round_to_odd(v))
}

/// `v` as float16, to nearest, ties to even.
pub fn f16_from_f64(v: f64) -> f16 {
    f16::from_f32(f32_round_to_odd(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The exact rounding, by comparing with both neighbours in float64.
    fn nearest_even<T: Copy>(v: f64, down: T, up: T, wide: fn(T) -> f64, even: fn(T) -> bool) -> T {
        let (d, u) = (v - wide(down), wide(up) - v);
        if d < u || (d == u && even(down)) {
            down
        } else {
            up
        }
    }

    #[test]
    fn ties_and_near_ties_round_to_nearest_even() {
        // Random doubles near every kind of 16-bit boundary: the float32 that
        // is exactly a tie, and a few float64 ulps either side of it.
        let mut s = 0x9e37_79b9_7f4a_7c15u64 ^ u64::from(std::process::id());
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..200_000 {
            let r = next();
            let hi = (r as u16 % 0x7f00) as u32; // a finite bfloat16 below the largest binade
            let tie = f32::from_bits((hi << 16) | 0x8000 | ((r >> 63) as u32) << 31);
            let v = f64::from(tie)
                + f64::from(tie).abs()
                    * ((r >> 20) % 7) as f64
                    * 1e-15
                    * if r & 1 == 0 { 1.0 } else { -1.0 };
            let b = bf16_from_f64(v);
            let x = bf16::from_f32(tie);
            let (lo, up) = if f64::from(x) <= v {
                (
                    x,
                    bf16::from_bits(if x.to_bits() & 0x8000 == 0 {
                        x.to_bits() + 1
                    } else {
                        x.to_bits() - 1
                    }),
                )
            } else {
                (
                    bf16::from_bits(if x.to_bits() & 0x8000 == 0 {
                        x.to_bits() - 1
                    } else {
                        x.to_bits() + 1
                    }),
                    x,
                )
            };
            let want = nearest_even(v, lo, up, f64::from, |t| t.to_bits() & 1 == 0);
            assert_eq!(b, want, "{v:e}");
        }
        // The case found in the DINOv2 suite.
        let v = f64::from(f32::from_bits(0xbf1a_8005));
        assert_eq!(bf16_from_f64(v).to_bits(), 0xbf1b);
        // Halfway cases of float16 decided by bits float32 does not hold.
        let x = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(f16_from_f64(x).to_bits(), 0x3c01);
        assert_eq!(f16_from_f64(1.0 + 2f64.powi(-11)).to_bits(), 0x3c00);
        assert!(bf16_from_f64(f64::NAN).is_nan() && f16_from_f64(1e10).is_infinite());
    }
}
