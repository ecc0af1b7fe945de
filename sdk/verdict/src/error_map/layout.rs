//! A tensor's natural layout, inferred from its shape (docs/report.md,
//! "Layouts"), and the 2-D views each layout is drawn as.

use serde::{Deserialize, Serialize};
pub use vips_data::document::TokenGrid;

/// How a tensor's axes are read. Leading axes of size 1 (a batch of one)
/// are ignored; a batch larger than one is a [`Layout::Matrix`]. A 3-D grid
/// (`grid_d` or `depth` above 1) is drawn as its depth slices side by side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Layout {
    /// `[tokens, channels]` where `tokens = prefix + grid_d·grid_h·grid_w`:
    /// patch (or voxel) tokens on their grid, the prefix (class and register
    /// tokens) apart.
    Tokens {
        prefix: usize,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        grid_d: usize,
        grid_h: usize,
        grid_w: usize,
        channels: usize,
    },
    /// `[channels, height, width]` with more than 4 channels (a convolution's
    /// output), or `[channels, depth, height, width]`: a grid of pixels (or
    /// voxels), each with its channels.
    FeatureMap {
        channels: usize,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        depth: usize,
        height: usize,
        width: usize,
    },
    /// `[heads, tokens, dim]`, tokens as in `Tokens` (attention).
    Heads {
        heads: usize,
        prefix: usize,
        #[serde(default = "one", skip_serializing_if = "is_one")]
        grid_d: usize,
        grid_h: usize,
        grid_w: usize,
        dim: usize,
    },
    /// `[C, H, W]` or `[H, W, C]` with 1 to 4 colour channels.
    Image {
        channels: usize,
        height: usize,
        width: usize,
        channels_last: bool,
    },
    /// `[N, C]` features of sparse voxels, row `i` at the coordinates
    /// (b, x, y, z) in row `i` of the stage's `coords [N, 4]`; `extent` is
    /// one past the largest x, y and z.
    Voxels {
        voxels: usize,
        channels: usize,
        extent: [usize; 3],
    },
    /// Anything else: the last axis as columns, the others flattened into rows.
    Matrix { rows: usize, cols: usize },
}

/// Where a tensor's elements lie beyond what its shape says: the
/// component's token grid, or the voxels its rows belong to.
#[derive(Debug, Clone, Copy, Default)]
pub struct Placement<'a> {
    pub grid: Option<&'a TokenGrid>,
    /// The coordinates (b, x, y, z) of a sparse tensor's rows.
    pub voxels: Option<&'a [[i32; 4]]>,
}

fn one() -> usize {
    1
}

fn is_one(n: &usize) -> bool {
    *n == 1
}

/// The layout of `shape` where its token axis holds this grid:
/// `[tokens, channels]` or `[heads, tokens, dim]` after a batch of one.
fn on_grid(grid: &TokenGrid, shape: &[usize]) -> Option<Layout> {
    let rank = shape.len();
    if rank < 2 || shape[rank - 2] != grid.tokens() {
        return None;
    }
    let [grid_d, grid_h, grid_w] = grid.grid;
    let batch_of_one = |k: usize| shape[..rank - k].iter().all(|&d| d == 1);
    if batch_of_one(2) {
        return Some(Layout::Tokens {
            prefix: grid.prefix,
            grid_d,
            grid_h,
            grid_w,
            channels: shape[rank - 1],
        });
    }
    // Heads after a batch axis, as `Layout::of` reads them: [2, T, C] is a batch.
    (rank >= 4 && batch_of_one(3)).then(|| Layout::Heads {
        heads: shape[rank - 3],
        prefix: grid.prefix,
        grid_d,
        grid_h,
        grid_w,
        dim: shape[rank - 1],
    })
}

/// At most this many prefix (class, register) tokens before the patch grid.
const MAX_PREFIX: usize = 8;
/// An image side is at least this many pixels.
const MIN_IMAGE_SIDE: usize = 8;

/// `tokens = prefix + g²` with the fewest prefix tokens and `g ≥ 2`.
fn token_grid(tokens: usize) -> Option<(usize, usize)> {
    (0..=MAX_PREFIX.min(tokens)).find_map(|prefix| {
        let n = tokens - prefix;
        let g = (n as f64).sqrt().round() as usize;
        (g >= 2 && g * g == n).then_some((prefix, g))
    })
}

