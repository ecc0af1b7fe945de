//! Without the HIP runtime (here: `VIPS_HIP_LIBRARY` naming a file that does
//! not exist), the provider still loads, reports zero devices, and says which
//! library it could not find; hiprtc's loader fails with a message too. One
//! test in its own program, because it sets the environment.
//!
//! Only for the default (dlopen) build: with the feature `hip-sys` the
//! runtime is linked, `VIPS_HIP_LIBRARY` does not apply, and
//! tests/hip_sys_bindings.rs checks that build instead.
#![cfg(not(feature = "hip-sys"))]

use std::path::PathBuf;
use vips_sdk::Provider;
use vsdk_gpu::Backend;
use vsdk_provider_hip::Hip;

#[test]
fn a_missing_runtime_is_zero_devices_and_a_reason() {
    let missing = std::env::temp_dir().join("vips-no-such-dir/libamdhip64.so.5");
    std::env::set_var("VIPS_HIP_LIBRARY", &missing);
    std::env::set_var("VIPS_HIPRTC_LIBRARY", &missing);

    let reason = match Hip::open_all() {
        Ok(d) => panic!("opened {} devices without a runtime", d.len()),
        Err(r) => r,
    };
    assert!(
        reason.starts_with("libamdhip64.so.5 (the HIP runtime) not found: tried ")
            && reason.contains(&missing.display().to_string()),
        "unexpected reason: {reason}"
    );
    let rtc = vsdk_provider_hip::hiprtc()
        .err()
        .expect("hiprtc loaded from a missing file");
    assert!(rtc.starts_with("hiprtc not found"), "{rtc}");

    let exe = std::env::current_exe().unwrap();
    let file = vips_sdk::library_file_name("hip");
    let lib: PathBuf = [
        exe.with_file_name(&file),
        exe.parent().unwrap().join("..").join(&file),
    ]
    .into_iter()
    .find(|p| p.is_file())
    .unwrap_or_else(|| panic!("{file} not found beside {}", exe.display()));
    let p = Provider::open(&lib).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.device_count().unwrap(), 0);
    assert_eq!(
        p.info().description,
        format!("{} (no devices: {reason})", Hip::DESCRIPTION)
    );
}
