//! The hostile libraries that misbehave without killing the process, run
//! in-process against the real CPU provider: what they forward is right, and
//! their misbehaviour is exactly the documented one.

mod common;

use common::*;
use rand::Rng;
use vsdk_hostile_providers as hostile;

/// `rows x cols` random values in [-2, 2]: there f32 GELU through
/// 1 + erf(x/sqrt 2) keeps 1e-5 relative accuracy (further left the sum
/// cancels, whatever provider computes it).
fn random_input(rng: &mut impl Rng) -> (Vec<i64>, Vec<f32>) {
    let rows = rng.gen_range(1..40);
    let cols = 2 * rng.gen_range(1..100); // even element count, for half_write
    let x = (0..rows * cols).map(|_| rng.gen_range(-2.0..2.0)).collect();
    (vec![rows, cols], x)
}

fn gelu_forwarded(path: &str, test: &str) {
    let _env = env_lock();
    target_cpu();
    let cpu = Driver::open(cpu_provider().to_str().unwrap());
    let mut driver = Driver::open(path);
    assert_eq!(driver.name(), cpu.name(), "get_info is forwarded as-is");
    assert_eq!(driver.api.concurrency, cpu.api.concurrency);
    assert_eq!(
        driver.api.copy_on_device.is_some(),
        cpu.api.copy_on_device.is_some()
    );

    let mut rng = rng(test);
    let (shape, x) = random_input(&mut rng);
    let out = driver.alloc(x.len() * 4);
    let out = Tensor::new(out, 0, &shape);
    driver.gelu_into(&x, &out).expect("vsdk.gelu");
    assert_gelu(&x, &f32s(&driver.download(out.ptr, 0, out.bytes())));
}

#[test]
fn working_forwards_gelu() {
    gelu_forwarded(hostile::WORKING, "working_forwards_gelu");
}

#[test]
fn stdout_noise_still_computes_gelu() {
    gelu_forwarded(hostile::STDOUT_NOISE, "stdout_noise_still_computes_gelu");
}

#[test]
fn half_write_leaves_the_second_half_poisoned() {
    let _env = env_lock();
    target_cpu();
    let mut driver = Driver::open(hostile::HALF_WRITE);
    let mut rng = rng("half_write_leaves_the_second_half_poisoned");
    let (shape, x) = random_input(&mut rng);
    let out = Tensor::new(driver.alloc(x.len() * 4), 0, &shape);
    driver.upload(out.ptr, 0, &vec![0xFF; out.bytes()]);
    driver.gelu_into(&x, &out).expect("vsdk.gelu");
    let bytes = driver.download(out.ptr, 0, out.bytes());
    let half = out.bytes() / 2;
    assert_gelu(&x[..x.len() / 2], &f32s(&bytes[..half]));
    assert!(
        bytes[half..].iter().all(|&b| b == 0xFF),
        "the second half was written"
    );
}

#[test]
fn replay_answers_from_the_tape_without_computing() {
    let _env = env_lock();
    target_cpu();
    let tape = tempfile::tempdir().expect("temporary directory");
    std::env::set_var(hostile::TAPE_ENV, tape.path());
    std::env::set_var(hostile::MODE_ENV, "record");
    let mut driver = Driver::open(hostile::REPLAY);
    let mut rng = rng("replay_answers_from_the_tape_without_computing");
    let (shape, x) = random_input(&mut rng);
    let n = x.len() * 4;

    // Record: forwarded, and written under both names.
    let out = Tensor::new(driver.alloc(n), 0, &shape);
    driver.gelu_into(&x, &out).expect("record vsdk.gelu");
    let recorded = driver.download(out.ptr, 0, n);
    assert_gelu(&x, &f32s(&recorded));
    let key = fnv1a64(&f32_bytes(&x));
    for file in [
        format!("vsdk.gelu-{key:016x}-0.bin"),
        format!("vsdk.gelu-last-{n}-0.bin"),
    ] {
        let on_tape = std::fs::read(tape.path().join(&file))
            .unwrap_or_else(|e| panic!("{file} was not recorded: {e}"));
        assert!(on_tape == recorded, "{file} holds other bytes");
    }

    // Replay with other inputs of the same size: the stale recording.
    std::env::set_var(hostile::MODE_ENV, "replay");
    let other: Vec<f32> = x.iter().map(|v| v + rng.gen_range(0.5..1.0)).collect();
    let out = Tensor::new(driver.alloc(n), 0, &shape);
    driver.upload(out.ptr, 0, &vec![0xFF; n]);
    driver.gelu_into(&other, &out).expect("replay vsdk.gelu");
    assert!(
        driver.download(out.ptr, 0, n) == recorded,
        "replay did not return the recorded bytes"
    );

    // The recorded inputs again: the keyed recording.
    let out = Tensor::new(driver.alloc(n), 0, &shape);
    driver.gelu_into(&x, &out).expect("replay vsdk.gelu");
    assert!(driver.download(out.ptr, 0, n) == recorded);

    // A size never recorded: zeros.
    let more = vec![1.0f32; x.len() + 2];
    let out = Tensor::new(driver.alloc(more.len() * 4), 0, &[more.len() as i64]);
    driver.upload(out.ptr, 0, &vec![0xFF; out.bytes()]);
    driver.gelu_into(&more, &out).expect("replay vsdk.gelu");
    assert!(driver
        .download(out.ptr, 0, out.bytes())
        .iter()
        .all(|&b| b == 0));

    // A mode it does not know: a status naming the variable.
    std::env::set_var(hostile::MODE_ENV, "rewind");
    let err = driver.gelu_into(&x, &out).expect_err("an unknown mode");
    assert!(err.1.contains(hostile::MODE_ENV), "{err:?}");

    // A tape that is not there: a status naming the variable, not zeros.
    std::env::set_var(hostile::MODE_ENV, "replay");
    std::env::set_var(hostile::TAPE_ENV, tape.path().join("missing"));
    let err = driver.gelu_into(&x, &out).expect_err("a missing tape");
    assert!(err.1.contains(hostile::TAPE_ENV), "{err:?}");

    std::env::remove_var(hostile::MODE_ENV);
    std::env::remove_var(hostile::TAPE_ENV);
}

