//! bfloat16 conversions written for the auto-vectoriser, bit for bit against `half`.

use half::bf16;
use rand::Rng;
use vsdk_provider_cpu::kernels::narrow::Narrow;

#[test]
fn bf16_widening_matches_half_for_every_value() {
    let all: Vec<bf16> = (0..=u16::MAX).map(bf16::from_bits).collect();
    let mut wide = vec![0f32; all.len()];
    bf16::widen_slice(&all, &mut wide);
    for (b, w) in all.iter().zip(&wide) {
        assert_eq!(w.to_bits(), b.to_f32().to_bits(), "{:#06x}", b.to_bits());
    }
}

#[test]
fn bf16_narrowing_matches_half_on_ties_specials_and_random_bits() {
    let mut r = crate::rng("narrow");
    let mut v: Vec<f32> = (0..1 << 20)
        .map(|i| {
            let bits: u32 = r.gen();
            f32::from_bits(match i % 4 {
                // exact ties, with the kept last bit odd or even
                0 => (bits & 0xffff_0000) | 0x8000,
                // one below and one above a tie
                1 => (bits & 0xffff_0000) | 0x7fff,
                2 => (bits & 0xffff_0000) | 0x8001,
                _ => bits,
            })
        })
        .collect();
    v.extend([
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::MAX,
        f32::MIN_POSITIVE,
        f32::from_bits(1),
        f32::from_bits(0x7f7f_8000), // rounds up to infinity
    ]);
    let mut narrow = vec![bf16::ZERO; v.len()];
    bf16::narrow_slice(&v, &mut narrow);
    for (x, n) in v.iter().zip(&narrow) {
        assert_eq!(
            n.to_bits(),
            bf16::from_f32(*x).to_bits(),
            "{:#010x}",
            x.to_bits()
        );
    }
}
