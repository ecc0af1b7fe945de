//! The SDK installed for C and C++ users (`tools/install`), used as they
//! would: the example engine (examples/c-engine) built with pkg-config
//! against the prefix runs the quick DINOv2 suite, checks tensors of its own
//! and accepts only a CERTIFIED report; a CMake project finds the package;
//! libvips and libvips_sdk share one translation unit and one program; the
//! installed CLI finds the installed provider and suites.
//!
//! Every consumer is built and run outside the prefix (a temporary directory
//! of its own), shared and static, with no VSDK_* variable set: suites and
//! the CPU provider are found by name from the library's own location
//! (shared) or the prefix recorded into it (static), and a directory named
//! like the suite in the working directory changes nothing. The static
//! archive defines no global symbol but the `vsdk_` functions.
//!
//! Needs a C compiler, pkg-config, CMake, binutils and libvips-dev (CI
//! installs them: .ci/run); without them these tests fail and say so.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
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
        .env_remove("VSDK_WORKER")
        .env_remove("VIPS_SIGN_KEY")
        .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
        .env("LD_LIBRARY_PATH", prefix.join("lib"));
    c
}

/// Where a consumer is built and run: a directory of its own, not under the
/// prefix (so nothing is found relative to the program by chance), holding a
/// directory and a file named like the suite and the provider opened by
/// name (names are never read as paths).
fn outside(prefix: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    assert!(!dir.path().starts_with(prefix));
    for suite in ["demo-mlp", "dinov2-vits14-quick"] {
        std::fs::create_dir(dir.path().join(suite)).unwrap();
    }
    std::fs::write(dir.path().join("cpu"), "not a provider").unwrap();
    dir
}

/// A program linked with the static archive, run with no SDK paths and no
/// library path: only what the library recorded may be found.
fn static_run(exe: &Path, prefix: &Path, cwd: &Path) -> Out {
    sh(clean(exe, prefix)
        .env_remove("LD_LIBRARY_PATH")
        .current_dir(cwd))
}

/// The link arguments of the static archive, as docs/c-api.md gives them.
fn static_link(prefix: &Path) -> Vec<String> {
    let mut args = vec![prefix.join("lib/libvips_sdk.a").display().to_string()];
    args.extend(["-lpthread", "-ldl", "-lm"].map(String::from));
    args
}

/// `source` compiled and linked with the static archive of `prefix`, warnings
/// as errors, into `exe`.
fn cc_static(prefix: &Path, source: &Path, exe: &Path) -> Out {
    let cflags = sh(clean("pkg-config", prefix).args(["--cflags", "vips-sdk"]));
    sh(clean("cc", prefix)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .arg(source)
        .args(cflags.stdout.split_whitespace())
        .args(static_link(prefix))
        .arg("-o")
        .arg(exe))
}

