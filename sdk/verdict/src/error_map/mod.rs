//! Where in a tensor the error lives (docs/report.md): an output's
//! normalised errors `|e| = |actual − reference| / bound` folded onto the
//! tensor's natural layout (tokens on their patch grid with the class token
//! apart, channels, heads, image pixels), a histogram and the worst elements.
//! A flipped axis, an off-by-one crop, one bad head or a wrong channel order
//! each leave a different picture. Every view is pooled to at most
//! [`MAX_SIDE`] cells a side, so a map's size does not grow with the tensor.

mod layout;

pub use layout::{Layout, Placement, TokenGrid};

use crate::compare::NanPolicy;
use crate::element::{element_error, WorstElement};
use serde::{Deserialize, Serialize};

/// Outputs whose largest `|e|` reaches this get a map (failing ones always).
pub const NEAR_FAILING: f64 = 0.5;
/// Cells a side of any view, at most.
pub const MAX_SIDE: usize = 128;
/// The worst elements kept.
const WORST: usize = 16;
/// Axes of a mapped tensor, at most.
const MAX_RANK: usize = 16;
/// `|e|` is stored up to this (and a non-finite `|e|` as this): JSON has no infinity.
pub const E_CAP: f32 = 1.0e9;
/// Histogram bins: `|e|` from 10^HIST_LO to 10^HIST_HI, HIST_PER_DECADE a decade.
pub const HIST_LO: i32 = -8;
pub const HIST_HI: i32 = 4;
pub const HIST_PER_DECADE: i32 = 4;

/// What a panel's cells hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PanelKind {
    /// The largest `|e|` of the elements a cell covers.
    Error,
    /// The reference's values (the mean over a cell).
    Expected,
    /// The provider's values, same cells as the `Expected` panel before it.
    Actual,
}

/// One 2-D view of a tensor: `rows × cols` cells, row-major; with an
/// image's colour channels, `rows × cols × channels`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    pub title: String,
    pub kind: PanelKind,
    /// What the rows and columns are ("patch row", "channel", ...).
    pub row_axis: String,
    pub col_axis: String,
    pub rows: usize,
    pub cols: usize,
    /// 1, or an image's colour channels (interleaved per cell).
    pub channels: usize,
    /// Tensor rows (columns) per cell: more than 1 where the view was pooled.
    pub row_step: usize,
    pub col_step: usize,
    pub values: Vec<f32>,
}

/// Counts of `|e|` on a log scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    /// Exactly 0.
    pub zero: u64,
    /// Above 0 and below 10^HIST_LO.
    pub below: u64,
    /// `(HIST_HI − HIST_LO) · HIST_PER_DECADE` bins from 10^HIST_LO up.
    pub bins: Vec<u64>,
    /// At or above 10^HIST_HI, finite.
    pub above: u64,
    /// NaN or ±Inf where the reference has another value (NaN against NaN
    /// counts unless the stage allows NaN, as in the verdict).
    pub non_finite: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorMap {
    pub shape: Vec<usize>,
    pub layout: Layout,
    pub panels: Vec<Panel>,
    pub histogram: Histogram,
    /// The largest `|e|` first.
    pub worst: Vec<Worst>,
}

/// One of the worst elements, with its `|e|` (as the verdict computed it:
/// a NaN matches a NaN only where the stage allows NaN).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Worst {
    #[serde(flatten)]
    pub element: WorstElement,
    #[serde(with = "vips_data::json_float")]
    pub e: f64,
}

/// How a cell combines the elements it covers.
#[derive(Clone, Copy)]
enum Pool {
    Max,
    Mean,
}

