//! A provider that forwards every call to a real one (`VSDK_MUTANT_TARGET`, a
//! library path) but injects one deliberate bug (`VSDK_MUTATION`), by
//! rewriting the attributes of the calls it concerns:
//!
//! | mutation | what changes |
//! |---|---|
//! | `layer_norm_eps` | `vsdk.layer_norm` uses eps 1e-5 |
//! | `attention_scale` | `vsdk.sdpa` uses 1/sqrt(384) |
//! | `resize_size` | `vsdk.resize_bicubic` with `scale_factor` s uses `size` = floor(in·s) |
//! | `resize_antialias` | `vsdk.resize_bicubic` antialiases |
//! | `crop_off_by_one` | a `vsdk.crop` of uint8 data starts one row lower |
//! | `resize_straight_alpha` | Pillow's resizes ignore `alpha`: RGBA resized straight, not through premultiplied RGBa |
//! | `resize_no_antialias` | `vsdk.resize_pil_bicubic` keeps the filter at 4 taps when downsampling (computed here; needs a host-memory target such as the CPU provider) |
//! | `patch_grid_flip` | `vsdk.conv2d`'s output rows reversed after the target computed it: the patch grid upside down (host-memory targets) |
//!
//! Kernels computed here in float32 (`mutants`, a module per operator family,
//! registered in `mutants::MUTANTS`; host-memory targets only):
//!
//! | mutation | what changes | correct? |
//! |---|---|---|
//! | `sum_reversed` | `vsdk.linear` sums `x·w` from the last term to the first | yes |
//! | `sum_pairwise` | `vsdk.linear` sums pairwise (blocks of 8) | yes |
//! | `sum_bias_first` | `vsdk.linear` accumulates onto the bias | yes |
//! | `fma` | `vsdk.linear` accumulates with fused multiply-add | yes |
//! | `online_softmax` | `vsdk.sdpa` in one pass with a streaming softmax | yes |
//! | `layer_norm_sequential` | `vsdk.layer_norm` with float32 sums in sequence | yes |
//! | `layer_norm_unbiased` | `vsdk.layer_norm` divides by N − 1 | no |
//! | `resize_cubic_a05` | `vsdk.resize_bicubic` (no antialias) with a = −0.5 | no |
//! | `gemm_round_up` | `vsdk.linear` rounds every output one ulp up | no |
//! | `tf32` | `vsdk.linear` rounds its inputs to TF32 (10 mantissa bits) | no |
//! | `one_element` | `vsdk.linear`'s middle output 1 % too large | no |
//! | `gelu_tanh` | `vsdk.gelu` by the tanh approximation | no |
//! | `softmax_bf16_sum` | `vsdk.sdpa` adds the softmax's exponentials in bfloat16 | no |
//! | `softmax_no_max` | `vsdk.sdpa` and `vsdk.softmax` exponentiate without subtracting the maximum | no |
//! | `layer_norm_one_pass` | `vsdk.layer_norm` with the variance `E[x²] − μ²` | no |
//! | `rms_norm_eps_added` | `vsdk.rms_norm` as `x·γ/√(mean(x²) + 1e-2)` (eps under the root) | no |
//! | `rms_norm_no_gamma` | `vsdk.rms_norm` ignores γ | no |
//! | `cast_truncate` | a float-to-integer `vsdk.cast` truncates toward zero | no |
//! | `raster_snapped` | `vsdk.rasterize` snaps vertices to 4 sub-pixel bits (nvdiffrast's CUDA rasterizer) | yes |
//! | `raster_rows_top_down` | `vsdk.rasterize` writes row 0 at the top (V not flipped, or twice) | no |
//! | `raster_ids_from_zero` | `vsdk.rasterize` writes ids without the + 1 | no |
//! | `raster_half_pixel` | `vsdk.rasterize` samples at integer coordinates, not pixel centres | no |
//! | `raster_cull_back` | `vsdk.rasterize` culls clockwise triangles | no |
//! | `raster_uv_swapped` | `vsdk.rasterize` writes (v, u) | no |
//!
//! Breaking the calling contract rather than the arithmetic (the kernel
//! contract must catch them; the suites' own calls never do):
//!
//! | mutation | what changes |
//! |---|---|
//! | `ignore_strides` | every input is read as if compact (strides replaced, offset kept) |
//! | `ignore_broadcast` | an input with a stride-0 axis is read as if compact |
//! | `shared_scratch` | declares `VSDK_CONCURRENCY_THREAD_SAFE`, and passes every output through one scratch buffer shared by all calls |
//! | `serial_overlap` | declares `VSDK_CONCURRENCY_SERIAL` and fails any call that overlaps another (the host must never let that happen) |
//!
//! Both variables are read once, when the first instance is created; one
//! process tests one mutation. Conformance tests run it through the CLI.

mod mutants;

use libloading::Library;
use mutants::contract::{compacted, through_scratch, InFlight};
use mutants::{Action, Rewrite};
use std::ffi::{c_char, c_void, CStr};
use std::sync::OnceLock;
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::{guard, ProviderError};

