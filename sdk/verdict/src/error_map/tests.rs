use super::*;
use crate::compare::NanPolicy;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn fresh() -> (ChaCha8Rng, u64) {
    let seed = rand::random::<u64>();
    (ChaCha8Rng::seed_from_u64(seed), seed)
}

fn uniform(rng: &mut ChaCha8Rng, n: usize) -> Vec<f64> {
    (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect()
}

fn panel<'a>(map: &'a ErrorMap, title_start: &str) -> &'a Panel {
    map.panels
        .iter()
        .find(|p| p.title.starts_with(title_start))
        .unwrap_or_else(|| panic!("no panel `{title_start}…`"))
}

/// A patch grid flipped upside down leaves an error map that is its own
/// mirror image, and the worst channel's actual values are the expected ones
/// upside down; the class token, left in place, has no error.
#[test]
fn a_flipped_patch_grid_shows_as_a_mirrored_map() {
    let (mut rng, seed) = fresh();
    let (g, c) = (16, 24);
    let reference = uniform(&mut rng, (1 + g * g) * c);
    let mut actual = reference.clone();
    for r in 0..g {
        for col in 0..g {
            let (to, from) = (1 + r * g + col, 1 + (g - 1 - r) * g + col);
            actual[to * c..(to + 1) * c].copy_from_slice(&reference[from * c..(from + 1) * c]);
        }
    }
    let bound = vec![1e-3; reference.len()];
    let map = ErrorMap::of(
        &actual,
        &reference,
        &bound,
        &[1, 1 + g * g, c],
        Placement::default(),
        NanPolicy::Fail,
    );
    assert_eq!(
        map.layout,
        Layout::Tokens {
            prefix: 1,
            grid_d: 1,
            grid_h: g,
            grid_w: g,
            channels: c
        }
    );
    let grid = panel(&map, "largest |e| per patch token");
    assert_eq!((grid.rows, grid.cols), (g, g), "seed {seed}");
    for r in 0..g {
        for col in 0..g {
            let (v, mirrored) = (grid.values[r * g + col], grid.values[(g - 1 - r) * g + col]);
            assert_eq!(v, mirrored, "seed {seed}: ({r}, {col})");
            assert!(
                v > 1.0,
                "seed {seed}: every row moved, ({r}, {col}) has |e| {v}"
            );
        }
    }
    assert_eq!(panel(&map, "largest |e| of the 1 token").values, [0.0]);
    let expected = panel(&map, "root mean square");
    let actual_panel = &map.panels[map.panels.len() - 1];
    assert_eq!(actual_panel.kind, PanelKind::Actual);
    for r in 0..g {
        assert_eq!(
            actual_panel.values[r * g..(r + 1) * g],
            expected.values[(g - 1 - r) * g..(g - r) * g],
            "seed {seed}: row {r}"
        );
    }
    let total: u64 = map.histogram.bins.iter().sum::<u64>()
        + map.histogram.zero
        + map.histogram.below
        + map.histogram.above;
    assert_eq!(total, reference.len() as u64, "seed {seed}");
    assert_eq!(
        map.histogram.zero as usize, c,
        "seed {seed}: the class token"
    );
}

/// A convolution's output with its rows reversed: read as a feature map,
/// the same mirrored picture.
#[test]
fn a_flipped_feature_map_shows_as_a_mirrored_map() {
    let (mut rng, seed) = fresh();
    let (c, h, w) = (96, 12, 12);
    let reference = uniform(&mut rng, c * h * w);
    let mut actual = reference.clone();
    for ch in 0..c {
        for r in 0..h {
            let (to, from) = ((ch * h + r) * w, (ch * h + h - 1 - r) * w);
            actual[to..to + w].copy_from_slice(&reference[from..from + w]);
        }
    }
    let map = ErrorMap::of(
        &actual,
        &reference,
        &vec![1e-3; c * h * w],
        &[1, c, h, w],
        Placement::default(),
        NanPolicy::Fail,
    );
    assert_eq!(
        map.layout,
        Layout::FeatureMap {
            channels: c,
            depth: 1,
            height: h,
            width: w
        }
    );
    let grid = panel(&map, "largest |e| per pixel");
    let (expected, actual_rms) = (
        panel(&map, "root mean square"),
        &map.panels[map.panels.len() - 1],
    );
    for r in 0..h {
        let mirrored = (h - 1 - r) * w..(h - r) * w;
        assert_eq!(
            grid.values[r * w..(r + 1) * w],
            grid.values[mirrored.clone()],
            "seed {seed}"
        );
        assert_eq!(
            actual_rms.values[r * w..(r + 1) * w],
            expected.values[mirrored],
            "seed {seed}"
        );
    }
    let every = panel(&map, "|e| of every pixel");
    // 144 pixels across, pooled two to a cell.
    assert_eq!((every.rows, every.cols, every.col_step), (c, h * w / 2, 2));
}

