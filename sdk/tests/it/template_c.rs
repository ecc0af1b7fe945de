//! The plain-C template and the CPU provider, both loaded through the loader,
//! agree on every operator of the catalog on fresh random inputs (fp32
//! tolerance for arithmetic, exact for data movement, cast and the uint8 resize).

use crate::common;
use common::cases::*;
use common::*;
use vips_sdk::{AttrValue, Attrs, DType, HostTensor};

#[test]
fn every_float_kernel_agrees_with_the_cpu_provider() {
    let (mut r, seed) = rng("template_float");
    let (cpu, tmpl) = (cpu(), template_c());
    for case in float_cases(&mut r) {
        let host: Vec<HostTensor> = case.inputs.iter().map(|t| t.host(DType::F32)).collect();
        let a = run(&tmpl, case.kernel, &case.attrs, &host);
        let b = run(&cpu, case.kernel, &case.attrs, &host);
        assert_eq!(a.spec, b.spec, "{}", case.name);
        assert_close(
            &format!("{} (seed {seed})", case.name),
            &a.to_f64_vec(),
            &b.to_f64_vec(),
            1e-5,
            1e-5,
        );
    }
}

#[test]
fn sparse_voxel_kernels_match_their_definitions() {
    common::sparse::check_sparse_kernels(
        &template_c(),
        "template_sparse",
        &[DType::F32],
        tolerance,
    );
}

#[test]
fn movement_kernels_agree_exactly() {
    let (mut r, seed) = rng("template_movement");
    let (cpu, tmpl) = (cpu(), template_c());
    for case in movement_cases(&mut r) {
        for dtype in [DType::F32, DType::U8] {
            let host: Vec<HostTensor> = case.inputs.iter().map(|t| t.host(dtype)).collect();
            let a = run(&tmpl, case.kernel, &case.attrs, &host);
            assert_eq!(
                a,
                run(&cpu, case.kernel, &case.attrs, &host),
                "{} {dtype} (seed {seed})",
                case.name
            );
        }
    }
}

#[test]
fn cast_agrees_exactly() {
    let (mut r, seed) = rng("template_cast");
    let (cpu, tmpl) = (cpu(), template_c());
    let mut x = cast_input(&mut r);
    x.data[1] = f64::NAN;
    let to_u8 = Attrs::new().with("dtype", AttrValue::Str("uint8".into()));
    let a = run(&tmpl, "vsdk.cast", &to_u8, &[x.host(DType::F32)]);
    assert_eq!(
        a,
        run(&cpu, "vsdk.cast", &to_u8, &[x.host(DType::F32)]),
        "seed {seed}"
    );
    let img = random_image(&mut r, 3, 7).host(DType::U8);
    let to_f32 = Attrs::new().with("dtype", AttrValue::Str("float32".into()));
    assert_eq!(
        run(&tmpl, "vsdk.cast", &to_f32, std::slice::from_ref(&img)),
        run(&cpu, "vsdk.cast", &to_f32, &[img])
    );
}

#[test]
fn pil_resize_agrees_bit_for_bit() {
    let (mut r, seed) = rng("template_pil");
    let (cpu, tmpl) = (cpu(), template_c());
    for kernel in ["vsdk.resize_pil_bicubic", "vsdk.resize_pil_lanczos"] {
        for (h, w, oh, ow) in [(31, 45, 13, 20), (17, 9, 40, 23), (30, 30, 30, 11)] {
            let img = random_image(&mut r, h, w).host(DType::U8);
            let size = Attrs::new().with("size", AttrValue::Ints(vec![oh, ow]));
            let a = run(&tmpl, kernel, &size, std::slice::from_ref(&img));
            assert_eq!(
                a,
                run(&cpu, kernel, &size, &[img]),
                "{kernel} {h}x{w} -> {oh}x{ow} (seed {seed})"
            );
        }
    }
}

#[test]
fn template_declares_what_it_supports() {
    let tmpl = template_c();
    assert!(tmpl.supports("vsdk.linear", 1, DType::F32).unwrap());
    assert!(!tmpl.supports("vsdk.linear", 1, DType::F16).unwrap());
    assert!(tmpl
        .supports("vsdk.resize_pil_bicubic", 1, DType::U8)
        .unwrap());
    assert!(tmpl
        .supports("vsdk.resize_pil_lanczos", 1, DType::U8)
        .unwrap());
    assert!(!tmpl.supports("vsdk.linear", 2, DType::F32).unwrap());
    let err = try_run(
        &tmpl,
        "vsdk.gelu",
        &Attrs::new(),
        &[T::new(&[2], vec![0.5, 1.0]).host(DType::F64)],
    )
    .unwrap_err();
    assert!(err.to_string().contains("UNSUPPORTED"), "{err}");
    let info = tmpl.provider_info();
    assert_eq!((info.name.as_str(), info.abi_version), ("template-c", 1));
}