/// A class token (and up to 4 registers) before a patch grid of at least
/// 4×4: tokens, not an image's or a feature map's side.
fn class_token_grid(tokens: usize) -> bool {
    token_grid(tokens).is_some_and(|(p, g)| (1..=5).contains(&p) && g >= 4)
}

/// Grey, RGB, RGBA.
fn is_colour(c: usize) -> bool {
    matches!(c, 1 | 3 | 4)
}

impl Layout {
    /// The layout of `shape`: sparse voxels where its rows are the
    /// placement's voxels, on the component's token grid where its token
    /// axis holds one, else inferred from the shape alone.
    pub fn placed(shape: &[usize], place: Placement) -> Layout {
        if let (Some(v), &[voxels, channels]) = (place.voxels, shape) {
            if v.len() == voxels && voxels > 0 {
                let axis = |a: usize| v.iter().map(|c| c[a].max(0) as usize).max().unwrap_or(0) + 1;
                return Layout::Voxels {
                    voxels,
                    channels,
                    extent: [axis(1), axis(2), axis(3)],
                };
            }
        }
        place
            .grid
            .and_then(|g| on_grid(g, shape))
            .unwrap_or_else(|| Layout::of(shape))
    }

    pub fn of(shape: &[usize]) -> Layout {
        let rank = shape.len();
        // The last `k` axes, when every axis before them is a batch of one.
        let last = |k: usize| {
            (rank >= k && shape[..rank - k].iter().all(|&d| d == 1)).then(|| &shape[rank - k..])
        };
        let side = |h: usize, w: usize| h >= MIN_IMAGE_SIDE && w >= MIN_IMAGE_SIDE;
        let image = |channels, height, width, channels_last| Layout::Image {
            channels,
            height,
            width,
            channels_last,
        };
        // Attention with 3 or 4 heads, a class token (and registers) before
        // its grid and a head dim of 16 to 256, [1, 3, 197, 64] (197 =
        // 1 + 14²), is not an image: an image whose rows are 1 to 5 more
        // than a square is seldom also exactly such a power of two wide.
        let heads = |heads, tokens, dim| {
            token_grid(tokens).map(|(prefix, g)| Layout::Heads {
                heads,
                prefix,
                grid_d: 1,
                grid_h: g,
                grid_w: g,
                dim,
            })
        };
        // A volume, [channels, depth, height, width] after a batch of one
        // (a 3-D convolution's input or output).
        if let (true, Some(&[channels, depth, height, width])) = (rank >= 5, last(4)) {
            if depth >= 2 && height >= 2 && width >= 2 {
                return Layout::FeatureMap {
                    channels,
                    depth,
                    height,
                    width,
                };
            }
        }
        let inferred = match (rank, last(3)) {
            (r, Some(&[h @ (3 | 4), t, d @ (16 | 32 | 64 | 128 | 256)]))
                if r >= 4 && t != d && class_token_grid(t) =>
            {
                heads(h, t, d)
            }
            // One channel only with a batch axis ([1, 1, H, W]): [1, T, C]
            // is a token sequence.
            (r, Some(&[c, h, w])) if side(h, w) && (c == 3 || c == 4 || (c == 1 && r >= 4)) => {
                Some(image(c, h, w, false))
            }
            (_, Some(&[h, w, c])) if side(h, w) && is_colour(c) => Some(image(c, h, w, true)),
            // Many channels, or a square grid whose side is no class token
            // plus a square (attention weights [1, 6, 257, 257] are heads).
            (r, Some(&[c, h, w]))
                if r >= 4
                    && c > 4
                    && h >= 2
                    && w >= 2
                    && (c > 64 || (h == w && !class_token_grid(h))) =>
            {
                Some(Layout::FeatureMap {
                    channels: c,
                    depth: 1,
                    height: h,
                    width: w,
                })
            }
            (r, Some(&[h, t, d])) if r >= 4 => heads(h, t, d),
            _ => None,
        };
        let tokens = || match (rank, last(2)) {
            (r, Some(&[tokens, channels])) if r >= 3 => {
                token_grid(tokens).map(|(prefix, g)| Layout::Tokens {
                    prefix,
                    grid_d: 1,
                    grid_h: g,
                    grid_w: g,
                    channels,
                })
            }
            _ => None,
        };
        inferred.or_else(tokens).unwrap_or_else(|| {
            let cols = shape.last().copied().unwrap_or(1).max(1);
            Layout::Matrix {
                rows: shape.iter().product::<usize>() / cols,
                cols,
            }
        })
    }

