//! The sparse voxel kernels (docs/operators.md, "Sparse voxel tensors") on a
//! random occupancy, against references written from that page: the
//! convolution from its formula by scanning every voxel pair, the
//! downsample, gather and subdivide from their definitions.

use super::*;
use rand::seq::SliceRandom;
use vips_sdk::AttrValue::Int;

type Voxel = [i32; 4];

/// Two batch entries of a spherical shell in an 8³ grid (voxels at the grid's
/// low and high faces included, so neighbours fall off every side), rows
/// shuffled: the kernels must not assume sorted input.
pub fn shell(r: &mut impl Rng) -> Vec<Voxel> {
    let mut v = Vec::new();
    for b in 0..2 {
        let c = [
            r.gen_range(3.0..4.5),
            r.gen_range(3.0..4.5),
            r.gen_range(3.0..4.5),
        ];
        let radius: f64 = r.gen_range(3.0..4.2);
        for x in 0..8 {
            for y in 0..8 {
                for z in 0..8 {
                    let p = [x, y, z].map(f64::from);
                    let d = (0..3).map(|i| (p[i] - c[i]).powi(2)).sum::<f64>().sqrt();
                    if (d - radius).abs() < 0.9 || (x == 0 && y == 0 && z == 0) {
                        v.push([b, x, y, z]);
                    }
                }
            }
        }
    }
    v.shuffle(r);
    v
}

fn coords_tensor(v: &[Voxel]) -> HostTensor {
    HostTensor::from_vec(
        &[v.len(), 4],
        v.iter().flatten().copied().collect::<Vec<i32>>(),
    )
    .unwrap()
}

fn voxels_of(t: &HostTensor) -> Vec<Voxel> {
    t.to_f64_vec()
        .chunks_exact(4)
        .map(|c| [c[0] as i32, c[1] as i32, c[2] as i32, c[3] as i32])
        .collect()
}

/// `out[i] = b + Σ_j Σ_c w[k(i,j), c, :] · feats[j, c]` over every voxel j
/// within one step of i on each axis (same batch), k = 9(dx+1) + 3(dy+1) + dz+1.
pub fn sparse_conv3d(v: &[Voxel], feats: &T, w: &T, b: Option<&T>) -> T {
    let cout = w.shape[2];
    sparse_conv3d_with(v, feats, cout, b, |k, c, o| w.at(&[k, c, o]), |_, _| true)
}

/// [`sparse_conv3d`] with the weight read through `weight(k, c, o)` and only
/// the neighbours `j` of `i` for which `include(i, j)`: what a port gets wrong.
pub fn sparse_conv3d_with(
    v: &[Voxel],
    feats: &T,
    cout: usize,
    b: Option<&T>,
    weight: impl Fn(usize, usize, usize) -> f64,
    include: impl Fn(&Voxel, &Voxel) -> bool,
) -> T {
    let cin = feats.shape[1];
    let mut out = vec![0.0; v.len() * cout];
    for (i, p) in v.iter().enumerate() {
        for o in 0..cout {
            out[i * cout + o] = b.map_or(0.0, |b| b.data[o]);
        }
        for (j, q) in v.iter().enumerate() {
            let d = [q[1] - p[1], q[2] - p[2], q[3] - p[3]];
            if q[0] != p[0] || d.iter().any(|x| x.abs() > 1) || !include(p, q) {
                continue;
            }
            let k = (9 * (d[0] + 1) + 3 * (d[1] + 1) + d[2] + 1) as usize;
            for o in 0..cout {
                out[i * cout + o] += (0..cin)
                    .map(|c| weight(k, c, o) * feats.at(&[j, c]))
                    .sum::<f64>();
            }
        }
    }
    T::new(&[v.len(), cout], out)
}

