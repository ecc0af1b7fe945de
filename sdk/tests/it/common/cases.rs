//! One random instance of every float kernel of the catalog, with its f64
//! reference. Shapes are chosen to hit broadcasting, grouping, padding,
//! dilation, non-last axes and both resize forms.

use super::*;
use vips_sdk::AttrValue::{Float, Floats, Int, Ints, Str};

/// Computes the expected output from the inputs as the provider saw them.
pub type Reference = Box<dyn Fn(&[T]) -> T>;

pub struct Case {
    pub name: &'static str,
    pub kernel: &'static str,
    pub attrs: Attrs,
    pub inputs: Vec<T>,
    pub reference: Reference,
}

fn case(
    name: &'static str,
    kernel: &'static str,
    attrs: Attrs,
    inputs: Vec<T>,
    reference: impl Fn(&[T]) -> T + 'static,
) -> Case {
    Case {
        name,
        kernel,
        attrs,
        inputs,
        reference: Box::new(reference),
    }
}

fn a() -> Attrs {
    Attrs::new()
}

pub fn float_cases(r: &mut ChaCha8Rng) -> Vec<Case> {
    let pe = 16.1 / 37.0;
    vec![
        case(
            "add broadcast",
            "vsdk.add",
            a(),
            vec![
                T::random(r, &[2, 3, 4], -3.0, 3.0),
                T::random(r, &[3, 1], -3.0, 3.0),
            ],
            |x| broadcast(&x[0], &x[1], |p, q| p + q),
        ),
        case(
            "sub both broadcast",
            "vsdk.sub",
            a(),
            vec![
                T::random(r, &[4, 1, 5], -3.0, 3.0),
                T::random(r, &[1, 6, 1], -3.0, 3.0),
            ],
            |x| broadcast(&x[0], &x[1], |p, q| p - q),
        ),
        case(
            "mul by scalar",
            "vsdk.mul",
            a(),
            vec![
                T::random(r, &[3, 4], -3.0, 3.0),
                T::random(r, &[], 0.5, 2.0),
            ],
            |x| broadcast(&x[0], &x[1], |p, q| p * q),
        ),
        case(
            "div per channel",
            "vsdk.div",
            a(),
            vec![
                T::random(r, &[2, 3, 4, 4], -3.0, 3.0),
                T::random(r, &[3, 1, 1], 0.5, 2.0),
            ],
            |x| broadcast(&x[0], &x[1], |p, q| p / q),
        ),
        case(
            "gelu",
            "vsdk.gelu",
            a(),
            vec![T::random(r, &[3, 7, 5], -4.0, 4.0)],
            |x| gelu(&x[0]),
        ),
        case(
            "gelu_tanh",
            "vsdk.gelu_tanh",
            a(),
            vec![T::random(r, &[3, 7, 5], -6.0, 6.0)],
            |x| map(&x[0], gelu_tanh),
        ),
        case(
            "silu",
            "vsdk.silu",
            a(),
            vec![T::random(r, &[4, 33], -12.0, 12.0)],
            |x| map(&x[0], silu),
        ),
        case(
            // TRELLIS's embeddings: arguments up to about 1000 (timestep · 1000).
            "sin",
            "vsdk.sin",
            a(),
            vec![T::random(r, &[2, 129], -1000.0, 1000.0)],
            |x| map(&x[0], f64::sin),
        ),
        case(
            "cos",
            "vsdk.cos",
            a(),
            vec![T::random(r, &[129, 2], -1000.0, 1000.0)],
            |x| map(&x[0], f64::cos),
        ),
        case(
            "linear with bias",
            "vsdk.linear",
            a(),
            vec![
                T::random(r, &[2, 5, 24], -1.0, 1.0),
                T::random(r, &[13, 24], -1.0, 1.0),
                T::random(r, &[13], -1.0, 1.0),
            ],
            |x| linear(&x[0], &x[1], Some(&x[2])),
        ),
        case(
            "linear without bias",
            "vsdk.linear",
            a(),
            vec![
                T::random(r, &[7, 16], -1.0, 1.0),
                T::random(r, &[9, 16], -1.0, 1.0),
            ],
            |x| linear(&x[0], &x[1], None),
        ),
        case(
            // Several 64 x 64 output tiles of a GPU GEMM each way, K not a multiple of 16.
            "linear over several tiles",
            "vsdk.linear",
            a(),
            vec![
                T::random(r, &[150, 70], -1.0, 1.0),
                T::random(r, &[130, 70], -1.0, 1.0),
                T::random(r, &[130], -1.0, 1.0),
            ],
            |x| linear(&x[0], &x[1], Some(&x[2])),
        ),
        case(
            "conv2d grouped, padded, dilated",
            "vsdk.conv2d",
            a().with("strides", Ints(vec![2, 1]))
                .with("pads", Ints(vec![1, 0, 2, 1]))
                .with("dilations", Ints(vec![1, 2]))
                .with("groups", Int(2)),
            vec![
                T::random(r, &[2, 4, 11, 10], -1.0, 1.0),
                T::random(r, &[6, 2, 3, 3], -1.0, 1.0),
                T::random(r, &[6], -1.0, 1.0),
            ],
            |x| conv2d(&x[0], &x[1], Some(&x[2]), [2, 1], [1, 0, 2, 1], [1, 2], 2),
        ),
        case(
            "conv2d patchify",
            "vsdk.conv2d",
            a().with("strides", Ints(vec![14, 14])),
            vec![
                T::random(r, &[1, 3, 28, 42], -1.0, 1.0),
                T::random(r, &[8, 3, 14, 14], -0.2, 0.2),
                T::random(r, &[8], -1.0, 1.0),
            ],
            |x| conv2d(&x[0], &x[1], Some(&x[2]), [14, 14], [0; 4], [1, 1], 1),
        ),
        case(
            "layer_norm last axis",
            "vsdk.layer_norm",
            a().with("eps", Float(1e-6)),
            vec![
                T::random(r, &[3, 4, 10], -2.0, 3.0),
                T::random(r, &[10], 0.5, 1.5),
                T::random(r, &[10], -0.5, 0.5),
            ],
            |x| layer_norm(&x[0], &x[1], &x[2], 2, 1e-6),
        ),
        case(
            "layer_norm two axes",
            "vsdk.layer_norm",
            a().with("axis", Int(1)),
            vec![
                T::random(r, &[3, 4, 10], -2.0, 3.0),
                T::random(r, &[4, 10], 0.5, 1.5),
                T::random(r, &[4, 10], -0.5, 0.5),
            ],
            |x| layer_norm(&x[0], &x[1], &x[2], 1, 1e-5),
        ),
        case(
            "rms_norm per-head gamma",
            "vsdk.rms_norm",
            a(),
            vec![
                T::random(r, &[2, 5, 3, 16], -2.0, 2.0),
                T::random(r, &[3, 16], 0.5, 1.5),
            ],
            |x| rms_norm(&x[0], &x[1], 1e-12),
        ),
        case(
            // Row 2 is all zero: the eps branch, y = 0.
            "rms_norm with a zero row",
            "vsdk.rms_norm",
            a().with("eps", Float(1e-6)),
            vec![
                zero_row(T::random(r, &[6, 24], -3.0, 3.0), 2),
                T::random(r, &[24], -1.5, 1.5),
            ],
            |x| rms_norm(&x[0], &x[1], 1e-6),
        ),
        case(
            "softmax middle axis",
            "vsdk.softmax",
            a().with("axis", Int(1)),
            vec![T::random(r, &[3, 5, 7], -5.0, 5.0)],
            |x| softmax(&x[0], 1),
        ),
        case(
            "softmax last axis",
            "vsdk.softmax",
            a(),
            vec![T::random(r, &[4, 9], -5.0, 5.0)],
            |x| softmax(&x[0], 1),
        ),
        case(
            "sdpa default scale",
            "vsdk.sdpa",
            a(),
            vec![
                T::random(r, &[2, 3, 6, 8], -1.0, 1.0),
                T::random(r, &[2, 3, 9, 8], -1.0, 1.0),
                T::random(r, &[2, 3, 9, 5], -1.0, 1.0),
            ],
            |x| sdpa(&x[0], &x[1], &x[2], 1.0 / 8f64.sqrt()),
        ),
        case(
            "sdpa explicit scale",
            "vsdk.sdpa",
            a().with("scale", Float(0.7)),
            vec![
                T::random(r, &[4, 8], -1.0, 1.0),
                T::random(r, &[5, 8], -1.0, 1.0),
                T::random(r, &[5, 3], -1.0, 1.0),
            ],
            |x| sdpa(&x[0], &x[1], &x[2], 0.7),
        ),
        case(
            // More rows than a GPU launch has blocks (4096): blocks loop over rows.
            "softmax over many rows",
            "vsdk.softmax",
            a(),
            vec![T::random(r, &[4100, 3], -4.0, 4.0)],
            |x| softmax(&x[0], 1),
        ),
        case(
            "layer_norm over many rows",
            "vsdk.layer_norm",
            a(),
            vec![
                // Rows of 8: two nearly equal values would make a row's
                // variance tiny and its normalisation ill-conditioned.
                T::random(r, &[4099, 8], -2.0, 2.0),
                T::random(r, &[8], 0.5, 1.5),
                T::random(r, &[8], -0.5, 0.5),
            ],
            |x| layer_norm(&x[0], &x[1], &x[2], 1, 1e-5),
        ),
        case(
            "rms_norm over many rows",
            "vsdk.rms_norm",
            a(),
            vec![
                T::random(r, &[4099, 8], -2.0, 2.0),
                T::random(r, &[8], 0.5, 1.5),
            ],
            |x| rms_norm(&x[0], &x[1], 1e-12),
        ),
        case(
            "sdpa over many query rows",
            "vsdk.sdpa",
            a(),
            vec![
                T::random(r, &[2, 2050, 4], -1.0, 1.0),
                T::random(r, &[2, 5, 4], -1.0, 1.0),
                T::random(r, &[2, 5, 3], -1.0, 1.0),
            ],
            |x| sdpa(&x[0], &x[1], &x[2], 0.5),
        ),
        case(
            // More keys and value channels than a GPU block has threads.
            "sdpa long rows",
            "vsdk.sdpa",
            a(),
            vec![
                T::random(r, &[3, 16], -1.0, 1.0),
                T::random(r, &[300, 16], -1.0, 1.0),
                T::random(r, &[300, 260], -1.0, 1.0),
            ],
            |x| sdpa(&x[0], &x[1], &x[2], 0.25),
        ),
        case(
            "resize_bicubic scale_factor 16.1/37",
            "vsdk.resize_bicubic",
            a().with("scale_factor", Floats(vec![pe, pe])),
            vec![T::random(r, &[1, 2, 37, 37], -1.0, 1.0)],
            move |x| resize_bicubic(&x[0], [16, 16], [1.0 / pe, 1.0 / pe], false),
        ),
        case(
            "resize_bicubic size, antialias",
            "vsdk.resize_bicubic",
            a().with("size", Ints(vec![5, 17]))
                .with("antialias", Int(1)),
            vec![T::random(r, &[2, 3, 9, 13], -1.0, 1.0)],
            |x| resize_bicubic(&x[0], [5, 17], [9.0 / 5.0, 13.0 / 17.0], true),
        ),
        case(
            "resize_bicubic size, upsample",
            "vsdk.resize_bicubic",
            a().with("size", Ints(vec![14, 6])),
            vec![T::random(r, &[1, 2, 6, 4], -1.0, 1.0)],
            |x| resize_bicubic(&x[0], [14, 6], [6.0 / 14.0, 4.0 / 6.0], false),
        ),
        case(
            "resize_bicubic scale_factor, antialias",
            "vsdk.resize_bicubic",
            a().with("scale_factor", Floats(vec![1.7, 0.45]))
                .with("antialias", Int(1)),
            vec![T::random(r, &[1, 1, 10, 21], -1.0, 1.0)],
            |x| resize_bicubic(&x[0], [17, 9], [1.0 / 1.7, 1.0 / 0.45], true),
        ),
        case(
            "resize_bilinear size, half-pixel",
            "vsdk.resize_bilinear",
            a().with("size", Ints(vec![31, 7])),
            vec![T::random(r, &[2, 3, 9, 12], -2.0, 2.0)],
            |x| bilinear(&x[0], [31, 7], [9.0 / 31.0, 12.0 / 7.0], false),
        ),
        case(
            "resize_bilinear size, align_corners",
            "vsdk.resize_bilinear",
            a().with("size", Ints(vec![31, 7]))
                .with("align_corners", Int(1)),
            vec![T::random(r, &[2, 3, 9, 12], -2.0, 2.0)],
            |x| bilinear(&x[0], [31, 7], [0.0, 0.0], true),
        ),
        case(
            // 9 rows at 1.05 stay 9: copied, not resampled at 1/1.05.
            "resize_bilinear scale_factor, a kept axis",
            "vsdk.resize_bilinear",
            a().with("scale_factor", Floats(vec![1.05, 2.0])),
            vec![T::random(r, &[1, 2, 9, 12], -2.0, 2.0)],
            |x| bilinear(&x[0], [9, 24], [1.0 / 1.05, 0.5], false),
        ),
        case(
            "resize_nearest size",
            "vsdk.resize_nearest",
            a().with("size", Ints(vec![31, 7])),
            vec![T::random(r, &[2, 3, 9, 12], -2.0, 2.0)],
            |x| nearest(&x[0], [31, 7], None, false),
        ),
        case(
            "resize_nearest scale_factor, exact",
            "vsdk.resize_nearest",
            a().with("scale_factor", Floats(vec![1.05, 0.7]))
                .with("exact", Int(1)),
            vec![T::random(r, &[1, 2, 9, 12], -2.0, 2.0)],
            |x| nearest(&x[0], [9, 8], Some([1.05, 0.7]), true),
        ),
        case(
            "resize_nearest scale_factor, a kept and a doubled axis",
            "vsdk.resize_nearest",
            a().with("scale_factor", Floats(vec![1.05, 2.0])),
            vec![T::random(r, &[1, 2, 9, 12], -2.0, 2.0)],
            |x| nearest(&x[0], [9, 24], Some([1.05, 2.0]), false),
        ),
        case(
            "group_norm 3 groups",
            "vsdk.group_norm",
            a().with("groups", Int(3)).with("eps", Float(1e-3)),
            vec![
                T::random(r, &[2, 6, 4, 5], -3.0, 5.0),
                T::random(r, &[6], 0.5, 1.5),
                T::random(r, &[6], -0.5, 0.5),
            ],
            |x| group_norm(x, 3, 1e-3),
        ),
        case(
            "matmul with broadcast batch axes",
            "vsdk.matmul",
            a(),
            vec![
                T::random(r, &[3, 1, 5, 7], -1.0, 1.0),
                T::random(r, &[4, 7, 6], -1.0, 1.0),
            ],
            |x| matmul(&x[0], &x[1]),
        ),
    ]
}

