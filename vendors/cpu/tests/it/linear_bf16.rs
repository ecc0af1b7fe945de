//! The AVX512_BF16 linear against float64 sums of the same values.

use half::bf16;
use ndarray::{ArrayD, IxDyn};
use rand::Rng;
use vsdk_provider_cpu::kernels::linear_bf16::{available, exact_on, linear};

fn random(r: &mut impl Rng, shape: &[usize]) -> ArrayD<bf16> {
    ArrayD::from_shape_fn(IxDyn(shape), |_| bf16::from_f32(r.gen_range(-2.0..2.0)))
}

/// Against float64 sums of the same bfloat16 values: within one rounding
/// to bfloat16 plus float32 accumulation over k.
#[test]
fn matches_float64_within_rounding_on_odd_shapes() {
    if !available() {
        // The kernel cannot run here; what can be checked is that the
        // dispatch agrees with what the CPU says it has.
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        assert!(
            !cpuinfo.contains("avx512_bf16") || !cpuinfo.contains("avx512f"),
            "the CPU lists AVX512_BF16 but the kernel is not dispatched"
        );
        eprintln!("no AVX512_BF16 on this CPU: bfloat16 linears widen to float32 here");
        return;
    }
    let mut r = crate::rng("linear_bf16");
    for (m, n, k, bias) in [
        (257, 384, 384, true),
        (1, 1, 1, false),
        (7, 65, 3, true),
        (13, 130, 257, true),
        (6, 64, 64, false),
        (5, 200, 1536, true),
        (4, 70, 0, true),
        (3, 5, 0, false),
    ] {
        let x = random(&mut r, &[1, m, k]);
        let w = random(&mut r, &[n, k]);
        let b = bias.then(|| random(&mut r, &[n]));
        assert!(exact_on(&[x.view(), w.view()]));
        let mut out = ArrayD::from_elem(IxDyn(&[1, m, n]), bf16::NAN);
        linear(
            &x.view(),
            &w.view(),
            b.as_ref().map(|b| b.view()).as_ref(),
            out.view_mut(),
        );
        for i in 0..m {
            for j in 0..n {
                let (mut exact, mut mag) = (b.as_ref().map_or(0.0, |b| b[[j]].to_f64()), 0.0);
                mag += exact.abs();
                for kk in 0..k {
                    let p = x[[0, i, kk]].to_f64() * w[[j, kk]].to_f64();
                    exact += p;
                    mag += p.abs();
                }
                let got = out[[0, i, j]].to_f64();
                let allowed = exact.abs() * 2f64.powi(-8) + mag * (k as f64 + 2.0) * 2f64.powi(-24);
                assert!(
                    (got - exact).abs() <= allowed,
                    "[{m}x{k}]·[{n}x{k}]ᵀ at ({i}, {j}): {got} against {exact} (allowed {allowed})"
                );
            }
        }
    }
}

#[test]
fn subnormal_operands_take_the_widening_path() {
    let mut r = crate::rng("linear_bf16 subnormal");
    let mut w = random(&mut r, &[70, 33]);
    assert!(exact_on(&[w.view()]));
    let at = [r.gen_range(0..70), r.gen_range(0..33)];
    w[IxDyn(&at)] = bf16::from_bits(r.gen_range(1..0x80) | (r.gen::<u16>() & 0x8000));
    assert!(!exact_on(&[w.view()]), "a subnormal at {at:?}");
    assert!(!exact_on(&[w.t()]), "a subnormal at {at:?}, strided view");
}
