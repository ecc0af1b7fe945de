//! The shared library's SONAME, so programs record `libvips_sdk.so.<abi>`
//! rather than the path they were linked against: `.so.0.<minor>` while the
//! version is 0.x (every minor may break), `.so.<major>` from 1.0.
fn main() {
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").unwrap_or_default();
    let minor = std::env::var("CARGO_PKG_VERSION_MINOR").unwrap_or_default();
    let abi = if major == "0" {
        format!("0.{minor}")
    } else {
        major
    };
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libvips_sdk.so.{abi}");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
