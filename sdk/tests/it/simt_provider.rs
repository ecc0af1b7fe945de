//! The GPU kernel source (vendors/gpu) and the GPU providers' launch code,
//! run on the CPU by the SIMT emulation provider, against the same f64
//! references as the CPU provider, on fresh random inputs: every float kernel
//! at float32, float16 and bfloat16, data movement on every dtype, and the
//! casts the kernels implement, bit for bit, the sparse voxel kernels (a
//! device hash, a bitonic sort) against their definitions, and the
//! rasterizer (8 sub-pixel bits, exact integer edges) against the CPU
//! reference's ids away from edges.

use crate::common;
use common::cases::*;
use common::*;
use rand::Rng;
use vips_sdk::{AttrValue, Attrs, DType, Device, HostTensor};
use vsdk_catalog::raster::{self, Triangle};

#[test]
fn float_kernels_match_f64_references_at_every_gpu_dtype() {
    let dtypes = [DType::F32, DType::F16, DType::BF16];
    check_float_kernels(&simt(), "simt_float_kernels", &dtypes, tolerance);
}

#[test]
fn sparse_voxel_kernels_match_their_definitions_at_every_gpu_dtype() {
    let dtypes = [DType::F32, DType::F16, DType::BF16];
    common::sparse::check_sparse_kernels(&simt(), "simt_sparse", &dtypes, tolerance);
}

#[test]
fn movement_kernels_are_exact_on_every_dtype() {
    check_movement_kernels(&simt(), "simt_movement_kernels");
}

fn cast(to: &str) -> Attrs {
    Attrs::new().with("dtype", AttrValue::Str(to.into()))
}

#[test]
fn casts_round_half_to_even_and_saturate_as_the_cpu_reference_does() {
    let (mut r, seed) = rng("simt_cast");
    let (dev, cpu) = (simt(), cpu());
    let mut x = cast_input(&mut r);
    x.data[3] = f64::NAN;
    let mut y = T::random(&mut r, &[64], -70000.0, 70000.0);
    // float16's edges: the overflow tie 65520, exact ties between subnormals
    // (2^-25 rounds to 0, 3·2^-25 to 2^-23) and between normals (1 + 2^-11
    // to 1, 1 + 3·2^-11 up), bfloat16's tie 1 + 2^-8, zero's sign.
    let p = |e: i32| 2f64.powi(e);
    let edges = [
        65504.0,
        65519.99,
        65520.0,
        6.1e-5,
        p(-25),
        3.0 * p(-25),
        1.0 + p(-11),
        1.0 + 3.0 * p(-11),
        1.0 + p(-8),
        -0.0,
        1e-9,
    ];
    y.data[..edges.len()].copy_from_slice(&edges);
    for to in ["uint8", "float16", "bfloat16", "float32"] {
        for (input, from) in [(&x, DType::F32), (&y, DType::F32), (&x, DType::F16)] {
            let host = input.host(from);
            let got = run(&dev, "vsdk.cast", &cast(to), std::slice::from_ref(&host));
            let want = run(&cpu, "vsdk.cast", &cast(to), &[host]);
            assert_eq!(
                got.bytes, want.bytes,
                "{from} -> {to} differs from the CPU reference (seed {seed})"
            );
        }
    }
    // int32 to the float types: exact below 2^24, rounded once to nearest above.
    let ints: Vec<i32> = (0..64)
        .map(|i| match i {
            0 => i32::MIN,
            1 => i32::MAX,
            2 => (1 << 24) + 1,
            // A bfloat16 tie only after a float32 rounding: rounded once it goes up.
            3 => (1 << 24) + (1 << 16) + 1,
            4 => -((1 << 24) + (1 << 16) + 1),
            _ => r.gen_range(-70000..70000),
        })
        .collect();
    let ints = HostTensor::from_vec(&[64], ints).unwrap();
    for to in ["float16", "bfloat16", "float32"] {
        let got = run(&dev, "vsdk.cast", &cast(to), std::slice::from_ref(&ints));
        let want = run(&cpu, "vsdk.cast", &cast(to), std::slice::from_ref(&ints));
        assert_eq!(got.bytes, want.bytes, "int32 -> {to} (seed {seed})");
    }
}

