//! The CPU provider, loaded through the loader, against straightforward f64
//! computations of every catalog operator, on fresh random inputs, in every
//! float dtype (and every dtype for data movement and cast).

use crate::common;
use common::cases::*;
use common::*;
use vips_sdk::{AttrValue, Attrs, DType};

#[test]
fn float_kernels_match_f64_references_in_every_float_dtype() {
    let dtypes = [DType::F64, DType::F32, DType::F16, DType::BF16];
    check_float_kernels(&cpu(), "float_kernels", &dtypes, tolerance);
}

#[test]
fn sparse_voxel_kernels_match_their_definitions_in_every_float_dtype() {
    let dtypes = [DType::F64, DType::F32, DType::F16, DType::BF16];
    common::sparse::check_sparse_kernels(&cpu(), "sparse_kernels", &dtypes, tolerance);
}

#[test]
fn movement_kernels_are_exact_on_every_dtype() {
    check_movement_kernels(&cpu(), "movement_kernels");
}

#[test]
fn cast_rounds_half_to_even_and_saturates() {
    let (mut r, seed) = rng("cast");
    let dev = cpu();
    let mut x = cast_input(&mut r);
    x.data[3] = f64::NAN;
    let cast = |to: &str| Attrs::new().with("dtype", AttrValue::Str(to.into()));
    let x32 = x.rounded(DType::F32);
    let u8s = run(&dev, "vsdk.cast", &cast("uint8"), &[x.host(DType::F32)]).to_f64_vec();
    let want: Vec<f64> = x32.data.iter().map(|&v| f32_to_u8(v)).collect();
    assert_eq!(u8s, want, "float32 -> uint8 (seed {seed})");
    let i32s = run(&dev, "vsdk.cast", &cast("int32"), &[x.host(DType::F32)]).to_f64_vec();
    let want: Vec<f64> = x32
        .data
        .iter()
        .map(|&v| if v.is_nan() { 0.0 } else { v.round_ties_even() })
        .collect();
    assert_eq!(i32s, want, "float32 -> int32 (seed {seed})");
    // Widening is exact; narrowing rounds to nearest.
    let img = random_image(&mut r, 4, 5);
    let f = run(&dev, "vsdk.cast", &cast("float32"), &[img.host(DType::U8)]).to_f64_vec();
    assert_eq!(f, img.data);
    let y = T::random(&mut r, &[33], -100.0, 100.0);
    let h = run(&dev, "vsdk.cast", &cast("float16"), &[y.host(DType::F64)]).to_f64_vec();
    assert_eq!(
        h,
        y.rounded(DType::F16).data,
        "float64 -> float16 (seed {seed})"
    );
    let b = run(&dev, "vsdk.cast", &cast("bfloat16"), &[y.host(DType::F32)]).to_f64_vec();
    let want: Vec<f64> = y
        .rounded(DType::F32)
        .data
        .iter()
        .map(|&v| half::bf16::from_f32(v as f32).to_f64())
        .collect();
    assert_eq!(b, want, "float32 -> bfloat16 (seed {seed})");
}
