//! Builds c/hostile.c once per way of misbehaving (see the comments there),
//! and c/throw_create.cpp with the C++ compiler. The variants that attack the
//! host read /proc and call prctl: this crate builds on Linux only.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Variant name and its `-D` flag in c/hostile.c.
const VARIANTS: &[(&str, &str)] = &[
    ("working", ""),
    ("segfault", "-DHOSTILE_SEGFAULT"),
    ("abort", "-DHOSTILE_ABORT"),
    ("exit0", "-DHOSTILE_EXIT0"),
    ("hang", "-DHOSTILE_HANG"),
    ("slow_start", "-DHOSTILE_SLOW_START"),
    ("flaky", "-DHOSTILE_FLAKY"),
    ("oob_near", "-DHOSTILE_OOB_NEAR"),
    ("oob_far", "-DHOSTILE_OOB_FAR"),
    ("half_write", "-DHOSTILE_HALF_WRITE"),
    ("replay", "-DHOSTILE_REPLAY"),
    ("nondeterministic", "-DHOSTILE_NONDETERMINISTIC"),
    ("stdout_noise", "-DHOSTILE_STDOUT_NOISE"),
    ("destroy_crash", "-DHOSTILE_DESTROY_CRASH"),
    ("huge_kernel_count", "-DHOSTILE_HUGE_KERNEL_COUNT"),
    ("huge_device_count", "-DHOSTILE_HUGE_DEVICE_COUNT"),
    ("right_then_wrong_count", "-DHOSTILE_RIGHT_THEN_WRONG_COUNT"),
    ("right_then_wrong_fill", "-DHOSTILE_RIGHT_THEN_WRONG_FILL"),
    (
        "right_then_wrong_address",
        "-DHOSTILE_RIGHT_THEN_WRONG_ADDRESS",
    ),
    ("key_thief", "-DHOSTILE_KEY_THIEF"),
    ("report_rewriter", "-DHOSTILE_REPORT_REWRITER"),
    ("mem_writer", "-DHOSTILE_MEM_WRITER"),
    ("fork_detach", "-DHOSTILE_FORK_DETACH"),
    ("allocator", "-DHOSTILE_ALLOCATOR"),
    ("name_detector", "-DHOSTILE_NAME_DETECTOR"),
];

/// Compiles `source` into `OUT_DIR/libvsdk_hostile_<name>.so` with `compiler`,
/// `flags` and then `libs`, and exports its path to the crate as
/// `VSDK_HOSTILE_<NAME>`.
fn shared_library(
    out_dir: &Path,
    compiler: &Path,
    name: &str,
    source: &str,
    flags: &[&str],
    libs: &[&str],
) {
    let lib = out_dir.join(format!(
        "libvsdk_hostile_{name}{}",
        std::env::consts::DLL_SUFFIX
    ));
    let status = Command::new(compiler)
        .args(["-O1", "-fPIC", "-shared", "-fvisibility=hidden"])
        .args(["-Wall", "-Wextra", "-Werror"])
        .args(["-I", "../../include"])
        .args(flags.iter().filter(|f| !f.is_empty()))
        .arg(source)
        .args(libs)
        .args(["-ldl", "-lpthread", "-o"])
        .arg(&lib)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the compiler {}: {e}", compiler.display()));
    assert!(status.success(), "hostile variant {name} failed to compile");
    println!(
        "cargo:rustc-env=VSDK_HOSTILE_{}={}",
        name.to_uppercase(),
        lib.display()
    );
}

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cc = cc::Build::new().cargo_metadata(false).get_compiler();
    let cxx = cc::Build::new()
        .cpp(true)
        .cargo_metadata(false)
        .get_compiler();
    for (name, define) in VARIANTS {
        shared_library(
            &out_dir,
            cc.path(),
            name,
            "c/hostile.c",
            &["-std=c99", define],
            &[],
        );
    }
    // The exception must propagate out of create: exceptions on, libstdc++.
    shared_library(
        &out_dir,
        cxx.path(),
        "throw_create",
        "c/throw_create.cpp",
        &["-std=c++17", "-fexceptions"],
        &["-lstdc++"],
    );
    println!("cargo:rerun-if-changed=c/hostile.c");
    println!("cargo:rerun-if-changed=c/throw_create.cpp");
    println!("cargo:rerun-if-changed=../../include/vips_sdk/provider.h");
}