    /// Words for the report: "257 tokens (1 + a 16×16 patch grid) × 384 channels".
    pub fn describe(&self) -> String {
        // "16×16" or "16×16×16", and how many positions that is.
        let grid = |d: usize, h: usize, w: usize| {
            let sides = if d > 1 {
                format!("{d}×{h}×{w}")
            } else {
                format!("{h}×{w}")
            };
            (sides, d.saturating_mul(h).saturating_mul(w))
        };
        match *self {
            Layout::Tokens {
                prefix,
                grid_d,
                grid_h,
                grid_w,
                channels,
            } => {
                let (sides, n) = grid(grid_d, grid_h, grid_w);
                format!(
                    "{} tokens ({}a {sides} {} grid) × {channels} channels",
                    prefix.saturating_add(n),
                    if prefix > 0 {
                        format!("{prefix} + ")
                    } else {
                        String::new()
                    },
                    if grid_d > 1 { "token" } else { "patch" }
                )
            }
            Layout::FeatureMap {
                channels,
                depth,
                height,
                width,
            } => format!(
                "a feature map: {channels} channels on a {} grid",
                grid(depth, height, width).0
            ),
            Layout::Heads {
                heads,
                prefix,
                grid_d,
                grid_h,
                grid_w,
                dim,
            } => {
                let (sides, n) = grid(grid_d, grid_h, grid_w);
                format!(
                    "{heads} heads × {} tokens ({prefix} + a {sides} {} grid) × {dim}",
                    prefix.saturating_add(n),
                    if grid_d > 1 { "token" } else { "patch" }
                )
            }
            Layout::Image {
                channels,
                height,
                width,
                channels_last,
            } => format!(
                "an image, {height}×{width} with {channels} channel{} ({})",
                if channels == 1 { "" } else { "s" },
                if channels_last { "HWC" } else { "CHW" }
            ),
            Layout::Voxels {
                voxels,
                channels,
                extent: [x, y, z],
            } => format!("{voxels} sparse voxels in a {x}×{y}×{z} box × {channels} channels"),
            Layout::Matrix { rows, cols } => format!("{rows} rows × {cols} columns"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dinov2_shapes_get_their_natural_layouts() {
        let tokens = |prefix, g, channels| Layout::Tokens {
            prefix,
            grid_d: 1,
            grid_h: g,
            grid_w: g,
            channels,
        };
        assert_eq!(Layout::of(&[1, 257, 384]), tokens(1, 16, 384));
        assert_eq!(Layout::of(&[1, 256, 384]), tokens(0, 16, 384));
        assert_eq!(Layout::of(&[1, 1370, 384]), tokens(1, 37, 384));
        assert_eq!(Layout::of(&[1, 261, 384]), tokens(5, 16, 384));
        assert_eq!(
            Layout::of(&[1, 6, 257, 64]),
            Layout::Heads {
                heads: 6,
                prefix: 1,
                grid_d: 1,
                grid_h: 16,
                grid_w: 16,
                dim: 64
            }
        );
        assert_eq!(
            Layout::of(&[1, 384, 16, 16]),
            Layout::FeatureMap {
                channels: 384,
                depth: 1,
                height: 16,
                width: 16
            }
        );
        assert_eq!(
            Layout::of(&[1, 6, 17, 64]),
            Layout::Heads {
                heads: 6,
                prefix: 1,
                grid_d: 1,
                grid_h: 4,
                grid_w: 4,
                dim: 64
            }
        );
        assert!(matches!(
            Layout::of(&[1, 3, 197, 64]),
            Layout::Heads {
                heads: 3,
                prefix: 1,
                grid_h: 14,
                ..
            }
        ));
        assert!(matches!(
            Layout::of(&[1, 6, 257, 257]),
            Layout::Heads {
                heads: 6,
                prefix: 1,
                dim: 257,
                ..
            }
        ));
        // Feature maps and images whose sides happen to be 1 to 5 more than a square.
        for shape in [
            [1, 384, 37, 37],
            [1, 512, 28, 28],
            [1, 768, 17, 17],
            [1, 16, 12, 12],
        ] {
            assert!(
                matches!(Layout::of(&shape), Layout::FeatureMap { .. }),
                "{shape:?}"
            );
        }
        // 325 = 1 + 18², but 500 wide is no head dim: an image.
        for shape in [[1, 227, 227, 3], [1, 3, 227, 227], [1, 3, 325, 500]] {
            assert!(
                matches!(Layout::of(&shape), Layout::Image { .. }),
                "{shape:?}"
            );
        }
        assert_eq!(
            Layout::of(&[1, 3, 224, 224]),
            Layout::Image {
                channels: 3,
                height: 224,
                width: 224,
                channels_last: false
            }
        );
        assert_eq!(
            Layout::of(&[75, 100, 3]),
            Layout::Image {
                channels: 3,
                height: 75,
                width: 100,
                channels_last: true
            }
        );
        assert_eq!(
            Layout::of(&[1, 1, 32, 48]),
            Layout::Image {
                channels: 1,
                height: 32,
                width: 48,
                channels_last: false
            }
        );
        assert_eq!(Layout::of(&[1, 384]), Layout::Matrix { rows: 1, cols: 384 });
        // A plain matrix whose rows happen to be a square stays a matrix.
        assert_eq!(Layout::of(&[16, 32]), Layout::Matrix { rows: 16, cols: 32 });
        assert_eq!(
            Layout::of(&[2, 257, 384]).describe(),
            "514 rows × 384 columns"
        );
        assert_eq!(Layout::of(&[]), Layout::Matrix { rows: 1, cols: 1 });
    }

    /// 4096 tokens are a 64×64 grid by their count; the document's grid
    /// says 16³ (TRELLIS's latent), for tokens and for attention heads, and
    /// a volume is read as one without a hint.
    #[test]
    fn a_declared_grid_places_tokens_in_three_dimensions() {
        let grid = TokenGrid {
            prefix: 0,
            grid: [16, 16, 16],
        };
        let on_grid = Placement {
            grid: Some(&grid),
            voxels: None,
        };
        assert!(matches!(
            Layout::of(&[1, 4096, 1024]),
            Layout::Tokens {
                grid_d: 1,
                grid_h: 64,
                ..
            }
        ));
        let tokens = Layout::placed(&[1, 4096, 1024], on_grid);
        assert_eq!(
            tokens,
            Layout::Tokens {
                prefix: 0,
                grid_d: 16,
                grid_h: 16,
                grid_w: 16,
                channels: 1024
            }
        );
        assert_eq!(
            tokens.describe(),
            "4096 tokens (a 16×16×16 token grid) × 1024 channels"
        );
        assert_eq!(
            Layout::placed(&[1, 16, 4096, 64], on_grid),
            Layout::Heads {
                heads: 16,
                prefix: 0,
                grid_d: 16,
                grid_h: 16,
                grid_w: 16,
                dim: 64
            }
        );
        // Another token count (the conditioning's 1374) keeps its own layout.
        assert_eq!(
            Layout::placed(&[1, 1374, 1024], on_grid),
            Layout::of(&[1, 1374, 1024])
        );
        // A batch of two is rows, grid or not.
        assert!(matches!(
            Layout::placed(&[2, 4096, 8], on_grid),
            Layout::Matrix { .. }
        ));
        let volume = Layout::of(&[1, 8, 16, 16, 16]);
        assert_eq!(
            volume,
            Layout::FeatureMap {
                channels: 8,
                depth: 16,
                height: 16,
                width: 16
            }
        );
        assert_eq!(
            volume.describe(),
            "a feature map: 8 channels on a 16×16×16 grid"
        );
        // The depth is left out of a 2-D layout's JSON, and defaults to 1.
        let flat = serde_json::to_string(&Layout::of(&[1, 257, 384])).expect("serialises");
        assert!(!flat.contains("grid_d"), "{flat}");
        let read: Layout = serde_json::from_str(&flat).expect("reads back");
        assert_eq!(read, Layout::of(&[1, 257, 384]));
        let deep = serde_json::to_string(&tokens).expect("serialises");
        assert_eq!(
            serde_json::from_str::<Layout>(&deep).expect("reads back"),
            tokens
        );
    }
}
