//! The two bindings of the HIP runtime agree: the default one (`dlopen`,
//! this crate's `hip_api`) and hip-sys's `extern` declarations, which the
//! `hip-sys` feature links. A test program of its own, built only with
//! `--features hip-sys` (Cargo.toml says why).
//!
//! - **Signatures**, at compile time: every HIP function the provider calls
//!   (`signatures!` below; `the_list_is_every_function_the_provider_binds`
//!   holds it to the names `hip_api.rs` looks up and links) is coerced from
//!   hip-sys's item to a function pointer whose parameter and result types
//!   must each agree with our `hip_api::Fn*` type's, so a different arity,
//!   parameter or result does not compile. Agreeing means the same type, or
//!   the same C type spelt differently (the `Agrees` impls, written here
//!   independently of the library's): hip-sys's `#[repr(u32)]` enums
//!   `hipError_t` and `hipMemcpyKind` against our C `int`, opaque handle
//!   structs (`ihipModule_t` ...) and `hipDeviceProp_t` behind pointers
//!   against our `void *`, `hipUUID` against `[u8; 16]`; their sizes and
//!   alignments are compared in `the_types_spelt_differently_have_one_layout`.
//! - **Values**: our constants against hip-sys's enums, and the
//!   `hipDeviceProp_t` layout the architecture name is read from.
//!   hip-sys has no hiprtc (`HIPRTC_SUCCESS`, the `hiprtc*` functions) and no
//!   `hipGetDevicePropertiesR0600` (ROCm 6's layout, offset 1160): those stay
//!   bound by `dlopen` in both builds, or unused in this one, and are not
//!   compared here.
//! - **At run time**: the provider built this way binds the linked runtime,
//!   and without an AMD GPU reports zero devices with the reason, also
//!   through its library loaded by the SDK, instead of panicking.
use hip_sys::hiprt;
use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::mem::{align_of, offset_of, size_of};
use std::path::{Path, PathBuf};
use vips_sdk::Provider;
use vsdk_gpu::Backend;
use vsdk_provider_hip::hip_api::*;
use vsdk_provider_hip::Hip;

/// hip-sys's type `Self` is, in C, our type `Ours`.
trait Agrees<Ours> {}

macro_rules! agrees {
    ($($sys:ty => $ours:ty),* $(,)?) => { $(impl Agrees<$ours> for $sys {})* };
}
agrees! {
    c_int => c_int,
    c_uint => c_uint,
    usize => usize,
    c_char => c_char,
    c_void => c_void,
    hiprt::hipError_t => c_int,
    hiprt::hipMemcpyKind => c_int,
    hiprt::hipUUID => [u8; 16],
    hiprt::ihipModule_t => c_void,
    hiprt::ihipModuleSymbol_t => c_void,
    hiprt::ihipStream_t => c_void,
    hiprt::hipDeviceProp_t => c_void,
}
impl<S: Agrees<O>, O> Agrees<*mut O> for *mut S {}
impl<S: Agrees<O>, O> Agrees<*const O> for *const S {}

/// hip-sys's function pointer type `Self` has as many parameters as our
/// `Ours`, each agreeing, and an agreeing result.
trait FnAgrees<Ours> {}

macro_rules! fn_agrees {
    ($($s:ident $o:ident),*) => {
        impl<RS: Agrees<RO>, RO, $($s: Agrees<$o>, $o),*>
            FnAgrees<unsafe extern "C" fn($($o),*) -> RO> for unsafe extern "C" fn($($s),*) -> RS
        {
        }
    };
}
fn_agrees!();
fn_agrees!(S1 O1);
fn_agrees!(S1 O1, S2 O2);
fn_agrees!(S1 O1, S2 O2, S3 O3);
fn_agrees!(S1 O1, S2 O2, S3 O3, S4 O4);
fn_agrees!(S1 O1, S2 O2, S3 O3, S4 O4, S5 O5, S6 O6, S7 O7, S8 O8, S9 O9, S10 O10, S11 O11);

/// Compiles only if `f` (a hip-sys function) agrees with our type `O`.
fn agrees_with<O, S: FnAgrees<O>>(f: S) -> S {
    f
}

