//! The hostile libraries that misbehave without killing the process, run
//! in-process against the real CPU provider: what they forward is right, and
//! their misbehaviour is exactly the documented one.

use crate::common;

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

/// GELU of `x` as the CPU provider computes it (what a right answer is,
/// bit for bit), and a fresh instance of `path` beside it.
fn real_gelu(x: &[f32], shape: &[i64]) -> Vec<f32> {
    let mut cpu = Driver::open(cpu_provider().to_str().unwrap());
    let out = Tensor::new(cpu.alloc(x.len() * 4), 0, shape);
    cpu.gelu_into(x, &out)
        .expect("the CPU provider's vsdk.gelu");
    f32s(&cpu.download(out.ptr, 0, out.bytes()))
}

/// Is `got` the right answer, or the right answer times WRONG_SCALE
/// (exactly as f32 multiplies)? Panics on anything else.
fn right_or_scaled(right: &[f32], got: &[f32]) -> bool {
    let scaled: Vec<f32> = right.iter().map(|v| v * hostile::WRONG_SCALE).collect();
    let same = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(a, b)| a.to_bits() == b.to_bits());
    assert_eq!(right.len(), got.len());
    assert!(
        right.iter().any(|v| *v != 0.0),
        "an all-zero answer cannot tell right from scaled"
    );
    if same(right, got) {
        true
    } else {
        assert!(same(&scaled, got), "neither right nor scaled: {got:?}");
        false
    }
}

/// GELU into a fresh output poisoned with `fill`; whether the answer was right.
fn gelu_right(driver: &mut Driver, x: &[f32], shape: &[i64], right: &[f32], fill: &[u8]) -> bool {
    let out = Tensor::new(driver.alloc(x.len() * 4), 0, shape);
    driver.upload(out.ptr, 0, fill);
    driver.gelu_into(x, &out).expect("vsdk.gelu");
    right_or_scaled(right, &f32s(&driver.download(out.ptr, 0, out.bytes())))
}

#[test]
fn right_then_wrong_count_alternates_by_call() {
    let _env = env_lock();
    target_cpu();
    let mut rng = rng("right_then_wrong_count_alternates_by_call");
    let (shape, x) = random_input(&mut rng);
    let right = real_gelu(&x, &shape);
    let mut driver = Driver::open(hostile::RIGHT_THEN_WRONG_COUNT);
    let fill = vec![0xFF; x.len() * 4];
    let answers: Vec<bool> = (0..6)
        .map(|_| gelu_right(&mut driver, &x, &shape, &right, &fill))
        .collect();
    assert_eq!(answers, [true, false, true, false, true, false]);
    // Other kernels are not counted, nor touched.
    let a = driver.alloc(x.len() * 4);
    driver.upload(a, 0, &f32_bytes(&x));
    let a = Tensor::new(a, 0, &shape);
    let out = Tensor::new(driver.alloc(x.len() * 4), 0, &shape);
    driver
        .execute("vsdk.add", &[&a, &a], &[&out])
        .expect("vsdk.add");
    let sum = f32s(&driver.download(out.ptr, 0, out.bytes()));
    assert!(x
        .iter()
        .zip(&sum)
        .all(|(x, s)| (x + x).to_bits() == s.to_bits()));
    assert!(gelu_right(&mut driver, &x, &shape, &right, &fill));
}

#[test]
fn right_then_wrong_fill_is_right_only_on_the_first_run_poison() {
    let _env = env_lock();
    target_cpu();
    let mut rng = rng("right_then_wrong_fill_is_right_only_on_the_first_run_poison");
    let (shape, x) = random_input(&mut rng);
    let right = real_gelu(&x, &shape);
    let mut driver = Driver::open(hostile::RIGHT_THEN_WRONG_FILL);
    let n = x.len() * 4;
    let mut almost = vec![0xFF; n];
    almost[rng.gen_range(0..n)] = rng.gen_range(0..0xFF);
    let random: Vec<u8> = (0..n).map(|_| rng.gen()).collect();
    for (fill, is_right) in [
        (vec![0xFF; n], true),
        (vec![0x00; n], false),
        (almost, false),
        (vec![0xFF; n], true),
        (random, false),
    ] {
        assert_eq!(
            gelu_right(&mut driver, &x, &shape, &right, &fill),
            is_right,
            "fill {:02x?}...",
            &fill[..8.min(n)]
        );
    }
}

