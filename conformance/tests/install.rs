//! The SDK installed for C and C++ users (`tools/install`), used as they
//! would: the example engine (examples/c-engine) built with pkg-config
//! against the prefix runs the quick DINOv2 suite, checks tensors of its own
//! and accepts only a CERTIFIED report; a CMake project finds the package;
//! libvips and libvips_sdk share one translation unit and one program; the
//! installed CLI finds the installed provider and suites.
//!
//! Needs a C compiler, pkg-config, CMake and libvips-dev (CI installs them:
//! .ci/run); without them these tests fail and say so.

use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::{repo, require, Out};

fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

fn sh(cmd: &mut Command) -> Out {
    Out::of(cmd.output().expect("start the command"))
}

/// A fresh prefix with the debug build installed (what `cargo build
/// --workspace` made; tools/test builds it first).
fn install() -> tempfile::TempDir {
    let prefix = tempfile::tempdir().expect("temp dir");
    let profile = target_dir();
    let r = sh(Command::new(repo().join("tools/install"))
        .arg(prefix.path())
        .args(["--debug", "--no-build"])
        .env("CARGO_TARGET_DIR", profile.parent().expect("target dir"))
        .current_dir(repo()));
    assert_eq!(r.code, 0, "tools/install failed: {}{}", r.stdout, r.stderr);
    prefix
}

/// A command with no SDK paths inherited: only the prefix may be found.
fn clean(program: impl AsRef<std::ffi::OsStr>, prefix: &Path) -> Command {
    let mut c = Command::new(program);
    c.env_remove("VSDK_PROVIDER_PATH")
        .env_remove("VSDK_SUITES_PATH")
        .env_remove("VIPS_SIGN_KEY")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .env("LD_LIBRARY_PATH", prefix.join("lib"));
    c
}

fn pkg_config(prefix: &Path, packages: &[&str]) -> Vec<String> {
    let r = sh(clean("pkg-config", prefix)
        .args(["--cflags", "--libs"])
        .args(packages));
    assert_eq!(r.code, 0, "pkg-config {packages:?}: {}", r.stderr);
    r.stdout.split_whitespace().map(str::to_string).collect()
}