/// PyTorch's bilinear resize of `[N, C, H, W]` to `size`, written from its
/// definition: per axis two taps at `src` (half-pixel clamped at 0, or
/// corners aligned), an axis whose length is kept copied.
fn bilinear(x: &T, size: [usize; 2], scale: [f64; 2], align: bool) -> T {
    let (n, c, ih, iw) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3]);
    let taps = |i: usize, len: usize, out: usize, scale: f64| -> (usize, usize, f64) {
        if len == out {
            return (i, i, 0.0);
        }
        let src = match align {
            true if out > 1 => i as f64 * (len - 1) as f64 / (out - 1) as f64,
            true => 0.0,
            false => f64::max(0.0, (i as f64 + 0.5) * scale - 0.5),
        };
        let lo = (src.floor() as usize).min(len - 1);
        (lo, (lo + 1).min(len - 1), src - lo as f64)
    };
    let shape = [n, c, size[0], size[1]];
    let data = (0..shape.iter().product())
        .map(|f| {
            let i = unravel(f, &shape);
            let (y0, y1, ly) = taps(i[2], ih, size[0], scale[0]);
            let (x0, x1, lx) = taps(i[3], iw, size[1], scale[1]);
            let p = |y: usize, xx: usize| x.at(&[i[0], i[1], y, xx]);
            (1.0 - ly) * ((1.0 - lx) * p(y0, x0) + lx * p(y0, x1))
                + ly * ((1.0 - lx) * p(y1, x0) + lx * p(y1, x1))
        })
        .collect();
    T::new(&shape, data)
}

