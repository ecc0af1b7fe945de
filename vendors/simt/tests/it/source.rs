//! The emulated program is the one NVRTC and hiprtc compile.

/// The emulation compiles the program NVRTC and hiprtc get: the kernel
/// files, `#include`d in `KERNEL_SOURCE`'s order.
#[test]
fn the_emulation_includes_the_kernel_files_in_order() {
    let simt = include_str!("../../emulator/simt.cpp");
    let included: Vec<&str> = simt
        .lines()
        .filter_map(|l| l.strip_prefix("#include \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|f| f.ends_with(".cu") && *f != "selftest.cu")
        .collect();
    assert_eq!(included, vsdk_gpu::KERNEL_FILES);
}