#[test]
fn the_example_engine_runs_checks_and_refuses_uncertified_drivers() {
    require("cc", &["--version"], "a C compiler");
    require("pkg-config", &["--version"], "pkg-config");
    let prefix = install();
    let p = prefix.path();
    for f in [
        "include/vips_sdk/vips_sdk.h",
        "include/vips_sdk/provider.h",
        "lib/libvips_sdk.so",
        "lib/libvips_sdk.a",
        "lib/vips-sdk/providers/libvsdk_provider_cpu.so",
        "bin/vips-conformance",
        "libexec/vips-sdk/vips-sdk-worker",
        "share/vips-sdk/suites/dinov2-vits14-quick/suite.golden",
        "lib/cmake/VipsSdk/VipsSdkConfig.cmake",
    ] {
        assert!(p.join(f).is_file(), "{f} not installed");
    }
    let version = sh(clean("pkg-config", p).args(["--modversion", "vips-sdk"]));
    assert_eq!(version.stdout.trim(), env!("CARGO_PKG_VERSION"));

    let engine = p.join("engine");
    let r = sh(clean("cc", p)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .arg(repo().join("examples/c-engine/engine.c"))
        .args(pkg_config(p, &["vips-sdk"]))
        .arg("-lm")
        .arg("-o")
        .arg(&engine));
    assert_eq!(r.code, 0, "building the example engine: {}", r.stderr);

    // A certified report of the installed CPU provider, made with the
    // installed CLI, which finds the provider and suites beside itself.
    let cli = p.join("bin/vips-conformance");
    let key = p.join("key.pem");
    let r = sh(clean(&cli, p).arg("keygen").arg(&key));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let report = p.join("quick.json");
    let r = sh(clean(&cli, p)
        .args(["run", "dinov2-vits14-quick", "--report"])
        .arg(&report)
        .arg("--sign-key")
        .arg(&key));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);

    let r = sh(clean(&engine, p).arg(&report).arg(p.join("key.pub.pem")));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    for line in [
        "provider cpu",
        "suite: PASS",
        "final_norm, own LayerNorm: PASS",
        "final_norm, own LayerNorm: FAIL, margin -",
        "own tensor: correct PASS, perturbed FAIL",
        "report: CERTIFIED dinov2-vits14-quick",
        "driver accepted",
    ] {
        assert!(r.stdout.contains(line), "`{line}` not in:\n{}", r.stdout);
    }

    // A report that verifies but does not certify (a filtered run): refused.
    let filtered = p.join("filtered.json");
    let r = sh(clean(&cli, p)
        .args([
            "run",
            "dinov2-vits14-quick",
            "--stage",
            "final_norm",
            "--report",
        ])
        .arg(&filtered)
        .arg("--sign-key")
        .arg(&key));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    let r = sh(clean(&engine, p).arg(&filtered).arg(p.join("key.pub.pem")));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stdout.contains("report: NOT CERTIFIED") && r.stdout.contains("driver REFUSED"),
        "{}",
        r.stdout
    );
    // Signed by someone else: does not verify, refused.
    let other = p.join("other.pem");
    assert_eq!(sh(clean(&cli, p).arg("keygen").arg(&other)).code, 0);
    let r = sh(clean(&engine, p).arg(&report).arg(p.join("other.pub.pem")));
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("not signed by the given key"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_cmake_project_finds_the_package() {
    require("cmake", &["--version"], "CMake");
    let prefix = install();
    let p = prefix.path();
    let build = p.join("build");
    let r = sh(clean("cmake", p)
        .arg("-S")
        .arg(repo().join("examples/cmake-consumer"))
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", p.display())));
    assert_eq!(r.code, 0, "cmake configure: {}{}", r.stdout, r.stderr);
    let r = sh(clean("cmake", p).arg("--build").arg(&build));
    assert_eq!(r.code, 0, "cmake build: {}{}", r.stdout, r.stderr);
    let r = sh(clean(build.join("consumer"), p).env_remove("LD_LIBRARY_PATH"));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("demo-mlp 0.1.0: 3 stages"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("cpu device 0: "), "{}", r.stdout);
    let r = sh(clean(build.join("consumer_static"), p).env_remove("LD_LIBRARY_PATH"));
    assert_eq!(r.code, 0, "static: {}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("demo-mlp 0.1.0: 3 stages"),
        "{}",
        r.stdout
    );
    let needed = sh(Command::new("readelf")
        .arg("-d")
        .arg(build.join("consumer_static")));
    assert!(!needed.stdout.contains("libvips_sdk"), "{}", needed.stdout);
    // A version the package does not satisfy is refused by find_package.
    let dir = p.join("too-new");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.16)\nproject(x NONE)\nfind_package(VipsSdk 9.0 REQUIRED)\n",
    )
    .unwrap();
    let r = sh(clean("cmake", p)
        .arg("-S")
        .arg(&dir)
        .arg("-B")
        .arg(dir.join("build"))
        .arg(format!("-DCMAKE_PREFIX_PATH={}", p.display())));
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("VipsSdk"), "{}", r.stderr);
}

#[test]
fn libvips_and_libvips_sdk_live_in_one_program() {
    require(
        "pkg-config",
        &["--exists", "vips"],
        "libvips-dev (pkg-config vips)",
    );
    let prefix = install();
    let p = prefix.path();
    let exe = p.join("coexist");
    let r = sh(clean("cc", p)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .arg(repo().join("examples/libvips-coexistence/main.c"))
        .args(pkg_config(p, &["vips", "vips-sdk"]))
        .arg("-o")
        .arg(&exe));
    assert_eq!(r.code, 0, "building with both libraries: {}", r.stderr);
    let r = sh(&mut clean(&exe, p));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("a 64x48 image of mean 128.0"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("suite demo-mlp with 3 stages"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("resized to 32x24"), "{}", r.stdout);
}

#[test]
fn the_quick_start_of_the_docs_compiles_and_runs() {
    require("pkg-config", &["--version"], "pkg-config");
    let doc = std::fs::read_to_string(repo().join("docs/c-api.md")).unwrap();
    let start = doc.find("```c\n").expect("a C block in docs/c-api.md") + 5;
    let code = &doc[start..start + doc[start..].find("```").expect("its end")];
    let prefix = install();
    let p = prefix.path();
    let source = p.join("quick_start.c");
    std::fs::write(&source, code).unwrap();
    let exe = p.join("quick_start");
    let r = sh(clean("cc", p)
        .arg(&source)
        .args(pkg_config(p, &["vips-sdk"]))
        .arg("-o")
        .arg(&exe));
    assert_eq!(r.code, 0, "building the quick start: {}", r.stderr);
    let r = sh(&mut clean(&exe, p));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), "PASS");
}