/// `NAME(_, ...): OurType;` for each function: the underscores give the
/// arity, and `agrees_with` checks the rest.
macro_rules! signatures {
    ($($name:ident($($arg:tt),*): $ours:ty;)*) => {
        /// The functions checked, by C name.
        const CHECKED: &[&str] = &[$(stringify!($name)),*];

        #[test]
        fn signatures_agree() {
            $(
                let f = agrees_with::<$ours, _>(
                    hiprt::$name as unsafe extern "C" fn($($arg),*) -> _,
                );
                assert_eq!(size_of_val(&f), size_of::<$ours>(), stringify!($name));
            )*
        }
    };
}

signatures! {
    hipInit(_): FnInit;
    hipGetDeviceCount(_): FnGetDeviceCount;
    hipSetDevice(_): FnSetDevice;
    hipDeviceGet(_, _): FnDeviceGet;
    hipDeviceGetName(_, _, _): FnDeviceGetName;
    hipDeviceTotalMem(_, _): FnDeviceTotalMem;
    hipDriverGetVersion(_): FnGetVersion;
    hipRuntimeGetVersion(_): FnGetVersion;
    hipDeviceGetUuid(_, _): FnDeviceGetUuid;
    hipDeviceGetPCIBusId(_, _, _): FnDeviceGetPciBusId;
    hipGetDeviceProperties(_, _): FnGetDeviceProperties;
    hipMalloc(_, _): FnMalloc;
    hipFree(_): FnFree;
    hipMemcpy(_, _, _, _): FnMemcpy;
    hipDeviceSynchronize(): FnDeviceSynchronize;
    hipModuleLoadData(_, _): FnModuleLoadData;
    hipModuleUnload(_): FnModuleUnload;
    hipModuleGetFunction(_, _, _): FnModuleGetFunction;
    hipModuleLaunchKernel(_, _, _, _, _, _, _, _, _, _, _): FnModuleLaunchKernel;
    hipGetErrorString(_): FnGetErrorString;
    hipGetErrorName(_): FnGetErrorString;
}

/// Each text between `marker` and the next `end` in `text` (a C name).
fn names_after(text: &str, marker: &str, end: char) -> BTreeSet<String> {
    text.match_indices(marker)
        .filter_map(|(i, _)| {
            let rest = &text[i + marker.len()..];
            rest.find(end).map(|e| rest[..e].to_string())
        })
        .collect()
}

#[test]
fn the_list_is_every_function_the_provider_binds() {
    let source = include_str!("../src/hip_api.rs");
    let checked: BTreeSet<String> = CHECKED.iter().map(|s| s.to_string()).collect();
    assert_eq!(checked.len(), CHECKED.len(), "a function listed twice");
    // The dlopen binding: `sym(&lib, &path, "hipX")`, hiprtc aside (hip-sys
    // has none) and ROCm 6's properties function (hip-sys has none either;
    // the linked build uses hipGetDeviceProperties).
    let mut dlopened: BTreeSet<String> = names_after(source, "sym(&lib, &path, \"", '"')
        .into_iter()
        .filter(|n| !n.starts_with("hiprtc"))
        .collect();
    assert!(
        dlopened.len() > 15,
        "the scan found too little: {dlopened:?}"
    );
    assert!(dlopened.remove("hipGetDevicePropertiesR0600"));
    assert_eq!(dlopened, checked, "dlopen binding vs this test's list");
    // The linked binding: `link!(hipX(`.
    let linked = names_after(source, "link!(", '(');
    assert_eq!(linked, checked, "hip-sys binding vs this test's list");
}

/// (size, alignment) of `T`.
fn layout<T>() -> (usize, usize) {
    (size_of::<T>(), align_of::<T>())
}

#[test]
fn the_types_spelt_differently_have_one_layout() {
    use hiprt as h;
    for (what, sys, ours) in [
        (
            "hipError_t (hip-sys: repr(u32) enum; ours: c_int)",
            layout::<h::hipError_t>(),
            layout::<HipError>(),
        ),
        (
            "hipMemcpyKind (hip-sys: repr(u32) enum; ours: c_int)",
            layout::<h::hipMemcpyKind>(),
            layout::<c_int>(),
        ),
        (
            "hipUUID (hip-sys: struct of char[16]; ours: [u8; 16])",
            layout::<h::hipUUID>(),
            layout::<[u8; 16]>(),
        ),
        (
            "hipModule_t",
            layout::<h::hipModule_t>(),
            layout::<HipModule>(),
        ),
        (
            "hipFunction_t",
            layout::<h::hipFunction_t>(),
            layout::<HipFunction>(),
        ),
        (
            "hipStream_t",
            layout::<h::hipStream_t>(),
            layout::<HipStream>(),
        ),
        ("hipDevice_t", layout::<h::hipDevice_t>(), layout::<c_int>()),
    ] {
        assert_eq!(sys, ours, "{what}");
    }
}