#[test]
fn oob_near_writes_past_an_offset_output() {
    let _env = env_lock();
    target_cpu();
    let mut driver = Driver::open(hostile::OOB_NEAR);
    let mut rng = rng("oob_near_writes_past_an_offset_output");
    let (shape, x) = random_input(&mut rng);
    let n = x.len() * 4;
    let (guard, tail) = (64, 64);
    let buffer = driver.alloc(guard + n + tail);
    driver.upload(buffer, 0, &vec![0xFF; guard + n + tail]);
    let out = Tensor::new(buffer, guard as u64, &shape);
    driver.gelu_into(&x, &out).expect("vsdk.gelu");
    let bytes = driver.download(buffer, 0, guard + n + tail);
    assert!(bytes[..guard].iter().all(|&b| b == 0xFF), "guard written");
    assert_gelu(&x, &f32s(&bytes[guard..guard + n]));
    assert_eq!(&bytes[guard + n..guard + n + 8], b"HOSTILE!");
    assert!(bytes[guard + n + 8..].iter().all(|&b| b == 0xFF));
}

#[test]
fn nondeterministic_flips_one_bit_every_second_call() {
    let _env = env_lock();
    target_cpu();
    let mut driver = Driver::open(hostile::NONDETERMINISTIC);
    let mut rng = rng("nondeterministic_flips_one_bit_every_second_call");
    let (shape, x) = random_input(&mut rng);
    let runs: Vec<Vec<u8>> = (0..2)
        .map(|_| {
            let out = Tensor::new(driver.alloc(x.len() * 4), 0, &shape);
            driver.gelu_into(&x, &out).expect("vsdk.gelu");
            driver.download(out.ptr, 0, out.bytes())
        })
        .collect();
    let diff: Vec<u8> = runs[0].iter().zip(&runs[1]).map(|(a, b)| a ^ b).collect();
    assert_eq!(diff[0], 1, "the lowest byte of element 0 differs by bit 0");
    assert!(diff[1..].iter().all(|&b| b == 0), "nothing else differs");
}

#[test]
fn huge_counts_answer_every_index() {
    let _env = env_lock();
    target_cpu();
    let cpu = Driver::open(cpu_provider().to_str().unwrap());
    let real_kernels = cpu.kernel_count();
    assert!(real_kernels > 3);

    let kernels = Driver::open(hostile::HUGE_KERNEL_COUNT);
    assert_eq!(kernels.kernel_count(), 1 << 63);
    assert_eq!(kernels.kernel_name(real_kernels + 3), cpu.kernel_name(3));
    assert_eq!(
        kernels.kernel_name((1 << 63) - 1),
        cpu.kernel_name(((1 << 63) - 1) % real_kernels)
    );

    let devices = Driver::open(hostile::HUGE_DEVICE_COUNT);
    assert_eq!(devices.device_count(), u32::MAX);
    let info = devices.device_info(12345);
    assert_eq!(info.device.device_id, 12345);
    let real = cpu.device_info(0);
    assert_eq!(info.device.device_type, real.device.device_type);
    assert_eq!(c_string(info.name), c_string(real.name), "device 0's info");
}
