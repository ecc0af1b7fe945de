//! Without a loadable target a hostile library still answers with a table,
//! and `create` fails with a status naming VSDK_HOSTILE_TARGET. Its own test
//! program: each library reads the variable once, at its first negotiation.

mod common;

use common::*;
use vsdk_ffi::*;
use vsdk_hostile_providers as hostile;

fn create_error(path: &str) -> (i32, String) {
    let lib = load(path);
    create(table(&lib)).expect_err("create without a target")
}

#[test]
fn create_names_the_variable_when_the_target_is_missing() {
    let _env = env_lock();
    let nowhere = std::env::temp_dir().join("no-such-provider/libnothing.so");
    std::env::set_var(hostile::TARGET_ENV, &nowhere);
    let (code, message) = create_error(hostile::WORKING);
    assert_eq!(code, VSDK_STATUS_DEVICE_ERROR);
    assert!(message.contains(hostile::TARGET_ENV), "{message}");
    assert!(message.contains(nowhere.to_str().unwrap()), "{message}");

    std::env::remove_var(hostile::TARGET_ENV);
    let (_, message) = create_error(hostile::NONDETERMINISTIC);
    assert!(message.contains(hostile::TARGET_ENV), "{message}");
    assert!(message.contains("not set"), "{message}");
}