/// PyTorch's `nearest` / `nearest-exact`, index arithmetic in float32 as
/// its kernels do (`factor`: the `scale_factor`, else `size` was given).
fn nearest(x: &T, size: [usize; 2], factor: Option<[f64; 2]>, exact: bool) -> T {
    let (n, c) = (x.shape[0], x.shape[1]);
    let source = |i: usize, len: usize, out: usize, axis: usize| -> usize {
        let scale: f32 = match factor {
            Some(f) => (1.0 / f[axis]) as f32,
            None => len as f32 / out as f32,
        };
        let src = if exact {
            ((i as f64 + 0.5) * scale as f64) as f32
        } else if out == len {
            i as f32
        } else if out == 2 * len {
            (i / 2) as f32
        } else {
            i as f32 * scale
        };
        (src.floor() as usize).min(len - 1)
    };
    let shape = [n, c, size[0], size[1]];
    let data = (0..shape.iter().product())
        .map(|f| {
            let i = unravel(f, &shape);
            let y = source(i[2], x.shape[2], size[0], 0);
            let xx = source(i[3], x.shape[3], size[1], 1);
            x.at(&[i[0], i[1], y, xx])
        })
        .collect();
    T::new(&shape, data)
}

/// Group norm from its definition: per sample and group, the mean and the
/// biased variance over the group's channels and positions.
fn group_norm(x: &[T], groups: usize, eps: f64) -> T {
    let (shape, (w, b)) = (&x[0].shape, (&x[1].data, &x[2].data));
    let (n, ch) = (shape[0], shape[1]);
    let inner: usize = shape[2..].iter().product();
    let per = ch / groups;
    let mut out = vec![0.0; x[0].data.len()];
    for s in 0..n {
        for g in 0..groups {
            let idx: Vec<usize> = (g * per..(g + 1) * per)
                .flat_map(|c| (0..inner).map(move |p| (s * ch + c) * inner + p))
                .collect();
            let k = idx.len() as f64;
            let mean = idx.iter().map(|&e| x[0].data[e]).sum::<f64>() / k;
            let var = idx
                .iter()
                .map(|&e| (x[0].data[e] - mean).powi(2))
                .sum::<f64>()
                / k;
            for &e in &idx {
                let c = (e / inner) % ch;
                out[e] = (x[0].data[e] - mean) / (var + eps).sqrt() * w[c] + b[c];
            }
        }
    }
    T::new(shape, out)
}