/// One head computed wrong lights up that head's row and nothing else.
#[test]
fn one_bad_head_lights_one_row() {
    let (mut rng, seed) = fresh();
    let (heads, tokens, dim) = (6, 1 + 64, 8);
    let bad = rng.gen_range(0..heads);
    let reference = uniform(&mut rng, heads * tokens * dim);
    let mut actual = reference.clone();
    for v in &mut actual[bad * tokens * dim..(bad + 1) * tokens * dim] {
        *v *= 1.01;
    }
    let bound = vec![1e-4; reference.len()];
    let map = ErrorMap::of(
        &actual,
        &reference,
        &bound,
        &[1, heads, tokens, dim],
        Placement::default(),
        NanPolicy::Fail,
    );
    let rows = panel(&map, "largest |e| per head and token");
    assert_eq!((rows.rows, rows.cols), (heads, tokens), "seed {seed}");
    for h in 0..heads {
        let row = &rows.values[h * tokens..(h + 1) * tokens];
        let hot = row.iter().filter(|&&v| v > 0.0).count();
        if h == bad {
            assert!(hot > tokens / 2, "seed {seed}: head {h}");
        } else {
            assert_eq!(hot, 0, "seed {seed}: head {h}");
        }
    }
    let side_by_side = panel(&map, "largest |e| per patch token");
    assert_eq!(
        (side_by_side.rows, side_by_side.cols),
        (8, heads * 8),
        "seed {seed}"
    );
}

/// A large image is pooled to at most MAX_SIDE cells a side, and one bad
/// pixel survives the pooling; the worst elements come first; non-finite
/// mismatches are counted apart.
#[test]
fn large_tensors_are_pooled_without_losing_a_spike() {
    let (mut rng, seed) = fresh();
    let (h, w) = (300 + rng.gen_range(0..50), 500 + rng.gen_range(0..50));
    let reference = uniform(&mut rng, 3 * h * w);
    let mut actual = reference.clone();
    let spike = (rng.gen_range(0..h), rng.gen_range(0..w));
    let at = (2 * h + spike.0) * w + spike.1;
    actual[at] += 0.5;
    let last = actual.len() - 1;
    actual[last] = f64::NAN;
    let bound = vec![1e-2; reference.len()];
    let map = ErrorMap::of(
        &actual,
        &reference,
        &bound,
        &[1, 3, h, w],
        Placement::default(),
        NanPolicy::Fail,
    );
    let pixels = panel(&map, "largest |e| per pixel");
    assert!(
        pixels.rows <= MAX_SIDE && pixels.cols <= MAX_SIDE,
        "seed {seed}"
    );
    let cell = (spike.0 / pixels.row_step) * pixels.cols + spike.1 / pixels.col_step;
    assert!((pixels.values[cell] - 50.0).abs() < 1e-3, "seed {seed}");
    let image = panel(&map, "the image, expected");
    assert_eq!(image.channels, 3);
    assert_eq!(image.values.len(), image.rows * image.cols * 3);
    assert_eq!(
        map.worst[0].element.index,
        [0, 2, h - 1, w - 1],
        "seed {seed}: NaN first"
    );
    assert_eq!(map.worst[0].e, f64::INFINITY);
    assert_eq!(
        map.worst[1].element.index,
        [0, 2, spike.0, spike.1],
        "seed {seed}"
    );
    assert!((map.worst[1].e - 50.0).abs() < 1e-9, "seed {seed}");
    assert_eq!(map.histogram.non_finite, 1);
    assert_eq!(map.histogram.zero as usize, reference.len() - 2);
    assert!(map.worst.len() == WORST);
}

/// NaN follows the stage's policy as the verdict does, and a map of
/// non-finite values reads back from JSON as it was written.
#[test]
fn non_finite_values_follow_the_nan_policy_and_read_back() {
    let (mut rng, seed) = fresh();
    let (tokens, c) = (1 + 16, 4);
    let mut reference = uniform(&mut rng, tokens * c);
    let mut actual = reference.clone();
    let both_nan = rng.gen_range(2..tokens * c);
    (reference[both_nan], actual[both_nan]) = (f64::NAN, f64::NAN);
    actual[0] = f64::INFINITY;
    (reference[1], actual[1]) = (f64::MAX, f64::MAX);
    let bound = vec![1e-3; tokens * c];
    let shape = [1, tokens, c];
    for (nan, non_finite) in [(NanPolicy::Fail, 2), (NanPolicy::Allow, 1)] {
        let map = ErrorMap::of(
            &actual,
            &reference,
            &bound,
            &shape,
            Placement::default(),
            nan,
        );
        assert_eq!(map.histogram.non_finite, non_finite, "seed {seed}: {nan:?}");
        let text = serde_json::to_string(&map).unwrap();
        let back: ErrorMap = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text, "seed {seed}");
        assert_eq!(back.validate(), Ok(()));
    }
}

