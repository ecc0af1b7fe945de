//! The `vips-conformance` binary: output and exit codes of `providers`.

use std::process::Command;

fn cli(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_vips-conformance"))
        .args(args)
        // Keep the search path to what the test names.
        .env("VSDK_PROVIDER_PATH", "")
        .output()
        .expect("run vips-conformance");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lists_a_provider_given_by_path() {
    let (code, out, err) = cli(&["providers", "--provider", vsdk_template_c::LIBRARY_PATH]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("template-c 0.1.0 (VIPS SDK template), ABI v1"),
        "{out}"
    );
    assert!(out.contains("device 0: template-c host device"), "{out}");
    assert!(out.contains("17 kernels: vsdk.add@1"), "{out}");
}

#[test]
fn a_broken_provider_is_reported_without_hiding_the_others() {
    let broken = vsdk_broken_providers::NULL_EXECUTE;
    let (code, out, _) = cli(&[
        "providers",
        "--json",
        "--provider",
        broken,
        "--provider",
        vsdk_template_c::LIBRARY_PATH,
    ]);
    assert_eq!(code, 2);
    let report: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let entries = report.as_array().expect("a list");
    let error = entries
        .iter()
        .find_map(|e| e["error"].as_str())
        .expect("an error entry");
    assert_eq!(
        error,
        format!("{broken}: required slot `execute` of the function table is NULL")
    );
    assert!(entries
        .iter()
        .any(|e| e["name"] == "template-c" && e["devices"][0]["stable_id"] == "template-c:0"));
}

#[test]
fn a_missing_library_exits_2_with_its_path() {
    let (code, _, err) = cli(&[
        "providers",
        "--provider",
        "/nonexistent/libvsdk_provider_x.so",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("error: cannot load provider library /nonexistent/libvsdk_provider_x.so"),
        "{err}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let (code, _, err) = cli(&["providers", "--no-such-flag"]);
    assert_eq!(code, 2, "{err}");
}
