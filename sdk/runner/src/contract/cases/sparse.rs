//! Sparse voxels: shuffled, on the grid's faces, coordinates in every layout.

use super::*;

/// Voxels of a random occupancy in an `extent`³ grid, two batch entries, in
/// shuffled order: a ball's shell, and every voxel of the grid's low faces
/// within its reach (neighbours at `x − 1 < 0` must be absent, not clamped).
pub(super) fn voxels(c: &mut Cases, extent: i32) -> Vec<[i32; 4]> {
    let mut v = Vec::new();
    for b in 0..2 {
        let centre = extent as f64 / 2.0 + c.rng.normal();
        let radius = extent as f64 / 3.0;
        for x in 0..extent {
            for y in 0..extent {
                for z in 0..extent {
                    let d = [x, y, z].map(|t| f64::from(t) - centre);
                    let r = (d[0] * d[0] + d[1] * d[1] + d[2] * d[2]).sqrt();
                    let face = (x == 0 || y == 0 || z == 0) && r < radius * 1.6;
                    if (r - radius).abs() < 0.9 || face {
                        v.push([b, x, y, z]);
                    }
                }
            }
        }
    }
    for i in (1..v.len()).rev() {
        let j = c.rng.below(i + 1);
        v.swap(i, j);
    }
    v
}

pub(super) fn coords_input(v: &[[i32; 4]], layout: Option<Layout>) -> Input {
    let values = v.iter().flatten().map(|&x| f64::from(x)).collect();
    input(&[v.len(), 4], values, DType::I32, layout)
}

pub(super) fn parents(v: &[[i32; 4]]) -> usize {
    let mut p: Vec<[i32; 4]> = v
        .iter()
        .map(|q| [q[0], q[1] / 2, q[2] / 2, q[3] / 2])
        .collect();
    p.sort_unstable();
    p.dedup();
    p.len()
}

/// The sparse kernels: every data input in each layout (the coordinates
/// too), shuffled voxels, the grid's faces, and a larger grid.
pub(super) fn sparse(c: &mut Cases) {
    let d = c.dtype;
    let small = voxels(c, 7);
    let n = small.len();
    let layouts = c.layouts(&[n, 4]);
    match c.op {
        Op::SparseConv3d | Op::SegmentMean | Op::GatherRows | Op::RepeatRows => {
            let cols = 5;
            for (variant, about, layout) in c.layouts(&[n, cols]) {
                let x = c.normals(&[n, cols], 2.0);
                let x = input(&[n, cols], x, d, Some(layout));
                let (attrs, rest) = sparse_rest(c, &small, None);
                c.add(
                    variant,
                    about,
                    attrs,
                    std::iter::once(x).chain(rest).collect(),
                );
            }
            if c.op == Op::SparseConv3d {
                // The coordinates as a view, and a larger grid.
                let (variant, about, layout) = layouts[1].clone();
                let x = c.normals(&[n, cols], 2.0);
                let x = input(&[n, cols], x, d, None);
                let (attrs, rest) = sparse_rest(c, &small, Some(layout));
                c.add(
                    &format!("coords-{variant}"),
                    about,
                    attrs,
                    std::iter::once(x).chain(rest).collect(),
                );
                let big = voxels(c, 24);
                let x = c.normals(&[big.len(), 16], 1.0);
                let x = input(&[big.len(), 16], x, d, None);
                let (attrs, rest) = sparse_rest(c, &big, None);
                c.add(
                    "large",
                    "two shells in a 24³ grid (a few thousand voxels), 16 channels",
                    attrs,
                    std::iter::once(x).chain(rest).collect(),
                );
            }
        }
        _ => {
            // Not broadcast: repeated rows would be the same voxel twice.
            for (variant, about, layout) in layouts.into_iter().take(2) {
                let (attrs, _) = sparse_rest(c, &small, None);
                c.add(
                    variant,
                    about,
                    attrs,
                    vec![coords_input(&small, Some(layout))],
                );
            }
        }
    }
}

/// The attributes and the inputs after the first of a sparse case on `v`.
pub(super) fn sparse_rest(
    c: &mut Cases,
    v: &[[i32; 4]],
    coords: Option<Layout>,
) -> (Attrs, Vec<Input>) {
    let n = v.len();
    let d = c.dtype;
    let index = |rows: usize, c: &mut Cases| {
        let values = (0..n).map(|_| c.rng.below(rows) as f64).collect();
        input(&[n], values, DType::I32, None)
    };
    match c.op {
        Op::SparseConv3d => {
            let (cin, cout) = if n > 1000 { (16, 8) } else { (5, 6) };
            let w = c.normals(&[27, cin, cout], 0.2);
            let b = c.normals(&[cout], 0.1);
            (
                Attrs::new(),
                vec![
                    coords_input(v, coords),
                    input(&[27, cin, cout], w, d, None),
                    input(&[cout], b, d, None),
                ],
            )
        }
        Op::SegmentMean => {
            let m = (n / 3).max(1);
            let segments = Attrs::new().with("segments", AttrValue::Int(m as i64));
            (segments, vec![index(m, c)])
        }
        Op::GatherRows => (Attrs::new(), vec![index(n, c)]),
        Op::RepeatRows => (Attrs::new().with("times", AttrValue::Int(8)), vec![]),
        Op::SparseDownsampleCoords | Op::SparseDownsampleIndex => (
            Attrs::new().with("voxels", AttrValue::Int(parents(v) as i64)),
            vec![],
        ),
        _ => (Attrs::new(), vec![]),
    }
}
