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
//! Kernels computed here in float32 (`kernels`; host-memory targets only):
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

mod kernels;

use kernels::{RasterVariant, Sum};
use libloading::Library;
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

/// Storage for rewritten attributes, alive for one call.
#[derive(Default)]
struct Rewrite {
    attrs: Vec<vsdk_attr_t>,
    ints: Vec<Vec<i64>>,
}

/// # Safety
/// `call` is a valid call per provider.h.
unsafe fn rewrite(mutation: &str, call: &vsdk_kernel_call_t, keep: &mut Rewrite) -> bool {
    // SAFETY: per the contract.
    let (kernel, attrs, inputs) = unsafe {
        (
            CStr::from_ptr(call.kernel).to_str().unwrap_or(""),
            if call.num_attrs == 0 {
                &[][..]
            } else {
                std::slice::from_raw_parts(call.attrs, call.num_attrs as usize)
            },
            std::slice::from_raw_parts(call.inputs, call.num_inputs as usize),
        )
    };
    keep.attrs = attrs.to_vec();
    // SAFETY (name reads): attribute names are NUL-terminated strings.
    let named = |a: &vsdk_attr_t, n: &CStr| unsafe { CStr::from_ptr(a.name) } == n;
    match (mutation, kernel) {
        ("layer_norm_eps", "vsdk.layer_norm") => {
            keep.attrs.retain(|a| !named(a, c"eps"));
            keep.attrs.push(vsdk_attr_t {
                name: c"eps".as_ptr(),
                kind: VSDK_ATTR_FLOAT,
                reserved: 0,
                value: vsdk_attr_value_t { f: 1e-5 },
            });
        }
        ("attention_scale", "vsdk.sdpa") => {
            keep.attrs.retain(|a| !named(a, c"scale"));
            keep.attrs.push(vsdk_attr_t {
                name: c"scale".as_ptr(),
                kind: VSDK_ATTR_FLOAT,
                reserved: 0,
                value: vsdk_attr_value_t {
                    f: 1.0 / 384f64.sqrt(),
                },
            });
        }
        ("resize_straight_alpha", "vsdk.resize_pil_bicubic" | "vsdk.resize_pil_lanczos") => {
            keep.attrs.retain(|a| !named(a, c"alpha"));
        }
        ("resize_antialias", "vsdk.resize_bicubic") => {
            keep.attrs.retain(|a| !named(a, c"antialias"));
            keep.attrs.push(vsdk_attr_t {
                name: c"antialias".as_ptr(),
                kind: VSDK_ATTR_INT,
                reserved: 0,
                value: vsdk_attr_value_t { i: 1 },
            });
        }
        ("resize_size", "vsdk.resize_bicubic") => {
            let Some(sf) = keep.attrs.iter().position(|a| named(a, c"scale_factor")) else {
                return false;
            };
            // SAFETY: `scale_factor` is a float list of 2; the input is NCHW.
            let (f, shape) = unsafe {
                let l = keep.attrs[sf].value.floats;
                (
                    std::slice::from_raw_parts(l.data, 2).to_vec(),
                    std::slice::from_raw_parts(inputs[0].shape, 4).to_vec(),
                )
            };
            keep.ints.push(vec![
                (shape[2] as f64 * f[0]).floor() as i64,
                (shape[3] as f64 * f[1]).floor() as i64,
            ]);
            let list = vsdk_int_list_t {
                data: keep.ints[0].as_ptr(),
                len: 2,
            };
            keep.attrs[sf] = vsdk_attr_t {
                name: c"size".as_ptr(),
                kind: VSDK_ATTR_INTS,
                reserved: 0,
                value: vsdk_attr_value_t { ints: list },
            };
        }
        ("crop_off_by_one", "vsdk.crop") if inputs[0].dtype.code == VSDK_DTYPE_UINT => {
            let Some(o) = keep.attrs.iter().position(|a| named(a, c"offsets")) else {
                return false;
            };
            // SAFETY: `offsets` is an int list of the input's rank.
            let mut offsets = unsafe {
                let l = keep.attrs[o].value.ints;
                std::slice::from_raw_parts(l.data, l.len as usize).to_vec()
            };
            offsets[0] += 1;
            keep.ints.push(offsets);
            let list = vsdk_int_list_t {
                data: keep.ints[0].as_ptr(),
                len: keep.ints[0].len() as u64,
            };
            keep.attrs[o].value = vsdk_attr_value_t { ints: list };
        }
        _ => return false,
    }
    true
}