/// No dynamic dependency on libvips_sdk: the archive is inside.
fn assert_static(exe: &Path) {
    let needed = sh(Command::new("readelf").arg("-d").arg(exe));
    assert_eq!(needed.code, 0, "readelf: {}", needed.stderr);
    assert!(!needed.stdout.contains("libvips_sdk"), "{}", needed.stdout);
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
        "share/vips-sdk/template/template.c",
        "lib/cmake/VipsSdk/VipsSdkConfig.cmake",
    ] {
        assert!(p.join(f).is_file(), "{f} not installed");
    }
    let version = sh(clean("pkg-config", p).args(["--modversion", "vips-sdk"]));
    assert_eq!(version.stdout.trim(), env!("CARGO_PKG_VERSION"));

    let build = outside(p);
    let engine = build.path().join("engine");
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

    let r = sh(clean(&engine, p)
        .arg(&report)
        .arg(p.join("key.pub.pem"))
        .current_dir(build.path()));
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
    let here = outside(p);
    let build = here.path().join("build");
    let r = sh(clean("cmake", p)
        .arg("-S")
        .arg(repo().join("examples/cmake-consumer"))
        .arg("-B")
        .arg(&build)
        .arg(format!("-DCMAKE_PREFIX_PATH={}", p.display())));
    assert_eq!(r.code, 0, "cmake configure: {}{}", r.stdout, r.stderr);
    let r = sh(clean("cmake", p).arg("--build").arg(&build));
    assert_eq!(r.code, 0, "cmake build: {}{}", r.stdout, r.stderr);
    // Shared (found through its rpath, suites and provider beside the
    // library) and static (the prefix recorded into the archive), run where
    // a directory `demo-mlp` lies.
    for (exe, what) in [("consumer", "shared"), ("consumer_static", "static")] {
        let r = static_run(&build.join(exe), p, here.path());
        assert_eq!(r.code, 0, "{what}: {}{}", r.stdout, r.stderr);
        assert!(
            r.stdout.contains("demo-mlp 0.1.0: 3 stages"),
            "{what}: {}",
            r.stdout
        );
        assert!(r.stdout.contains("cpu device 0: "), "{what}: {}", r.stdout);
    }
    assert_static(&build.join("consumer_static"));
    // `./demo-mlp` is a path: that directory, which holds no suite; the
    // message says how the argument was read.
    let r = sh(clean(build.join("consumer_static"), p)
        .env_remove("LD_LIBRARY_PATH")
        .arg("./demo-mlp")
        .current_dir(here.path()));
    assert_eq!(r.code, 1, "{}", r.stdout);
    assert!(
        r.stderr
            .contains("`./demo-mlp` (read as a path: it contains `/`): ./demo-mlp/suite.yaml"),
        "{}",
        r.stderr
    );
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
    let here = outside(p);
    let source = repo().join("examples/libvips-coexistence/main.c");
    let flags = ["-std=c99", "-Wall", "-Wextra", "-Werror"];
    // Shared, and with libvips_sdk.a: no Rust symbol of the archive meets
    // libvips or its dependencies.
    let shared = here.path().join("coexist");
    let r = sh(clean("cc", p)
        .args(flags)
        .arg(&source)
        .args(pkg_config(p, &["vips", "vips-sdk"]))
        .arg("-o")
        .arg(&shared));
    assert_eq!(r.code, 0, "building with both libraries: {}", r.stderr);
    let statik = here.path().join("coexist_static");
    let cflags = sh(clean("pkg-config", p).args(["--cflags", "vips-sdk"]));
    let r = sh(clean("cc", p)
        .args(flags)
        .arg(&source)
        .args(cflags.stdout.split_whitespace())
        .args(pkg_config(p, &["vips"]))
        .args(static_link(p))
        .arg("-o")
        .arg(&statik));
    assert_eq!(r.code, 0, "building with libvips_sdk.a: {}", r.stderr);
    assert_static(&statik);
    for (exe, what) in [(&shared, "shared"), (&statik, "static")] {
        let r = sh(clean(exe, p).current_dir(here.path()));
        assert_eq!(r.code, 0, "{what}: {}{}", r.stdout, r.stderr);
        for line in [
            "a 64x48 image of mean 128.0",
            "suite demo-mlp with 3 stages",
            "resized to 32x24",
        ] {
            assert!(r.stdout.contains(line), "{what}: {}", r.stdout);
        }
    }
}

#[test]
fn the_quick_start_of_the_docs_compiles_and_runs() {
    require("pkg-config", &["--version"], "pkg-config");
    let doc = std::fs::read_to_string(repo().join("docs/c-api.md")).unwrap();
    let start = doc.find("```c\n").expect("a C block in docs/c-api.md") + 5;
    let code = &doc[start..start + doc[start..].find("```").expect("its end")];
    let prefix = install();
    let p = prefix.path();
    let here = outside(p);
    let source = here.path().join("quick_start.c");
    std::fs::write(&source, code).unwrap();
    let exe = here.path().join("quick_start");
    // Warnings as errors: the docs' `{.struct_size = sizeof s}` initialisers
    // pass -Wextra (`{sizeof s}` would not).
    let r = sh(clean("cc", p)
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .arg(&source)
        .args(pkg_config(p, &["vips-sdk"]))
        .arg("-o")
        .arg(&exe));
    assert_eq!(r.code, 0, "building the quick start: {}", r.stderr);
    let r = sh(clean(&exe, p).current_dir(here.path()));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), "PASS");
    // Static: the suite, the CPU provider and the worker program (vsdk_run)
    // found through the prefix tools/install recorded into the archive.
    let statik = here.path().join("quick_start_static");
    let r = cc_static(p, &source, &statik);
    assert_eq!(r.code, 0, "building the quick start static: {}", r.stderr);
    assert_static(&statik);
    let r = static_run(&statik, p, here.path());
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), "PASS");
}