struct Target {
    api: vsdk_provider_api_t,
    mutation: String,
    _lib: Library,
}

static TARGET: OnceLock<Result<Target, String>> = OnceLock::new();

fn load() -> Result<Target, String> {
    let path = std::env::var("VSDK_MUTANT_TARGET")
        .map_err(|_| "VSDK_MUTANT_TARGET is not set".to_string())?;
    let mutation =
        std::env::var("VSDK_MUTATION").map_err(|_| "VSDK_MUTATION is not set".to_string())?;
    // SAFETY: loading the provider library the test names; its entry point
    // follows provider.h.
    unsafe {
        let lib = Library::new(&path).map_err(|e| format!("{path}: {e}"))?;
        let entry = *lib
            .get::<vsdk_get_provider_api_fn>(VSDK_ENTRY_SYMBOL)
            .map_err(|e| format!("{path}: {e}"))?;
        let mut v = 0;
        let table = entry.ok_or("NULL entry")?(VSDK_ABI_VERSION, &mut v);
        let api = *table
            .as_ref()
            .ok_or_else(|| format!("{path} refused ABI v1"))?;
        Ok(Target {
            api,
            mutation,
            _lib: lib,
        })
    }
}

fn target() -> Result<&'static Target, ProviderError> {
    TARGET
        .get_or_init(load)
        .as_ref()
        .map_err(|e| ProviderError::internal(e.clone()))
}

/// Turns the target's status into one of ours.
fn forward(t: &Target, status: *mut vsdk_status_t) -> Result<(), ProviderError> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a live status of the target, read and destroyed with its own table.
    unsafe {
        let code = t.api.status_code.expect("required")(status);
        let message = CStr::from_ptr(t.api.status_message.expect("required")(status))
            .to_string_lossy()
            .into_owned();
        t.api.status_destroy.expect("required")(status);
        Err(ProviderError::new(code, message))
    }
}

/// Forwards a call to the target's slot of the same name.
macro_rules! pass {
    ($slot:ident($($arg:expr),*)) => {
        guard(|| {
            let t = target()?;
            // SAFETY: the target's validated slot with the host's own arguments.
            forward(t, unsafe { t.api.$slot.ok_or(ProviderError::internal(stringify!($slot)))?($($arg),*) })
        })
    };
}

unsafe extern "C" fn create(
    o: *const vsdk_create_options_t,
    out: *mut *mut vsdk_provider_t,
) -> *mut vsdk_status_t {
    pass!(create(o, out))
}
unsafe extern "C" fn destroy(p: *mut vsdk_provider_t) {
    if let Ok(t) = target() {
        // SAFETY: the target's instance, destroyed once by the host.
        unsafe { t.api.destroy.expect("required")(p) }
    }
}
unsafe extern "C" fn get_info(
    p: *mut vsdk_provider_t,
    o: *mut vsdk_provider_info_t,
) -> *mut vsdk_status_t {
    pass!(get_info(p, o))
}
unsafe extern "C" fn device_count(p: *mut vsdk_provider_t, o: *mut u32) -> *mut vsdk_status_t {
    pass!(device_count(p, o))
}
unsafe extern "C" fn device_info(
    p: *mut vsdk_provider_t,
    i: u32,
    o: *mut vsdk_device_info_t,
) -> *mut vsdk_status_t {
    pass!(device_info(p, i, o))
}
unsafe extern "C" fn kernel_count(p: *mut vsdk_provider_t, o: *mut u64) -> *mut vsdk_status_t {
    pass!(kernel_count(p, o))
}
unsafe extern "C" fn kernel_info(
    p: *mut vsdk_provider_t,
    i: u64,
    o: *mut vsdk_kernel_info_t,
) -> *mut vsdk_status_t {
    pass!(kernel_info(p, i, o))
}
unsafe extern "C" fn kernel_supports(
    p: *mut vsdk_provider_t,
    d: u32,
    k: *const c_char,
    v: u32,
    t: vsdk_dtype_t,
    o: *mut i32,
) -> *mut vsdk_status_t {
    pass!(kernel_supports(p, d, k, v, t, o))
}
unsafe extern "C" fn alloc(
    p: *mut vsdk_provider_t,
    d: u32,
    n: u64,
    a: u64,
    o: *mut *mut c_void,
) -> *mut vsdk_status_t {
    pass!(alloc(p, d, n, a, o))
}
unsafe extern "C" fn free(p: *mut vsdk_provider_t, d: u32, ptr: *mut c_void) {
    if let Ok(t) = target() {
        // SAFETY: forwarded to the target that allocated `ptr`.
        unsafe { t.api.free.expect("required")(p, d, ptr) }
    }
}
unsafe extern "C" fn copy_to_device(
    p: *mut vsdk_provider_t,
    d: u32,
    dst: *mut c_void,
    o: u64,
    src: *const c_void,
    n: u64,
) -> *mut vsdk_status_t {
    pass!(copy_to_device(p, d, dst, o, src, n))
}
unsafe extern "C" fn copy_to_host(
    p: *mut vsdk_provider_t,
    d: u32,
    dst: *mut c_void,
    src: *const c_void,
    o: u64,
    n: u64,
) -> *mut vsdk_status_t {
    pass!(copy_to_host(p, d, dst, src, o, n))
}
unsafe extern "C" fn synchronize(p: *mut vsdk_provider_t, d: u32) -> *mut vsdk_status_t {
    pass!(synchronize(p, d))
}

