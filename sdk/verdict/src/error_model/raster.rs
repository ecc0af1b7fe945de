//! Rasterization's error model (docs/error-model.md, "Discrete outputs"):
//! `vsdk.rasterize` writes a triangle id per pixel, which no tolerance can
//! judge, beside (u, v, z/w), which a vertex snapped to the sub-pixel grid
//! moves. The verdict is dEQP's: a pixel whose centre lies within the
//! sub-pixel budget of an edge is *ambiguous* and accepts any triangle whose
//! closed area comes that close (or the background, near a silhouette);
//! everywhere else the id must be the reference's. The continuous channels
//! are then judged against the triangle the implementation chose, within
//! what snapping its vertices can change; `vsdk.interpolate` is an ordinary
//! float operator on top.

use super::Precision;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use vips_data::{Error, HostTensor};
#[cfg(test)]
use vsdk_catalog::raster::Window;
use vsdk_catalog::raster::{self, Triangle};

/// A rasterizer's pixels, counted by the verdict (one batch entry after another).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PixelCounts {
    pub pixels: u64,
    /// Centres within the sub-pixel budget of an edge or a silhouette: more
    /// than one answer is correct.
    pub ambiguous: u64,
    /// The background where it is not a right answer (a hole).
    pub missing: u64,
    /// Anything but the background where only the background is right.
    pub unexpected: u64,
    /// Another triangle (or a value that is no id) where a triangle is right.
    pub wrong: u64,
}

impl PixelCounts {
    pub fn failed(&self) -> u64 {
        self.missing + self.unexpected + self.wrong
    }
}

impl std::fmt::Display for PixelCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pixels: {} ambiguous (near an edge: more than one answer is right), {} missing, {} unexpected, {} with a wrong triangle",
            self.pixels, self.ambiguous, self.missing, self.unexpected, self.wrong
        )
    }
}

/// A rasterizer's output resolved against what it may be: per element the
/// value to compare with and the bound, and the counts.
pub struct Resolved {
    pub expected: Vec<f64>,
    pub bound: Vec<f64>,
    pub pixels: PixelCounts,
}

/// The verdict's geometry at `bits` sub-pixel bits.
#[derive(Debug, Clone, Copy)]
struct Budget {
    bits: u32,
}

impl Budget {
    /// How far a vertex of `t` may move per axis: half a sub-pixel step
    /// (snapping rounds to nearest), plus the rounding of its float32 window
    /// coordinates (a vertex far outside the raster has coarse ones).
    fn snap(&self, t: &Triangle) -> f64 {
        let far =
            t.v.iter()
                .map(|v| v.x.abs().max(v.y.abs()))
                .fold(1.0, f64::max);
        2f64.powi(-(self.bits as i32) - 1) + 2f64.powi(-23) * far
    }

    /// How close to an edge of `t` a centre is ambiguous: a snapped edge
    /// moves by at most `√2·snap`.
    fn edge(&self, t: &Triangle) -> f64 {
        1.5 * self.snap(t)
    }
}

/// The float32 roundings of computing (u, v, z/w) from window coordinates:
/// a few ulps of each, plus the ulp of the largest coordinate the edge
/// functions subtract (folded into `Budget::snap`).
const ATTRIBUTE_ULPS: f64 = 8.0;

/// How far (u, v, z/w) of triangle `t` at `p` may move when each vertex
/// moves by up to `snap` per axis: Σ |∂f/∂vertex|·snap, the derivatives by
/// central differences (float64, a thousandth of a pixel).
fn attribute_bound(t: &Triangle, p: (f64, f64), budget: Budget, u: f64) -> [f64; 3] {
    const H: f64 = 1e-3;
    let base = t.attributes(p);
    let mut sum = [0.0f64; 3];
    for m in 0..3 {
        for axis in 0..2 {
            let moved = |d: f64| {
                let mut v = t.v;
                if axis == 0 {
                    v[m].x += d;
                } else {
                    v[m].y += d;
                }
                Triangle::new(v).attributes(p)
            };
            let (a, b) = (moved(H), moved(-H));
            for k in 0..3 {
                sum[k] += ((a[k] - b[k]) / (2.0 * H)).abs();
            }
        }
    }
    // 1.25: the first-order term's slack for the curvature over one snap.
    std::array::from_fn(|k| {
        let s = 1.25 * sum[k] * budget.snap(t) + ATTRIBUTE_ULPS * u * (1.0 + base[k].abs());
        if s.is_finite() {
            s
        } else {
            f64::INFINITY
        }
    })
}