/// Pillow's bicubic coefficients for one axis with the filter *not* widened by
/// the scale: what a resize without antialiasing does. Fixed point, 22 bits.
fn narrow_taps(input: usize, output: usize) -> Vec<(usize, Vec<i64>)> {
    let cubic = |x: f64| {
        let (a, x) = (-0.5, x.abs());
        if x < 1.0 {
            ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0
        } else if x < 2.0 {
            (((x - 5.0) * x + 8.0) * x - 4.0) * a
        } else {
            0.0
        }
    };
    let scale = input as f64 / output as f64;
    (0..output)
        .map(|i| {
            let center = (i as f64 + 0.5) * scale;
            let lo = ((center - 2.0 + 0.5) as i64).max(0) as usize;
            let hi = ((center + 2.0 + 0.5) as i64).min(input as i64) as usize;
            let w: Vec<f64> = (lo..hi).map(|j| cubic(j as f64 - center + 0.5)).collect();
            let sum: f64 = w.iter().sum();
            let fixed = w
                .iter()
                .map(|v| ((v / sum) * (1 << 22) as f64).round() as i64)
                .collect();
            (lo, fixed)
        })
        .collect()
}

/// # Safety
/// The call is a valid `vsdk.resize_pil_bicubic` call on host memory.
unsafe fn resize_without_antialias(call: &vsdk_kernel_call_t) {
    // SAFETY: per the contract: one uint8 [H, W, C] input, one compact output.
    unsafe {
        let (x, y) = (&*call.inputs, &*call.outputs);
        let dims = |t: &vsdk_tensor_t| {
            std::slice::from_raw_parts(t.shape, 3)
                .iter()
                .map(|&d| d as usize)
                .collect::<Vec<_>>()
        };
        let (ins, outs) = (dims(x), dims(y));
        let st: Vec<usize> = std::slice::from_raw_parts(x.strides, 3)
            .iter()
            .map(|&d| d as usize)
            .collect();
        let src = (x.data as *const u8).add(x.byte_offset as usize);
        let dst = (y.data as *mut u8).add(y.byte_offset as usize);
        let (h, w, c, oh, ow) = (ins[0], ins[1], ins[2], outs[0], outs[1]);
        let clip = |acc: i64| ((acc + (1 << 21)) >> 22).clamp(0, 255) as u8;
        let (tx, ty) = (narrow_taps(w, ow), narrow_taps(h, oh));
        let mut tmp = vec![0u8; h * ow * c];
        for r in 0..h {
            for (o, (lo, k)) in tx.iter().enumerate() {
                for ch in 0..c {
                    let acc: i64 = k
                        .iter()
                        .enumerate()
                        .map(|(j, kk)| {
                            i64::from(*src.add(r * st[0] + (lo + j) * st[1] + ch * st[2])) * kk
                        })
                        .sum();
                    tmp[(r * ow + o) * c + ch] = clip(acc);
                }
            }
        }
        for (o, (lo, k)) in ty.iter().enumerate() {
            for col in 0..ow {
                for ch in 0..c {
                    let acc: i64 = k
                        .iter()
                        .enumerate()
                        .map(|(j, kk)| i64::from(tmp[((lo + j) * ow + col) * c + ch]) * kk)
                        .sum();
                    *dst.add((o * ow + col) * c + ch) = clip(acc);
                }
            }
        }
    }
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
        if t.mutation == "resize_no_antialias" && kernel == c"vsdk.resize_pil_bicubic" {
            // SAFETY: a valid resize call; the target keeps tensors in host memory.
            unsafe { resize_without_antialias(call) };
            return Ok(());
        }
        let own: Option<kernels::Kernel> = match (t.mutation.as_str(), kernel.to_bytes()) {
            ("sum_reversed", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::Reversed)),
            ("sum_pairwise", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::Pairwise)),
            ("sum_bias_first", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::BiasFirst)),
            ("fma", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::Fma)),
            ("gemm_round_up", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::RoundUp)),
            ("tf32", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::Tf32)),
            ("one_element", b"vsdk.linear") => Some(|c| kernels::linear(c, Sum::OneElement)),
            ("gelu_tanh", b"vsdk.gelu") => Some(kernels::gelu_tanh),
            ("softmax_bf16_sum", b"vsdk.sdpa") => Some(kernels::sdpa_bf16_sum),
            ("online_softmax", b"vsdk.sdpa") => Some(kernels::sdpa_online),
            ("layer_norm_unbiased", b"vsdk.layer_norm") => Some(kernels::layer_norm_unbiased),
            ("layer_norm_sequential", b"vsdk.layer_norm") => Some(kernels::layer_norm_sequential),
            ("resize_cubic_a05", b"vsdk.resize_bicubic") => Some(kernels::resize_a05),
            ("softmax_no_max", b"vsdk.sdpa") => Some(kernels::sdpa_no_max),
            ("softmax_no_max", b"vsdk.softmax") => Some(kernels::softmax_no_max),
            ("layer_norm_one_pass", b"vsdk.layer_norm") => Some(kernels::layer_norm_one_pass),
            ("rms_norm_eps_added", b"vsdk.rms_norm") => {
                Some(|c| kernels::rms_norm(c, kernels::RmsBug::EpsAdded))
            }
            ("rms_norm_no_gamma", b"vsdk.rms_norm") => {
                Some(|c| kernels::rms_norm(c, kernels::RmsBug::NoGamma))
            }
            ("cast_truncate", b"vsdk.cast") => Some(kernels::cast_truncate),
            ("raster_snapped", b"vsdk.rasterize") => {
                Some(|c| kernels::rasterize(c, RasterVariant::Snapped))
            }
            ("raster_rows_top_down", b"vsdk.rasterize") => {
                Some(|c| kernels::rasterize(c, RasterVariant::RowsTopDown))
            }
            ("raster_ids_from_zero", b"vsdk.rasterize") => {
                Some(|c| kernels::rasterize(c, RasterVariant::IdsFromZero))
            }
            ("raster_half_pixel", b"vsdk.rasterize") => {
                Some(|c| kernels::rasterize(c, RasterVariant::HalfPixel))
            }
            ("raster_cull_back", b"vsdk.rasterize") => {
                Some(|c| kernels::rasterize(c, RasterVariant::CullBack))
            }
            ("raster_uv_swapped", b"vsdk.rasterize") => {
                Some(|c| kernels::rasterize(c, RasterVariant::UvSwapped))
            }
            _ => None,
        };
        if let Some(kernel) = own {
            // SAFETY: the host's call, valid for this call.
            let checked = unsafe { vsdk_provider_kit::KernelCall::from_raw(call) }?;
            // Only float-to-integer casts truncate; others are the target's.
            let truncating =
                checked.inputs[0].dtype.is_float() && !checked.outputs[0].dtype.is_float();
            if t.mutation != "cast_truncate" || truncating {
                return kernel(&checked);
            }
        }
        let mut keep = Rewrite::default();
        // SAFETY: as above.
        let changed = unsafe { rewrite(&t.mutation, call, &mut keep) };
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
        if t.mutation == "patch_grid_flip" && kernel == c"vsdk.conv2d" {
            // SAFETY: the host's call, valid for this call; the target wrote
            // its output in host memory.
            let checked = unsafe { vsdk_provider_kit::KernelCall::from_raw(call) }?;
            kernels::flip_rows(&checked)?;
        }
        Ok(())
    })
}

