//! `vsdk.linear` through cuBLAS when `libcublas` loads; otherwise (`None`)
//! the kernel source's tiled GEMM runs.
//!
//! Row-major `out[m, n] = x[m, k] · w[n, k]ᵀ (+ bias[n])` is, read
//! column-major, `outᵀ[n, m] = w · xᵀ`: `w` is a column-major k×n matrix
//! (transposed: `op(A) = T`, lda = k), `x` a column-major k×m matrix
//! (`op(B) = N`, ldb = k), `out` a column-major n×m matrix (ldc = n).
//!
//! Bias: `out` is first filled with the bias broadcast over the rows, as the
//! k = 1 product `bias[n×1] · ones[1×m]` (exact: every product is by 1), then
//! the main GEMM adds to it with β = 1. The sum is formed in float32 and
//! rounded to the output type once, as the catalog's definition does.
//!
//! float32 goes through `cublasGemmEx` with `CUBLAS_COMPUTE_32F` (float32
//! accumulation, never TF32) and the math mode forbids reduced-precision
//! split-K reductions: on an H200 (2026-11-28, docs/validation.md "The CUDA
//! provider on an H200") every linear of the DINOv2 and TRELLIS quick suites
//! passed so. float16 and bfloat16 do not: `linear` failed its own bound in
//! about 2 % of the qkv outputs, each about one 16-bit step off where the
//! exact value lies next to a representable one (|e| up to 1.7-2.3). That is
//! what rounding twice gives (tools/linear_rounding_model.py: the product
//! rounded to the output type, then the bias, 3 %, |e| 1.8; tensor cores'
//! truncating accumulation alone stays inside): cuBLAS's 16-bit `β·C` with C
//! in the output type is not the single rounding this module assumed. They
//! run the kernel source's tiled GEMM instead (float32 FMA accumulation, one
//! rounding; the SIMT emulation checks it at both types). Back to cuBLAS
//! would be: a float32 output (`Ctype` `CUDA_R_32F`) pre-filled with the bias,
//! then one conversion, judged on a GPU first ([`conforms`]).

use super::{load_first, missing_symbols, Cuda};
use cudarc::cublas::sys as cb;
use cudarc::driver::sys;
use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;
use vsdk_gpu::{Backend, DevicePtr, Gemm, GemmType};
use vsdk_provider_kit::{ffi, ProviderError};

const CUBLAS_SYMBOLS: &[&str] = &[
    "cublasCreate_v2",
    "cublasDestroy_v2",
    "cublasSetStream_v2",
    "cublasSetMathMode",
    "cublasGemmEx",
    "cublasGetStatusString",
];

/// A device's cuBLAS state, created on its first GEMM.
pub(crate) enum Blas {
    Ready(Ready),
    /// cuBLAS is missing or could not start on this device: GEMMs use the
    /// kernel source.
    Unavailable,
}

pub(crate) struct Ready {
    handle: cb::cublasHandle_t,
    /// Per [`GemmType`]: a device vector of ones (address, length).
    ones: [Option<(DevicePtr, usize)>; 3],
}

// SAFETY: the handle is used only under the device's `blas` mutex, with the
// device's context current (cuBLAS handles may move between threads).
unsafe impl Send for Ready {}

impl Blas {
    fn create(dev: &Cuda) -> Blas {
        if probe_cublas().is_err() {
            return Blas::Unavailable;
        }
        let mut handle: cb::cublasHandle_t = std::ptr::null_mut();
        // SAFETY: libcublas is loaded with every symbol used (probed); the
        // device's context is current (`gemm` binds it first).
        if unsafe { cb::cublasCreate_v2(&mut handle) } != cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS
        {
            return Blas::Unavailable;
        }
        // SAFETY: a live handle and the device's live stream.
        let ok = unsafe {
            cb::cublasSetStream_v2(handle, dev.stream().cast())
                == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS
                && cb::cublasSetMathMode(
                    handle,
                    cb::cublasMath_t::CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION,
                ) == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS
        };
        if !ok {
            // SAFETY: created above, destroyed once.
            unsafe { cb::cublasDestroy_v2(handle) };
            return Blas::Unavailable;
        }
        Blas::Ready(Ready {
            handle,
            ones: [None; 3],
        })
    }