#[test]
fn every_16_bit_value_widens_exactly() {
    let dev = simt();
    for dtype in [DType::F16, DType::BF16] {
        let bits: Vec<u8> = (0..=u16::MAX).flat_map(u16::to_ne_bytes).collect();
        let x = HostTensor::from_bytes(spec(dtype, &[65536]), bits).unwrap();
        let got = run(
            &dev,
            "vsdk.cast",
            &cast("float32"),
            std::slice::from_ref(&x),
        );
        let (got, want) = (got.to_f64_vec(), x.to_f64_vec());
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g == w || (g.is_nan() && w.is_nan()),
                "{dtype} bits {i:#06x}: {g} instead of {w}"
            );
        }
    }
}

#[test]
fn float64_math_is_refused_as_unsupported_not_computed() {
    let (mut r, _) = rng("simt_f64");
    let x = T::random(&mut r, &[3, 4], -1.0, 1.0);
    let err = try_run(&simt(), "vsdk.gelu", &Attrs::new(), &[x.host(DType::F64)]).unwrap_err();
    assert!(err.to_string().contains("float64"), "{err}");
}

/// `vsdk.rasterize` on `dev`: clip-space `pos [B, V, 4]` (rounded to
/// float32), `tri [F, 3]`.
fn rasterize(dev: &Device, pos: &T, tri: &[usize], (h, w): (usize, usize)) -> HostTensor {
    let attrs = Attrs::new()
        .with("height", AttrValue::Int(h as i64))
        .with("width", AttrValue::Int(w as i64));
    let tri = T::new(&[tri.len() / 3, 3], tri.iter().map(|&i| i as f64).collect());
    run(
        dev,
        "vsdk.rasterize",
        &attrs,
        &[pos.host(DType::F32), tri.host(DType::I32)],
    )
}

/// The catalog's triangles of batch entry `b` (float32 positions, as the
/// providers see them).
fn window_triangles(pos: &T, tri: &[usize], b: usize, (h, w): (usize, usize)) -> Vec<Triangle> {
    let pos = pos.rounded(DType::F32);
    let v = pos.shape[1];
    let vertex = |i: usize| {
        let at = 4 * (b * v + i);
        let clip = [0, 1, 2, 3].map(|j| pos.data[at + j]);
        raster::Window::of(clip, h, w).unwrap()
    };
    tri.chunks_exact(3)
        .map(|t| Triangle::new([vertex(t[0]), vertex(t[1]), vertex(t[2])]))
        .collect()
}

/// Clip-space positions of window coordinates `(x, y)`, depth `d`, at `w`.
fn clip((x, y): (f64, f64), d: f64, w: f64, (h, wd): (usize, usize)) -> [f64; 4] {
    [
        (2.0 * x / wd as f64 - 1.0) * w,
        (2.0 * y / h as f64 - 1.0) * w,
        d * w,
        w,
    ]
}

