//! Replay packs and the embedded verifier's core (docs/embedded.md): the
//! device's streaming verdict is the host's `judge` bit for bit on random
//! outputs (passing, failing, NaN and Inf, biased, past one block, with
//! elements allowed past their bound), and a pack written by the host
//! streams through `Replay` in chunks of any size.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use vips_sdk::compare::{NanPolicy, Tier};
use vips_sdk::error_model::{judge, Rules, Statistics};
use vips_sdk::{HostTensor, Provider};
use vips_verify_core::format::EXPECTED_STRIDE;
use vips_verify_core::{Frame, Judge, Replay, Verdict};

fn rng() -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(rand::random())
}

fn same(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}

fn opt(x: Option<f64>) -> f64 {
    x.unwrap_or(f64::NAN)
}

/// The device's verdict of `actual` (float32) fed in random chunks.
fn device(
    actual: &[f32],
    (r, b, s): (&[f64], &[f64], &[f64]),
    rules: vips_verify_core::Rules,
    g: &mut ChaCha8Rng,
) -> Verdict {
    let mut j = Judge::new(vips_verify_core::DType::F32, actual.len() as u64, rules).unwrap();
    let mut at = 0;
    while at < actual.len() {
        let n = g.gen_range(1..3000).min(actual.len() - at);
        let bytes: Vec<u8> = actual[at..at + n]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let expected: Vec<u8> = (at..at + n)
            .flat_map(|i| [r[i], b[i], s[i]])
            .flat_map(|x| x.to_le_bytes())
            .collect();
        j.bytes(&bytes, &expected).unwrap();
        at += n;
    }
    j.finish().unwrap()
}

#[test]
fn the_devices_verdict_is_the_hosts_bit_for_bit() {
    let mut g = rng();
    for case in 0..24 {
        let n = [1, 7, 1000, 16384, 16385, 40000][case % 6];
        let reference: Vec<f64> = (0..n).map(|_| g.gen_range(-40.0..40.0)).collect();
        let bound: Vec<f64> = (0..n).map(|_| g.gen_range(1e-4..1e-2)).collect();
        let sigma: Vec<f64> = bound
            .iter()
            .map(|b| if g.gen_bool(0.1) { 0.0 } else { b / 4.0 })
            .collect();
        // Errors in units of the bound: inside, past it, biased, and specials.
        let spread = [0.2, 0.9, 1.5][case % 3];
        let shift = if case % 4 == 3 { 0.3 } else { 0.0 };
        let mut actual: Vec<f32> = (0..n)
            .map(|i| (reference[i] + (shift + g.gen_range(-spread..spread)) * bound[i]) as f32)
            .collect();
        if case % 5 == 4 {
            for _ in 0..3 {
                let i = g.gen_range(0..n);
                actual[i] = [f32::NAN, f32::INFINITY, -f32::INFINITY][g.gen_range(0..3)];
            }
        }
        let nan = if case % 2 == 0 {
            NanPolicy::Fail
        } else {
            NanPolicy::Allow
        };
        let fraction = if case % 3 == 2 { 0.002 } else { 0.0 };
        let bias = (case % 4 != 0).then_some((3.0, 0.1));
        let rules = Rules {
            nan,
            allowed_over_fraction: fraction,
            statistics: Statistics {
                rms_factor: 1.5,
                bias,
            },
        };
        let t = HostTensor::from_vec(&[n], actual.clone()).unwrap();
        let host = judge(&t, &reference, &bound, Some(&sigma), rules);
        let core_rules = vips_verify_core::Rules {
            nan: nan.into(),
            allowed_over: (fraction * n as f64).floor() as u64,
            rms_factor: 1.5,
            bias,
        };
        if core_rules.allowed_over >= vips_verify_core::tally::TOP as u64 {
            continue;
        }
        let dev = device(&actual, (&reference, &bound, &sigma), core_rules, &mut g);
        let what = format!("case {case}, n {n}: host {host:?}\ndevice {dev:?}");
        assert_eq!(host.passed, dev.passed == 1, "{what}");
        assert_eq!(host.over_bound, dev.over_bound, "{what}");
        assert_eq!(host.elements, dev.elements, "{what}");
        for (h, d) in [
            (host.max_e, dev.max_e),
            (host.rms_e, dev.rms_e),
            (opt(host.rms_t), dev.rms_t),
            (opt(host.bias_z), dev.bias_z),
            (opt(host.bias_ratio), dev.bias_ratio),
            (host.max_abs_error, dev.max_abs_error),
            (host.rel_l2_error, dev.rel_l2_error),
            (opt(host.tolerance_factor), dev.tolerance_factor),
        ] {
            assert!(same(h, d), "{h} != {d}: {what}");
        }
        let worst = host.worst.as_ref().map_or(u64::MAX, |w| w.index[0] as u64);
        assert_eq!(worst, dev.worst_index, "{what}");
    }
}

