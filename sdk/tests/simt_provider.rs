//! The GPU kernel source (vendors/gpu) and the GPU providers' launch code,
//! run on the CPU by the SIMT emulation provider, against the same f64
//! references as the CPU provider, on fresh random inputs: every float kernel
//! at float32, float16 and bfloat16, data movement on every dtype, and the
//! casts the kernels implement, bit for bit, and the sparse voxel kernels
//! (a device hash, a bitonic sort) against their definitions.

mod common;
use common::cases::*;
use common::*;
use rand::Rng;
use vips_sdk::{AttrValue, Attrs, DType, HostTensor};

#[test]
fn float_kernels_match_f64_references_at_every_gpu_dtype() {
    let dtypes = [DType::F32, DType::F16, DType::BF16];
    check_float_kernels(&simt(), "simt_float_kernels", &dtypes, tolerance);
}

#[test]
fn sparse_voxel_kernels_match_their_definitions_at_every_gpu_dtype() {
    let dtypes = [DType::F32, DType::F16, DType::BF16];
    common::sparse::check_sparse_kernels(&simt(), "simt_sparse", &dtypes, tolerance);
}

#[test]
fn movement_kernels_are_exact_on_every_dtype() {
    check_movement_kernels(&simt(), "simt_movement_kernels");
}

fn cast(to: &str) -> Attrs {
    Attrs::new().with("dtype", AttrValue::Str(to.into()))
}

#[test]
fn casts_round_half_to_even_and_saturate_as_the_cpu_reference_does() {
    let (mut r, seed) = rng("simt_cast");
    let (dev, cpu) = (simt(), cpu());
    let mut x = cast_input(&mut r);
    x.data[3] = f64::NAN;
    let mut y = T::random(&mut r, &[64], -70000.0, 70000.0);
    // float16's edges: the overflow tie 65520, exact ties between subnormals
    // (2^-25 rounds to 0, 3·2^-25 to 2^-23) and between normals (1 + 2^-11
    // to 1, 1 + 3·2^-11 up), bfloat16's tie 1 + 2^-8, zero's sign.
    let p = |e: i32| 2f64.powi(e);
    let edges = [
        65504.0,
        65519.99,
        65520.0,
        6.1e-5,
        p(-25),
        3.0 * p(-25),
        1.0 + p(-11),
        1.0 + 3.0 * p(-11),
        1.0 + p(-8),
        -0.0,
        1e-9,
    ];
    y.data[..edges.len()].copy_from_slice(&edges);
    for to in ["uint8", "float16", "bfloat16", "float32"] {
        for (input, from) in [(&x, DType::F32), (&y, DType::F32), (&x, DType::F16)] {
            let host = input.host(from);
            let got = run(&dev, "vsdk.cast", &cast(to), std::slice::from_ref(&host));
            let want = run(&cpu, "vsdk.cast", &cast(to), &[host]);
            assert_eq!(
                got.bytes, want.bytes,
                "{from} -> {to} differs from the CPU reference (seed {seed})"
            );
        }
    }
    // int32 to the float types: exact below 2^24, rounded once to nearest above.
    let ints: Vec<i32> = (0..64)
        .map(|i| match i {
            0 => i32::MIN,
            1 => i32::MAX,
            2 => (1 << 24) + 1,
            // A bfloat16 tie only after a float32 rounding: rounded once it goes up.
            3 => (1 << 24) + (1 << 16) + 1,
            4 => -((1 << 24) + (1 << 16) + 1),
            _ => r.gen_range(-70000..70000),
        })
        .collect();
    let ints = HostTensor::from_vec(&[64], ints).unwrap();
    for to in ["float16", "bfloat16", "float32"] {
        let got = run(&dev, "vsdk.cast", &cast(to), std::slice::from_ref(&ints));
        let want = run(&cpu, "vsdk.cast", &cast(to), std::slice::from_ref(&ints));
        assert_eq!(got.bytes, want.bytes, "int32 -> {to} (seed {seed})");
    }
}

#[test]
fn every_16_bit_value_widens_exactly() {
    let dev = simt();
    for dtype in [DType::F16, DType::BF16] {
        let bits: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_ne_bytes).collect();
        let x = HostTensor::from_bytes(spec(dtype, &[65536]), bits).unwrap();
        let got = run(
            &dev,
            "vsdk.cast",
            &cast("float32"),
            std::slice::from_ref(&x),
        );
        let (got, want) = (got.to_f64_vec(), x.to_f64_vec());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w || (g.is_nan() && w.is_nan()),
                "{dtype} bits {i:#06x}: {g} instead of {w}"
            );
        }
    }
}

#[test]
fn float64_math_is_refused_as_unsupported_not_computed() {
    let (mut r, _) = rng("simt_f64");
    let x = T::random(&mut r, &[3, 4], -1.0, 1.0);
    let err = try_run(&simt(), "vsdk.gelu", &Attrs::new(), &[x.host(DType::F64)]).unwrap_err();
    assert!(err.to_string().contains("float64"), "{err}");
}