/// The GPU rasterizer snaps vertices to 8 sub-pixel bits and decides
/// coverage with exact integer edge functions: its ids are the reference's
/// wherever no edge passes within 1/16 pixel of a centre (and bit for bit
/// on a grid whose vertices and edges lie exactly on centres, where only the
/// tie rule decides), a watertight mesh has no hole away from its outline,
/// and (u, v, z/w) move by no more than the snapping can.
#[test]
fn rasterize_agrees_with_the_reference_away_from_edges_and_keeps_meshes_watertight() {
    let (mut r, seed) = rng("simt_rasterize");
    let (dev, cpu) = (simt(), cpu());
    let (h, w) = (37, 53);
    let ids = |t: &HostTensor| -> Vec<f64> { t.to_f64_vec().chunks(4).map(|p| p[3]).collect() };

    // Overlapping triangles of both windings, each with its own vertices at
    // one depth (distinct, a few past [-1, 1]) and w in [0.5, 2]: no depth
    // is ever nearly tied, so ids differ only where snapping moves an edge
    // across a centre. Two batch entries.
    let faces = 60;
    let (batch, v) = (2, 3 * faces);
    let mut pos = Vec::new();
    let mut depths = Vec::new();
    for _ in 0..batch {
        let mut order: Vec<usize> = (0..faces).collect();
        for i in (1..faces).rev() {
            order.swap(i, r.gen_range(0..=i));
        }
        for (f, &rank) in order.iter().enumerate() {
            let d = if f % 13 == 5 {
                1.5
            } else {
                -0.95 + 0.03 * rank as f64
            };
            depths.push(d);
            let (cx, cy) = (r.gen_range(-5.0..58.0), r.gen_range(-5.0..42.0));
            let size = r.gen_range(1.0..25.0);
            for _ in 0..3 {
                let p = (cx + r.gen_range(-size..size), cy + r.gen_range(-size..size));
                pos.extend(clip(p, d, r.gen_range(0.5..2.0), (h, w)));
            }
        }
    }
    let pos = T::new(&[batch, v, 4], pos);
    let tri: Vec<usize> = (0..v).collect();
    let (got, want) = (
        rasterize(&dev, &pos, &tri, (h, w)),
        rasterize(&cpu, &pos, &tri, (h, w)),
    );
    let (g, e) = (got.to_f64_vec(), want.to_f64_vec());
    let mut compared = 0;
    for b in 0..batch {
        let tris = window_triangles(&pos, &tri, b, (h, w));
        for row in 0..h {
            for col in 0..w {
                let p = raster::centre(row, col);
                let at = 4 * ((b * h + row) * w + col);
                let (gp, ep) = (&g[at..at + 4], &e[at..at + 4]);
                let near = |f: usize| tris[f].distances(p).1 < 1.0 / 16.0;
                if (0..faces).any(near) {
                    // Either answer of a triangle near the centre, or none.
                    let id = gp[3] as usize;
                    assert!(
                        id == 0 || tris[id - 1].distances(p).0 < 1.0 / 16.0,
                        "batch {b} pixel ({row}, {col}): triangle {} is not near (seed {seed})",
                        id - 1
                    );
                    continue;
                }
                compared += 1;
                assert_eq!(gp[3], ep[3], "batch {b} pixel ({row}, {col}) (seed {seed})");
                if ep[3] == 0.0 {
                    assert_eq!(gp, [0.0; 4], "({row}, {col}) (seed {seed})");
                    continue;
                }
                let t = &tris[ep[3] as usize - 1];
                // λ = E/A moves by at most 8·L·δ/A for vertices moved by δ
                // (1/512 pixel per axis), times 4 for the perspective
                // division with w in [0.5, 2].
                let longest = (0..3)
                    .map(|k| {
                        let (a, c) = (&t.v[k], &t.v[(k + 1) % 3]);
                        (a.x - c.x).hypot(a.y - c.y)
                    })
                    .fold(0.0, f64::max);
                let tol = 4.0 * 8.0 * longest * (2f64.sqrt() / 512.0) / t.area.abs() + 1e-6;
                for k in 0..2 {
                    assert!(
                        (gp[k] - ep[k]).abs() <= tol,
                        "({row}, {col}) {}: {} vs {} (tolerance {tol}, seed {seed})",
                        ["u", "v"][k],
                        gp[k],
                        ep[k]
                    );
                }
                let d = depths[b * faces + ep[3] as usize - 1];
                assert!(
                    (gp[2] - d).abs() <= 1e-6,
                    "({row}, {col}): z/w {} vs {d}",
                    gp[2]
                );
            }
        }
    }
    assert!(compared > batch * h * w / 2, "{compared} pixels compared");

    // A watertight mesh: a grid of jittered cells, triangles of both
    // windings sharing edges, one depth. Away from its outline every centre
    // the reference covers is covered (no hole where two triangles meet),
    // and away from every edge by the same triangle.
    let (nx, ny) = (7, 5);
    let mut pos = Vec::new();
    for j in 0..=ny {
        for i in 0..=nx {
            let jitter = |r: &mut rand_chacha::ChaCha8Rng| r.gen_range(-1.2..1.2);
            let p = (
                3.0 + 6.9 * i as f64 + jitter(&mut r),
                2.0 + 6.3 * j as f64 + jitter(&mut r),
            );
            pos.extend(clip(p, 0.25, r.gen_range(0.5..2.0), (h, w)));
        }
    }
    let vertex = |i: usize, j: usize| j * (nx + 1) + i;
    let mut tri = Vec::new();
    for j in 0..ny {
        for i in 0..nx {
            let (a, b, c, d) = (
                vertex(i, j),
                vertex(i + 1, j),
                vertex(i + 1, j + 1),
                vertex(i, j + 1),
            );
            if (i + j) % 2 == 0 {
                tri.extend([a, b, c, a, c, d]);
            } else {
                tri.extend([b, a, d, d, c, b]);
            }
        }
    }
    let pos = T::new(&[1, (nx + 1) * (ny + 1), 4], pos);
    let (got, want) = (
        ids(&rasterize(&dev, &pos, &tri, (h, w))),
        ids(&rasterize(&cpu, &pos, &tri, (h, w))),
    );
    let tris = window_triangles(&pos, &tri, 0, (h, w));
    let seen = pos.rounded(DType::F32);
    let window = |i: usize| {
        let c = [0, 1, 2, 3].map(|j| seen.data[4 * i + j]);
        raster::Window::of(c, h, w).unwrap()
    };
    // The outline: edges of one triangle only.
    let mut edges = std::collections::HashMap::new();
    for t in tri.chunks_exact(3) {
        for k in 0..3 {
            let (a, b) = (t[k], t[(k + 1) % 3]);
            *edges.entry((a.min(b), a.max(b))).or_insert(0) += 1;
        }
    }
    let outline: Vec<_> = edges
        .iter()
        .filter(|(_, &n)| n == 1)
        .map(|(&(a, b), _)| (window(a), window(b)))
        .collect();
    for row in 0..h {
        for col in 0..w {
            let p = raster::centre(row, col);
            let (gi, ei) = (got[row * w + col], want[row * w + col]);
            let near_outline = outline
                .iter()
                .any(|(a, b)| raster::segment_distance(a, b, p) < 1.0 / 16.0);
            if ei != 0.0 && !near_outline {
                assert_ne!(gi, 0.0, "a hole at ({row}, {col}) (seed {seed})");
            }
            if !tris.iter().any(|t| t.distances(p).1 < 1.0 / 16.0) {
                assert_eq!(gi, ei, "({row}, {col}) (seed {seed})");
            }
        }
    }

    // Vertices on pixel centres, edges through centres: the snapped and the
    // float64 geometry are one, only the tie rule decides, ids bit for bit.
    let (h, w) = (32, 64);
    let mut pos = Vec::new();
    for j in 0..=6 {
        for i in 0..=14 {
            let p = (0.5 + 4.0 * i as f64, 0.5 + 5.0 * j as f64);
            pos.extend(clip(p, 0.5, 1.0, (h, w)));
        }
    }
    let vertex = |i: usize, j: usize| j * 15 + i;
    let mut tri = Vec::new();
    for j in 0..6 {
        for i in 0..14 {
            let (a, b, c, d) = (
                vertex(i, j),
                vertex(i + 1, j),
                vertex(i + 1, j + 1),
                vertex(i, j + 1),
            );
            match (i + 2 * j) % 3 {
                0 => tri.extend([a, b, c, a, c, d]),
                1 => tri.extend([c, b, a, d, c, a]),
                _ => tri.extend([a, b, d, b, c, d]),
            }
        }
    }
    let pos = T::new(&[1, 15 * 7, 4], pos);
    let (got, want) = (
        ids(&rasterize(&dev, &pos, &tri, (h, w))),
        ids(&rasterize(&cpu, &pos, &tri, (h, w))),
    );
    if let Some(i) = (0..h * w).find(|&i| got[i] != want[i]) {
        panic!(
            "pixel ({}, {}), its centre on an edge: id + 1 {} instead of {} (seed {seed})",
            i / w,
            i % w,
            got[i],
            want[i]
        );
    }
    // Inside the grid (columns 1..56, rows 1..30) nothing is empty.
    for row in 1..30 {
        for col in 1..56 {
            assert_ne!(got[row * w + col], 0.0, "({row}, {col})");
        }
    }
}