/// The inputs of a rasterize call: positions per batch entry and triangles.
struct Scene {
    batch: usize,
    vertices: usize,
    pos: Vec<f64>,
    tris: Vec<[usize; 3]>,
}

impl Scene {
    fn of(inputs: &[&HostTensor]) -> Result<Scene, Error> {
        let (pos, tri) = (inputs[0], inputs[1]);
        let [batch, vertices, _] = pos.spec.shape[..] else {
            return Err(Error::Tensor(format!(
                "rasterize: pos {:?} is not [B, V, 4]",
                pos.spec.shape
            )));
        };
        let tris = raster::triangles(tri.to_f64_vec().into_iter().map(|i| i as i64), vertices)
            .map_err(|e| Error::Tensor(format!("rasterize: {e}")))?;
        Ok(Scene {
            batch,
            vertices,
            pos: pos.to_f64_vec(),
            tris,
        })
    }

    fn triangles(&self, b: usize, hw: (usize, usize)) -> Result<Vec<Triangle>, Error> {
        let pos = &self.pos[b * self.vertices * 4..(b + 1) * self.vertices * 4];
        raster::setup(pos, &self.tris, hw, b).map_err(|e| Error::Tensor(format!("rasterize: {e}")))
    }

    /// For each triangle and each of its edges (opposite vertex k): whether
    /// it is a silhouette, i.e. not shared with a triangle on its other side.
    fn silhouettes(&self, tris: &[Triangle]) -> Vec<[bool; 3]> {
        let mut edges: HashMap<(usize, usize), Vec<(usize, usize)>> = HashMap::new();
        for (f, t) in self.tris.iter().enumerate() {
            if tris[f].degenerate() {
                continue;
            }
            for k in 0..3 {
                let (a, b) = (t[(k + 1) % 3], t[(k + 2) % 3]);
                edges.entry((a.min(b), a.max(b))).or_default().push((f, k));
            }
        }
        let mut out = vec![[true; 3]; tris.len()];
        for shared in edges.values() {
            let [(f, k), (g, l)] = shared[..] else {
                continue;
            };
            // The opposite vertices on either side of the edge: which side
            // of `v[k+1] -> v[k+2]` vertex `k` lies on is the sign of the
            // triangle's area (a cyclic permutation of the same determinant).
            let (a, g_first) = (self.tris[f][(k + 1) % 3], self.tris[g][(l + 1) % 3]);
            // Measured along the same direction.
            let s = tris[f].area.signum() * if a == g_first { 1.0 } else { -1.0 };
            if s * tris[g].area.signum() < 0.0 {
                out[f][k] = false;
                out[g][l] = false;
            }
        }
        out
    }
}

/// What may be at one pixel.
struct Candidates {
    /// Triangles whose closed area comes within the budget, with their
    /// (u, v, z/w) there and its bound.
    possible: Vec<(usize, [f64; 3], [f64; 3])>,
    background: bool,
}

fn candidates(
    tris: &[Triangle],
    silhouette: &[[bool; 3]],
    near: &[u32],
    p: (f64, f64),
    budget: Budget,
    u: f64,
) -> Candidates {
    let mut possible = Vec::new();
    // The nearest depth among triangles that certainly cover the centre.
    let mut certain: Option<f64> = None;
    let mut silhouette_near = false;
    for &f in near {
        let (f, t) = (f as usize, &tris[f as usize]);
        let (dist, to_boundary) = t.distances(p);
        let edge = budget.edge(t);
        if dist > edge {
            continue;
        }
        if t.degenerate() {
            // It covers nothing here, but snapped it may be a sliver over
            // the centre, with any (u, v, z/w); and it may hide its
            // neighbours' gap.
            silhouette_near = true;
            possible.push((f, [0.0; 3], [f64::INFINITY; 3]));
            continue;
        }
        let attrs = t.attributes(p);
        let bound = attribute_bound(t, p, budget, u);
        let depth = attrs[2];
        if depth.is_nan() || depth.abs() > 1.0 + bound[2] {
            // Clipped away here; what it would have covered may be empty.
            silhouette_near = true;
            continue;
        }
        if dist == 0.0 && to_boundary > edge && depth.abs() < 1.0 - bound[2] {
            certain = Some(certain.map_or(depth + bound[2], |c: f64| c.min(depth + bound[2])));
        } else {
            // A centre near a silhouette, or near the depth range's ends,
            // may be left empty.
            let near_silhouette = (0..3).any(|k| {
                silhouette[f][k]
                    && raster::segment_distance(&t.v[(k + 1) % 3], &t.v[(k + 2) % 3], p) <= edge
            });
            silhouette_near |= near_silhouette || depth.abs() >= 1.0 - bound[2];
        }
        possible.push((f, attrs, bound));
    }
    let background = certain.is_none() && (possible.is_empty() || silhouette_near);
    if let Some(c) = certain {
        // An unbounded depth (a degenerate triangle's) compares as -inf: kept.
        possible.retain(|(_, a, b)| a[2] - b[2] <= c);
    }
    Candidates {
        possible,
        background,
    }
}

