//! The pure parts of the HIP device: versions and UUIDs as ROCm prints them,
//! and the overlap test its device-to-device copy relies on.

use vsdk_provider_hip::device::{hip_version, uuid_text};
use vsdk_provider_hip::Hip;

#[test]
fn versions_read_as_hip_prints_them() {
    assert_eq!(hip_version(50221153), "5.2.21153");
    assert_eq!(hip_version(60342134), "6.3.42134");
}

#[test]
fn uuids_as_rocm_fills_them() {
    assert_eq!(
        uuid_text(b"5fd8a1b2c3d4e5f6").as_deref(),
        Some("GPU-5fd8a1b2c3d4e5f6")
    );
    assert_eq!(uuid_text(&[0; 16]), None);
    assert_eq!(uuid_text(b"ffffffffffffffff"), None);
    let mut xx = [0u8; 16];
    xx[..2].copy_from_slice(b"XX");
    assert_eq!(uuid_text(&xx), None);
    let raw = [0x80u8, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    assert_eq!(
        uuid_text(&raw).as_deref(),
        Some("GPU-800102030405060708090a0b0c0d0e0f")
    );
}

#[test]
fn overlap_is_detected_both_ways() {
    assert!(Hip::overlaps(100, 150, 100));
    assert!(Hip::overlaps(150, 100, 100));
    assert!(!Hip::overlaps(100, 200, 100));
    assert!(!Hip::overlaps(200, 100, 100));
}