/// `a @ b` with NumPy's broadcasting of the batch axes.
fn matmul(a: &T, b: &T) -> T {
    let (ra, rb) = (a.shape.len(), b.shape.len());
    let (m, k, nn) = (a.shape[ra - 2], a.shape[ra - 1], b.shape[rb - 1]);
    let (rank, lead) = (ra.max(rb), ra.max(rb) - 2);
    // Batch axis d of `s`, aligned from the right (1 where it has none).
    let axis = |s: &[usize], d: usize| (d + s.len() - 2).checked_sub(lead).map_or(1, |j| s[j]);
    let batch: Vec<usize> = (0..lead)
        .map(|d| axis(&a.shape, d).max(axis(&b.shape, d)))
        .collect();
    let mut shape = batch.clone();
    shape.extend([m, nn]);
    let data = (0..shape.iter().product())
        .map(|f| {
            let i = unravel(f, &shape);
            let pick = |s: &[usize], row: usize, col: usize| -> Vec<usize> {
                let own = s.len() - 2;
                let mut at: Vec<usize> = (0..own)
                    .map(|j| if s[j] == 1 { 0 } else { i[j + lead - own] })
                    .collect();
                at.extend([row, col]);
                at
            };
            (0..k)
                .map(|kk| {
                    a.at(&pick(&a.shape, i[rank - 2], kk)) * b.at(&pick(&b.shape, kk, i[rank - 1]))
                })
                .sum()
        })
        .collect();
    T::new(&shape, data)
}