/// The verdict's expected values and bounds for `actual`, a rasterizer's
/// output `[B, H, W, 4]` from `inputs` (pos, tri), against `reference`
/// (the reference provider's output, float64) at `bits` sub-pixel bits.
pub fn resolve(
    inputs: &[&HostTensor],
    actual: &HostTensor,
    reference: &[f64],
    bits: u32,
    precision: Precision,
) -> Result<Resolved, Error> {
    let shape = &actual.spec.shape;
    let [batch, h, w, 4] = shape[..] else {
        return Err(Error::Tensor(format!(
            "rasterize: output {shape:?} is not [B, H, W, 4]"
        )));
    };
    let scene = Scene::of(inputs)?;
    if scene.batch != batch || reference.len() != actual.spec.numel() {
        return Err(Error::Tensor(format!(
            "rasterize: output {shape:?} does not match {} batch entries",
            scene.batch
        )));
    }
    let budget = Budget { bits };
    let got = actual.to_f64_vec();
    let mut expected = vec![0.0; got.len()];
    let mut bound = vec![0.0; got.len()];
    let mut pixels = PixelCounts::default();
    for b in 0..batch {
        let tris = scene.triangles(b, (h, w))?;
        let silhouette = scene.silhouettes(&tris);
        let bins = Bins::new(&tris, (h, w), budget)?;
        let at = b * h * w * 4;
        let (ex, bd) = (
            &mut expected[at..at + h * w * 4],
            &mut bound[at..at + h * w * 4],
        );
        let counts: Vec<PixelCounts> = ex
            .par_chunks_mut(w * 4)
            .zip(bd.par_chunks_mut(w * 4))
            .enumerate()
            .map(|(r, (ex, bd))| {
                let mut n = PixelCounts::default();
                for c in 0..w {
                    let e = at + (r * w + c) * 4;
                    let p = raster::centre(r, c);
                    let cand =
                        candidates(&tris, &silhouette, bins.near(r, c), p, budget, precision.u);
                    n.pixels += 1;
                    n.ambiguous +=
                        u64::from(cand.possible.len() + usize::from(cand.background) > 1);
                    let id = got[e + 3];
                    let r4: [f64; 4] = reference[e..e + 4].try_into().expect("4 channels");
                    let chosen = cand.possible.iter().find(|(f, _, _)| (f + 1) as f64 == id);
                    // The reference's own answer is always right (the
                    // candidates' margins are conservative, not exhaustive).
                    let own = || {
                        let t = tris.get((r4[3] as usize).wrapping_sub(1))?;
                        Some((t.attributes(p), attribute_bound(t, p, budget, precision.u)))
                    };
                    let (values, bounds) = match chosen {
                        // Unbounded (a degenerate triangle's): any value.
                        Some((_, _, bnd)) if bnd[0].is_infinite() => {
                            let a: [f64; 4] = got[e..e + 4].try_into().expect("4 channels");
                            (a, [f64::INFINITY, f64::INFINITY, f64::INFINITY, 0.0])
                        }
                        Some((_, a, bnd)) => {
                            ([a[0], a[1], a[2], id], [bnd[0], bnd[1], bnd[2], 0.0])
                        }
                        None if id == 0.0 && (cand.background || r4[3] == 0.0) => {
                            ([0.0; 4], [0.0; 4])
                        }
                        None if id == r4[3] => match own() {
                            Some((a, bnd)) => {
                                ([a[0], a[1], a[2], id], [bnd[0], bnd[1], bnd[2], 0.0])
                            }
                            None => (r4, [0.0; 4]),
                        },
                        None => {
                            if id == 0.0 {
                                n.missing += 1;
                            } else if cand.possible.is_empty() {
                                n.unexpected += 1;
                            } else {
                                n.wrong += 1;
                            }
                            let bnd = own().map_or([0.0; 3], |(_, b)| b);
                            (r4, [bnd[0], bnd[1], bnd[2], 0.0])
                        }
                    };
                    ex[c * 4..c * 4 + 4].copy_from_slice(&values);
                    bd[c * 4..c * 4 + 4].copy_from_slice(&bounds);
                }
                n
            })
            .collect();
        for n in counts {
            pixels.pixels += n.pixels;
            pixels.ambiguous += n.ambiguous;
            pixels.missing += n.missing;
            pixels.unexpected += n.unexpected;
            pixels.wrong += n.wrong;
        }
    }
    Ok(Resolved {
        expected,
        bound,
        pixels,
    })
}