unsafe extern "C" fn execute(
    p: *mut vsdk_provider_t,
    call: *const vsdk_kernel_call_t,
) -> *mut vsdk_status_t {
    guard(|| {
        let t = target()?;
        // SAFETY: the host's call is valid for this call.
        let call =
            unsafe { call.as_ref() }.ok_or_else(|| ProviderError::invalid("call is NULL"))?;
        // SAFETY: the kernel name is a NUL-terminated string.
        let kernel = unsafe { CStr::from_ptr(call.kernel) };
        let _serial = match t.mutation.as_str() {
            "serial_overlap" => Some(InFlight::enter()?),
            _ => None,
        };
        let action = mutants::find(&t.mutation, kernel.to_bytes());
        match action {
            Some(Action::ComputeRaw(compute)) => {
                // SAFETY: a valid call; the target keeps tensors in host memory.
                unsafe { compute(call) };
                return Ok(());
            }
            Some(Action::Compute(compute)) => {
                // SAFETY: the host's call, valid for this call.
                let checked = unsafe { vsdk_provider_kit::KernelCall::from_raw(call) }?;
                return compute(&checked);
            }
            Some(Action::ComputeIf(applies, compute)) => {
                // SAFETY: the host's call, valid for this call.
                let checked = unsafe { vsdk_provider_kit::KernelCall::from_raw(call) }?;
                if applies(&checked) {
                    return compute(&checked);
                }
            }
            _ => {}
        }
        let mut keep = Rewrite::default();
        // SAFETY: as above.
        let changed = unsafe { mutants::rewrite(action, call, &mut keep) };
        // SAFETY: as above.
        let inputs = unsafe { compacted(&t.mutation, call, &mut keep) };
        let mutated = vsdk_kernel_call_t {
            attrs: keep.attrs.as_ptr(),
            num_attrs: keep.attrs.len() as u64,
            inputs: inputs.as_ref().map_or(call.inputs, |i| i.as_ptr()),
            ..*call
        };
        let changed = changed || inputs.is_some();
        let forwarded: *const vsdk_kernel_call_t = if changed { &mutated } else { call };
        // SAFETY: the target's slot with a call whose every pointer outlives it.
        forward(t, unsafe { t.api.execute.expect("required")(p, forwarded) })?;
        if t.mutation == "shared_scratch" {
            // SAFETY: the host's call, valid for this call; the target wrote
            // its outputs in host memory.
            let checked = unsafe { vsdk_provider_kit::KernelCall::from_raw(call) }?;
            through_scratch(&checked);
        }
        if let Some(Action::After(after)) = action {
            // SAFETY: the host's call, valid for this call; the target wrote
            // its output in host memory.
            let checked = unsafe { vsdk_provider_kit::KernelCall::from_raw(call) }?;
            after(&checked)?;
        }
        Ok(())
    })
}

static TABLE_THREAD_SAFE: vsdk_provider_api_t = vsdk_provider_api_t {
    concurrency: VSDK_CONCURRENCY_THREAD_SAFE,
    ..TABLE
};

static TABLE: vsdk_provider_api_t = vsdk_provider_api_t {
    struct_size: std::mem::size_of::<vsdk_provider_api_t>(),
    abi_version: VSDK_ABI_VERSION,
    concurrency: VSDK_CONCURRENCY_SERIAL,
    status_code: Some(vsdk_provider_kit::status_code),
    status_message: Some(vsdk_provider_kit::status_message),
    status_destroy: Some(vsdk_provider_kit::status_destroy),
    create: Some(create),
    destroy: Some(destroy),
    get_info: Some(get_info),
    device_count: Some(device_count),
    device_info: Some(device_info),
    kernel_count: Some(kernel_count),
    kernel_info: Some(kernel_info),
    kernel_supports: Some(kernel_supports),
    alloc: Some(alloc),
    free: Some(free),
    copy_to_device: Some(copy_to_device),
    copy_to_host: Some(copy_to_host),
    synchronize: Some(synchronize),
    execute: Some(execute),
    copy_on_device: None,
};

/// The entry point.
///
/// # Safety
/// `provider_abi_version` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn vsdk_get_provider_api(
    host: u32,
    provider: *mut u32,
) -> *const vsdk_provider_api_t {
    let table = match std::env::var("VSDK_MUTATION").as_deref() {
        Ok("shared_scratch") => &TABLE_THREAD_SAFE,
        _ => &TABLE,
    };
    // SAFETY: forwarded caller contract.
    unsafe { vsdk_provider_kit::negotiate(host, provider, table) }
}