/// Data-movement cases: exact on every dtype.
pub fn movement_cases(r: &mut ChaCha8Rng) -> Vec<Case> {
    vec![
        case(
            "crop",
            "vsdk.crop",
            a().with("offsets", Ints(vec![1, 0, 3]))
                .with("sizes", Ints(vec![2, 4, 5])),
            vec![T::random(r, &[4, 4, 9], 0.0, 100.0)],
            |x| {
                let shape = [2, 4, 5];
                T::new(
                    &shape,
                    (0..40)
                        .map(|f| {
                            let i = unravel(f, &shape);
                            x[0].at(&[i[0] + 1, i[1], i[2] + 3])
                        })
                        .collect(),
                )
            },
        ),
        case(
            "concat axis 1",
            "vsdk.concat",
            a().with("axis", Int(-2)),
            vec![
                T::random(r, &[2, 1, 3], 0.0, 100.0),
                T::random(r, &[2, 4, 3], 0.0, 100.0),
            ],
            |x| {
                let shape = [2, 5, 3];
                T::new(
                    &shape,
                    (0..30)
                        .map(|f| {
                            let i = unravel(f, &shape);
                            if i[1] == 0 {
                                x[0].at(&[i[0], 0, i[2]])
                            } else {
                                x[1].at(&[i[0], i[1] - 1, i[2]])
                            }
                        })
                        .collect(),
                )
            },
        ),
        case(
            "reshape",
            "vsdk.reshape",
            a().with("shape", Ints(vec![-1, 6])),
            vec![T::random(r, &[2, 3, 4], 0.0, 100.0)],
            |x| T::new(&[4, 6], x[0].data.clone()),
        ),
        pad_case("pad constant", "constant", r, |j, n| {
            (0..n).contains(&j).then_some(j)
        }),
        // Mirrored about the edge element: ... 2 1 | 0 1 2 ... | n-2 n-3 ...
        pad_case("pad reflect", "reflect", r, |j, n| {
            Some(if j < 0 {
                -j
            } else if j >= n {
                2 * n - 2 - j
            } else {
                j
            })
        }),
        pad_case("pad replicate", "replicate", r, |j, n| {
            Some(j.max(0).min(n - 1))
        }),
        pad_case("pad circular", "circular", r, |j, n| Some((j + n) % n)),
        case(
            "permute",
            "vsdk.permute",
            a().with("perm", Ints(vec![2, 0, 1])),
            vec![T::random(r, &[2, 3, 4], 0.0, 100.0)],
            |x| {
                let shape = [4, 2, 3];
                T::new(
                    &shape,
                    (0..24)
                        .map(|f| {
                            let i = unravel(f, &shape);
                            x[0].at(&[i[1], i[2], i[0]])
                        })
                        .collect(),
                )
            },
        ),
    ]
}

