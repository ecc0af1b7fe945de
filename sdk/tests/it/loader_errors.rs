//! Every way a library can fail to be a working provider gives its own clear
//! error naming the file and the cause, and nothing panics.

use vips_sdk::{Attrs, DType, Error, HostTensor, Provider};
use vsdk_broken_providers as fixtures;

fn open_err(path: &str) -> Error {
    match Provider::open(path) {
        Ok(p) => panic!("{path} loaded as {:?}", p.info()),
        Err(e) => e,
    }
}

#[test]
fn the_working_fixture_loads_and_runs() {
    let p = Provider::open(fixtures::WORKING).unwrap();
    assert_eq!(p.info().name, "fixture");
    let dev = p.device(0).unwrap();
    let x = dev
        .upload(&HostTensor::from_vec(&[3], vec![-1.0f32, 0.5, 2.0]).unwrap())
        .unwrap();
    let y = dev.execute("vsdk.gelu", 1, &Attrs::new(), &[&x]).unwrap();
    let got: Vec<f32> = dev.download(&y[0]).unwrap().to_vec().unwrap();
    assert!((got[2] - 1.9544997).abs() < 1e-6, "{got:?}");
}

#[test]
fn a_missing_file_names_the_path() {
    let e = open_err("/nonexistent/libvsdk_provider_ghost.so");
    assert!(matches!(e, Error::Open { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.starts_with("cannot load provider library /nonexistent/libvsdk_provider_ghost.so: "),
        "{msg}"
    );
}

#[test]
fn a_library_without_the_entry_symbol_is_not_a_provider() {
    let e = open_err(fixtures::NO_ENTRY);
    assert_eq!(
        e.to_string(),
        format!("{} is not a VIPS provider: it does not export the entry symbol `vsdk_get_provider_api`", fixtures::NO_ENTRY)
    );
}

#[test]
fn an_abi_mismatch_quotes_both_versions() {
    let e = open_err(fixtures::WRONG_ABI);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: ABI version mismatch: this host speaks provider ABI v1, the provider answered v99",
            fixtures::WRONG_ABI
        )
    );
}

#[test]
fn a_null_required_slot_is_named() {
    let e = open_err(fixtures::NULL_EXECUTE);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: required slot `execute` of the function table is NULL",
            fixtures::NULL_EXECUTE
        )
    );
}

#[test]
fn a_table_too_short_for_v1_is_refused() {
    let e = open_err(fixtures::SHORT_TABLE);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: invalid function table: struct_size 104 ends before required slot `alloc`",
            fixtures::SHORT_TABLE
        )
    );
}

#[test]
fn a_failing_create_reports_code_and_message() {
    let e = open_err(fixtures::CREATE_FAILS);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: create failed: OUT_OF_MEMORY (3): fixture: no memory for the device context",
            fixtures::CREATE_FAILS
        )
    );
}

#[test]
fn a_version_that_is_not_semver_is_refused() {
    let e = open_err(fixtures::BAD_VERSION);
    assert_eq!(
        e.to_string(),
        format!(
            "{}: get_info: version \"1.0\" is not a semantic version: unexpected end of input while parsing minor version number",
            fixtures::BAD_VERSION
        )
    );
}

#[test]
fn a_kernel_error_reports_code_and_the_providers_message() {
    let p = Provider::open(fixtures::KERNEL_FAILS).unwrap();
    let dev = p.device(0).unwrap();
    let x = dev
        .upload(&HostTensor::from_vec(&[2], vec![1.0f32, 2.0]).unwrap())
        .unwrap();
    let e = dev
        .execute("vsdk.gelu", 1, &Attrs::new(), &[&x])
        .err()
        .expect("the kernel fails");
    assert_eq!(
        e.to_string(),
        format!(
            "{}: execute(vsdk.gelu@1) failed: DEVICE_ERROR (4): fixture: the device lost its queue",
            fixtures::KERNEL_FAILS
        )
    );
}

#[test]
fn unsupported_and_unknown_kernels_are_refused_before_dispatch() {
    let p = Provider::open(fixtures::WORKING).unwrap();
    let dev = p.device(0).unwrap();
    let x = dev
        .upload(&HostTensor::from_vec(&[2], vec![1.0f64, 2.0]).unwrap())
        .unwrap();
    let e = dev
        .execute("vsdk.gelu", 1, &Attrs::new(), &[&x])
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .ends_with("the provider does not support this kernel for float64 on device 0"),
        "{e}"
    );
    let e = dev
        .execute("vsdk.gelu_fast", 1, &Attrs::new(), &[&x])
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("unknown kernel `vsdk.gelu_fast@1`"),
        "{e}"
    );
    let e = p.device(3).err().unwrap();
    assert!(
        e.to_string()
            .ends_with("device 3 does not exist (the provider has 1)"),
        "{e}"
    );
    assert!(!dev.supports("vsdk.gelu", 1, DType::F16).unwrap());
}

#[test]
fn a_name_not_on_the_search_path_lists_where_it_looked() {
    let e = Provider::open_by_name("no-such-provider").err().unwrap();
    let msg = e.to_string();
    assert!(msg.starts_with("no provider named `no-such-provider` (read as a name: looked for libvsdk_provider_no-such-provider.so in: "), "{msg}");
    assert!(msg.contains("/usr/lib/vips-sdk/providers"), "{msg}");
}

#[test]
fn a_path_is_told_from_a_name_by_a_slash_or_the_library_suffix() {
    for (arg, why) in [
        ("./no-such-provider", "it contains `/`"),
        ("/no/such/libx.so", "it contains `/`"),
        ("libvsdk_provider_nothing.so", "it ends in `.so`"),
    ] {
        let msg = Provider::open_by_name(arg).err().unwrap().to_string();
        assert!(
            msg.contains(&format!("read as a path ({why}), and no file is there")),
            "{msg}"
        );
    }
    assert_eq!(
        Provider::locate(fixtures::WORKING).unwrap(),
        std::path::PathBuf::from(fixtures::WORKING)
    );
}

#[test]
fn tensors_keep_their_library_loaded() {
    // Drop every handle but a tensor: the library must stay loaded until the
    // tensor is freed through it.
    let t = {
        let p = Provider::open(fixtures::WORKING).unwrap();
        let dev = p.device(0).unwrap();
        dev.upload(&HostTensor::from_vec(&[4], vec![1.0f32; 4]).unwrap())
            .unwrap()
    };
    assert_eq!(t.spec.shape, vec![4]);
    drop(t); // calls the provider's `free`: would crash had it been unloaded
}
