//! Rasterization and interpolation: watertight grids, overlaps, extreme vertices.

use super::*;

/// A scene for `vsdk.rasterize`: a jittered grid of quads split into
/// triangles (shared edges, both windings, perspective w), plus `loose`
/// triangles anywhere at random depths (overlaps, the depth test), in clip
/// space `[1, V, 4]`.
pub(super) fn scene(c: &mut Cases, grid: usize, loose: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut pos, mut tri) = (Vec::new(), Vec::new());
    let mut vertex = |c: &mut Cases, ndc: [f64; 3]| {
        let w = 0.5 + 1.5 * c.rng.unit();
        pos.extend([ndc[0] * w, ndc[1] * w, ndc[2] * w, w]);
        pos.len() / 4 - 1
    };
    let side = grid + 1;
    let mut ids = Vec::new();
    for i in 0..side * side {
        let (gx, gy) = ((i % side) as f64, (i / side) as f64);
        // Inner grid points jittered by up to 15 % of a cell; the outline straight.
        let coord = |c: &mut Cases, g: f64| {
            let inner = g > 0.0 && g < grid as f64;
            let jitter = if inner {
                0.3 * (c.rng.unit() - 0.5)
            } else {
                0.0
            };
            -0.8 + 1.6 * (g + jitter) / grid as f64
        };
        let x = coord(c, gx);
        let y = coord(c, gy);
        let z = 0.2 * c.rng.unit() - 0.1;
        ids.push(vertex(c, [x, y, z]));
    }
    for gy in 0..grid {
        for gx in 0..grid {
            let q = [
                gy * side + gx,
                gy * side + gx + 1,
                (gy + 1) * side + gx + 1,
                (gy + 1) * side + gx,
            ];
            // Both windings, and both diagonals.
            let (a, b) = if c.rng.below(2) == 0 {
                ([q[0], q[1], q[2]], [q[0], q[2], q[3]])
            } else {
                ([q[1], q[0], q[3]], [q[1], q[3], q[2]])
            };
            for t in [a, b] {
                tri.extend(t.iter().map(|&k| ids[k] as f64));
            }
        }
    }
    for _ in 0..loose {
        let z = 1.8 * c.rng.unit() - 0.9;
        let (cx, cy) = (1.6 * c.rng.unit() - 0.8, 1.6 * c.rng.unit() - 0.8);
        for _ in 0..3 {
            let ndc = [
                cx + 0.4 * c.rng.normal(),
                cy + 0.4 * c.rng.normal(),
                z + 0.05 * c.rng.normal(),
            ];
            let v = vertex(c, ndc);
            tri.push(v as f64);
        }
    }
    (pos, tri)
}

/// The rasterizer and the interpolation: positions and attributes in each
/// layout, a watertight grid among overlapping triangles, a large raster,
/// and extremes (vertices far outside, tiny and large w, degenerate
/// triangles, depths past the clip range).
pub(super) fn raster(c: &mut Cases) {
    let d = c.dtype;
    let size = |h: usize, w: usize| {
        Attrs::new()
            .with("height", AttrValue::Int(h as i64))
            .with("width", AttrValue::Int(w as i64))
    };
    let tri_input = |t: &[f64]| input(&[t.len() / 3, 3], t.to_vec(), DType::I32, None);
    match c.op {
        Op::Rasterize => {
            let (pos, tri) = scene(c, 6, 12);
            let v = pos.len() / 4;
            for (variant, about, layout) in c.layouts(&[1, v, 4]) {
                let p = input(&[1, v, 4], pos.clone(), d, Some(layout));
                c.add(variant, about, size(37, 53), vec![p, tri_input(&tri)]);
            }
            let (pos, tri) = scene(c, 24, 200);
            let v = pos.len() / 4;
            c.add(
                "large",
                "a 384 x 512 raster of about 1350 triangles (a 24 x 24 grid and 200 overlapping)",
                size(384, 512),
                vec![input(&[1, v, 4], pos, d, None), tri_input(&tri)],
            );
            let (mut pos, mut tri) = scene(c, 4, 8);
            // Far outside the viewport, tiny and large w, a degenerate
            // triangle (collinear), depths past [-1, 1].
            let extra = [
                [-1e4, -3.0, 0.0, 1.0],
                [1e4, -2.0, 0.0, 1.0],
                [0.0, 1e4, 0.5, 1.0],
                [0.001, 0.001, 0.0, 1e-3],
                [1.5e3, -0.5e3, 0.0, 2e3],
                [0.0, 0.9e3, 0.2, 1e3],
                [-0.5, -0.5, 0.0, 1.0],
                [0.0, 0.0, 0.0, 1.0],
                [0.5, 0.5, 0.0, 1.0],
                [-0.9, 0.9, -2.0, 1.0],
                [0.9, 0.9, 2.0, 1.0],
                [0.0, -0.9, 0.0, 1.0],
            ];
            let first = pos.len() / 4;
            pos.extend(extra.iter().flatten());
            tri.extend((first..first + 12).map(|k| k as f64));
            let v = pos.len() / 4;
            c.add(
                "extremes",
                "vertices 10^4 outside the viewport, w from 10^-3 to 2000, a degenerate triangle, depths past [-1, 1]",
                size(45, 31),
                vec![input(&[1, v, 4], pos, d, None), tri_input(&tri)],
            );
        }
        _ => {
            // A rasterizer's output as the kernel reads it: ids + 1 (0
            // empty), (u, v) with u + v <= 1.
            let (v, f, (h, w), a) = (40, 60, (19, 23), 5);
            let tri: Vec<f64> = (0..3 * f).map(|_| c.rng.below(v) as f64).collect();
            let mut rast = Vec::with_capacity(h * w * 4);
            for _ in 0..h * w {
                let (u, t) = (c.rng.unit(), c.rng.unit());
                let (u, t) = if u + t > 1.0 {
                    (1.0 - u, 1.0 - t)
                } else {
                    (u, t)
                };
                let id = c.rng.below(f + 1) as f64;
                rast.extend(if id == 0.0 { [0.0; 4] } else { [u, t, 0.0, id] });
            }
            let rast_input = |rast: &[f64]| input(&[1, h, w, 4], rast.to_vec(), DType::F32, None);
            for (variant, about, layout) in c.layouts(&[1, v, a]) {
                let attr = c.normals(&[1, v, a], 2.0);
                let attr = input(&[1, v, a], attr, d, Some(layout));
                c.add(
                    variant,
                    about,
                    Attrs::new(),
                    vec![attr, rast_input(&rast), tri_input(&tri)],
                );
            }
            let (layout_name, about, layout) = c.layouts(&[1, h, w, 4])[0].clone();
            let attr = c.normals(&[1, v, a], 2.0);
            c.add(
                &format!("rast-{layout_name}"),
                about,
                Attrs::new(),
                vec![
                    input(&[1, v, a], attr, d, None),
                    input(&[1, h, w, 4], rast, DType::F32, Some(layout)),
                    tri_input(&tri),
                ],
            );
        }
    }
}