/// Streams `pack` through a `Replay` in chunks of random size, answering
/// every Expected frame with `answer(first, reference values)`; returns the
/// verdicts and the event kinds in order.
fn stream(
    pack: &[u8],
    g: &mut ChaCha8Rng,
    answer: impl Fn(&[f64], vips_verify_core::DType) -> Vec<u8>,
) -> Result<(Vec<Verdict>, Vec<&'static str>), vips_verify_core::Error> {
    let mut replay = Replay::new();
    let mut buf = vec![0u8; 64 * 1024];
    let (mut verdicts, mut kinds) = (Vec::new(), Vec::new());
    let mut dtype = vips_verify_core::DType::F32;
    let mut at = 0;
    while at < pack.len() {
        let n = g.gen_range(1..9000).min(pack.len() - at);
        let (used, frame) = replay.feed(&mut buf, &pack[at..at + n])?;
        at += used;
        let Some(frame) = frame else { continue };
        let pending = match frame {
            Frame::Pack { .. } => {
                kinds.push("pack");
                None
            }
            Frame::Stage { .. } => {
                kinds.push("stage");
                None
            }
            Frame::Input { .. } => None,
            Frame::Output { dtype: d, .. } => {
                kinds.push("output");
                dtype = d;
                None
            }
            Frame::Expected { values, .. } => Some(
                values
                    .chunks_exact(EXPECTED_STRIDE)
                    .map(|v| f64::from_le_bytes(v[..8].try_into().unwrap()))
                    .collect::<Vec<_>>(),
            ),
            Frame::End { .. } => {
                kinds.push("end");
                None
            }
        };
        if let Some(reference) = pending {
            let bytes = answer(&reference, dtype);
            if let Some(v) = replay.output(&buf, &bytes)? {
                verdicts.push(v);
            }
        }
    }
    if !replay.done() {
        return Err(vips_verify_core::Error::Incomplete);
    }
    Ok((verdicts, kinds))
}

/// The reference values in the output's dtype: what a correct device gives
/// (within rounding).
fn rounded(reference: &[f64], dtype: vips_verify_core::DType) -> Vec<u8> {
    let t = HostTensor::from_vec(&[reference.len()], reference.to_vec()).unwrap();
    let d = match dtype {
        vips_verify_core::DType::F32 => vips_sdk::DType::F32,
        vips_verify_core::DType::BF16 => vips_sdk::DType::BF16,
        vips_verify_core::DType::F16 => vips_sdk::DType::F16,
        vips_verify_core::DType::U8 => vips_sdk::DType::U8,
        other => panic!("{other:?}"),
    };
    t.cast(d).bytes.to_vec()
}

#[test]
fn a_pack_streams_through_the_core_in_chunks_of_any_size() {
    let suite = vips_sdk::suite::Suite::open(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/suites/demo-mlp"
    )))
    .unwrap();
    let cpu = Provider::open_by_name("cpu").unwrap().device(0).unwrap();
    let mut g = rng();
    for tier in [Tier::Fp32, Tier::Bf16] {
        let mut pack = Vec::new();
        let summary = vips_sdk::replay::write(&suite, tier, &[], &cpu, &mut pack).unwrap();
        assert_eq!(summary.bytes, pack.len() as u64);
        let (verdicts, kinds) = stream(&pack, &mut g, rounded).unwrap();
        assert_eq!(verdicts.len(), summary.outputs.len());
        assert!(verdicts.iter().all(|v| v.passed == 1), "{verdicts:?}");
        assert_eq!(kinds.first(), Some(&"pack"));
        assert_eq!(kinds.last(), Some(&"end"));
        // Off by 1 % everywhere: fails.
        let (verdicts, _) = stream(&pack, &mut g, |r, d| {
            rounded(&r.iter().map(|x| x * 1.01 + 0.01).collect::<Vec<_>>(), d)
        })
        .unwrap();
        assert!(verdicts.iter().any(|v| v.passed == 0));
        // Damage: a byte flipped in the middle is refused (the frame does
        // not decode, is out of place, or the checksum fails at the end).
        let mut bad = pack.clone();
        let at = pack.len() / 2;
        bad[at] ^= 0x40;
        assert!(stream(&bad, &mut g, rounded).is_err());
    }
    // A stage whose output is a rasterizer's cannot be packed.
    let bake = vips_sdk::suite::Suite::open(std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../conformance/suites/trellis-texture-bake-quick"
    )))
    .unwrap();
    let e = vips_sdk::replay::write(&bake, Tier::Fp32, &["rasterize".into()], &cpu, Vec::new())
        .unwrap_err()
        .to_string();
    assert!(e.contains("rasterizer"), "{e}");
}

