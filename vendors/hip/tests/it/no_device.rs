//! The provider on a machine as it is: without an AMD GPU (this project's
//! machines and CI), `Hip::open_all` says why, and the built provider library
//! loads through the SDK with zero devices and that reason in its
//! description. With an AMD GPU, the same tests demand the opposite.

use std::path::{Path, PathBuf};
use vips_sdk::Provider;
use vsdk_gpu::Backend;
use vsdk_provider_hip::Hip;

/// Whether the kernel exposes an AMD GPU to compute: `/dev/kfd` and a KFD
/// topology node with SIMDs (CPU nodes have none). Read independently of HIP.
fn amd_gpu_present() -> bool {
    if !Path::new("/dev/kfd").exists() {
        return false;
    }
    let Ok(nodes) = std::fs::read_dir("/sys/class/kfd/kfd/topology/nodes") else {
        return false;
    };
    nodes.flatten().any(|n| {
        std::fs::read_to_string(n.path().join("properties"))
            .map(|p| {
                p.lines().any(|l| {
                    l.strip_prefix("simd_count ")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .is_some_and(|v| v > 0)
                })
            })
            .unwrap_or(false)
    })
}

/// The provider library cargo built beside this test program.
fn provider_library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let file = vips_sdk::library_file_name("hip");
    [deps.join(&file), deps.join("..").join(&file)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{file} not found beside {}", exe.display()))
}

#[test]
fn open_all_matches_the_hardware() {
    let gpu = amd_gpu_present();
    match Hip::open_all() {
        Err(reason) => {
            assert!(!gpu, "an AMD GPU is present but open_all failed: {reason}");
            if vsdk_provider_hip::runtime().is_ok() {
                // The runtime is installed (tools/gpu-toolchains does that):
                // the reason is the missing device, as HIP reports it.
                assert!(
                    reason.starts_with("no AMD GPU: hipGetDeviceCount returned hipErrorNoDevice"),
                    "unexpected reason: {reason}"
                );
            } else {
                assert!(reason.contains("not found"), "unexpected reason: {reason}");
            }
        }
        Ok(devices) => {
            assert!(
                gpu,
                "no AMD GPU is visible, yet open_all opened {}",
                devices.len()
            );
            assert!(!devices.is_empty(), "open_all returned Ok with no devices");
            for d in &devices {
                let info = d.info();
                assert!(
                    !info.name.is_empty() && !info.stable_id.is_empty(),
                    "{info:?}"
                );
                assert!(info.memory_bytes > 0, "{info:?}");
                assert!(d.arch().is_ok(), "{info:?}: {:?}", d.arch());
            }
        }
    }
}

#[test]
fn the_provider_library_loads_through_the_sdk() {
    let gpu = amd_gpu_present();
    let expected = Hip::open_all().map(|d| d.len());
    let p = Provider::open(provider_library()).unwrap_or_else(|e| panic!("{e}"));
    let info = p.info();
    assert_eq!(info.name, "hip");
    assert!(info.description.starts_with(Hip::DESCRIPTION), "{info:?}");
    let count = p.device_count().unwrap();
    match expected {
        Err(reason) => {
            assert!(!gpu);
            assert_eq!(count, 0);
            assert!(p.devices().unwrap().is_empty());
            assert!(
                info.description.contains(&reason),
                "the description {:?} lacks the reason {reason:?}",
                info.description
            );
            assert!(
                p.device(0).is_err(),
                "device 0 opened on a provider without devices"
            );
        }
        Ok(n) => {
            assert!(gpu);
            assert_eq!(count as usize, n);
            for d in p.devices().unwrap() {
                assert_eq!(
                    d.device_type,
                    vsdk_provider_kit::ffi::VSDK_DEVICE_ROCM,
                    "{d:?}"
                );
                assert!(d.memory_bytes > 0 && !d.stable_id.is_empty(), "{d:?}");
            }
            assert!(!info.description.contains("no devices"), "{info:?}");
        }
    }
}