/// The archive defines, as globals, exactly the functions the shared
/// library exports (the header's): the Rust standard library, compiler
/// builtins and the SDK's crates are local to its one object, so they
/// cannot clash with another Rust static library in the same program.
#[test]
fn the_static_library_defines_only_vsdk_globals() {
    require("nm", &["--version"], "binutils (nm)");
    let prefix = install();
    let p = prefix.path();
    let defined = |args: &[&str], file: &Path| -> Vec<String> {
        let r = sh(Command::new("nm").args(args).arg(file));
        assert_eq!(r.code, 0, "nm {args:?}: {}", r.stderr);
        let mut names: Vec<String> = r
            .stdout
            .lines()
            .filter_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                (f.len() == 3).then(|| f[2].to_string())
            })
            .collect();
        names.sort();
        names
    };
    let globals = defined(&["-g", "--defined-only"], &p.join("lib/libvips_sdk.a"));
    let foreign: Vec<&String> = globals.iter().filter(|s| !s.starts_with("vsdk_")).collect();
    assert!(
        foreign.is_empty(),
        "{} globals beside vsdk_*, e.g. {:?}",
        foreign.len(),
        &foreign[..foreign.len().min(5)]
    );
    let exported = defined(&["-D", "--defined-only"], &p.join("lib/libvips_sdk.so"));
    assert!(exported.len() >= 20, "{exported:?}");
    assert_eq!(globals, exported);
    // One object, and the prefix recorded in it and in the shared library.
    let members = sh(Command::new("ar").arg("t").arg(p.join("lib/libvips_sdk.a")));
    assert_eq!(members.stdout.lines().count(), 1, "{}", members.stdout);
    let recorded = format!("vsdk-install-prefix:{}\0", p.display());
    for lib in ["lib/libvips_sdk.a", "lib/libvips_sdk.so"] {
        let bytes = std::fs::read(p.join(lib)).unwrap();
        let hits = bytes
            .windows(recorded.len())
            .filter(|w| *w == recorded.as_bytes())
            .count();
        assert_eq!(hits, 1, "{lib}: the recorded prefix");
    }
}

/// A relocated tree keeps working through the shared library's own
/// location; a statically linked program knows only the prefix it was
/// installed to, and says where it looked.
#[test]
fn a_moved_prefix_still_serves_shared_consumers() {
    require("pkg-config", &["--version"], "pkg-config");
    let prefix = install();
    let old = prefix.path();
    let here = outside(old);
    let code = r#"#include <stdio.h>
#include <vips_sdk/vips_sdk.h>
int main(void) {
  vsdk_suite_t* s = NULL;
  vsdk_host_provider_t* p = NULL;
  vsdk_error_t* e = vsdk_suite_open("demo-mlp", &s);
  if (!e) e = vsdk_provider_open("cpu", &p);
  if (e) { fprintf(stderr, "%s\n", vsdk_error_message(e)); return 1; }
  puts("found");
  vsdk_provider_free(p);
  vsdk_suite_free(s);
  return 0;
}
"#;
    let c = here.path().join("find.c");
    std::fs::write(&c, code).unwrap();
    let statik = here.path().join("find_static");
    let r = cc_static(old, &c, &statik);
    assert_eq!(r.code, 0, "{}", r.stderr);
    // Move the tree.
    let moved_parent = tempfile::tempdir().unwrap();
    let new = moved_parent.path().join("moved");
    std::fs::rename(old, &new).expect("move the prefix");
    let shared = here.path().join("find_shared");
    let r = sh(clean("cc", &new)
        .arg(&c)
        .args(pkg_config(&new, &["vips-sdk"]))
        .arg("-o")
        .arg(&shared));
    assert_eq!(r.code, 0, "{}", r.stderr);
    let r = sh(clean(&shared, &new).current_dir(here.path()));
    assert_eq!(r.code, 0, "{}{}", r.stdout, r.stderr);
    assert_eq!(r.stdout.trim(), "found");
    let r = static_run(&statik, &new, here.path());
    assert_eq!(r.code, 1, "{}", r.stdout);
    let expected = old.join("share/vips-sdk/suites");
    assert!(
        r.stderr.contains("no suite `demo-mlp`")
            && r.stderr.contains(&expected.display().to_string()),
        "{}",
        r.stderr
    );
}