/// Every sparse kernel on `dev`, in each of `dtypes`: the convolution and the
/// segment mean within `tolerance`, the rest exactly.
pub fn check_sparse_kernels(
    dev: &Device,
    test: &str,
    dtypes: &[DType],
    tolerance: impl Fn(DType) -> (f64, f64),
) {
    let (mut r, seed) = rng(test);
    let v = shell(&mut r);
    let n = v.len();
    let coords = coords_tensor(&v);
    let (cin, cout) = (5, 7);
    let feats = T::random(&mut r, &[n, cin], -2.0, 2.0);
    let w = T::random(&mut r, &[27, cin, cout], -0.5, 0.5);
    let bias = T::random(&mut r, &[cout], -1.0, 1.0);
    for &dtype in dtypes {
        let what = |k: &str| format!("{k} {dtype} ({n} voxels, seed {seed})");
        let (f, wr, br) = (feats.rounded(dtype), w.rounded(dtype), bias.rounded(dtype));
        let (rtol, atol) = tolerance(dtype);
        for with_bias in [true, false] {
            let mut ins = vec![feats.host(dtype), coords.clone(), w.host(dtype)];
            ins.extend(with_bias.then(|| bias.host(dtype)));
            let got = run(dev, "vsdk.sparse_conv3d", &Attrs::new(), &ins);
            let want = sparse_conv3d(&v, &f, &wr, with_bias.then_some(&br));
            assert_eq!(got.spec.shape, want.shape);
            assert_close(
                &what("sparse_conv3d"),
                &got.to_f64_vec(),
                &want.data,
                rtol,
                atol,
            );
        }

        // Downsample: sorted distinct parents, the inverse, the mean.
        let parent = |p: &Voxel| [p[0], p[1] / 2, p[2] / 2, p[3] / 2];
        let mut parents: Vec<Voxel> = v.iter().map(parent).collect();
        parents.sort();
        parents.dedup();
        let m = parents.len();
        let voxels = Attrs::new().with("voxels", Int(m as i64));
        let got = run(
            dev,
            "vsdk.sparse_downsample_coords",
            &voxels,
            std::slice::from_ref(&coords),
        );
        assert_eq!(voxels_of(&got), parents, "{}", what("downsample coords"));
        let inverse = run(
            dev,
            "vsdk.sparse_downsample_index",
            &voxels,
            std::slice::from_ref(&coords),
        );
        let got: Vec<usize> = inverse.to_f64_vec().iter().map(|&i| i as usize).collect();
        let want_inverse: Vec<usize> = v
            .iter()
            .map(|p| parents.binary_search(&parent(p)).unwrap())
            .collect();
        assert_eq!(got, want_inverse, "{}", what("downsample inverse"));
        for kernel in [
            "vsdk.sparse_downsample_coords",
            "vsdk.sparse_downsample_index",
        ] {
            let wrong = Attrs::new().with("voxels", Int(m as i64 - 1));
            let err = try_run(dev, kernel, &wrong, std::slice::from_ref(&coords))
                .unwrap_err()
                .to_string();
            assert!(err.contains("distinct parents"), "{err}");
        }
        let mut mean = vec![0.0; m * cin];
        let mut count = vec![0.0; m];
        for (i, &pm) in want_inverse.iter().enumerate() {
            count[pm] += 1.0;
            for c in 0..cin {
                mean[pm * cin + c] += f.at(&[i, c]);
            }
        }
        let mean: Vec<f64> = mean
            .iter()
            .enumerate()
            .map(|(e, s)| s / count[e / cin])
            .collect();
        let segments = Attrs::new().with("segments", Int(m as i64));
        let coarse = run(
            dev,
            "vsdk.segment_mean",
            &segments,
            &[feats.host(dtype), inverse.clone()],
        );
        assert_close(
            &what("segment_mean"),
            &coarse.to_f64_vec(),
            &mean,
            rtol,
            atol,
        );

        // Upsample through the inverse: every fine voxel gets its parent's row.
        let up = run(
            dev,
            "vsdk.gather_rows",
            &Attrs::new(),
            &[coarse.clone(), inverse.clone()],
        );
        let coarse = coarse.to_f64_vec();
        let want: Vec<f64> = want_inverse
            .iter()
            .flat_map(|&pm| coarse[pm * cin..(pm + 1) * cin].to_vec())
            .collect();
        assert_eq!(up.to_f64_vec(), want, "{}", what("gather_rows"));

        // Subdivide: children 2c + (dx, dy, dz), m = 4dx + 2dy + dz; features repeated.
        let got = run(
            dev,
            "vsdk.sparse_subdivide_coords",
            &Attrs::new(),
            std::slice::from_ref(&coords),
        );
        let mut children = Vec::new();
        for p in &v {
            for m in 0..8 {
                children.push([
                    p[0],
                    2 * p[1] + (m >> 2),
                    2 * p[2] + ((m >> 1) & 1),
                    2 * p[3] + (m & 1),
                ]);
            }
        }
        assert_eq!(voxels_of(&got), children, "{}", what("subdivide coords"));
        let times = Attrs::new().with("times", Int(8));
        let got = run(dev, "vsdk.repeat_rows", &times, &[feats.host(dtype)]);
        let want: Vec<f64> = (0..8 * n)
            .flat_map(|e| f.data[e / 8 * cin..(e / 8 + 1) * cin].to_vec())
            .collect();
        assert_eq!(got.to_f64_vec(), want, "{}", what("repeat_rows"));
    }

    // Bad coordinates are refused with the row named.
    let mut twice = v.clone();
    twice[n - 1] = twice[0];
    let mut negative = v.clone();
    negative[1][2] = -1;
    let f32s = feats.host(DType::F32);
    for (bad, want) in [(twice, "are the same voxel"), (negative, "coords row 1")] {
        let ins = [f32s.clone(), coords_tensor(&bad), w.host(DType::F32)];
        let err = try_run(dev, "vsdk.sparse_conv3d", &Attrs::new(), &ins)
            .unwrap_err()
            .to_string();
        assert!(err.contains(want), "{err}");
        // The coordinate kernels check them too (a provider may hash them its own way).
        let coords = [coords_tensor(&bad)];
        let m = Attrs::new().with("voxels", Int(n as i64));
        for (kernel, attrs) in [
            ("vsdk.sparse_downsample_coords", &m),
            ("vsdk.sparse_subdivide_coords", &Attrs::new()),
        ] {
            let err = try_run(dev, kernel, attrs, &coords)
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{kernel}: {err}");
        }
    }
    let idx = HostTensor::from_vec(&[2], vec![0i32, n as i32]).unwrap();
    let err = try_run(
        dev,
        "vsdk.gather_rows",
        &Attrs::new(),
        &[f32s.clone(), idx.clone()],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("index[1]"), "{err}");
    let segments = Attrs::new().with("segments", Int(n as i64));
    let err = try_run(
        dev,
        "vsdk.segment_mean",
        &segments,
        &[
            T::random(&mut r, &[2, cin], -1.0, 1.0).host(DType::F32),
            idx,
        ],
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("index[1]"), "{err}");
}
