//! What `vsdk.rasterize@1` computes (docs/operators.md, "Rasterization"), as
//! plain float64 geometry: window coordinates, the edge functions, the tie
//! rule, barycentrics. The CPU provider rasterizes with it and the verdict on
//! a rasterizer's output (which pixels are ambiguous) measures with it, so
//! the two can never disagree about a pixel's centre or an edge's owner.

/// Largest output side (nvdiffrast's limit is 16384 per axis too).
pub const MAX_RASTER_SIDE: usize = 1 << 14;

/// Largest triangle count: `id + 1` must be exact in float32.
pub const MAX_TRIANGLES: usize = 1 << 24;

/// A vertex in window coordinates: pixels with y up (row 0 at the bottom),
/// its depth `z/w`, and `1/w` for perspective-correct barycentrics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Window {
    pub x: f64,
    pub y: f64,
    pub depth: f64,
    pub inv_w: f64,
}

impl Window {
    /// Clip-space `(x, y, z, w)` to window coordinates of a `height × width`
    /// raster: NDC `x/w ∈ [−1, 1]` spans the columns, pixel `i`'s centre at
    /// `i + 0.5`. None unless `w > 0` and every value is finite.
    pub fn of(clip: [f64; 4], height: usize, width: usize) -> Option<Window> {
        let [x, y, z, w] = clip;
        if w <= 0.0 || ![x, y, z, w].iter().all(|v| v.is_finite()) {
            return None;
        }
        let v = Window {
            x: (x / w + 1.0) * 0.5 * width as f64,
            y: (y / w + 1.0) * 0.5 * height as f64,
            depth: z / w,
            inv_w: 1.0 / w,
        };
        [v.x, v.y, v.depth, v.inv_w]
            .iter()
            .all(|c| c.is_finite())
            .then_some(v)
    }
}

/// Each triangle of one batch entry (`pos` its `[V, 4]` clip-space
/// positions) in window coordinates. A vertex a triangle uses must have
/// `w > 0` and finite values (version 1 does not clip); the error names it.
pub fn setup(
    pos: &[f64],
    tris: &[[usize; 3]],
    (height, width): (usize, usize),
    batch: usize,
) -> Result<Vec<Triangle>, String> {
    tris.iter()
        .enumerate()
        .map(|(f, t)| {
            let window = |i: usize| {
                let clip = [pos[4 * i], pos[4 * i + 1], pos[4 * i + 2], pos[4 * i + 3]];
                Window::of(clip, height, width).ok_or_else(|| {
                    format!(
                        "pos[{batch}, {i}] = {clip:?} (a vertex of triangle {f}): w must be > 0 and every value finite (version 1 does not clip)"
                    )
                })
            };
            Ok(Triangle::new([window(t[0])?, window(t[1])?, window(t[2])?]))
        })
        .collect()
}

/// The centre of pixel `(row, col)` in window coordinates (row 0 at the bottom).
pub fn centre(row: usize, col: usize) -> (f64, f64) {
    (col as f64 + 0.5, row as f64 + 0.5)
}

/// `(b − a) × (p − a)`: positive when `p` lies left of `a → b` (y up).
/// Evaluated from the lexicographically smaller endpoint and negated for
/// the other direction, so the two triangles sharing an edge get exactly
/// opposite values: a centre on the edge is 0 for both, never a hole.
fn edge(a: &Window, b: &Window, p: (f64, f64)) -> f64 {
    if (a.x, a.y) <= (b.x, b.y) {
        raw_edge(a, b, p)
    } else {
        -raw_edge(b, a, p)
    }
}

fn raw_edge(a: &Window, b: &Window, (x, y): (f64, f64)) -> f64 {
    (b.x - a.x) * (y - a.y) - (b.y - a.y) * (x - a.x)
}

/// The tie rule: a pixel centre exactly on an edge belongs to the triangle
/// whose counter-clockwise traversal runs that edge downward, or along +x
/// when it is horizontal. Two triangles sharing an edge traverse it in
/// opposite directions, so exactly one of them owns its centres.
fn owns(from: &Window, to: &Window) -> bool {
    let (dx, dy) = (to.x - from.x, to.y - from.y);
    dy < 0.0 || (dy == 0.0 && dx > 0.0)
}

/// One triangle in window coordinates, in its own vertex order.
#[derive(Debug, Clone, Copy)]
pub struct Triangle {
    pub v: [Window; 3],
    /// Twice the signed area, positive counter-clockwise (y up).
    pub area: f64,
}

impl Triangle {
    pub fn new(v: [Window; 3]) -> Triangle {
        Triangle {
            area: edge(&v[0], &v[1], (v[2].x, v[2].y)),
            v,
        }
    }

    /// Zero (or not finite) area: it covers nothing.
    pub fn degenerate(&self) -> bool {
        self.area == 0.0 || !self.area.is_finite()
    }