    /// Frees the handle and the ones vectors; the device's context is
    /// current and its stream idle.
    pub(crate) fn destroy(self) {
        if let Blas::Ready(ready) = self {
            // SAFETY: created in `create`, destroyed once.
            unsafe { cb::cublasDestroy_v2(ready.handle) };
            for (ptr, _) in ready.ones.into_iter().flatten() {
                // SAFETY: allocated in `ones`, no queued work uses it.
                unsafe { sys::cuMemFree_v2(ptr) };
            }
        }
    }
}

impl Ready {
    /// A device vector of at least `len` ones of type `t`.
    fn ones(&mut self, dev: &Cuda, t: GemmType, len: usize) -> Result<DevicePtr, ProviderError> {
        let slot = &mut self.ones[t as usize];
        if let Some((ptr, have)) = *slot {
            if have >= len {
                return Ok(ptr);
            }
            // `free` waits for queued GEMMs that read the old vector.
            dev.free(ptr);
            *slot = None;
        }
        let one: &[u8] = match t {
            GemmType::F32 => &1.0f32.to_le_bytes(),
            GemmType::F16 => &[0x00, 0x3c],
            GemmType::BF16 => &[0x80, 0x3f],
        };
        let len = len.next_multiple_of(1024);
        let bytes = one.repeat(len);
        let ptr = dev.alloc(bytes.len())?;
        if let Err(e) = dev.copy_to_device(ptr, &bytes) {
            dev.free(ptr);
            return Err(e);
        }
        *slot = Some((ptr, len));
        Ok(ptr)
    }

    fn run(
        &mut self,
        dev: &Cuda,
        g: &Gemm,
        m: c_int,
        n: c_int,
        k: c_int,
    ) -> Result<(), ProviderError> {
        let t = match g.dtype {
            GemmType::F32 => cb::cudaDataType::CUDA_R_32F,
            GemmType::F16 => cb::cudaDataType::CUDA_R_16F,
            GemmType::BF16 => cb::cudaDataType::CUDA_R_16BF,
        };
        let one = 1.0f32;
        let zero = 0.0f32;
        let mut beta = zero;
        if let Some(bias) = g.bias {
            let ones = self.ones(dev, g.dtype, g.m)?;
            // outᵀ[n×m] = bias[n×1] · ones[1×m]
            self.gemm_ex(
                "bias broadcast",
                (
                    cb::cublasOperation_t::CUBLAS_OP_N,
                    cb::cublasOperation_t::CUBLAS_OP_N,
                ),
                (n, m, 1),
                (bias, n),
                (ones, 1),
                zero,
                g.out,
                t,
            )?;
            beta = one;
        }
        // outᵀ[n×m] = wᵀ… i.e. op(w)[n×k] · x^T[k×m] (+ outᵀ)
        let ld = k.max(1);
        self.gemm_ex(
            "linear",
            (
                cb::cublasOperation_t::CUBLAS_OP_T,
                cb::cublasOperation_t::CUBLAS_OP_N,
            ),
            (n, m, k),
            (g.w, ld),
            (g.x, ld),
            beta,
            g.out,
            t,
        )
    }

