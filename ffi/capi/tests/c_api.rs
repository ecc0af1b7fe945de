//! libvips_sdk as C sees it: only `vsdk_` symbols exported; misuse (NULL,
//! wrong struct_size, handles of the wrong kind, bad tensors) answered with
//! errors; several threads checking tensors at once; both headers in one
//! C++ translation unit; the static library linked too. Each C program is
//! built here with the system's C compiler against `include/` and the
//! library cargo just built.

use std::path::{Path, PathBuf};
use std::process::Command;

/// target/<profile>, where cargo puts the library and the CPU provider.
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test program path");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps")
        .to_path_buf()
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn library(ext: &str) -> PathBuf {
    let lib = target_dir().join(format!("libvips_sdk.{ext}"));
    assert!(
        lib.is_file(),
        "{} is missing: `cargo test` does not build a cdylib for integration tests; run `cargo build -p vips-sdk-capi` first (tools/test builds the workspace before testing it)",
        lib.display()
    );
    lib
}

/// Compiles `sources` into a program in `dir`, linked with `link`.
fn build(
    dir: tempfile::TempDir,
    compiler: &str,
    std: &str,
    sources: &[&str],
    link: &[String],
) -> (tempfile::TempDir, PathBuf) {
    let exe = dir.path().join("program");
    let mut cmd = Command::new(compiler);
    cmd.arg(format!("-std={std}"))
        .args(["-Wall", "-Wextra", "-Werror", "-pedantic", "-O1"])
        .arg("-I")
        .arg(repo().join("include"));
    for s in sources {
        cmd.arg(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/c")
                .join(s),
        );
    }
    cmd.args(link).arg("-o").arg(&exe);
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(
        out.status.success(),
        "{compiler} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, exe)
}

/// Link arguments for the shared library. It carries a SONAME
/// (`libvips_sdk.so.0.<minor>`, what programs record), which cargo's
/// output is not named: a link of that name in `dir` is put on the rpath.
fn shared(dir: &Path) -> Vec<String> {
    let target = target_dir();
    let lib = library("so");
    let major = env!("CARGO_PKG_VERSION_MAJOR");
    let abi = if major == "0" {
        format!("0.{}", env!("CARGO_PKG_VERSION_MINOR"))
    } else {
        major.to_string()
    };
    let soname = dir.join(format!("libvips_sdk.so.{abi}"));
    std::os::unix::fs::symlink(&lib, &soname).expect("link the SONAME");
    vec![
        format!("-L{}", target.display()),
        "-lvips_sdk".into(),
        format!("-Wl,-rpath,{}", dir.display()),
        "-lpthread".into(),
        "-lm".into(),
    ]
}

fn run(exe: &Path) -> String {
    // In a working directory holding a file and a directory named like the
    // provider and the suite the programs open by name: names are never
    // read as paths (docs/c-api.md, "Names and paths").
    let cwd = tempfile::tempdir().unwrap();
    std::fs::create_dir(cwd.path().join("demo-mlp")).unwrap();
    std::fs::write(cwd.path().join("cpu"), "not a provider").unwrap();
    let out = Command::new(exe)
        .env("VSDK_SUITES_PATH", repo().join("conformance/suites"))
        .env("VSDK_PROVIDER_PATH", target_dir())
        .current_dir(cwd.path())
        .output()
        .expect("run the C program");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{} failed ({:?}):\n{stdout}\n{stderr}",
        exe.display(),
        out.status
    );
    stdout
}

#[test]
fn the_shared_library_exports_only_vsdk_symbols() {
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(library("so"))
        .output()
        .expect("nm (binutils) is required");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let symbols: Vec<&str> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .collect();
    let foreign: Vec<&&str> = symbols.iter().filter(|s| !s.starts_with("vsdk_")).collect();
    assert!(foreign.is_empty(), "exported beside vsdk_*: {foreign:?}");
    let elf = Command::new("readelf")
        .arg("-d")
        .arg(library("so"))
        .output()
        .expect("readelf (binutils) is required");
    let dynamic = String::from_utf8_lossy(&elf.stdout);
    assert!(
        dynamic.contains("Library soname: [libvips_sdk.so."),
        "no SONAME: {dynamic}"
    );
    // Every function of the header, and nothing it does not declare.
    let header = std::fs::read_to_string(repo().join("include/vips_sdk/vips_sdk.h")).unwrap();
    let declared: Vec<&str> = header
        // Declarations start a line with `VSDK_API ` (the macro's own
        // definitions do not).
        .split("\nVSDK_API ")
        .skip(1)
        .filter_map(|d| d.split('(').next())
        .filter_map(|d| d.rsplit([' ', '*']).next())
        .collect();
    assert!(declared.len() >= 20, "{declared:?}");
    let mut exported = symbols.clone();
    exported.sort_unstable();
    let mut declared = declared;
    declared.sort_unstable();
    assert_eq!(exported, declared);
}

