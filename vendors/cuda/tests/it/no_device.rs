//! Without an NVIDIA driver the provider still loads, reports zero devices
//! and says why; with one it opens its devices. Which case applies is decided
//! by whether `libcuda` can be loaded here, and each case asserts its own
//! outcome, so both can fail.

use std::path::PathBuf;
use vips_sdk::Provider;
use vsdk_gpu::Backend;
use vsdk_provider_cuda::Cuda;

/// Whether the NVIDIA driver library can be loaded on this machine.
fn driver_present() -> bool {
    ["libcuda.so.1", "libcuda.so"].iter().any(|name| {
        // SAFETY: loading the driver library runs only its own initialisers.
        unsafe { libloading::Library::new(name) }.is_ok()
    })
}

/// The provider library cargo built beside this test program.
fn provider_library() -> PathBuf {
    let deps = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let file = vips_sdk::library_file_name("cuda");
    [deps.join(&file), deps.join("..").join(&file)]
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{file} not found beside {}", deps.display()))
}

#[test]
fn open_all_reports_why_there_is_no_device() {
    let result = std::panic::catch_unwind(Cuda::open_all).expect("open_all panicked");
    if driver_present() {
        let devices = result.unwrap_or_else(|reason| {
            panic!("libcuda loads here but no CUDA device opened: {reason}")
        });
        assert!(!devices.is_empty());
        for d in &devices {
            let info = d.info();
            assert!(
                info.stable_id.starts_with("GPU-") && info.stable_id.len() == 40,
                "{info:?}"
            );
            assert!(info.memory_bytes > 0 && !info.name.is_empty(), "{info:?}");
            assert!(
                info.driver_version
                    .split('.')
                    .all(|p| p.parse::<u32>().is_ok()),
                "{info:?}"
            );
        }
    } else {
        let reason = match result {
            Ok(devices) => panic!("no libcuda here, yet {} device(s) opened", devices.len()),
            Err(reason) => reason,
        };
        assert!(
            reason.contains("libcuda.so.1 not found") && reason.contains("no NVIDIA driver"),
            "{reason}"
        );
        // Asked again: the same answer, still no panic.
        assert_eq!(Cuda::open_all().err(), Some(reason));
    }
}

#[test]
fn the_library_loads_through_the_sdk() {
    let provider = Provider::open(provider_library()).expect("the CUDA provider does not load");
    let info = provider.info();
    assert_eq!(info.name, "cuda");
    eprintln!("{}", info.description);
    let count = provider.device_count().unwrap();
    if driver_present() {
        assert!(
            count > 0,
            "libcuda loads but no device: {}",
            info.description
        );
        for d in provider.devices().unwrap() {
            assert_eq!(d.device_type, vsdk_provider_kit::ffi::VSDK_DEVICE_CUDA);
            assert!(d.stable_id.starts_with("GPU-"), "{d:?}");
        }
    } else {
        assert_eq!(count, 0);
        assert!(
            info.description.contains("no devices")
                && info.description.contains("libcuda.so.1 not found"),
            "{}",
            info.description
        );
        assert!(provider.device(0).is_err());
    }
}