    /// Screen-space barycentrics of `p` (extrapolated outside), in vertex order.
    pub fn lambdas(&self, p: (f64, f64)) -> [f64; 3] {
        let [a, b, c] = &self.v;
        [
            edge(b, c, p) / self.area,
            edge(c, a, p) / self.area,
            edge(a, b, p) / self.area,
        ]
    }

    /// The edge opposite vertex `k`, traversed counter-clockwise.
    fn ccw_edge(&self, k: usize) -> (&Window, &Window) {
        let (from, to) = (&self.v[(k + 1) % 3], &self.v[(k + 2) % 3]);
        if self.area > 0.0 {
            (from, to)
        } else {
            (to, from)
        }
    }

    /// Whether the triangle covers `p` under the tie rule.
    pub fn covers(&self, p: (f64, f64)) -> bool {
        if self.degenerate() {
            return false;
        }
        let l = self.lambdas(p);
        (0..3).all(|k| {
            l[k] > 0.0
                || (l[k] == 0.0 && {
                    let (from, to) = self.ccw_edge(k);
                    owns(from, to)
                })
        })
    }

    /// `(u, v, z/w)` at `p`: the perspective-correct barycentrics of vertices
    /// 0 and 1, and the depth, linear in screen space.
    pub fn attributes(&self, p: (f64, f64)) -> [f64; 3] {
        let l = self.lambdas(p);
        let q = [
            l[0] * self.v[0].inv_w,
            l[1] * self.v[1].inv_w,
            l[2] * self.v[2].inv_w,
        ];
        let s = q[0] + q[1] + q[2];
        let depth = l[0] * self.v[0].depth + l[1] * self.v[1].depth + l[2] * self.v[2].depth;
        [q[0] / s, q[1] / s, depth]
    }

    /// The distance from `p` to the closed triangle (0 inside) and to its
    /// boundary, in pixels.
    pub fn distances(&self, p: (f64, f64)) -> (f64, f64) {
        let to_boundary = (0..3)
            .map(|k| segment_distance(&self.v[(k + 1) % 3], &self.v[(k + 2) % 3], p))
            .fold(f64::INFINITY, f64::min);
        let inside = !self.degenerate() && self.lambdas(p).iter().all(|&l| l >= 0.0);
        (if inside { 0.0 } else { to_boundary }, to_boundary)
    }

    /// The pixel bounding box `(row0, row1, col0, col1)` (inclusive) of the
    /// centres within `margin` pixels of the triangle, clipped to the raster.
    pub fn pixel_box(
        &self,
        margin: f64,
        height: usize,
        width: usize,
    ) -> Option<(usize, usize, usize, usize)> {
        let lo = |f: fn(&Window) -> f64| self.v.iter().map(f).fold(f64::INFINITY, f64::min);
        let hi = |f: fn(&Window) -> f64| self.v.iter().map(f).fold(f64::NEG_INFINITY, f64::max);
        // Centres c + 0.5 within [lo − margin, hi + margin].
        let range = |lo: f64, hi: f64, n: usize| {
            let first = (lo - margin - 0.5).ceil().max(0.0);
            let last = (hi + margin - 0.5).floor().min(n as f64 - 1.0);
            (first <= last).then_some((first as usize, last as usize))
        };
        let (r0, r1) = range(lo(|v| v.y), hi(|v| v.y), height)?;
        let (c0, c1) = range(lo(|v| v.x), hi(|v| v.x), width)?;
        Some((r0, r1, c0, c1))
    }
}

/// Triangles `[F, 3]` (row-major vertex indices) as vertex rows, every
/// entry checked against `vertices`: the error names the first bad one.
pub fn triangles(
    indices: impl Iterator<Item = i64>,
    vertices: usize,
) -> Result<Vec<[usize; 3]>, String> {
    let mut out: Vec<[usize; 3]> = Vec::new();
    for (n, i) in indices.enumerate() {
        let v = usize::try_from(i)
            .ok()
            .filter(|&v| v < vertices)
            .ok_or_else(|| {
                format!(
                    "tri[{}, {}] = {i}: vertex indices lie in [0, {vertices})",
                    n / 3,
                    n % 3
                )
            })?;
        if n % 3 == 0 {
            out.push([v, 0, 0]);
        } else if let Some(t) = out.last_mut() {
            t[n % 3] = v;
        }
    }
    Ok(out)
}

