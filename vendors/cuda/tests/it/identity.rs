//! The pure parts of device identity: which NVRTC target a device gets, and
//! its UUID as nvidia-smi prints it.

use vsdk_provider_cuda::nvrtc::Target;

#[test]
fn targets() {
    let archs = [50, 60, 70, 75, 80, 86, 89, 90, 100, 120];
    assert_eq!(
        Target::for_device(8, 6, Some(&archs)),
        Ok(Target::Cubin(86))
    );
    // A device newer than this NVRTC: PTX for the newest it can run.
    assert_eq!(
        Target::for_device(12, 1, Some(&archs)),
        Ok(Target::Ptx(120))
    );
    assert_eq!(Target::for_device(8, 7, Some(&archs)), Ok(Target::Ptx(86)));
    assert!(Target::for_device(3, 5, Some(&archs)).is_err());
    assert_eq!(Target::for_device(9, 0, None), Ok(Target::Cubin(90)));
    assert_eq!(Target::Cubin(90).option(), "--gpu-architecture=sm_90");
    assert_eq!(Target::Ptx(80).option(), "--gpu-architecture=compute_80");
}

#[test]
fn uuid_format() {
    let bytes: [std::ffi::c_char; 16] = std::array::from_fn(|i| (i * 17) as u8 as std::ffi::c_char);
    assert_eq!(
        vsdk_provider_cuda::format_uuid(&bytes),
        "GPU-00112233-4455-6677-8899-aabbccddeeff"
    );
}
