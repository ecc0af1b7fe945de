//! Builds c/fixture.c once per way of being broken (see the comment there).

use std::path::PathBuf;
use std::process::Command;

const FIXTURES: &[(&str, &str)] = &[
    ("working", ""),
    ("no_entry", "-DFIXTURE_NO_ENTRY"),
    ("wrong_abi", "-DFIXTURE_ABI=99"),
    ("null_execute", "-DFIXTURE_NULL_EXECUTE"),
    ("short_table", "-DFIXTURE_SHORT_TABLE"),
    ("kernel_fails", "-DFIXTURE_KERNEL_FAILS"),
    ("create_fails", "-DFIXTURE_CREATE_FAILS"),
    ("bad_version", "-DFIXTURE_BAD_VERSION"),
];

/// Variants of the real C template with one deliberate bug each.
const MUTANTS: &[(&str, &str)] = &[("gelu_tanh", "c/mutant_gelu_tanh.c")];

fn main() {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let compiler = cc::Build::new().cargo_metadata(false).get_compiler();
    for (name, define) in FIXTURES {
        let lib = out_dir.join(format!(
            "libvsdk_fixture_{name}{}",
            std::env::consts::DLL_SUFFIX
        ));
        let mut cmd = Command::new(compiler.path());
        cmd.args([
            "-std=c99",
            "-O1",
            "-fPIC",
            "-shared",
            "-fvisibility=hidden",
            "-Wall",
            "-Wextra",
            "-Werror",
            "-Wno-unused-function",
        ]);
        if !define.is_empty() {
            cmd.arg(define);
        }
        let status = cmd
            .args(["-I", "../../include", "c/fixture.c", "-lm", "-o"])
            .arg(&lib)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run the C compiler {}: {e}",
                    compiler.path().display()
                )
            });
        assert!(status.success(), "fixture `{name}` failed to compile");
        println!(
            "cargo:rustc-env=VSDK_FIXTURE_{}={}",
            name.to_uppercase(),
            lib.display()
        );
    }
    for (name, source) in MUTANTS {
        let lib = out_dir.join(format!(
            "libvsdk_mutant_{name}{}",
            std::env::consts::DLL_SUFFIX
        ));
        let status = Command::new(compiler.path())
            .args([
                "-std=c99",
                "-O1",
                "-fPIC",
                "-shared",
                "-fvisibility=hidden",
                "-Wall",
                "-Wextra",
                "-Werror",
            ])
            .args([
                "-I",
                "../../include",
                "-I",
                "../../vendors/template-c",
                source,
                "-lm",
                "-o",
            ])
            .arg(&lib)
            .status()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run the C compiler {}: {e}",
                    compiler.path().display()
                )
            });
        assert!(status.success(), "mutant `{name}` failed to compile");
        println!(
            "cargo:rustc-env=VSDK_MUTANT_{}={}",
            name.to_uppercase(),
            lib.display()
        );
        println!("cargo:rerun-if-changed={source}");
    }
    println!("cargo:rerun-if-changed=../../vendors/template-c/template.c");
    println!("cargo:rerun-if-changed=c/fixture.c");
    println!("cargo:rerun-if-changed=../../include/vips_sdk/provider.h");
}