/// A `rows × cols` view of `value(r, c, channel)` pooled to at most
/// [`MAX_SIDE`] cells a side.
#[allow(clippy::too_many_arguments)]
fn pooled(
    title: String,
    kind: PanelKind,
    (row_axis, col_axis): (&str, &str),
    (rows, cols, channels): (usize, usize, usize),
    pool: Pool,
    value: impl Fn(usize, usize, usize) -> f32,
) -> Panel {
    let row_step = rows.div_ceil(MAX_SIDE).max(1);
    let col_step = cols.div_ceil(MAX_SIDE).max(1);
    let (out_rows, out_cols) = (rows.div_ceil(row_step), cols.div_ceil(col_step));
    let mut values = Vec::with_capacity(out_rows * out_cols * channels);
    for pr in 0..out_rows {
        for pc in 0..out_cols {
            for ch in 0..channels {
                let (mut acc, mut n) = (0.0f64, 0u32);
                for r in pr * row_step..((pr + 1) * row_step).min(rows) {
                    for c in pc * col_step..((pc + 1) * col_step).min(cols) {
                        // Cells stay finite (JSON has no NaN): errors are
                        // capped, values averaged over their finite ones.
                        let v = f64::from(value(r, c, ch));
                        if v.is_finite() {
                            acc = match pool {
                                Pool::Max => acc.max(v),
                                Pool::Mean => acc + v,
                            };
                            n += 1;
                        }
                    }
                }
                let cell = match pool {
                    Pool::Max => acc,
                    Pool::Mean => acc / f64::from(n.max(1)),
                };
                values.push(cell.clamp(-f64::from(f32::MAX), f64::from(f32::MAX)) as f32);
            }
        }
    }
    Panel {
        title,
        kind,
        row_axis: row_axis.into(),
        col_axis: col_axis.into(),
        rows: out_rows,
        cols: out_cols,
        channels,
        row_step,
        col_step,
        values,
    }
}

/// The largest value of each row of a `rows × cols` row-major array.
fn row_max(e: &[f32], cols: usize) -> Vec<f32> {
    e.chunks(cols.max(1))
        .map(|r| r.iter().copied().fold(0.0, f32::max))
        .collect()
}

fn histogram(e: &[f32], nonfinite: u64) -> Histogram {
    let n_bins = ((HIST_HI - HIST_LO) * HIST_PER_DECADE) as usize;
    let mut h = Histogram {
        zero: 0,
        below: 0,
        bins: vec![0; n_bins],
        above: 0,
        non_finite: nonfinite,
    };
    let (lo, hi) = (10f64.powi(HIST_LO), 10f64.powi(HIST_HI));
    for &v in e {
        let v = f64::from(v);
        if v == 0.0 {
            h.zero += 1;
        } else if v < lo {
            h.below += 1;
        } else if v >= f64::from(E_CAP) {
            // Counted as non-finite (capped) or far above.
        } else if v >= hi {
            h.above += 1;
        } else {
            let bin = ((v.log10() - f64::from(HIST_LO)) * f64::from(HIST_PER_DECADE)) as usize;
            h.bins[bin.min(n_bins - 1)] += 1;
        }
    }
    h.above += (e.iter().filter(|&&v| v >= E_CAP).count() as u64).saturating_sub(nonfinite);
    h
}

