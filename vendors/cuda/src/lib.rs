//! The CUDA reference provider of the VIPS SDK.
//!
//! A [`vsdk_gpu::Backend`] over the CUDA driver API: the C ABI, the checks of
//! every call, the choice of kernels and launch shapes, and the kernel source
//! itself are shared with the other GPU providers in `vendors/gpu`; this
//! crate supplies memory, copies, launches and cuBLAS for one device kind.
//!
//! Nothing of CUDA is needed to build or load it: the driver (`libcuda`),
//! NVRTC and cuBLAS are loaded at run time. Without a driver the provider
//! loads, reports zero devices and says why.
//!
//! The kernel source is compiled by NVRTC on a device's first launch, for
//! that device's compute capability ([`compile_kernel_source`]).

mod device;
pub mod nvrtc;

#[doc(hidden)]
pub use device::format_uuid;
pub use device::Cuda;

/// Compiles [`vsdk_gpu::KERNEL_SOURCE`] (with its header) for `target`,
/// exactly as the provider does before its first launch, with `extra`
/// options appended (the compile tests add `--ptxas-options=-v`).
pub fn compile_kernel_source(
    target: nvrtc::Target,
    extra: &[&str],
) -> Result<nvrtc::Compiled, String> {
    let mut options = vec![target.option()];
    options.extend(extra.iter().map(|o| o.to_string()));
    nvrtc::compile(
        vsdk_gpu::KERNEL_SOURCE,
        &[(vsdk_gpu::DEVICE_HEADER_NAME, vsdk_gpu::DEVICE_HEADER)],
        &options,
    )
}

vsdk_gpu::export_provider!(Cuda);
