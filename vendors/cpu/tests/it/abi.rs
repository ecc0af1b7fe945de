//! The CPU provider at the raw C ABI, as a host written in C would see it:
//! negotiation, strided and offset inputs (which the Rust loader never sends),
//! the checks that protect it from a buggy host, and struct_size handling.

use std::ffi::CStr;
use vsdk_abi_host::{random, tensor, Host};
use vsdk_ffi::*;
use vsdk_provider_cpu::vsdk_get_provider_api;

fn host() -> Host {
    // SAFETY: the CPU provider's entry point follows provider.h.
    unsafe { Host::new(vsdk_get_provider_api) }
}

#[test]
fn negotiation_refuses_older_hosts_and_names_its_version() {
    let mut v = 0;
    // SAFETY: valid out pointer.
    assert!(unsafe { vsdk_get_provider_api(0, &mut v) }.is_null());
    assert_eq!(v, 1);
    // A newer host gets v1 and decides itself.
    // SAFETY: as above.
    assert!(!unsafe { vsdk_get_provider_api(7, &mut v) }.is_null());
    assert_eq!(v, 1);
}

#[test]
fn strided_and_offset_inputs_are_honoured() {
    let h = host();
    // w holds a padding row, then a [5, 3] matrix; pass its transpose [3, 5]
    // as the linear weight: strides [1, 3], byte_offset = one row of 3 floats.
    let (x, w) = (random(2 * 5), random(3 + 5 * 3));
    let (xd, wd) = (h.upload(&x), h.upload(&w));
    let out = h.upload(&[f32::NAN; 2 * 3]); // poisoned: every element must be written
    let (xs, ws, os) = ([2i64, 5], [3i64, 5], [2i64, 3]);
    h.execute(
        c"vsdk.linear",
        &[tensor(xd, &xs, &[5, 1], 0), tensor(wd, &ws, &[1, 3], 12)],
        &[tensor(out, &os, &[3, 1], 0)],
    )
    .unwrap();
    let got = h.download(out, 6);
    for i in 0..2 {
        for n in 0..3 {
            // weight[n, k] = w_matrix[k, n] = w[3 + k * 3 + n]
            let want: f32 = (0..5).map(|k| x[i * 5 + k] * w[3 + k * 3 + n]).sum();
            assert!(
                (got[i * 3 + n] - want).abs() < 1e-5,
                "[{i}, {n}]: {} vs {want}",
                got[i * 3 + n]
            );
        }
    }
}

#[test]
fn a_tensor_outside_its_buffer_is_refused() {
    let h = host();
    let x = h.upload(&random(4));
    let out = h.upload(&[f32::NAN; 8]);
    let err = h
        .execute(
            c"vsdk.gelu",
            &[tensor(x, &[8], &[1], 0)],
            &[tensor(out, &[8], &[1], 0)],
        )
        .unwrap_err();
    assert_eq!(err.0, VSDK_STATUS_INVALID_ARGUMENT);
    assert!(
        err.1.contains("vsdk.gelu: input: 32 bytes at") && err.1.contains("not inside a buffer"),
        "{}",
        err.1
    );
}

#[test]
fn a_wrong_output_shape_is_refused_with_the_expected_one() {
    let h = host();
    let x = h.upload(&random(6));
    let out = h.upload(&[f32::NAN; 6]);
    let err = h
        .execute(
            c"vsdk.gelu",
            &[tensor(x, &[2, 3], &[3, 1], 0)],
            &[tensor(out, &[3, 2], &[2, 1], 0)],
        )
        .unwrap_err();
    assert_eq!(
        err,
        (
            VSDK_STATUS_INVALID_ARGUMENT,
            "vsdk.gelu: output 0 is float32 [3, 2], the catalog's shape rule gives float32 [2, 3]"
                .into()
        )
    );
    let err = h
        .execute(c"vsdk.gelu_fast", &[tensor(x, &[6], &[1], 0)], &[])
        .unwrap_err();
    assert_eq!(err.0, VSDK_STATUS_UNSUPPORTED);
}

#[test]
fn out_structs_are_written_only_as_far_as_the_host_knows_them() {
    let h = host();
    let marker = c"untouched";
    let mut info = vsdk_provider_info_t {
        // A host built when the struct ended after `vendor`.
        struct_size: std::mem::offset_of!(vsdk_provider_info_t, version),
        version: marker.as_ptr(),
        description: marker.as_ptr(),
        ..Default::default()
    };
    // SAFETY: a live instance and a valid out-struct.
    h.status(unsafe { h.api.get_info.unwrap()(h.p, &mut info) })
        .unwrap();
    // SAFETY: the provider wrote a static string.
    assert_eq!(unsafe { CStr::from_ptr(info.name) }, c"cpu");
    assert_eq!(info.version, marker.as_ptr());
    assert_eq!(info.description, marker.as_ptr());
}

#[test]
fn the_table_refuses_bad_calls() {
    vsdk_abi_host::check_table_refuses_bad_calls(&host());
}