impl ErrorMap {
    /// Checks a map read from a file (a results file is untrusted): every
    /// panel within [`MAX_SIDE`] a side, 1 to 4 channels, as many values as
    /// cells; the histogram's bins as [`Histogram`] defines them.
    pub fn validate(&self) -> Result<(), String> {
        for (i, p) in self.panels.iter().enumerate() {
            let channels = if p.kind == PanelKind::Error {
                1..=1
            } else {
                1..=4
            };
            if p.rows > MAX_SIDE || p.cols > MAX_SIDE || !channels.contains(&p.channels) {
                return Err(format!(
                    "panel {i}: {}×{} cells of {} channels (at most {MAX_SIDE}×{MAX_SIDE}, 1 to 4 channels, errors 1)",
                    p.rows, p.cols, p.channels
                ));
            }
            let cells = p.rows * p.cols * p.channels;
            if p.values.iter().any(|v| !v.is_finite()) {
                return Err(format!("panel {i}: a value is not finite"));
            }
            let before = i.checked_sub(1).map(|j| &self.panels[j]);
            if p.kind == PanelKind::Actual
                && !before.is_some_and(|e| {
                    e.kind == PanelKind::Expected
                        && (e.rows, e.cols, e.channels) == (p.rows, p.cols, p.channels)
                })
            {
                return Err(format!(
                    "panel {i}: actual values not after expected ones of the same size"
                ));
            }
            if p.values.len() != cells {
                return Err(format!(
                    "panel {i}: {} values for {}×{}×{} cells",
                    p.values.len(),
                    p.rows,
                    p.cols,
                    p.channels
                ));
            }
        }
        if self.worst.len() > WORST || self.shape.len() > MAX_RANK {
            return Err(format!(
                "{} worst elements of a rank-{} tensor (at most {WORST}, rank {MAX_RANK})",
                self.worst.len(),
                self.shape.len()
            ));
        }
        if let Some(w) = self
            .worst
            .iter()
            .find(|w| w.element.index.len() != self.shape.len())
        {
            return Err(format!(
                "a worst element's index {:?} does not fit shape {:?}",
                w.element.index, self.shape
            ));
        }
        let bins = ((HIST_HI - HIST_LO) * HIST_PER_DECADE) as usize;
        if self.histogram.bins.len() != bins {
            return Err(format!(
                "the histogram has {} bins, not {bins}",
                self.histogram.bins.len()
            ));
        }
        Ok(())
    }

    /// The map of `actual` against `reference` within `bound` (all three
    /// row-major over `shape`), NaN judged by `nan` as the verdict was;
    /// tokens drawn on the component's grid where it declares one, sparse
    /// voxels' rows at their coordinates.
    pub fn of(
        actual: &[f64],
        reference: &[f64],
        bound: &[f64],
        shape: &[usize],
        place: Placement,
        nan: NanPolicy,
    ) -> ErrorMap {
        let full: Vec<f64> = actual
            .iter()
            .zip(reference)
            .zip(bound)
            .map(|((&a, &r), &b)| element_error(a, r, b, nan).abs())
            .collect();
        let e: Vec<f32> = full
            .iter()
            .map(|&v| v.min(f64::from(E_CAP)) as f32)
            .collect();
        let nonfinite = actual
            .iter()
            .zip(reference)
            .zip(&full)
            .filter(|((a, r), &e)| !(a.is_finite() && r.is_finite()) && e != 0.0)
            .count() as u64;
        let layout = Layout::placed(shape, place);
        let panels = match (layout, place.voxels) {
            (
                Layout::Voxels {
                    channels, extent, ..
                },
                Some(voxels),
            ) => voxel_panels(voxels, channels, extent, &e),
            _ => panels(layout, &e, actual, reference),
        };
        // By the uncapped |e|, so the first is the verdict's worst.
        let mut order: Vec<usize> = (0..full.len()).collect();
        let k = WORST.min(full.len());
        if k > 0 && k < full.len() {
            order.select_nth_unstable_by(k - 1, |&i, &j| full[j].total_cmp(&full[i]));
        }
        order.truncate(k);
        order.sort_by(|&i, &j| full[j].total_cmp(&full[i]).then(i.cmp(&j)));
        let worst = order
            .into_iter()
            .map(|i| Worst {
                element: WorstElement {
                    index: crate::compare::unravel(i, shape),
                    actual: actual[i],
                    reference: reference[i],
                    bound: bound[i],
                },
                e: full[i],
            })
            .collect();
        let map = ErrorMap {
            shape: shape.to_vec(),
            layout,
            histogram: histogram(&e, nonfinite),
            panels,
            worst,
        };
        debug_assert_eq!(map.validate(), Ok(()));
        map
    }
}

