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
            nan: vips_sdk::replay::nan(nan),
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