/// The triangles near each 8 × 8 tile of pixels.
struct Bins {
    cols: usize,
    tiles: Vec<Vec<u32>>,
}

const TILE: usize = 8;

/// The most (triangle, tile) pairs the verdict lists (256 MiB of ids): a
/// scene of huge triangles is refused rather than listed in gigabytes.
const MAX_BINNED: usize = 1 << 26;

impl Bins {
    fn new(tris: &[Triangle], (h, w): (usize, usize), budget: Budget) -> Result<Bins, Error> {
        let cols = w.div_ceil(TILE);
        let boxes: Vec<_> = tris
            .iter()
            .map(|t| t.pixel_box(budget.edge(t), h, w))
            .collect();
        let pairs: usize = boxes
            .iter()
            .flatten()
            .map(|(r0, r1, c0, c1)| (r1 / TILE - r0 / TILE + 1) * (c1 / TILE - c0 / TILE + 1))
            .sum();
        if pairs > MAX_BINNED {
            return Err(Error::Tensor(format!(
                "rasterize: the triangles cover {pairs} tiles of {TILE} x {TILE} pixels in all, more than the verdict lists ({MAX_BINNED})"
            )));
        }
        let mut tiles = vec![Vec::new(); h.div_ceil(TILE) * cols];
        for (f, bx) in boxes.iter().enumerate() {
            if let Some((r0, r1, c0, c1)) = *bx {
                for tr in r0 / TILE..=r1 / TILE {
                    for tc in c0 / TILE..=c1 / TILE {
                        tiles[tr * cols + tc].push(f as u32);
                    }
                }
            }
        }
        Ok(Bins { cols, tiles })
    }

    fn near(&self, r: usize, c: usize) -> &[u32] {
        &self.tiles[r / TILE * self.cols + c / TILE]
    }
}

/// `vsdk.interpolate`'s local bound and σ: `u·a0 + v·a1 + (1 − u − v)·a2`
/// in float32 (or wider) in any association, rounded once to the output.
pub(super) fn interpolate_local(
    inputs: &[&HostTensor],
    value: &[f64],
    p: Precision,
) -> (Vec<f64>, Vec<f64>) {
    let mut bound = vec![0.0; value.len()];
    let mut sigma = vec![0.0; value.len()];
    for_each_pixel(inputs, |x| {
        let ([u, v, w], a, e) = (x.l, x.a, x.element);
        let m = (u * a[0]).abs() + (v * a[1]).abs() + (w * a[2]).abs();
        // 1 − u − v: two roundings of terms up to 1 + |u| + |v|.
        let m = m + (1.0 + u.abs() + v.abs()) * a[2].abs();
        let x = value[e];
        bound[e] = p.u * x.abs() + 4.0 * p.u_acc * m + p.tiny;
        sigma[e] = ((p.u * x).powi(2) + 4.0 * (p.u_acc * m).powi(2)).sqrt() / 3f64.sqrt();
    });
    (bound, sigma)
}

/// Errors of the inputs carried through `vsdk.interpolate` (variances):
/// `u²V_a0 + v²V_a1 + w²V_a2 + (a0 − a2)²V_u + (a1 − a2)²V_v`.
pub(super) fn interpolate_propagate(
    inputs: &[&HostTensor],
    var_attr: Option<&HostTensor>,
    var_rast: Option<&HostTensor>,
    numel: usize,
) -> Vec<f64> {
    let va = var_attr.map(|t| t.to_f64_vec());
    let vr = var_rast.map(|t| t.to_f64_vec());
    let mut out = vec![0.0; numel];
    for_each_pixel(inputs, |x| {
        let [u, v, w] = x.l;
        let mut s = 0.0;
        if let Some(va) = &va {
            s += u * u * va[x.at[0]] + v * v * va[x.at[1]] + w * w * va[x.at[2]];
        }
        if let Some(vr) = &vr {
            let a = x.a;
            s += (a[0] - a[2]).powi(2) * vr[x.pixel * 4]
                + (a[1] - a[2]).powi(2) * vr[x.pixel * 4 + 1];
        }
        out[x.element] = s;
    });
    out
}

/// One output element of an interpolation at a covered pixel.
struct Texel {
    element: usize,
    pixel: usize,
    /// `[u, v, 1 − u − v]`.
    l: [f64; 3],
    /// The three vertices' attribute values, and where they are in `attr`.
    a: [f64; 3],
    at: [usize; 3],
}

