//! The Pillow resizes (`vsdk.resize_pil_bicubic`, `vsdk.resize_pil_lanczos`)
//! against the installed Pillow itself, on fresh random images and sizes:
//! up- and downscaling, 1 to 4 channels (Pillow's modes L, LA, RGB, RGBA, and
//! RGBa for four independent channels), both pass orders, every provider
//! (CPU, the plain-C template, the GPU kernel source under the SIMT
//! emulation). tools/pillow_resize.py runs Pillow; it needs python3 with
//! Pillow (`pip install pillow`).

use crate::common;
use common::*;
use rand::Rng;
use serde_json::{json, Value};
use std::io::Write;
use std::process::{Command, Stdio};
use vips_sdk::{AttrValue, Attrs, Device, HostTensor};

struct Case {
    filter: &'static str,
    mode: &'static str,
    alpha: bool,
    shape: [usize; 3],
    size: [usize; 2],
    data: Vec<u8>,
}

fn channels(mode: &str) -> usize {
    match mode {
        "L" => 1,
        "LA" => 2,
        "RGB" => 3,
        _ => 4,
    }
}

/// Noise, hard 0/255 runs (the filters overshoot and clip), and for alpha
/// modes an alpha of 0 or 255 in about half the pixels (Pillow leaves
/// those colours as they are when it divides the alpha back out).
fn image(r: &mut impl Rng, [h, w, c]: [usize; 3], alpha: bool) -> Vec<u8> {
    let mut v: Vec<u8> = (0..h * w * c)
        .map(|i| match (i / 5) % 4 {
            0 => 255 * r.gen_range(0..2u8),
            _ => r.gen(),
        })
        .collect();
    if alpha {
        for px in v.chunks_exact_mut(c) {
            px[c - 1] = match r.gen_range(0..4) {
                0 => 0,
                1 => 255,
                _ => r.gen(),
            };
        }
    }
    v
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// Pillow's answer for one case.
struct Answer {
    horizontal_first: Vec<u8>,
    vertical_first: Vec<u8>,
    /// The order Pillow's own two-axis resize took ("neither" fails).
    order: String,
}

/// Pillow's version and answers.
fn pillow(cases: &[Case]) -> (String, Vec<Answer>) {
    let input: Vec<Value> = cases
        .iter()
        .map(|c| {
            json!({"filter": c.filter, "mode": c.mode, "h": c.shape[0], "w": c.shape[1],
                   "oh": c.size[0], "ow": c.size[1], "data": hex(&c.data)})
        })
        .collect();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tools/pillow_resize.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 with Pillow is needed (pip install pillow)");
    let body = serde_json::to_vec(&input).unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success(),
        "tools/pillow_resize.py failed (python3 with Pillow is needed):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let version = v["pillow"].as_str().unwrap().to_string();
    let answers = v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Answer {
            horizontal_first: unhex(c["horizontal_first"].as_str().unwrap()),
            vertical_first: unhex(c["vertical_first"].as_str().unwrap()),
            order: c["order"].as_str().unwrap_or("neither").to_string(),
        })
        .collect();
    (version, answers)
}

fn resize(dev: &Device, c: &Case, vertical_first: bool) -> Vec<u8> {
    let attrs = Attrs::new()
        .with(
            "size",
            AttrValue::Ints(c.size.iter().map(|&v| v as i64).collect()),
        )
        .with("vertical_first", AttrValue::Int(i64::from(vertical_first)))
        .with("alpha", AttrValue::Int(i64::from(c.alpha)));
    let x = HostTensor::from_vec(&c.shape, c.data.clone()).unwrap();
    let kernel = format!("vsdk.resize_pil_{}", c.filter);
    let out = run(dev, &kernel, &attrs, &[x]);
    assert_eq!(out.spec.shape, [c.size[0], c.size[1], c.shape[2]]);
    out.to_vec::<u8>().unwrap()
}

#[test]
fn pil_resizes_match_the_installed_pillow_bit_for_bit() {
    let (mut r, seed) = rng("pil_resizes_match_the_installed_pillow_bit_for_bit");
    let mut cases = Vec::new();
    for filter in ["bicubic", "lanczos"] {
        for mode in ["L", "LA", "RGB", "RGBA", "RGBa"] {
            for k in 0..6 {
                let (h, w) = (r.gen_range(1..=40), r.gen_range(1..=40));
                // Down (the filter widens), up, and mixed.
                let size = match k % 3 {
                    0 => [r.gen_range(1..=h), r.gen_range(1..=w)],
                    1 => [r.gen_range(h..=2 * h + 3), r.gen_range(w..=2 * w + 3)],
                    _ => [r.gen_range(1..=60), r.gen_range(1..=60)],
                };
                let alpha = matches!(mode, "LA" | "RGBA");
                let shape = [h, w, channels(mode)];
                let data = image(&mut r, shape, alpha);
                cases.push(Case {
                    filter,
                    mode,
                    alpha,
                    shape,
                    size,
                    data,
                });
            }
        }
    }
    // TRELLIS's conditioning: an RGBA crop, LANCZOS to 518 x 518 (down from
    // a large crop, up from a small one), and an unchanged size (a copy, no
    // premultiplication round trip).
    for (h, w) in [
        (r.gen_range(560..700), r.gen_range(560..700)),
        (301, 287),
        (518, 518),
    ] {
        let shape = [h, w, 4];
        cases.push(Case {
            filter: "lanczos",
            mode: "RGBA",
            alpha: true,
            shape,
            size: [518, 518],
            data: image(&mut r, shape, true),
        });
    }
    let (version, want) = pillow(&cases);
    eprintln!("Pillow {version}");
    // The two one-axis decompositions are Pillow's own resize in one order
    // or the other, whatever order this Pillow picks.
    for (c, a) in cases.iter().zip(&want) {
        assert_ne!(
            a.order, "neither",
            "Pillow {version} resized {:?} to {:?} ({}, {}) in neither order (seed {seed})",
            c.shape, c.size, c.mode, c.filter
        );
    }
    // The fixture must tell the orders apart, and alpha from no alpha.
    for filter in ["bicubic", "lanczos"] {
        assert!(
            cases
                .iter()
                .zip(&want)
                .any(|(c, a)| c.filter == filter && a.horizontal_first != a.vertical_first),
            "{filter}: no case where the pass order matters (seed {seed})"
        );
    }
    let devices = [cpu(), template_c(), simt()];
    let mut premultiplication_mattered = false;
    for dev in &devices {
        let name = dev.provider_info().name.to_string();
        for (i, (c, a)) in cases.iter().zip(&want).enumerate() {
            let (h, v) = (&a.horizontal_first, &a.vertical_first);
            let what = format!(
                "{name}: case {i}, {} {} {:?} -> {:?} (Pillow {version}, seed {seed})",
                c.filter, c.mode, c.shape, c.size
            );
            assert!(resize(dev, c, false) == *h, "{what}, horizontal first");
            assert!(resize(dev, c, true) == *v, "{what}, vertical first");
            if c.alpha && c.shape[..2] != c.size {
                let plain = Case {
                    alpha: false,
                    data: c.data.clone(),
                    ..*c
                };
                premultiplication_mattered |= resize(dev, &plain, false) != *h;
            }
        }
    }
    assert!(
        premultiplication_mattered,
        "no alpha case where Pillow's premultiplication changes the result (seed {seed})"
    );
}