/// A pack written frame by frame, its header and End checksum correct:
/// what a hostile or buggy writer could hand a device.
fn handmade(frames: &[Frame]) -> Vec<u8> {
    use sha2::Digest;
    use vips_verify_core::format::{Header, VERSION};
    let mut out = Header {
        version: VERSION,
        max_frame: 4096,
    }
    .encode()
    .to_vec();
    for f in frames {
        let p = postcard::to_stdvec(f).unwrap();
        out.extend_from_slice(&(p.len() as u32).to_le_bytes());
        out.extend_from_slice(&p);
    }
    let sha256: [u8; 32] = sha2::Sha256::digest(&out).into();
    let end = postcard::to_stdvec(&Frame::End {
        frames: frames.len() as u32,
        sha256,
    })
    .unwrap();
    out.extend_from_slice(&(end.len() as u32).to_le_bytes());
    out.extend_from_slice(&end);
    out
}

fn name(s: &str) -> vips_verify_core::format::Name {
    s.try_into().unwrap()
}

fn shape(d: &[u64]) -> vips_verify_core::format::Shape {
    vips_verify_core::format::Shape::from_slice(d).unwrap()
}

/// A one-stage pack: input `x` in the given chunks, output `y` of two
/// float32 elements expected at 1.0 and -2.0 within 1e-3.
fn one_stage(stages: u32, chunks: &[(u64, &[u64], &[u8])]) -> Vec<u8> {
    let expected: Vec<u8> = [1.0f64, 1e-3, 1e-3, -2.0, 1e-3, 1e-3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let mut frames = vec![
        Frame::Pack {
            suite: name("hostile"),
            suite_version: name("0.1.0"),
            tier: name("fp32"),
            document_sha256: [0; 32],
            golden_sha256: [0; 32],
            stages,
        },
        Frame::Stage {
            name: name("s"),
            inputs: 1,
            outputs: 1,
        },
    ];
    for &(offset, dims, bytes) in chunks {
        frames.push(Frame::Input {
            name: name("x"),
            dtype: vips_verify_core::DType::U8,
            shape: shape(dims),
            offset,
            bytes,
        });
    }
    frames.push(Frame::Output {
        name: name("y"),
        dtype: vips_verify_core::DType::F32,
        shape: shape(&[2]),
        rules: vips_verify_core::Rules {
            nan: vips_verify_core::Nan::Fail,
            allowed_over: 0,
            rms_factor: 3.0,
            bias: None,
        },
    });
    frames.push(Frame::Expected {
        first: 0,
        values: &expected,
    });
    handmade(&frames)
}

fn device_output(_: &[f64], _: vips_verify_core::DType) -> Vec<u8> {
    [1.0005f32, -2.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

#[test]
fn hostile_packs_with_valid_checksums_are_refused_and_stay_refused() {
    let mut g = rng();
    let data = [7u8; 20];
    // The well-formed pack passes: the handmade writer is right.
    let good = one_stage(1, &[(0, &[20], &data[..10]), (10, &[20], &data[10..])]);
    let (verdicts, _) = stream(&good, &mut g, device_output).unwrap();
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0].passed, 1, "{verdicts:?}");
    // A later chunk of an input claiming another shape (a firmware that
    // sized its buffer from the first would overflow).
    let grown = one_stage(1, &[(0, &[20], &data[..10]), (10, &[1000], &data[10..])]);
    assert_eq!(
        stream(&grown, &mut g, device_output).unwrap_err(),
        vips_verify_core::Error::Order(
            "an input chunk naming another input, dtype or shape before the current one ended"
        )
    );
    // No stages; an empty input; an input chunk out of place.
    assert!(stream(&one_stage(0, &[(0, &[20], &data)]), &mut g, device_output).is_err());
    assert!(stream(&one_stage(1, &[(0, &[0], &[])]), &mut g, device_output).is_err());
    assert!(stream(&one_stage(1, &[(4, &[20], &data)]), &mut g, device_output).is_err());
    // A frame longer than the header allows: refused, and every later call too.
    let mut long = good.clone();
    long[16..20].copy_from_slice(&5000u32.to_le_bytes());
    let mut replay = Replay::new();
    let mut buf = vec![0u8; 8192];
    let (used, _) = replay.feed(&mut buf, &long[..16]).unwrap();
    assert_eq!(used, 16);
    assert!(matches!(
        replay.feed(&mut buf, &long[16..]),
        Err(vips_verify_core::Error::FrameTooLong {
            len: 5000,
            limit: 4096
        })
    ));
    for _ in 0..3 {
        assert!(replay.feed(&mut buf, &long[20..]).is_err());
        assert!(replay.output(&buf, &[0; 8]).is_err());
    }
    assert!(!replay.done());
    // A buffer smaller than the header asks for.
    let mut small = vec![0u8; 100];
    assert_eq!(
        Replay::new().feed(&mut small, &good).unwrap_err(),
        vips_verify_core::Error::Buffer {
            needed: 4100,
            given: 100
        }
    );
}