/// `vsdk.pad` of a [3, 4, 5] tensor by 2/0/4 before and 1/3/0 after in
/// `mode`, with `source(j, n)` mapping an offset index on an axis of `n` to
/// the element it reads (None: the constant, 7, exact in every dtype).
fn pad_case(
    name: &'static str,
    mode: &str,
    r: &mut ChaCha8Rng,
    source: fn(i64, i64) -> Option<i64>,
) -> Case {
    const BEFORE: [i64; 3] = [2, 0, 4];
    const AFTER: [i64; 3] = [1, 3, 0];
    let mut attrs = a()
        .with("pads", Ints([BEFORE, AFTER].concat()))
        .with("mode", Str(mode.into()));
    if mode == "constant" {
        attrs = attrs.with("value", Float(7.0));
    }
    let x = vec![T::random(r, &[3, 4, 5], 0.0, 100.0)];
    case(name, "vsdk.pad", attrs, x, move |x: &[T]| {
        let n = [3i64, 4, 5];
        let shape: Vec<usize> = (0..3)
            .map(|d| (n[d] + BEFORE[d] + AFTER[d]) as usize)
            .collect();
        let total = shape.iter().product();
        T::new(
            &shape,
            (0..total)
                .map(|f| {
                    let i = unravel(f, &shape);
                    let at: Option<Vec<usize>> = (0..3)
                        .map(|d| source(i[d] as i64 - BEFORE[d], n[d]).map(|j| j as usize))
                        .collect();
                    at.map_or(7.0, |at| x[0].at(&at))
                })
                .collect(),
        )
    })
}

