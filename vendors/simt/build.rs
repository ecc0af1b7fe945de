//! Compiles the SIMT emulation with the GPU kernel source inside it.

fn main() {
    let kernels = "../gpu/kernels";
    for f in [
        "emulator/simt.cpp",
        "emulator/simt.hpp",
        "../gpu/kernels/vips_kernels.cu",
        "../gpu/kernels/vips_device.h",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("emulator/simt.cpp")
        .include("emulator")
        .include(kernels)
        .define("VIPS_SIMT_EMULATION", None)
        // The kernels are the code under test: compile them as a GPU compiler
        // would, optimised, and keep float semantics strict (no -ffast-math).
        .opt_level(2)
        .flag_if_supported("-Wno-unused-parameter")
        .compile("vips_simt");
}
