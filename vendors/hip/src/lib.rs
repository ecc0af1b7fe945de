//! The HIP reference provider of the VIPS SDK: AMD GPUs through the HIP
//! runtime, the kernels of [`vsdk_gpu::KERNEL_SOURCE`] compiled at run time by
//! hiprtc for each device's architecture, and the shared GPU host code of
//! `vsdk-gpu` (operators as launches, the provider C ABI).
//!
//! By default nothing of ROCm is linked: the HIP runtime is opened with
//! `dlopen` when the provider is created ([`hip_api`]), so the library loads
//! on any machine and, without ROCm or without an AMD GPU, reports zero
//! devices and the reason. The feature `hip-sys` links it instead, through
//! hip-sys, for distributions that ship ROCm (see [`hip_api`]).
//! There is no vendor GEMM (Debian ships no hipBLAS): `vsdk.linear` runs the
//! kernel source's tiled GEMM.

pub mod device;
pub mod hip_api;

pub use device::{compile_kernels, Hip, ARCH_ENV, HIPRTC_OPTIONS};
pub use hip_api::{hiprtc, runtime, CompileOutput, HipApi, Hiprtc};

vsdk_gpu::export_provider!(Hip);