/// TRELLIS's latent: 16³ tokens flattened from [D, H, W], declared by the
/// document's grid. One wrong token lands in its depth slice, at its row and
/// column; the same map without the grid would draw a 64×64 square.
#[test]
fn a_wrong_token_shows_in_its_depth_slice() {
    let (mut rng, seed) = fresh();
    let (d, h, w, c) = (6, 5, 7, 12);
    let reference = uniform(&mut rng, d * h * w * c);
    let mut actual = reference.clone();
    let (z, y, x) = (
        rng.gen_range(0..d),
        rng.gen_range(0..h),
        rng.gen_range(0..w),
    );
    let token = (z * h + y) * w + x;
    actual[token * c + rng.gen_range(0..c)] += 1.0;
    let bound = vec![1e-3; reference.len()];
    let grid = TokenGrid {
        prefix: 0,
        grid: [d, h, w],
    };
    let shape = [1, d * h * w, c];
    let map = ErrorMap::of(
        &actual,
        &reference,
        &bound,
        &shape,
        Placement {
            grid: Some(&grid),
            voxels: None,
        },
        NanPolicy::Fail,
    );
    assert_eq!(
        map.layout,
        Layout::Tokens {
            prefix: 0,
            grid_d: d,
            grid_h: h,
            grid_w: w,
            channels: c
        }
    );
    let slices = panel(&map, "largest |e| per patch token");
    assert!(
        slices.title.contains("6 depth slices side by side"),
        "{}",
        slices.title
    );
    assert_eq!((slices.rows, slices.cols), (h, d * w), "seed {seed}");
    for r in 0..h {
        for col in 0..d * w {
            let v = slices.values[r * d * w + col];
            let hit = (r, col) == (y, z * w + x);
            assert_eq!(v > 1.0, hit, "seed {seed}: ({r}, {col}) has |e| {v}");
        }
    }
    // The expected values' picture has the same slices.
    let rms = panel(&map, "root mean square");
    assert_eq!((rms.rows, rms.cols), (h, d * w));
    let flat = ErrorMap::of(
        &actual,
        &reference,
        &bound,
        &shape,
        Placement::default(),
        NanPolicy::Fail,
    );
    assert!(
        matches!(flat.layout, Layout::Matrix { .. }),
        "{:?}",
        flat.layout
    );
}

/// Sparse voxels' rows are drawn at their coordinates: a port that drops
/// the neighbours on the grid's x = 0 face leaves its error on that face,
/// seen along y and z, and nowhere else; without the coordinates (or with
/// another row count) the same tensor is a matrix.
#[test]
fn sparse_voxels_are_drawn_at_their_coordinates() {
    let mut r = ChaCha8Rng::seed_from_u64(rand::random());
    let (mut voxels, c) = (Vec::new(), 5);
    for x in 0..9 {
        for y in 0..7 {
            for z in 0..6 {
                if r.gen_bool(0.4) || x == 0 {
                    voxels.push([0, x, y, z]);
                }
            }
        }
    }
    let n = voxels.len();
    let reference: Vec<f64> = (0..n * c).map(|_| r.gen_range(-1.0..1.0)).collect();
    let mut actual = reference.clone();
    for (i, v) in voxels.iter().enumerate() {
        if v[1] == 0 {
            actual[i * c + r.gen_range(0..c)] += 1.0;
        }
    }
    let bound = vec![1e-3; n * c];
    let place = Placement {
        grid: None,
        voxels: Some(&voxels),
    };
    let map = ErrorMap::of(&actual, &reference, &bound, &[n, c], place, NanPolicy::Fail);
    assert_eq!(
        map.layout,
        Layout::Voxels {
            voxels: n,
            channels: c,
            extent: [9, 7, 6]
        }
    );
    assert!(map.layout.describe().contains("9×7×6 box"));
    let along_z = panel(&map, "seen along z");
    assert_eq!(
        (along_z.row_axis.as_str(), along_z.col_axis.as_str()),
        ("x", "y")
    );
    assert_eq!((along_z.rows, along_z.cols), (9, 7));
    for (cell, &v) in along_z.values.iter().enumerate() {
        assert_eq!(v > 1.0, cell / 7 == 0, "cell {cell}: |e| {v}");
    }
    let along_x = panel(&map, "seen along x");
    assert!(
        along_x.values.iter().all(|&v| v > 1.0),
        "the face covers every (y, z)"
    );
    let elsewhere = Placement {
        grid: None,
        voxels: Some(&voxels[1..]),
    };
    let flat = ErrorMap::of(
        &actual,
        &reference,
        &bound,
        &[n, c],
        elsewhere,
        NanPolicy::Fail,
    );
    assert_eq!(flat.layout, Layout::Matrix { rows: n, cols: c });
}