/// `ignore_strides` / `ignore_broadcast`: the inputs with compact strides
/// (all of them, or those with a stride-0 axis), laid out in `keep`; `None`
/// when nothing changes.
///
/// # Safety
/// `call` is a valid call per provider.h.
unsafe fn compacted(
    mutation: &str,
    call: &vsdk_kernel_call_t,
    keep: &mut Rewrite,
) -> Option<Vec<vsdk_tensor_t>> {
    let all = match mutation {
        "ignore_strides" => true,
        "ignore_broadcast" => false,
        _ => return None,
    };
    // SAFETY: per the contract: `num_inputs` descriptors, each with `ndim`
    // shape and stride entries.
    let inputs = unsafe { std::slice::from_raw_parts(call.inputs, call.num_inputs as usize) };
    let mut out = inputs.to_vec();
    for (i, t) in inputs.iter().enumerate() {
        let n = t.ndim.max(0) as usize;
        // SAFETY: as above.
        let (shape, strides) = unsafe {
            if n == 0 {
                (&[][..], &[][..])
            } else {
                (
                    std::slice::from_raw_parts(t.shape, n),
                    std::slice::from_raw_parts(t.strides, n),
                )
            }
        };
        if !all && !strides.contains(&0) {
            continue;
        }
        let mut compact = vec![1i64; n];
        for d in (0..n.saturating_sub(1)).rev() {
            compact[d] = compact[d + 1] * shape[d + 1];
        }
        keep.ints.push(compact);
        out[i].strides = keep.ints.last().expect("just pushed").as_ptr();
    }
    Some(out)
}

/// One scratch buffer for every call (the bug: a provider that declares
/// itself thread safe).
static SCRATCH: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

/// Copies each output into [`SCRATCH`], waits a little (as a kernel using
/// it would), and copies it back: a call overlapping this one overwrites it.
fn through_scratch(call: &vsdk_provider_kit::KernelCall) {
    for out in &call.outputs {
        let n = out.numel() * out.dtype.size_bytes();
        {
            let mut s = SCRATCH
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            s.clear();
            // SAFETY: a compact output of `n` bytes in host memory, written by the target.
            s.extend_from_slice(unsafe { std::slice::from_raw_parts(out.ptr, n) });
        }
        std::thread::sleep(std::time::Duration::from_micros(300));
        let s = SCRATCH
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: as above; the copy is clipped to the output's size.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), out.ptr, n.min(s.len())) };
    }
}

/// `serial_overlap`: calls in flight; a second one at once is an error.
struct InFlight;

static IN_FLIGHT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl InFlight {
    fn enter() -> Result<InFlight, ProviderError> {
        use std::sync::atomic::Ordering;
        let before = IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight;
        if before > 0 {
            return Err(ProviderError::internal(
                "called while another call was running, though the table declares VSDK_CONCURRENCY_SERIAL",
            ));
        }
        // Long enough for an overlapping call to arrive.
        std::thread::sleep(std::time::Duration::from_micros(200));
        Ok(guard)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
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
