//! Compiles template.c into a provider library with the compiler the cc crate
//! finds, and tells the crate where it is.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let lib = out_dir.join(format!(
        "libvsdk_provider_template_c{}",
        std::env::consts::DLL_SUFFIX
    ));
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    let status = Command::new(compiler.path())
        .args(["-std=c99", "-O2", "-fPIC", "-shared", "-fvisibility=hidden"])
        .args(["-Wall", "-Wextra", "-Werror", "-pedantic"])
        .arg("-I")
        .arg("../../include")
        .arg("template.c")
        .arg("-o")
        .arg(&lib)
        .arg("-lm")
        .status()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run the C compiler {}: {e}",
                compiler.path().display()
            )
        });
    assert!(status.success(), "template.c failed to compile");
    println!("cargo:rustc-env=VSDK_TEMPLATE_C_LIBRARY={}", lib.display());
    println!("cargo:rerun-if-changed=template.c");
    println!("cargo:rerun-if-changed=../../include/vips_sdk/provider.h");
}
