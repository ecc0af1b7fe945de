//! The CPU provider at the raw C ABI, as a host written in C would see it:
//! negotiation, strided and offset inputs (which the Rust loader never sends),
//! the checks that protect it from a buggy host, and struct_size handling.

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use vsdk_ffi::*;
use vsdk_provider_cpu::vsdk_get_provider_api;

struct Host {
    api: &'static vsdk_provider_api_t,
    p: *mut vsdk_provider_t,
}

impl Host {
    fn new() -> Host {
        let mut v = 0;
        // SAFETY: valid out pointer; the table is static.
        let api = unsafe { vsdk_get_provider_api(VSDK_ABI_VERSION, &mut v).as_ref() }.unwrap();
        assert_eq!(v, VSDK_ABI_VERSION);
        let opts = vsdk_create_options_t {
            struct_size: size_of::<vsdk_create_options_t>(),
            host_abi_version: 1,
            reserved: 0,
        };
        let mut p = null_mut();
        // SAFETY: valid arguments per provider.h.
        assert!(unsafe { api.create.unwrap()(&opts, &mut p) }.is_null());
        Host { api, p }
    }

    /// Ok, or (code, message) of the status, which is destroyed.
    fn status(&self, s: *mut vsdk_status_t) -> Result<(), (i32, String)> {
        if s.is_null() {
            return Ok(());
        }
        // SAFETY: a live status from this provider, destroyed once.
        unsafe {
            let r = (
                self.api.status_code.unwrap()(s),
                CStr::from_ptr(self.api.status_message.unwrap()(s))
                    .to_string_lossy()
                    .into_owned(),
            );
            self.api.status_destroy.unwrap()(s);
            Err(r)
        }
    }

    fn upload(&self, values: &[f32]) -> *mut c_void {
        let mut ptr = null_mut();
        let n = (values.len() * 4) as u64;
        // SAFETY: valid arguments; the host buffer lives for the call.
        unsafe {
            self.status(self.api.alloc.unwrap()(self.p, 0, n, 64, &mut ptr))
                .unwrap();
            self.status(self.api.copy_to_device.unwrap()(
                self.p,
                0,
                ptr,
                0,
                values.as_ptr().cast(),
                n,
            ))
            .unwrap();
        }
        ptr
    }

    fn download(&self, ptr: *mut c_void, n: usize) -> Vec<f32> {
        let mut out = vec![0f32; n];
        // SAFETY: ptr is a live buffer of at least n floats.
        unsafe {
            self.status(self.api.copy_to_host.unwrap()(
                self.p,
                0,
                out.as_mut_ptr().cast(),
                ptr,
                0,
                (n * 4) as u64,
            ))
            .unwrap()
        };
        out
    }

    fn execute(
        &self,
        kernel: &CStr,
        inputs: &[vsdk_tensor_t],
        outputs: &[vsdk_tensor_t],
    ) -> Result<(), (i32, String)> {
        let call = vsdk_kernel_call_t {
            struct_size: size_of::<vsdk_kernel_call_t>(),
            kernel: kernel.as_ptr(),
            version: 1,
            device_index: 0,
            attrs: null(),
            num_attrs: 0,
            inputs: inputs.as_ptr(),
            num_inputs: inputs.len() as u64,
            outputs: outputs.as_ptr(),
            num_outputs: outputs.len() as u64,
        };
        // SAFETY: the call and everything it points to outlive the call.
        self.status(unsafe { self.api.execute.unwrap()(self.p, &call) })
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // SAFETY: the instance is live and destroyed once.
        unsafe { self.api.destroy.unwrap()(self.p) };
    }
}

fn tensor(data: *mut c_void, shape: &[i64], strides: &[i64], byte_offset: u64) -> vsdk_tensor_t {
    vsdk_tensor_t {
        data,
        device: vsdk_device_t {
            device_type: VSDK_DEVICE_CPU,
            device_id: 0,
        },
        ndim: shape.len() as i32,
        dtype: vsdk_dtype_t {
            code: VSDK_DTYPE_FLOAT,
            bits: 32,
            lanes: 1,
        },
        shape: shape.as_ptr(),
        strides: strides.as_ptr(),
        byte_offset,
    }
}

fn random(n: usize) -> Vec<f32> {
    (0..n).map(|_| rand::random::<f32>() * 2.0 - 1.0).collect()
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
    let h = Host::new();
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
    let h = Host::new();
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
    let h = Host::new();
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
        .execute(c"vsdk.gelu_tanh", &[tensor(x, &[6], &[1], 0)], &[])
        .unwrap_err();
    assert_eq!(err.0, VSDK_STATUS_UNSUPPORTED);
}

#[test]
fn out_structs_are_written_only_as_far_as_the_host_knows_them() {
    let h = Host::new();
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
