//! The header compiles as strict C99 and as C++, and the C compiler sees the
//! same sizes and offsets as the Rust bindings.

use std::path::{Path, PathBuf};
use std::process::Command;

fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../include")
}

fn out_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::create_dir_all(&dir).expect("create test dir");
    dir
}

/// Compiles `source` with `compiler` and `flags`, runs it, returns its stdout.
fn build_and_run(compiler: &str, ext: &str, flags: &[&str], source: &str) -> String {
    let dir = out_dir(&format!("header-{compiler}"));
    let src = dir.join(format!("probe.{ext}"));
    let exe = dir.join("probe");
    std::fs::write(&src, source).expect("write probe source");
    let out = Command::new(compiler)
        .args(flags)
        .arg("-I")
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler `{compiler}` (install gcc/g++): {e}"));
    assert!(
        out.status.success(),
        "{compiler} {flags:?} rejected provider.h:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().expect("run probe");
    assert!(run.status.success());
    String::from_utf8(run.stdout).expect("probe prints ASCII")
}

const PROBE: &str = r#"
#include <stdio.h>
#include <vips_sdk/provider.h>
#define P(T, F) printf(#T "." #F " %zu\n", (size_t)offsetof(T, F))
#define S(T) printf(#T " %zu\n", sizeof(T))
int main(void) {
  S(vsdk_tensor_t); P(vsdk_tensor_t, shape); P(vsdk_tensor_t, byte_offset);
  S(vsdk_attr_t); P(vsdk_attr_t, value);
  S(vsdk_kernel_call_t); P(vsdk_kernel_call_t, num_outputs);
  S(vsdk_device_info_t); P(vsdk_device_info_t, memory_bytes);
  S(vsdk_provider_api_t); P(vsdk_provider_api_t, execute); P(vsdk_provider_api_t, copy_on_device);
  return 0;
}
"#;

fn rust_view() -> String {
    use core::mem::{offset_of, size_of};
    use vsdk_ffi::*;
    format!(
        "vsdk_tensor_t {}\nvsdk_tensor_t.shape {}\nvsdk_tensor_t.byte_offset {}\n\
         vsdk_attr_t {}\nvsdk_attr_t.value {}\n\
         vsdk_kernel_call_t {}\nvsdk_kernel_call_t.num_outputs {}\n\
         vsdk_device_info_t {}\nvsdk_device_info_t.memory_bytes {}\n\
         vsdk_provider_api_t {}\nvsdk_provider_api_t.execute {}\nvsdk_provider_api_t.copy_on_device {}\n",
        size_of::<vsdk_tensor_t>(),
        offset_of!(vsdk_tensor_t, shape),
        offset_of!(vsdk_tensor_t, byte_offset),
        size_of::<vsdk_attr_t>(),
        offset_of!(vsdk_attr_t, value),
        size_of::<vsdk_kernel_call_t>(),
        offset_of!(vsdk_kernel_call_t, num_outputs),
        size_of::<vsdk_device_info_t>(),
        offset_of!(vsdk_device_info_t, memory_bytes),
        size_of::<vsdk_provider_api_t>(),
        offset_of!(vsdk_provider_api_t, execute),
        offset_of!(vsdk_provider_api_t, copy_on_device),
    )
}

#[test]
fn compiles_as_c99_with_the_same_layout() {
    let flags = ["-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror"];
    assert_eq!(build_and_run("cc", "c", &flags, PROBE), rust_view());
}

#[test]
fn compiles_as_cpp_with_the_same_layout() {
    let flags = [
        "-x",
        "c++",
        "-std=c++11",
        "-Wall",
        "-Wextra",
        "-pedantic",
        "-Werror",
    ];
    assert_eq!(build_and_run("c++", "cpp", &flags, PROBE), rust_view());
}