    /// `C = op(A)·op(B) + beta·C`, column-major, alpha = 1, ldc = rows of C.
    #[allow(clippy::too_many_arguments)]
    fn gemm_ex(
        &self,
        what: &str,
        (ta, tb): (cb::cublasOperation_t, cb::cublasOperation_t),
        (rows, cols, inner): (c_int, c_int, c_int),
        (a, lda): (DevicePtr, c_int),
        (b, ldb): (DevicePtr, c_int),
        beta: f32,
        c: DevicePtr,
        t: cb::cudaDataType,
    ) -> Result<(), ProviderError> {
        let alpha = 1.0f32;
        // SAFETY: a live handle on the device's stream with its context
        // current; the caller (vsdk_gpu) guarantees that x, w, bias and out
        // are live allocations of the GEMM's shape, which is what the
        // dimensions and leading dimensions above describe; alpha and beta
        // are host float32 values (pointer mode host, compute type 32F) read
        // before the call returns.
        let s = unsafe {
            cb::cublasGemmEx(
                self.handle,
                ta,
                tb,
                rows,
                cols,
                inner,
                (&alpha as *const f32).cast::<c_void>(),
                a as *const c_void,
                t,
                lda,
                b as *const c_void,
                t,
                ldb,
                (&beta as *const f32).cast::<c_void>(),
                c as *mut c_void,
                t,
                rows,
                cb::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                cb::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        };
        if s == cb::cublasStatus_t::CUBLAS_STATUS_SUCCESS {
            return Ok(());
        }
        // SAFETY: returns a static string for any status.
        let text = unsafe { cb::cublasGetStatusString(s) };
        let text = if text.is_null() {
            format!("{s:?}")
        } else {
            // SAFETY: a static NUL-terminated string from cuBLAS.
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned()
        };
        Err(ProviderError::new(
            ffi::VSDK_STATUS_DEVICE_ERROR,
            format!("cublasGemmEx ({what}, {rows}x{cols}x{inner}): {text}"),
        ))
    }
}

/// The GEMM through cuBLAS, or `None` when cuBLAS is absent, cannot start,
/// or does not support the type on this device.
pub(crate) fn gemm(dev: &Cuda, g: &Gemm) -> Option<Result<(), ProviderError>> {
    if !conforms(g.dtype) {
        return None;
    }
    let (m, n, k) = (
        c_int::try_from(g.m).ok()?,
        c_int::try_from(g.n).ok()?,
        c_int::try_from(g.k).ok()?,
    );
    let needs = match g.dtype {
        GemmType::F32 => (0, 0),
        GemmType::F16 => (5, 3),
        GemmType::BF16 => (8, 0),
    };
    if dev.capability() < needs {
        return None;
    }
    if m == 0 || n == 0 {
        return Some(Ok(()));
    }
    if let Err(e) = dev.bind() {
        return Some(Err(e));
    }
    let mut blas = dev.blas.lock().unwrap_or_else(|p| p.into_inner());
    let blas = blas.get_or_insert_with(|| Blas::create(dev));
    match blas {
        Blas::Ready(ready) => Some(ready.run(dev, g, m, n, k)),
        Blas::Unavailable => None,
    }
}

/// Whether cuBLAS's GEMM of this type meets the catalog's `linear` (exact
/// products, float32 accumulation) as judged on a GPU: float32 only (see
/// the module's comment).
fn conforms(t: GemmType) -> bool {
    matches!(t, GemmType::F32)
}

/// Whether libcublas loads (by cudarc's names, in its order) with every
/// function used, so that cudarc never panics. Probed once; the library
/// stays loaded.
fn probe_cublas() -> Result<(), String> {
    static PROBE: OnceLock<Result<libloading::Library, String>> = OnceLock::new();
    PROBE
        .get_or_init(|| {
            let candidates = cudarc::get_lib_name_candidates("cublas");
            let (name, lib) = load_first(&candidates)
                .map_err(|_| format!("cuBLAS not found (tried {})", candidates.join(", ")))?;
            let missing = missing_symbols(&lib, CUBLAS_SYMBOLS);
            if missing.is_empty() {
                Ok(lib)
            } else {
                Err(format!("{name} lacks {}", missing.join(", ")))
            }
        })
        .as_ref()
        .map(|_| ())
        .map_err(Clone::clone)
}