/// Calls `f` for every output element of an interpolation at a covered
/// pixel (the ids already checked by the reference's own run).
fn for_each_pixel(inputs: &[&HostTensor], mut f: impl FnMut(Texel)) {
    let (attr, rast, tri) = (
        inputs[0].to_f64_vec(),
        inputs[1].to_f64_vec(),
        inputs[2].to_f64_vec(),
    );
    let [batch, vertices, channels] = inputs[0].spec.shape[..] else {
        return;
    };
    let (per_batch, faces) = ((rast.len() / 4 / batch.max(1)).max(1), tri.len() / 3);
    for (pixel, r) in rast.chunks_exact(4).enumerate() {
        // Valid ids and vertices only (the reference's run refused others).
        let id = r[3];
        if !(id >= 1.0 && id <= faces as f64 && id.fract() == 0.0) {
            continue;
        }
        let (t, b) = (
            &tri[(id as usize - 1) * 3..id as usize * 3],
            pixel / per_batch,
        );
        if t.iter().any(|&v| !(v >= 0.0 && v < vertices as f64)) {
            continue;
        }
        for ch in 0..channels {
            let at: [usize; 3] =
                std::array::from_fn(|k| (b * vertices + t[k] as usize) * channels + ch);
            f(Texel {
                element: pixel * channels + ch,
                pixel,
                l: [r[0], r[1], 1.0 - r[0] - r[1]],
                a: at.map(|i| attr[i]),
                at,
            });
        }
    }
}

/// A window vertex, for tests.
#[cfg(test)]
fn win(x: f64, y: f64) -> Window {
    Window {
        x,
        y,
        depth: 0.0,
        inv_w: 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vsdk_catalog::DType;

    /// A collinear triangle covers nothing in float64, but snapped to 1/16
    /// pixel it is a sliver over the centre of (row 3, col 2), 0.006 pixel
    /// from it: a snapping rasterizer may draw it there, not 5 pixels away.
    #[test]
    fn a_snapped_sliver_is_a_right_answer_near_its_line_only() {
        let window = [(3.44, 2.84), (0.4, 5.0), (1.92, 3.92)];
        // Window x = (X + 1)·8/2 on an 8 × 8 raster: X = x/4 − 1.
        let pos: Vec<f64> = window
            .iter()
            .flat_map(|&(x, y)| [x / 4.0 - 1.0, y / 4.0 - 1.0, 0.0, 1.0])
            .collect();
        let pos = HostTensor::from_vec(&[1, 3, 4], pos).unwrap();
        let tri = HostTensor::from_vec(&[1, 3], vec![0.0, 1.0, 2.0])
            .unwrap()
            .cast(DType::I32);
        let mut out = vec![0.0; 8 * 8 * 4];
        for (r, c) in [(3, 2), (7, 7)] {
            out[(r * 8 + c) * 4 + 3] = 1.0;
        }
        let actual = HostTensor::from_vec(&[1, 8, 8, 4], out).unwrap();
        let reference = vec![0.0; 8 * 8 * 4];
        let p = Precision::of(DType::F32).unwrap();
        let r = resolve(&[&pos, &tri], &actual, &reference, 4, p).unwrap();
        assert_eq!(
            (r.pixels.unexpected, r.pixels.wrong, r.pixels.missing),
            (1, 0, 0)
        );
        assert!(r.pixels.ambiguous >= 1, "{:?}", r.pixels);
        // The sliver's texel accepts any (u, v, z/w); the far one expects 0.
        assert!(r.bound[(3 * 8 + 2) * 4].is_infinite());
        assert_eq!(r.expected[(7 * 8 + 7) * 4 + 3], 0.0);
    }

    #[test]
    fn the_bound_grows_as_the_triangle_shrinks() {
        let budget = Budget { bits: 4 };
        let big = Triangle::new([win(0.0, 0.0), win(64.0, 0.0), win(0.0, 64.0)]);
        let small = Triangle::new([win(0.0, 0.0), win(4.0, 0.0), win(0.0, 4.0)]);
        let u = 2f64.powi(-24);
        let (b, s) = (
            attribute_bound(&big, (1.5, 1.5), budget, u),
            attribute_bound(&small, (1.5, 1.5), budget, u),
        );
        assert!(s[0] > 10.0 * b[0] && s[0] < 0.1, "{b:?} {s:?}");
        // Each vertex moved by `snap` moves u by up to about snap / 4 here.
        assert!(s[0] > budget.snap(&small) / 4.0, "{s:?}");
    }
}
