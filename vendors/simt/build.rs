//! Compiles the SIMT emulation with the GPU kernel source inside it.

fn main() {
    let kernels = "../gpu/kernels";
    for f in [
        "emulator/simt.cpp",
        "emulator/simt.hpp",
        "emulator/selftest.cu",
        // Every file of the kernel source (a directory: any file in it).
        "../gpu/kernels",
    ] {
        println!("cargo:rerun-if-changed={f}");
    }
    let mut build = cc::Build::new();
    // The kernels' fmaf is a single rounding, as on a GPU. Without the
    // instruction it is a library call, a third of the emulation's time. Used
    // when the machine building is the one running (the emulator is a test
    // tool, built where it runs); the provider checks the CPU at load.
    if fma_here() {
        build.flag("-mfma");
        println!("cargo:rustc-cfg=simt_fma");
    }
    println!("cargo:rustc-check-cfg=cfg(simt_fma)");
    build
        .cpp(true)
        .std("c++17")
        .file("emulator/simt.cpp")
        .include("emulator")
        .include(kernels)
        .define("VIPS_SIMT_EMULATION", None)
        // The kernels are the code under test: optimised, IEEE semantics (no
        // -ffast-math), and a * b + c contracted to one fma where the compiler
        // sees fit, as NVRTC (--fmad=true) and hiprtc do by default.
        .opt_level(2)
        .flag_if_supported("-ffp-contract=fast")
        .flag_if_supported("-Wno-unused-parameter")
        .compile("vips_simt");
}

fn fma_here() -> bool {
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    #[cfg(target_arch = "x86_64")]
    {
        host == target && target.starts_with("x86_64") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (host, target);
        false
    }
}