#[test]
fn the_constants_agree() {
    use hiprt::hipError_t as E;
    use hiprt::hipMemcpyKind as K;
    assert_eq!(HIP_SUCCESS, E::hipSuccess as c_int);
    assert_eq!(HIP_ERROR_OUT_OF_MEMORY, E::hipErrorOutOfMemory as c_int);
    assert_eq!(HIP_ERROR_NO_DEVICE, E::hipErrorNoDevice as c_int);
    assert_eq!(HIP_MEMCPY_HOST_TO_DEVICE, K::hipMemcpyHostToDevice as c_int);
    assert_eq!(HIP_MEMCPY_DEVICE_TO_HOST, K::hipMemcpyDeviceToHost as c_int);
    assert_eq!(
        HIP_MEMCPY_DEVICE_TO_DEVICE,
        K::hipMemcpyDeviceToDevice as c_int
    );
}

/// `hipGetDeviceProperties` (ROCm 5's `hipDeviceProp_t`, hip-sys's struct)
/// writes `gcnArchName` where the binding reads it, and no more than the
/// buffer it is handed.
#[test]
fn the_architecture_is_read_where_hip_sys_has_it() {
    assert_eq!(
        offset_of!(hiprt::hipDeviceProp_t, gcnArchName),
        PROPS_R0000_ARCH_OFFSET
    );
    let props = hiprt::hipDeviceProp_t::default();
    assert_eq!(props.gcnArchName.len(), ARCH_NAME_BYTES);
    assert!(size_of::<hiprt::hipDeviceProp_t>() <= PROPS_BUFFER_BYTES);
    assert!(PROPS_R0000_ARCH_OFFSET + ARCH_NAME_BYTES <= size_of::<hiprt::hipDeviceProp_t>());
}

/// Whether the kernel exposes an AMD GPU to compute: `/dev/kfd` and a KFD
/// topology node with SIMDs (as in tests/it/no_device.rs).
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

/// The provider library cargo built beside this test program (with this
/// feature, since it is built with the test).
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
fn the_linked_provider_reports_zero_devices_with_a_reason() {
    // The linked runtime, named by the loader; VIPS_HIP_LIBRARY plays no part.
    let api = vsdk_provider_hip::runtime().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        api.path.contains("libamdhip64") && api.path.ends_with(" (linked)"),
        "{}",
        api.path
    );
    // hiprtc is still opened at run time; ROCm 5.2 exports it from the
    // linked runtime itself.
    let rtc = vsdk_provider_hip::hiprtc().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        rtc.path.contains("libhiprtc") || rtc.path.contains("libamdhip64"),
        "{}",
        rtc.path
    );

    // The library links libamdhip64 (the default build does not).
    let lib = provider_library();
    let out = std::process::Command::new("readelf")
        .arg("-d")
        .arg(&lib)
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils): {e}"));
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(
        dynamic
            .lines()
            .any(|l| l.contains("(NEEDED)") && l.contains("[libamdhip64.so")),
        "{} does not link libamdhip64:\n{dynamic}",
        lib.display()
    );

    let gpu = amd_gpu_present();
    let expected = Hip::open_all().map(|d| d.len());
    eprintln!(
        "runtime: {}\nhiprtc: {}\nopen_all: {expected:?}",
        api.path, rtc.path
    );
    let p = Provider::open(&lib).unwrap_or_else(|e| panic!("{e}"));
    let info = p.info();
    assert_eq!(info.name, "hip");
    let count = p.device_count().unwrap();
    match expected {
        Err(reason) => {
            assert!(!gpu, "an AMD GPU is present but open_all failed: {reason}");
            assert!(
                reason.starts_with("no AMD GPU: hipGetDeviceCount returned hipErrorNoDevice"),
                "unexpected reason: {reason}"
            );
            assert_eq!(count, 0);
            assert!(p.devices().unwrap().is_empty());
            assert_eq!(
                info.description,
                format!("{} (no devices: {reason})", Hip::DESCRIPTION)
            );
            assert!(p.device(0).is_err());
        }
        Ok(n) => {
            assert!(gpu, "no AMD GPU is visible, yet open_all opened {n}");
            assert!(n > 0);
            assert_eq!(count as usize, n);
        }
    }
}
