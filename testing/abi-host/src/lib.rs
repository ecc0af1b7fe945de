//! A minimal host for tests of providers at the raw C ABI, as a host written
//! in C would call them: negotiation, create/destroy, float32 buffers,
//! kernel calls with any strides and offsets (which the Rust loader never
//! sends), status objects. Panics on anything unexpected: it is test code.
// The raw pointers these functions take are the provider's own handles
// (status objects, device buffers) handed straight back to it, as a C host
// does; checking them is the provider's job, which is what the tests test.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_void, CStr};
use std::ptr::{null, null_mut};
use vsdk_ffi::*;

/// A provider's entry point.
pub type EntryFn = unsafe extern "C" fn(u32, *mut u32) -> *const vsdk_provider_api_t;

pub struct Host {
    pub api: &'static vsdk_provider_api_t,
    pub p: *mut vsdk_provider_t,
}

impl Host {
    /// Negotiates with `entry` (a provider's `vsdk_get_provider_api`) and creates an instance.
    ///
    /// # Safety
    /// `entry` follows provider.h: it returns NULL or a table valid for the program's life.
    pub unsafe fn new(entry: EntryFn) -> Host {
        let mut v = 0;
        // SAFETY: valid out pointer; the table is static per the contract.
        let api = unsafe { entry(VSDK_ABI_VERSION, &mut v).as_ref() }.unwrap();
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
    pub fn status(&self, s: *mut vsdk_status_t) -> Result<(), (i32, String)> {
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

    pub fn upload(&self, values: &[f32]) -> *mut c_void {
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

    pub fn download(&self, ptr: *mut c_void, n: usize) -> Vec<f32> {
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

    pub fn execute(
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

pub fn tensor(
    data: *mut c_void,
    shape: &[i64],
    strides: &[i64],
    byte_offset: u64,
) -> vsdk_tensor_t {
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

/// `n` floats in [-1, 1) from a fresh seed, printed (or `VSDK_TEST_SEED`) so a
/// failure reproduces.
pub fn random(n: usize) -> Vec<f32> {
    use rand::{Rng, SeedableRng};
    let seed = std::env::var("VSDK_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("random({n}): VSDK_TEST_SEED={seed}");
    let mut r = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n).map(|_| r.gen_range(-1.0f32..1.0)).collect()
}

/// The table's own checks, which every provider built on the kit shares:
/// NULL pointers, device indices, offsets that overflow, ranges outside a
/// buffer, kernel indices, each refused with INVALID_ARGUMENT and a message
/// naming what was wrong; a zero-length copy inside a buffer is fine.
pub fn check_table_refuses_bad_calls(h: &Host) {
    let buf = h.upload(&random(4));
    let mut host = [0f32; 4];
    let (src, dst) = (
        host.as_ptr().cast::<c_void>(),
        host.as_mut_ptr().cast::<c_void>(),
    );
    let api = h.api;
    let refused = |s: *mut vsdk_status_t, what: &str, needle: &str| {
        let (code, message) = h.status(s).expect_err(what);
        assert_eq!(code, VSDK_STATUS_INVALID_ARGUMENT, "{what}: {message}");
        assert!(
            message.contains(needle),
            "{what}: {message:?} lacks {needle:?}"
        );
    };
    let mut out = null_mut();
    // SAFETY (every call below): a live instance; the pointers are valid or
    // deliberately NULL / out of range, which is what is being tested.
    unsafe {
        refused(
            api.alloc.unwrap()(h.p, 1, 16, 64, &mut out),
            "alloc on device 1",
            "device index 1",
        );
        refused(
            api.alloc.unwrap()(h.p, 0, 16, 64, null_mut()),
            "alloc into NULL",
            "NULL",
        );
        refused(
            api.copy_to_device.unwrap()(h.p, 0, buf, 0, null(), 4),
            "NULL src",
            "src is NULL",
        );
        refused(
            api.copy_to_host.unwrap()(h.p, 0, null_mut(), buf, 0, 4),
            "NULL dst",
            "dst is NULL",
        );
        refused(
            api.copy_to_device.unwrap()(h.p, 0, buf, 8, src, 16),
            "past the buffer",
            "not inside a buffer",
        );
        refused(
            api.copy_to_host.unwrap()(h.p, 0, dst, buf, u64::MAX - 2, 4),
            "overflowing offset",
            "overflow",
        );
        refused(
            api.copy_on_device.unwrap()(h.p, 0, buf, 0, buf, 12, 8),
            "on device, past the end",
            "not inside a buffer",
        );
        refused(
            api.copy_to_device.unwrap()(h.p, 3, buf, 0, src, 4),
            "copy to device 3",
            "device index 3",
        );
        refused(
            api.synchronize.unwrap()(h.p, 2),
            "synchronize device 2",
            "device index 2",
        );
        let mut info = vsdk_kernel_info_t {
            struct_size: size_of::<vsdk_kernel_info_t>(),
            ..Default::default()
        };
        refused(
            api.kernel_info.unwrap()(h.p, 1 << 40, &mut info),
            "kernel 2^40",
            "out of range",
        );
        let mut count = 0u32;
        refused(
            api.device_count.unwrap()(null_mut(), &mut count),
            "NULL provider",
            "provider is NULL",
        );
        h.status(api.copy_to_device.unwrap()(h.p, 0, buf, 16, src, 0))
            .expect("a zero-length copy at the end");
        h.status(api.synchronize.unwrap()(h.p, 0))
            .expect("synchronize device 0");
    }
}