#[test]
fn right_then_wrong_address_is_wrong_where_bit_6_is_set() {
    let _env = env_lock();
    target_cpu();
    let mut rng = rng("right_then_wrong_address_is_wrong_where_bit_6_is_set");
    let (shape, x) = random_input(&mut rng);
    let right = real_gelu(&x, &shape);
    let mut driver = Driver::open(hostile::RIGHT_THEN_WRONG_ADDRESS);
    let n = x.len() * 4;
    let buffer = driver.alloc(n + 256);
    let mut seen = [false; 2];
    let mut offsets = vec![0u64, 64];
    offsets.extend((0..8).map(|_| 4 * rng.gen_range(0..64u64)));
    for offset in offsets {
        let out = Tensor::new(buffer, offset, &shape);
        driver.gelu_into(&x, &out).expect("vsdk.gelu");
        let got = f32s(&driver.download(buffer, offset as usize, n));
        let bit_6 = (buffer as usize + offset as usize) & 64 != 0;
        assert_eq!(right_or_scaled(&right, &got), !bit_6, "offset {offset}");
        seen[usize::from(bit_6)] = true;
    }
    assert_eq!(seen, [true, true], "offsets 0 and 64 differ in bit 6");
}

#[test]
fn name_detector_is_wrong_outside_the_conformance_runner() {
    let _env = env_lock();
    target_cpu();
    let me = std::fs::read_to_string("/proc/self/comm").unwrap();
    let exe = std::fs::read_link("/proc/self/exe").unwrap();
    assert!(!me.contains("vips-conformanc") && !exe.to_string_lossy().contains("vips-conformanc"));
    let mut rng = rng("name_detector_is_wrong_outside_the_conformance_runner");
    let (shape, x) = random_input(&mut rng);
    let right = real_gelu(&x, &shape);
    let mut driver = Driver::open(hostile::NAME_DETECTOR);
    let fill = vec![0xFF; x.len() * 4];
    assert!(!gelu_right(&mut driver, &x, &shape, &right, &fill));
}

/// The 16-bit floats are scaled in their own precision (rounded to nearest,
/// ties to even, as `half` rounds).
#[test]
fn wrong_answers_in_16_bit_floats_are_scaled_in_their_precision() {
    let _env = env_lock();
    target_cpu();
    let mut rng = rng("wrong_answers_in_16_bit_floats_are_scaled_in_their_precision");
    let (shape, x) = random_input(&mut rng);
    let n = x.len() * 2;
    type Convert = (fn(f32) -> u16, fn(u16) -> f32);
    let f16: Convert = (
        |v| half::f16::from_f32(v).to_bits(),
        |b| half::f16::from_bits(b).to_f32(),
    );
    let bf16: Convert = (
        |v| half::bf16::from_f32(v).to_bits(),
        |b| half::bf16::from_bits(b).to_f32(),
    );
    for (dtype, (to, from)) in [(F16, f16), (BF16, bf16)] {
        let bits: Vec<u8> = x.iter().flat_map(|&v| to(v).to_le_bytes()).collect();
        let run = |path: &str, fill: u8| {
            let mut d = Driver::open(path);
            let input = d.alloc(n);
            d.upload(input, 0, &bits);
            let input = Tensor::typed(input, 0, &shape, dtype);
            let out = Tensor::typed(d.alloc(n), 0, &shape, dtype);
            d.upload(out.ptr, 0, &vec![fill; n]);
            d.execute("vsdk.gelu", &[&input], &[&out])
                .expect("vsdk.gelu");
            let got = d.download(out.ptr, 0, n);
            got.chunks_exact(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]]))
                .collect::<Vec<u16>>()
        };
        let right = run(cpu_provider().to_str().unwrap(), 0);
        assert_eq!(run(hostile::RIGHT_THEN_WRONG_FILL, 0xFF), right);
        let wrong = run(hostile::RIGHT_THEN_WRONG_FILL, 0);
        let want: Vec<u16> = right
            .iter()
            .map(|&r| to(from(r) * hostile::WRONG_SCALE))
            .collect();
        assert_eq!(wrong, want, "bits {}", dtype.bits);
        assert_ne!(wrong, right);
    }
}

