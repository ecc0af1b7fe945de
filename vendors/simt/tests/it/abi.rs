//! The GPU providers' host code at the raw C ABI, on the SIMT emulation:
//! inputs with arbitrary strides and byte offsets (which the Rust loader
//! never sends, an engine may) reach the kernels correctly, whether the
//! kernel reads strides itself (element-wise) or gets a compact copy first
//! (linear, GELU).

use vsdk_abi_host::{random, tensor, Host};
use vsdk_provider_simt::vsdk_get_provider_api;

fn host() -> Host {
    // SAFETY: the SIMT provider's entry point follows provider.h.
    unsafe { Host::new(vsdk_get_provider_api) }
}

fn close(got: f32, want: f32, what: &str) {
    assert!(
        (got - want).abs() <= 1e-5 * (1.0 + want.abs()),
        "{what}: {got} vs {want}"
    );
}

#[test]
fn a_transposed_offset_weight_reaches_the_gemm() {
    let h = host();
    // w holds a padding row, then a [70, 3] matrix; its transpose [3, 70] at
    // byte offset 12 with strides [1, 3] is the weight.
    let (x, w) = (random(2 * 70), random(3 + 70 * 3));
    let (xd, wd) = (h.upload(&x), h.upload(&w));
    let out = h.upload(&[f32::NAN; 2 * 3]);
    h.execute(
        c"vsdk.linear",
        &[
            tensor(xd, &[2, 70], &[70, 1], 0),
            tensor(wd, &[3, 70], &[1, 3], 12),
        ],
        &[tensor(out, &[2, 3], &[3, 1], 0)],
    )
    .unwrap();
    let got = h.download(out, 6);
    for i in 0..2 {
        for n in 0..3 {
            let want: f32 = (0..70).map(|k| x[i * 70 + k] * w[3 + k * 3 + n]).sum();
            close(got[i * 3 + n], want, &format!("[{i}, {n}]"));
        }
    }
}

#[test]
fn element_wise_kernels_read_permuted_and_broadcast_inputs_in_place() {
    let h = host();
    // a: a [4, 5] matrix stored transposed ([5, 4] row-major), read as [4, 5]
    // with strides [1, 4]; b: a row of 5 broadcast over the 4 rows, stored
    // after two floats of padding.
    let (a, b) = (random(20), random(2 + 5));
    let (ad, bd) = (h.upload(&a), h.upload(&b));
    let out = h.upload(&[f32::NAN; 20]);
    h.execute(
        c"vsdk.sub",
        &[tensor(ad, &[4, 5], &[1, 4], 0), tensor(bd, &[5], &[1], 8)],
        &[tensor(out, &[4, 5], &[5, 1], 0)],
    )
    .unwrap();
    let got = h.download(out, 20);
    for r in 0..4 {
        for c in 0..5 {
            close(
                got[r * 5 + c],
                a[c * 4 + r] - b[2 + c],
                &format!("[{r}, {c}]"),
            );
        }
    }
}

#[test]
fn a_strided_input_to_a_compact_only_kernel_is_copied_first() {
    let h = host();
    // Every other element of 2 × 7, at an offset of one float.
    let x = random(1 + 2 * 14);
    let xd = h.upload(&x);
    let out = h.upload(&[f32::NAN; 14]);
    h.execute(
        c"vsdk.gelu",
        &[tensor(xd, &[2, 7], &[14, 2], 4)],
        &[tensor(out, &[2, 7], &[7, 1], 0)],
    )
    .unwrap();
    let got = h.download(out, 14);
    for r in 0..2 {
        for c in 0..7 {
            let v = f64::from(x[1 + r * 14 + c * 2]);
            let want = 0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2));
            close(got[r * 7 + c], want as f32, &format!("[{r}, {c}]"));
        }
    }
}

/// erf by its series (|x| < 3 here: the inputs are in [-1, 1)).
fn erf(x: f64) -> f64 {
    let mut term = x;
    let mut sum = x;
    for n in 1..60 {
        term *= -x * x / n as f64;
        sum += term / (2 * n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn the_table_refuses_bad_calls() {
    vsdk_abi_host::check_table_refuses_bad_calls(&host());
}
