//! The host side of the VIPS SDK's GPU providers (CUDA, HIP, and the CPU
//! SIMT emulation that runs the same kernel source without a GPU):
//!
//! - `kernels/vips_kernels.cu`: every operator, written once for CUDA and HIP;
//! - [`Backend`]: what a device API supplies (memory, copies, launch by name);
//! - `ops`: each catalog operator as launches of those kernels;
//! - `abi`: [`GpuProvider`], the provider ABI over any backend
//!   ([`export_provider!`]).

pub mod abi;
mod backend;
mod memory;
mod ops;

pub use abi::GpuProvider;
pub use backend::{Backend, DeviceInfo, DevicePtr, Gemm, GemmType};
pub use ops::kernel_names;
/// The kit, for [`export_provider!`].
pub use vsdk_provider_kit as kit;

/// Every kernel, written once in the common subset of CUDA and HIP
/// (`kernels/vips_device.h` papers over the differences). Compiled at run
/// time by NVRTC or hiprtc with [`DEVICE_HEADER`] supplied as a header.
pub const KERNEL_SOURCE: &str = include_str!("../kernels/vips_kernels.cu");
/// The portability header the kernel source includes.
pub const DEVICE_HEADER: &str = include_str!("../kernels/vips_device.h");
/// Its include name, as the kernel source spells it.
pub const DEVICE_HEADER_NAME: &str = "vips_device.h";
