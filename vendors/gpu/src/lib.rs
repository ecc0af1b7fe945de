//! The host side of the VIPS SDK's GPU providers (CUDA, HIP, and the CPU
//! SIMT emulation that runs the same kernel source without a GPU):
//!
//! - `kernels/*.cu`: every operator, written once for CUDA and HIP, a file
//!   per operator family, compiled as one program ([`KERNEL_SOURCE`]);
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
/// time by NVRTC or hiprtc with [`DEVICE_HEADER`] supplied as a header, as
/// one program (`vips_kernels.cu`): the files of [`KERNEL_FILES`], in order.
pub const KERNEL_SOURCE: &str = concat!(
    include_str!("../kernels/common.cu"),
    include_str!("../kernels/elementwise.cu"),
    include_str!("../kernels/movement.cu"),
    include_str!("../kernels/linear.cu"),
    include_str!("../kernels/normalization.cu"),
    include_str!("../kernels/reduction.cu"),
    include_str!("../kernels/attention.cu"),
    include_str!("../kernels/resize.cu"),
    include_str!("../kernels/sparse.cu"),
    include_str!("../kernels/raster.cu"),
);
/// The files under `kernels/` that [`KERNEL_SOURCE`] concatenates, in order:
/// what every family uses, then one file per operator family. The SIMT
/// emulation `#include`s them in this order.
pub const KERNEL_FILES: [&str; 10] = [
    "common.cu",
    "elementwise.cu",
    "movement.cu",
    "linear.cu",
    "normalization.cu",
    "reduction.cu",
    "attention.cu",
    "resize.cu",
    "sparse.cu",
    "raster.cu",
];
/// The portability header the kernel source includes.
pub const DEVICE_HEADER: &str = include_str!("../kernels/vips_device.h");
/// Its include name, as the kernel source spells it.
pub const DEVICE_HEADER_NAME: &str = "vips_device.h";

#[cfg(test)]
mod tests {
    /// `KERNEL_SOURCE`'s `include_str!`s and `KERNEL_FILES` name the same
    /// files in the same order.
    #[test]
    fn the_kernel_source_is_the_kernel_files_in_order() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("kernels");
        let joined: String = super::KERNEL_FILES
            .iter()
            .map(|f| std::fs::read_to_string(dir.join(f)).unwrap())
            .collect();
        assert!(joined == super::KERNEL_SOURCE);
        let on_disk = std::fs::read_dir(&dir)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().path().extension() == Some("cu".as_ref()))
            .count();
        assert_eq!(on_disk, super::KERNEL_FILES.len(), "a .cu file left out");
    }
}