/// The views of each layout (docs/report.md, "Layouts"); none for a tensor
/// without elements.
fn panels(layout: Layout, e: &[f32], actual: &[f64], reference: &[f64]) -> Vec<Panel> {
    if e.is_empty() {
        return Vec::new();
    }
    let (err, exp, act) = (PanelKind::Error, PanelKind::Expected, PanelKind::Actual);
    match layout {
        Layout::Tokens {
            prefix,
            grid_d,
            grid_h,
            grid_w,
            channels,
        } => grid_panels(
            Grid {
                prefix,
                depth: grid_d,
                height: grid_h,
                width: grid_w,
                channels,
                channels_first: false,
            },
            e,
            actual,
            reference,
        ),
        Layout::FeatureMap {
            channels,
            depth,
            height,
            width,
        } => grid_panels(
            Grid {
                prefix: 0,
                depth,
                height,
                width,
                channels,
                channels_first: true,
            },
            e,
            actual,
            reference,
        ),
        Layout::Heads {
            heads,
            prefix,
            grid_d,
            grid_h,
            grid_w,
            dim,
        } => {
            let tokens = prefix + grid_d * grid_h * grid_w;
            let per_token = row_max(e, dim);
            // The heads side by side, each on its patch grid (a 3-D grid's
            // depth slices side by side within each head).
            let width = grid_d * grid_w;
            let slices = if grid_d > 1 {
                format!(", {grid_d} depth slices each")
            } else {
                String::new()
            };
            let mut out = vec![pooled(
                format!("largest |e| per patch token (over {dim}), the {heads} heads side by side{slices}"),
                err,
                ("patch row", "head × patch column"),
                (grid_h, heads * width, 1),
                Pool::Max,
                |r, c, _| {
                    let at = c % width;
                    per_token[(c / width) * tokens
                        + prefix
                        + (at / grid_w) * grid_h * grid_w
                        + r * grid_w
                        + at % grid_w]
                },
            )];
            out.push(pooled(
                format!("largest |e| per head and token (the first {prefix} before the grid)"),
                err,
                ("head", "token"),
                (heads, tokens, 1),
                Pool::Max,
                |r, c, _| per_token[r * tokens + c],
            ));
            out
        }
        Layout::Image {
            channels,
            height,
            width,
            channels_last,
        } => {
            let at = |r: usize, c: usize, ch: usize| {
                if channels_last {
                    (r * width + c) * channels + ch
                } else {
                    (ch * height + r) * width + c
                }
            };
            let mut out = vec![pooled(
                format!("largest |e| per pixel (over {channels} channels)"),
                err,
                ("row", "column"),
                (height, width, 1),
                Pool::Max,
                |r, c, _| (0..channels).map(|ch| e[at(r, c, ch)]).fold(0.0, f32::max),
            )];
            for (kind, values, what) in [(exp, reference, "expected"), (act, actual, "actual")] {
                out.push(pooled(
                    format!("the image, {what}"),
                    kind,
                    ("row", "column"),
                    (height, width, channels),
                    Pool::Mean,
                    |r, c, ch| values[at(r, c, ch)] as f32,
                ));
            }
            out
        }
        // Drawn from the coordinates (`voxel_panels`); without them, a matrix.
        Layout::Voxels {
            voxels: rows,
            channels: cols,
            ..
        }
        | Layout::Matrix { rows, cols } => vec![pooled(
            "|e| of every element (last axis across)".into(),
            err,
            ("row", "column"),
            (rows, cols, 1),
            Pool::Max,
            |r, c, _| e[r * cols + c],
        )],
    }
}