/// Draws rows `rows` of a `height × width` raster into `out`, which the
/// caller zeroed: `(u, v, z/w, id + 1)` per covered pixel, row-major from
/// `rows.start`. `candidates` names the triangles that may reach these rows
/// (any order: ties compare ids).
pub fn draw(
    tris: &[Triangle],
    candidates: &[u32],
    (height, width): (usize, usize),
    rows: std::ops::Range<usize>,
    out: &mut [f64],
) {
    if rows.is_empty() {
        return;
    }
    let mut best: Vec<Option<(f64, usize)>> = vec![None; rows.len() * width];
    for &f in candidates {
        let (f, t) = (f as usize, &tris[f as usize]);
        if t.degenerate() {
            continue;
        }
        let Some((r0, r1, c0, c1)) = t.pixel_box(0.0, height, width) else {
            continue;
        };
        for r in r0.max(rows.start)..=r1.min(rows.end.saturating_sub(1)) {
            for c in c0..=c1 {
                let p = centre(r, c);
                if !t.covers(p) {
                    continue;
                }
                let [u, v, depth] = t.attributes(p);
                let at = (r - rows.start) * width + c;
                if in_depth_range(depth) && nearer(depth, f, best[at]) {
                    best[at] = Some((depth, f));
                    out[4 * at..4 * at + 4].copy_from_slice(&[u, v, depth, (f + 1) as f64]);
                }
            }
        }
    }
}

/// The distance from `p` to the segment `a b`, in pixels.
pub fn segment_distance(a: &Window, b: &Window, (x, y): (f64, f64)) -> f64 {
    let (dx, dy) = (b.x - a.x, b.y - a.y);
    let len2 = dx * dx + dy * dy;
    let t = if len2 > 0.0 {
        (((x - a.x) * dx + (y - a.y) * dy) / len2).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (x - a.x - t * dx).hypot(y - a.y - t * dy)
}

/// The nearer of two covering triangles: the smaller depth, and at equal
/// depth the earlier triangle (as OpenGL's `GL_LESS` drawing in order).
pub fn nearer(depth: f64, id: usize, than: Option<(f64, usize)>) -> bool {
    match than {
        None => true,
        Some((d, i)) => depth < d || (depth == d && id < i),
    }
}

/// Depth clipping: a covered centre counts only where `−1 ≤ z/w ≤ 1`.
pub fn in_depth_range(depth: f64) -> bool {
    (-1.0..=1.0).contains(&depth)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn win(x: f64, y: f64) -> Window {
        Window {
            x,
            y,
            depth: 0.0,
            inv_w: 1.0,
        }
    }

    #[test]
    fn a_shared_edge_belongs_to_exactly_one_triangle() {
        // A square split along its diagonal, both windings; centres on the
        // diagonal and on the shared vertical edge of a second split.
        let (a, b, c, d) = (win(0.5, 0.5), win(4.5, 0.5), win(4.5, 4.5), win(0.5, 4.5));
        for (t1, t2) in [
            (Triangle::new([a, b, c]), Triangle::new([a, c, d])),
            (Triangle::new([c, b, a]), Triangle::new([d, c, a])),
            (Triangle::new([a, b, d]), Triangle::new([b, c, d])),
        ] {
            for r in 0..5 {
                for col in 0..5 {
                    let p = centre(r, col);
                    // Strictly inside the square: once; on its outline the
                    // rule decides, but never twice.
                    let inside = p.0 > 0.5 && p.0 < 4.5 && p.1 > 0.5 && p.1 < 4.5;
                    let n = t1.covers(p) as u8 + t2.covers(p) as u8;
                    assert!(n <= 1 && (n == 1 || !inside), "{p:?}: covered {n} times");
                }
            }
        }
    }

    #[test]
    fn barycentrics_follow_vertex_order_and_perspective() {
        let t = Triangle::new([win(0.0, 0.0), win(8.0, 0.0), win(0.0, 8.0)]);
        let [u, v, _] = t.attributes((0.0, 0.0));
        assert_eq!((u, v), (1.0, 0.0));
        let [u, v, _] = t.attributes((8.0, 0.0));
        assert_eq!((u, v), (0.0, 1.0));
        let mut far = t;
        far.v[1].inv_w = 0.25; // w = 4 at vertex 1
        let [u, v, _] = far.attributes((4.0, 0.0));
        // Halfway on screen, a fifth of the way in 3-D: (0.5/1) / (0.5/1 + 0.5/4).
        assert!(
            (u - 0.8).abs() < 1e-15 && (v - 0.2).abs() < 1e-15,
            "{u} {v}"
        );
        assert!(Window::of([0.0, 0.0, 0.0, 0.0], 4, 4).is_none());
        let w = Window::of([-1.0, 1.0, 0.5, 2.0], 4, 8).unwrap();
        assert_eq!((w.x, w.y, w.depth), (2.0, 3.0, 0.25));
    }

    #[test]
    fn distances_and_boxes() {
        let t = Triangle::new([win(1.0, 1.0), win(5.0, 1.0), win(1.0, 5.0)]);
        assert_eq!(t.distances((2.0, 2.0)), (0.0, 1.0));
        assert_eq!(t.distances((3.0, 0.0)), (1.0, 1.0));
        assert_eq!(t.pixel_box(0.0, 8, 8), Some((1, 4, 1, 4)));
        assert_eq!(t.pixel_box(0.0, 3, 3), Some((1, 2, 1, 2)));
        assert!(Triangle::new([win(1.0, 1.0), win(2.0, 2.0), win(3.0, 3.0)]).degenerate());
    }
}