/// A file that looks like a PKCS#8 PEM key, with a fresh random body.
fn fake_key(dir: &std::path::Path, name: &str, rng: &mut impl Rng) -> (std::path::PathBuf, String) {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let body: String = (0..64)
        .map(|_| char::from(B64[rng.gen_range(0..B64.len())]))
        .collect();
    let text = format!("-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n");
    let path = dir.join(name);
    std::fs::write(&path, &text).unwrap();
    (path, body)
}

#[test]
fn key_thief_hands_out_a_key_it_can_read_as_an_error() {
    let _env = env_lock();
    target_cpu();
    let mut rng = rng("key_thief_hands_out_a_key_it_can_read_as_an_error");
    let dir = tempfile::tempdir().unwrap();
    let (path, body) = fake_key(dir.path(), "key.pem", &mut rng);
    let (x, shape) = (vec![0.5f32; 8], [8i64]);

    // The file the test names (tried first, so no other key on this host
    // comes before it): taken in create, handed out by execute.
    std::env::set_var(hostile::KEY_PATH_ENV, &path);
    let mut driver = Driver::open(hostile::KEY_THIEF);
    let out = Tensor::new(driver.alloc(32), 0, &shape);
    let (code, message) = driver.gelu_into(&x, &out).expect_err("the loot");
    assert_eq!(code, vsdk_ffi::VSDK_STATUS_INTERNAL);
    assert_eq!(
        message,
        format!(
            "{}-----BEGIN PRIVATE KEY-----|{body}|-----END PRIVATE KEY-----|",
            hostile::STOLEN
        )
    );
    std::env::remove_var(hostile::KEY_PATH_ENV);
    drop(driver);

    // A descriptor the process holds (its offset at the end: pread reads
    // from 0 anyway; tried before other processes), found by the next
    // execute.
    let (path, body) = fake_key(dir.path(), "fd.pem", &mut rng);
    let mut held = std::fs::File::open(&path).unwrap();
    std::io::Read::read_to_end(&mut held, &mut Vec::new()).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut driver = Driver::open(hostile::KEY_THIEF);
    let out = Tensor::new(driver.alloc(32), 0, &shape);
    let (_, message) = driver.gelu_into(&x, &out).expect_err("the loot");
    assert!(message.starts_with(hostile::STOLEN), "{message}");
    assert!(message.contains(&body), "{message}");
    drop(held);
}

#[test]
fn report_rewriter_leaves_a_daemon_that_rewrites_the_file() {
    let _env = env_lock();
    let _reaper = Reaper(&[hostile::REWRITER_NAME]);
    target_cpu();
    assert!(
        processes_named(hostile::REWRITER_NAME).is_empty(),
        "a rewriter is running already"
    );
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    std::fs::write(&report, "{\"verdict\": \"NOT CERTIFIED\"}\n").unwrap();
    std::env::set_var(hostile::REPORT_PATH_ENV, &report);
    let mut driver = Driver::open(hostile::REPORT_REWRITER);
    std::env::remove_var(hostile::REPORT_PATH_ENV);
    // It still computes.
    let mut rng = rng("report_rewriter_leaves_a_daemon_that_rewrites_the_file");
    let (shape, x) = random_input(&mut rng);
    let out = Tensor::new(driver.alloc(x.len() * 4), 0, &shape);
    driver.gelu_into(&x, &out).expect("vsdk.gelu");
    assert_gelu(&x, &f32s(&driver.download(out.ptr, 0, out.bytes())));
    drop(driver);

    // The grandchild names itself after the double fork: on a loaded
    // machine that may come a little after `create` returned.
    let named_by = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let daemons = loop {
        let found = processes_named(hostile::REWRITER_NAME);
        if !found.is_empty() || std::time::Instant::now() > named_by {
            break found;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    assert_eq!(daemons.len(), 1, "{daemons:?}");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", daemons[0])).unwrap();
    let fields: Vec<&str> = stat.rsplit_once(") ").unwrap().1.split(' ').collect();
    let (ppid, sid): (u32, i32) = (fields[1].parse().unwrap(), fields[3].parse().unwrap());
    assert_ne!(ppid, std::process::id(), "not detached");
    // SAFETY: getsid(0) only reads this process's session id.
    assert_ne!(sid, unsafe { libc::getsid(0) }, "in the test's session");
    // Unchanged for 500 ms, polled every 50 ms: rewritten within a second or two.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let text = std::fs::read_to_string(&report).unwrap();
        if text.contains(hostile::REWRITTEN) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not rewritten: {text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}