#[test]
fn misuse_gives_errors_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let link = shared(dir.path());
    let (_dir, exe) = build(dir, "cc", "c99", &["misuse.c"], &link);
    let out = run(&exe);
    assert!(out.contains("misuse: all checks passed"), "{out}");
    assert!(out.contains("not a live suite handle"), "{out}");
}

#[test]
fn the_static_library_links_and_works() {
    let link = vec![
        library("a").display().to_string(),
        "-lpthread".into(),
        "-ldl".into(),
        "-lm".into(),
    ];
    let (_dir, exe) = build(
        tempfile::tempdir().unwrap(),
        "cc",
        "c99",
        &["misuse.c"],
        &link,
    );
    let out = run(&exe);
    assert!(out.contains("misuse: all checks passed"), "{out}");
}

#[test]
fn threads_check_tensors_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let link = shared(dir.path());
    let (_dir, exe) = build(dir, "cc", "c99", &["threads.c"], &link);
    let out = run(&exe);
    assert!(
        out.contains("6 threads x 5 checks, all as expected"),
        "{out}"
    );
}

#[test]
fn both_headers_compile_in_one_cpp_translation_unit() {
    let dir = tempfile::tempdir().unwrap();
    let link = shared(dir.path());
    let (_dir, exe) = build(dir, "c++", "c++11", &["both_headers.cpp"], &link);
    let out = run(&exe);
    assert!(
        out.contains(&format!("libvips_sdk {}", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
}

/// A driver right only when its process, program or parent is called
/// vips-conformance (testing/hostile-providers, NAME_DETECTOR), run by an
/// engine through `vsdk_run`: it gets the CLI's verdict (GELU wrong, so
/// block_00 FAILs in both rounds), because `vsdk_run` runs it in the same
/// worker as the CLI. The same library without the misbehaviour passes: the
/// failure is the driver's, not the harness's. The hostile library is built
/// here from its C source (into target/tmp: the worker's /tmp is its own),
/// with the CPU provider beside this test as its target.
#[test]
fn vsdk_run_gives_a_name_detecting_driver_the_clis_verdict() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let source = repo().join("testing/hostile-providers/c/hostile.c");
    let mut libs = Vec::new();
    for (name, define) in [
        ("name_detector", "-DHOSTILE_NAME_DETECTOR"),
        ("working", ""),
    ] {
        let lib = dir.path().join(format!("libvsdk_hostile_{name}.so"));
        let out = Command::new("cc")
            .args(["-std=c99", "-O1", "-fPIC", "-shared", "-fvisibility=hidden"])
            .args(["-Wall", "-Wextra", "-Werror"])
            .arg("-I")
            .arg(repo().join("include"))
            .args([define].into_iter().filter(|d| !d.is_empty()))
            .arg(&source)
            .args(["-ldl", "-lpthread", "-o"])
            .arg(&lib)
            .output()
            .expect("run cc");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        libs.push(lib);
    }
    let programs = tempfile::tempdir().unwrap();
    let link = shared(programs.path());
    let (_programs, exe) = build(programs, "cc", "c99", &["run_provider.c"], &link);
    let run = |lib: &Path| {
        let out = Command::new(&exe)
            .arg(lib)
            .args(["dinov2-vits14-quick", "{preprocess,block_00}"])
            .env("VSDK_SUITES_PATH", repo().join("conformance/suites"))
            .env("VSDK_PROVIDER_PATH", target_dir())
            .env(
                "VSDK_HOSTILE_TARGET",
                target_dir().join("libvsdk_provider_cpu.so"),
            )
            .output()
            .expect("run the C program");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let detector = run(&libs[0]);
    for line in [
        "main preprocess PASS",
        "main block_00 FAIL",
        "differential preprocess PASS",
        "differential block_00 FAIL",
        "passed 0",
    ] {
        assert!(detector.lines().any(|l| l == line), "{line}: {detector}");
    }
    let working = run(&libs[1]);
    for line in [
        "main block_00 PASS",
        "differential block_00 PASS",
        "passed 1",
    ] {
        assert!(working.lines().any(|l| l == line), "{line}: {working}");
    }
}

/// The header's version is the crate's (tests/c/misuse.c checks that the
/// library's `vsdk_sdk_version*` functions agree with the header).
#[test]
fn the_header_version_is_cargo_s() {
    let header = std::str::from_utf8(vsdk_ffi::engine::VSDK_SDK_VERSION_STRING)
        .unwrap()
        .trim_end_matches('\0');
    assert_eq!(header, env!("CARGO_PKG_VERSION"));
    let numbers = [
        vsdk_ffi::engine::VSDK_SDK_VERSION_MAJOR,
        vsdk_ffi::engine::VSDK_SDK_VERSION_MINOR,
        vsdk_ffi::engine::VSDK_SDK_VERSION_PATCH,
    ];
    assert_eq!(
        numbers.map(|n| n.to_string()).join("."),
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(
        vsdk_ffi::engine::VSDK_SDK_VERSION_NUMBER,
        numbers[0] * 10000 + numbers[1] * 100 + numbers[2]
    );
}