/// Casts from float32: saturating, round-half-even, NaN to 0 for integers.
pub fn f32_to_u8(v: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else {
        v.round_ties_even().clamp(0.0, 255.0)
    }
}

/// A float32 tensor for cast tests: random values out of uint8 range plus exact ties.
pub fn cast_input(r: &mut ChaCha8Rng) -> T {
    let mut x = T::random(r, &[5, 12], -20.0, 280.0);
    let ties = [0.5, 1.5, 2.5, 254.5, 255.5, -0.5, 127.5];
    for (i, &t) in ties.iter().enumerate() {
        x.data[i * 7] = t;
    }
    x
}

pub fn random_image(r: &mut ChaCha8Rng, h: usize, w: usize) -> T {
    T::new(
        &[h, w, 3],
        (0..h * w * 3)
            .map(|_| f64::from(r.gen_range(0u8..=255)))
            .collect(),
    )
}

/// (rtol, atol) per dtype: output rounding of the dtype plus f32 arithmetic.
pub fn tolerance(dtype: DType) -> (f64, f64) {
    match dtype {
        DType::F64 => (1e-10, 1e-12),
        DType::F32 => (1e-5, 1e-5),
        DType::F16 => (1.5e-3, 1e-4),
        DType::BF16 => (1e-2, 1e-3),
        _ => (0.0, 0.0),
    }
}

/// Every float case on `dev` in each of `dtypes`, against its f64 reference
/// on the inputs as rounded to the dtype.
pub fn check_float_kernels(
    dev: &Device,
    test: &str,
    dtypes: &[DType],
    tolerance: impl Fn(DType) -> (f64, f64),
) {
    let (mut r, seed) = rng(test);
    for case in float_cases(&mut r) {
        for &dtype in dtypes {
            let seen: Vec<T> = case.inputs.iter().map(|t| t.rounded(dtype)).collect();
            let host: Vec<HostTensor> = case.inputs.iter().map(|t| t.host(dtype)).collect();
            let out = run(dev, case.kernel, &case.attrs, &host);
            assert_eq!(out.spec.dtype, dtype);
            let expected = (case.reference)(&seen);
            assert_eq!(out.spec.shape, expected.shape, "{} {dtype}", case.name);
            let (rtol, atol) = tolerance(dtype);
            assert_close(
                &format!("{} {dtype} (seed {seed})", case.name),
                &out.to_f64_vec(),
                &expected.data,
                rtol,
                atol,
            );
        }
    }
}

/// Every data-movement case on `dev`, bit-exact, on every dtype.
pub fn check_movement_kernels(dev: &Device, test: &str) {
    let (mut r, seed) = rng(test);
    for case in movement_cases(&mut r) {
        for dtype in DType::ALL {
            let seen: Vec<T> = case.inputs.iter().map(|t| t.rounded(dtype)).collect();
            let host: Vec<HostTensor> = case.inputs.iter().map(|t| t.host(dtype)).collect();
            let out = run(dev, case.kernel, &case.attrs, &host);
            let expected = (case.reference)(&seen);
            assert_eq!(out.spec.shape, expected.shape);
            assert_eq!(
                out.to_f64_vec(),
                expected.data,
                "{} {dtype} (seed {seed})",
                case.name
            );
        }
    }
}