impl ErrorMap {
    /// The map of `actual`, tensor `name` of `stage` whose inputs and
    /// outputs (by name) are among `values`: on the document's token grid, a
    /// sparse tensor's rows at the stage's coordinates (never its own).
    #[allow(clippy::too_many_arguments)]
    pub fn of_stage_tensor(
        name: &str,
        actual: &vips_data::HostTensor,
        expected: &[f64],
        bound: &[f64],
        stage: &vips_data::document::Stage,
        values: &std::collections::HashMap<String, vips_data::HostTensor>,
        nan: NanPolicy,
    ) -> ErrorMap {
        let shape = &actual.spec.shape;
        let voxels = voxels_among(
            shape,
            stage
                .inputs
                .iter()
                .chain(&stage.outputs)
                .filter(|n| *n != name)
                .filter_map(|n| values.get(n)),
        );
        let place = Placement {
            grid: stage.token_grid.as_ref(),
            voxels: voxels.as_deref(),
        };
        ErrorMap::of(&actual.f64_values(), expected, bound, shape, place, nan)
    }
}

/// The coordinates of a sparse tensor of `shape` (`[N, C]`): the first
/// int32 `[N, 4]` tensor among `tensors` (a stage's inputs, then outputs).
fn voxels_among<'a>(
    shape: &[usize],
    tensors: impl IntoIterator<Item = &'a vips_data::HostTensor>,
) -> Option<Vec<[i32; 4]>> {
    let &[n, _] = shape else { return None };
    tensors
        .into_iter()
        .find(|t| t.spec.dtype == vsdk_catalog::DType::I32 && t.spec.shape == [n, 4])
        .map(|t| {
            t.to_f64_vec()
                .chunks_exact(4)
                .map(|c| [c[0] as i32, c[1] as i32, c[2] as i32, c[3] as i32])
                .collect()
        })
}

/// Cells a side of a voxel projection before pooling: coordinates beyond
/// are scaled down to fit.
const MAX_VOXEL_SIDE: usize = 256;

/// Sparse voxels seen along each axis: the largest `|e|` of the voxels
/// (over their channels, every batch entry) behind each cell of the (x, y),
/// (x, z) and (y, z) planes, 0 where no voxel is. Where on the shape the
/// error lies: a face, a corner, one coarse voxel's children.
/// `extent` is the layout's: one past the largest x, y and z.
fn voxel_panels(voxels: &[[i32; 4]], channels: usize, extent: [usize; 3], e: &[f32]) -> Vec<Panel> {
    if e.is_empty() {
        return Vec::new();
    }
    let per_voxel = row_max(e, channels.max(1));
    let step: Vec<usize> = extent
        .iter()
        .map(|&n| n.div_ceil(MAX_VOXEL_SIDE).max(1))
        .collect();
    let names = ["x", "y", "z"];
    [(0, 1, 2), (0, 2, 1), (1, 2, 0)]
        .into_iter()
        .map(|(row, col, along)| {
            let (rows, cols) = (
                extent[row].div_ceil(step[row]),
                extent[col].div_ceil(step[col]),
            );
            let mut plane = vec![0.0f32; rows * cols];
            for (v, &err) in voxels.iter().zip(&per_voxel) {
                let at = |a: usize| v[a + 1].max(0) as usize / step[a];
                let cell = &mut plane[at(row) * cols + at(col)];
                *cell = cell.max(err);
            }
            pooled(
                format!(
                    "seen along {}: the largest |e| (over {channels} channels) of the voxels behind each ({}, {}) cell",
                    names[along], names[row], names[col]
                ),
                PanelKind::Error,
                (names[row], names[col]),
                (rows, cols, 1),
                Pool::Max,
                |r, c, _| plane[r * cols + c],
            )
        })
        .collect()
}

/// Positions on a grid (patch tokens after `prefix` others, or a feature
/// map's pixels), each with `channels` values.
struct Grid {
    prefix: usize,
    /// 1 for a 2-D grid; a 3-D grid is drawn as its depth slices side by side.
    depth: usize,
    height: usize,
    width: usize,
    channels: usize,
    /// `[channels, positions]` rather than `[positions, channels]`.
    channels_first: bool,
}

impl Grid {
    fn positions(&self) -> usize {
        self.prefix + self.depth * self.height * self.width
    }