/// `vsdk.interpolate` against its definition on a rasterizer's output, at
/// every GPU dtype and from a float32 or float64 raster; and both kernels'
/// invalid arguments refused with the CPU provider's own messages.
#[test]
fn interpolate_matches_its_definition_and_invalid_arguments_are_named_as_the_cpu_names_them() {
    let (mut r, seed) = rng("simt_interpolate");
    let (dev, cpu) = (simt(), cpu());
    let (h, w, batch, v, a) = (19, 23, 2, 30, 5);
    let pos = T::new(
        &[batch, v, 4],
        (0..batch * v)
            .flat_map(|_| {
                let w = r.gen_range(0.5..2.0);
                [
                    r.gen_range(-1.0..1.0) * w,
                    r.gen_range(-1.0..1.0) * w,
                    r.gen_range(-0.9..0.9) * w,
                    w,
                ]
            })
            .collect(),
    );
    let faces = 40;
    let tri: Vec<usize> = (0..3 * faces).map(|_| r.gen_range(0..v)).collect();
    let rast = rasterize(&dev, &pos, &tri, (h, w));
    let rast_values = rast.to_f64_vec();
    assert!(rast_values.chunks(4).filter(|p| p[3] > 0.0).count() > h * w / 4);
    let tri_t = T::new(&[faces, 3], tri.iter().map(|&i| i as f64).collect());
    let attr = T::random(&mut r, &[batch, v, a], -3.0, 3.0);
    for dtype in [DType::F32, DType::F16, DType::BF16] {
        let seen = attr.rounded(dtype);
        let mut want = vec![0.0; batch * h * w * a];
        for (p, px) in rast_values.chunks(4).enumerate() {
            if px[3] == 0.0 {
                continue;
            }
            let t = &tri[3 * (px[3] as usize - 1)..][..3];
            let at = |k: usize, ch: usize| seen.at(&[p / (h * w), t[k], ch]);
            for ch in 0..a {
                want[p * a + ch] =
                    px[0] * at(0, ch) + px[1] * at(1, ch) + (1.0 - px[0] - px[1]) * at(2, ch);
            }
        }
        for rast_dtype in [DType::F32, DType::F64] {
            let rast = T::new(&rast.spec.shape, rast_values.clone()).host(rast_dtype);
            let inputs = [attr.host(dtype), rast, tri_t.host(DType::I32)];
            let got = run(&dev, "vsdk.interpolate", &Attrs::new(), &inputs);
            assert_eq!(got.spec.dtype, dtype);
            let (rtol, atol) = tolerance(dtype);
            assert_close(
                &format!("interpolate {dtype} from a {rast_dtype} raster (seed {seed})"),
                &got.to_f64_vec(),
                &want,
                rtol,
                atol * 10.0,
            );
        }
    }

    // Invalid arguments: the same status and message as the CPU provider.
    let same_error = |kernel: &str, attrs: &Attrs, inputs: &[HostTensor], says: &str| {
        let message = |d: &Device| match try_run(d, kernel, attrs, inputs) {
            Err(vips_sdk::Error::Provider { code, message, .. }) => (code, message),
            other => panic!("{kernel}: {other:?}"),
        };
        let (got, want) = (message(&dev), message(&cpu));
        assert_eq!(got, want, "{kernel}");
        assert!(got.1.contains(says), "{kernel}: {}", got.1);
    };
    let size = Attrs::new()
        .with("height", AttrValue::Int(h as i64))
        .with("width", AttrValue::Int(w as i64));
    let mut bad_tri = tri_t.clone();
    bad_tri.data[3 * 7 + 2] = v as f64;
    same_error(
        "vsdk.rasterize",
        &size,
        &[pos.host(DType::F32), bad_tri.host(DType::I32)],
        &format!("tri[7, 2] = {v}"),
    );
    same_error(
        "vsdk.interpolate",
        &Attrs::new(),
        &[
            attr.host(DType::F32),
            rast.clone(),
            bad_tri.host(DType::I32),
        ],
        &format!("tri[7, 2] = {v}"),
    );
    // A vertex with w = 0 in batch entry 1, used by two triangles: the first is named.
    let mut bad_pos = pos.clone();
    let used = tri[3 * 11 + 1];
    bad_pos.data[4 * (v + used) + 3] = 0.0;
    same_error(
        "vsdk.rasterize",
        &size,
        &[bad_pos.host(DType::F32), tri_t.host(DType::I32)],
        &format!("pos[1, {used}]"),
    );
    let mut bad_rast = rast_values.clone();
    bad_rast[4 * (h * w + 5 * w + 3) + 3] = 2.5;
    let bad_rast = T::new(&rast.spec.shape, bad_rast);
    same_error(
        "vsdk.interpolate",
        &Attrs::new(),
        &[
            attr.host(DType::F32),
            bad_rast.host(DType::F32),
            tri_t.host(DType::I32),
        ],
        "rast[1, 5, 3, 3] = 2.5",
    );
}
