//! The Nix flake (flake.nix), checked where nixpkgs cannot be reached:
//! flake.lock pins exactly nixpkgs, and the package's install step, taken
//! from the flake by Nix itself (evaluated against tests/nix/stub-nixpkgs,
//! `tools/nix-check nix`) and run on this build, lays out the prefix C users
//! get from `tools/install`: the same files, with headers, vips-sdk.pc and
//! the CMake config moved to the `dev` output and pointing at `out`.
//!
//! Needs tools/nix-check's Nix (it installs it on first use; tools/test runs
//! it first) and pkg-config: without them these tests fail and say so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;
use common::{repo, Out};

#[test]
fn flake_lock_pins_exactly_nixpkgs() {
    let text = std::fs::read_to_string(repo().join("flake.lock")).unwrap();
    let lock: serde_json::Value = serde_json::from_str(&text).unwrap();
    let nodes = lock["nodes"].as_object().unwrap();
    let names: Vec<&str> = nodes.keys().map(String::as_str).collect();
    assert_eq!(names, ["nixpkgs", "root"], "only nixpkgs is locked");
    assert_eq!(lock["root"], "root");
    assert_eq!(
        nodes["root"]["inputs"],
        serde_json::json!({ "nixpkgs": "nixpkgs" })
    );
    let locked = &nodes["nixpkgs"]["locked"];
    assert_eq!(
        (&locked["type"], &locked["owner"], &locked["repo"]),
        (&"github".into(), &"NixOS".into(), &"nixpkgs".into())
    );
    let rev = locked["rev"].as_str().unwrap();
    assert!(
        rev.len() == 40 && rev.bytes().all(|b| b.is_ascii_hexdigit()),
        "a full commit: {rev}"
    );
    // Nix does not check narHash offline: a lock without it would pass every other check here.
    let nar = locked["narHash"].as_str().unwrap();
    assert!(
        nar.starts_with("sha256-") && nar.len() == 51,
        "narHash {nar}"
    );
    // The branch the lock follows is the one flake.nix names.
    let branch = nodes["nixpkgs"]["original"]["ref"].as_str().unwrap();
    let flake = std::fs::read_to_string(repo().join("flake.nix")).unwrap();
    assert!(
        flake.contains(&format!("\"github:NixOS/nixpkgs/{branch}\"")),
        "flake.nix's nixpkgs input is not {branch}"
    );
}

fn sh(cmd: &mut Command) -> Out {
    Out::of(cmd.output().expect("start the command"))
}

/// Every file and symlink under `root`, relative to it.
fn files(root: &Path) -> BTreeSet<String> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeSet<String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let t = std::fs::symlink_metadata(&p).unwrap().file_type();
            if t.is_dir() {
                walk(root, &p, out);
            } else {
                out.insert(p.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = BTreeSet::new();
    walk(root, root, &mut out);
    out
}

/// The debug build's directory (target/debug), where `cargo build --workspace` put the CLI,
/// libvips_sdk and the CPU provider.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

#[test]
fn the_flake_package_installs_the_c_library_layout() {
    // The install step as the flake declares it, from Nix.
    let nix = sh(Command::new(repo().join("tools/nix-check"))
        .args(["nix", "eval", "--raw"])
        .arg(".#packages.x86_64-linux.vips-sdk.installPhase")
        .current_dir(repo()));
    assert_eq!(
        nix.code, 0,
        "evaluating the flake failed (tools/nix-check installs Nix; run it once): {}",
        nix.stderr
    );
    let script = nix.stdout;
    assert!(script.contains("tools/install"), "{script}");

    // A source tree as the Nix build sees it: the build's outputs under
    // target/<rust triple>/release.
    let src = tempfile::tempdir().unwrap();
    let (s, r) = (src.path(), repo());
    std::fs::create_dir_all(s.join("tools")).unwrap();
    std::fs::copy(r.join("tools/install"), s.join("tools/install")).unwrap();
    std::fs::copy(r.join("Cargo.toml"), s.join("Cargo.toml")).unwrap();
    std::fs::create_dir_all(s.join("conformance")).unwrap();
    std::os::unix::fs::symlink(r.join("include"), s.join("include")).unwrap();
    std::os::unix::fs::symlink(r.join("conformance/suites"), s.join("conformance/suites")).unwrap();
    // The plain-C provider template is installed as a starting point.
    std::fs::create_dir_all(s.join("vendors")).unwrap();
    std::os::unix::fs::symlink(r.join("vendors/template-c"), s.join("vendors/template-c")).unwrap();
    std::fs::create_dir_all(s.join("target/x86_64-unknown-linux-gnu")).unwrap();
    std::os::unix::fs::symlink(
        profile_dir(),
        s.join("target/x86_64-unknown-linux-gnu/release"),
    )
    .unwrap();

    let outputs = tempfile::tempdir().unwrap();
    let (out, dev) = (outputs.path().join("out"), outputs.path().join("dev"));
    let run = sh(Command::new("bash")
        .arg("-euo")
        .arg("pipefail")
        .arg("-c")
        .arg(format!("runHook() {{ :; }}\n{script}"))
        .env("out", &out)
        .env("dev", &dev)
        .current_dir(s));
    assert_eq!(
        run.code, 0,
        "the flake's installPhase: {}{}",
        run.stdout, run.stderr
    );

    // The same files as tools/install lays out, split between the outputs.
    let prefix = tempfile::tempdir().unwrap();
    let c = sh(Command::new(r.join("tools/install"))
        .arg(prefix.path())
        .args(["--debug", "--no-build"])
        .env("CARGO_TARGET_DIR", profile_dir().parent().unwrap())
        .current_dir(&r));
    assert_eq!(c.code, 0, "tools/install: {}{}", c.stdout, c.stderr);
    let (in_out, in_dev) = (files(&out), files(&dev));
    let both: BTreeSet<String> = in_out.union(&in_dev).cloned().collect();
    assert_eq!(
        both,
        files(prefix.path()),
        "the flake's outputs against tools/install"
    );
    for f in &in_dev {
        assert!(
            f.starts_with("include/")
                || f.starts_with("lib/pkgconfig/")
                || f.starts_with("lib/cmake/"),
            "{f} belongs in out, not dev"
        );
    }
    assert!(in_out.contains("lib/vips-sdk/providers/libvsdk_provider_cpu.so"));
    assert!(in_out.contains("bin/vips-conformance"));

    // pkg-config and CMake from `dev` find the headers there and the libraries in `out`.
    let pc = sh(Command::new("pkg-config")
        .args(["--cflags", "--libs", "vips-sdk"])
        .env("PKG_CONFIG_PATH", dev.join("lib/pkgconfig")));
    assert_eq!(pc.code, 0, "pkg-config (needs pkg-config): {}", pc.stderr);
    let flags: Vec<&str> = pc.stdout.split_whitespace().collect();
    let include = format!("-I{}", dev.join("include").display());
    let libdir = format!("-L{}", out.join("lib").display());
    assert!(
        flags.contains(&include.as_str()) && flags.contains(&libdir.as_str()),
        "{flags:?}"
    );
    let cmake = std::fs::read_to_string(dev.join("lib/cmake/VipsSdk/VipsSdkConfig.cmake")).unwrap();
    assert!(
        !cmake.contains("_vsdk_prefix}/lib"),
        "a library path still relative to dev: {cmake}"
    );
    assert!(
        cmake.contains(&format!("{}/libvips_sdk.so", out.join("lib").display())),
        "{cmake}"
    );
}