    /// The drawing's size: `height` rows, the slices' columns side by side.
    fn drawn(&self) -> (usize, usize, usize) {
        (self.height, self.depth * self.width, 1)
    }

    /// The position drawn at row `r`, column `c`.
    fn position(&self, r: usize, c: usize) -> usize {
        let (slice, x) = (c / self.width, c % self.width);
        self.prefix + (slice * self.height + r) * self.width + x
    }

    fn at(&self, position: usize, channel: usize) -> usize {
        if self.channels_first {
            channel * self.positions() + position
        } else {
            position * self.channels + channel
        }
    }

    /// The largest of `v` at each position (over channels) and at each
    /// channel (over positions).
    fn maxima(&self, v: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let mut per_position = vec![0.0f32; self.positions()];
        let mut per_channel = vec![0.0f32; self.channels];
        for (p, pm) in per_position.iter_mut().enumerate() {
            for (c, cm) in per_channel.iter_mut().enumerate() {
                let x = v[self.at(p, c)];
                *pm = pm.max(x);
                *cm = cm.max(x);
            }
        }
        (per_position, per_channel)
    }

    /// The root mean square over channels at each position.
    fn rms(&self, v: &[f64]) -> Vec<f32> {
        (0..self.positions())
            .map(|p| {
                let s: f64 = (0..self.channels).map(|c| v[self.at(p, c)].powi(2)).sum();
                (s / self.channels.max(1) as f64).sqrt() as f32
            })
            .collect()
    }
}

/// Tokens and feature maps: the error per position on the grid (the prefix
/// tokens apart), per channel, every element; and the values' size per
/// position, expected beside actual (a moved or flipped pattern shows as the
/// same picture in another place).
fn grid_panels(g: Grid, e: &[f32], actual: &[f64], reference: &[f64]) -> Vec<Panel> {
    let (err, exp, act) = (PanelKind::Error, PanelKind::Expected, PanelKind::Actual);
    let (prefix, channels) = (g.prefix, g.channels);
    let (per_position, per_channel) = g.maxima(e);
    let slices = if g.depth > 1 {
        format!(", {} depth slices side by side", g.depth)
    } else {
        String::new()
    };
    let (row, col) = if g.channels_first {
        ("row", "column")
    } else {
        ("patch row", "patch column")
    };
    let what = if g.channels_first {
        "pixel"
    } else {
        "patch token"
    };
    let mut out = vec![pooled(
        format!("largest |e| per {what} (over {channels} channels){slices}"),
        err,
        (row, col),
        g.drawn(),
        Pool::Max,
        |r, c, _| per_position[g.position(r, c)],
    )];
    if prefix > 0 {
        out.push(pooled(
            format!("largest |e| of the {prefix} token(s) before the grid (class token first)"),
            err,
            ("", "token"),
            (1, prefix, 1),
            Pool::Max,
            |_, c, _| per_position[c],
        ));
    }
    out.push(pooled(
        format!("largest |e| per channel (over every {what})"),
        err,
        ("", "channel"),
        (1, channels, 1),
        Pool::Max,
        |_, c, _| per_channel[c],
    ));
    out.push(pooled(
        format!("|e| of every {what} and channel"),
        err,
        (
            if g.channels_first { "channel" } else { "token" },
            if g.channels_first { what } else { "channel" },
        ),
        if g.channels_first {
            (channels, g.positions(), 1)
        } else {
            (g.positions(), channels, 1)
        },
        Pool::Max,
        |r, c, _| {
            e[r * if g.channels_first {
                g.positions()
            } else {
                channels
            } + c]
        },
    ));
    for (kind, values, which) in [(exp, reference, "expected"), (act, actual, "actual")] {
        let rms = g.rms(values);
        out.push(pooled(
            format!("root mean square over channels per {what}, {which}{slices}"),
            kind,
            (row, col),
            g.drawn(),
            Pool::Mean,
            |r, c, _| rms[g.position(r, c)],
        ));
    }
    out
}

#[cfg(test)]
mod tests;
