//! Image resizes: Pillow's 8-bit filters (bit-exact), PyTorch's bicubic,
//! bilinear and nearest.

use super::{Check, Inferred};
use crate::taps::PilFilter;
use crate::CatalogError;
use crate::{Attrs, DType, Node, Op, TensorSpec};

#[derive(Debug, Clone, PartialEq)]
pub struct Resize {
    pub out_h: usize,
    pub out_w: usize,
    /// Source pixels per output pixel, per axis (the value used in coordinate maps).
    pub scale_h: f64,
    pub scale_w: f64,
    pub antialias: bool,
}

/// A `vsdk.resize_pil_*` call: Pillow's 8-bit `Image.resize`.
#[derive(Debug, Clone, PartialEq)]
pub struct PilResize {
    pub filter: PilFilter,
    pub out_h: usize,
    pub out_w: usize,
    /// Run the vertical pass before the horizontal one (Pillow 13 does
    /// for some sizes).
    pub vertical_first: bool,
    /// The last channel is alpha (Pillow's modes LA and RGBA): the colour
    /// channels are premultiplied before the passes and divided after.
    pub alpha: bool,
}

impl PilResize {
    /// Pillow returns a copy when the size does not change (no pass, and
    /// no premultiplication round trip).
    pub fn is_copy(&self, in_h: usize, in_w: usize) -> bool {
        (self.out_h, self.out_w) == (in_h, in_w)
    }
}

impl Op {
    /// The Pillow filter of a `vsdk.resize_pil_*` kernel (uint8, bit-exact).
    pub fn pil_filter(self) -> Option<PilFilter> {
        match self {
            Op::ResizePilBicubic => Some(PilFilter::Bicubic),
            Op::ResizePilLanczos => Some(PilFilter::Lanczos),
            _ => None,
        }
    }
}

pub(super) fn pil(
    op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
    c.rank("input [H, W, C]", x, 3)?;
    let Some([out_h, out_w]) = positive_size(c, attrs)? else {
        return c.attr("size", "is required");
    };
    if x.shape[0] == 0 || x.shape[1] == 0 {
        return c.fail(format!("input image {:?} is empty", x.shape));
    }
    let vertical_first = c.flag(attrs, "vertical_first", false)?;
    let alpha = c.flag(attrs, "alpha", false)?;
    if alpha && ![2, 4].contains(&x.shape[2]) {
        return c.attr(
            "alpha",
            format!(
                "needs 2 (LA) or 4 (RGBA) channels, the last one alpha; the input has {}",
                x.shape[2]
            ),
        );
    }
    Ok((
        Node::ResizePil(PilResize {
            filter: op.pil_filter().expect("a Pillow resize"),
            out_h,
            out_w,
            vertical_first,
            alpha,
        }),
        out(vec![out_h, out_w, x.shape[2]]),
    ))
}

pub(super) fn bicubic(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let r = resize_size(c, attrs, x)?;
    let antialias = c.flag(attrs, "antialias", false)?;
    let shape = vec![x.shape[0], x.shape[1], r.out_h, r.out_w];
    let node = Node::ResizeBicubic(Resize { antialias, ..r });
    Ok((node, vec![TensorSpec { dtype, shape }]))
}

/// A `vsdk.resize_bilinear` call: PyTorch's `upsample_bilinear2d`.
#[derive(Debug, Clone, PartialEq)]
pub struct Bilinear {
    pub out_h: usize,
    pub out_w: usize,
    /// Source pixels per output pixel when corners are not aligned (`in /
    /// out`, or `1 / scale_factor` where one was given).
    pub scale_h: f64,
    pub scale_w: f64,
    pub align_corners: bool,
}

impl Bilinear {
    /// The two taps of output index `i` on an axis of `len` input pixels
    /// resized to `out` with `scale`: `(i0, i1, λ)`, the value being
    /// `(1 − λ)·x[i0] + λ·x[i1]` (docs/operators.md, `vsdk.resize_bilinear@1`).
    pub fn taps(&self, i: usize, len: usize, out: usize, scale: f64) -> (usize, usize, f64) {
        // An axis whose length does not change is copied, whatever the scale.
        if out == len {
            return (i, i, 0.0);
        }
        let src = if self.align_corners {
            if out > 1 {
                (len - 1) as f64 / (out - 1) as f64 * i as f64
            } else {
                0.0
            }
        } else {
            (scale * (i as f64 + 0.5) - 0.5).max(0.0)
        };
        let i0 = (src.floor() as usize).min(len - 1);
        let i1 = (i0 + 1).min(len - 1);
        (i0, i1, src - i0 as f64)
    }
}

/// A `vsdk.resize_nearest` call: PyTorch's `nearest` or `nearest-exact`.
#[derive(Debug, Clone, PartialEq)]
pub struct Nearest {
    pub out_h: usize,
    pub out_w: usize,
    /// As PyTorch's kernels hold them: float32 (`in / out`, or
    /// `1 / scale_factor`), the source index computed in float32 too.
    pub scale_h: f32,
    pub scale_w: f32,
    /// `nearest-exact` (pixel centres) rather than `nearest` (top-left corners).
    pub exact: bool,
}

impl Nearest {
    /// The input index output index `i` reads on an axis of `len` pixels
    /// resized to `out` (docs/operators.md, `vsdk.resize_nearest@1`).
    pub fn source(&self, i: usize, len: usize, out: usize, scale: f32) -> usize {
        // PyTorch's shortcuts for `nearest`, whatever the scale.
        if !self.exact && out == len {
            return i;
        }
        if !self.exact && out == 2 * len {
            return i / 2;
        }
        let src = if self.exact {
            ((i as f64 + 0.5) * f64::from(scale)) as f32
        } else {
            i as f32 * scale
        };
        (src.floor() as usize).min(len - 1)
    }
}

/// The output size and the scale per axis of a float resize of `[N, C, H,
/// W]`: `size` (scale `in / out`) or `scale_factor` (`floor(in · s)`, scale
/// `1 / s`).
fn resize_size(c: &Check, attrs: &Attrs, x: &TensorSpec) -> Result<Resize, CatalogError> {
    c.rank("input [N, C, H, W]", x, 4)?;
    let (in_h, in_w) = (x.shape[2], x.shape[3]);
    if in_h == 0 || in_w == 0 {
        return c.fail(format!(
            "input {:?} has an empty spatial dimension",
            x.shape
        ));
    }
    let size = positive_size(c, attrs)?;
    let factor = attrs.floats(c.kernel, "scale_factor")?;
    match (size, factor) {
        (Some([oh, ow]), None) => Ok(Resize {
            out_h: oh,
            out_w: ow,
            scale_h: in_h as f64 / oh as f64,
            scale_w: in_w as f64 / ow as f64,
            antialias: false,
        }),
        (None, Some(&[sh, sw])) if sh > 0.0 && sw > 0.0 && sh.is_finite() && sw.is_finite() => {
            let (oh, ow) = ((in_h as f64 * sh).floor(), (in_w as f64 * sw).floor());
            if oh < 1.0 || ow < 1.0 {
                return c.attr(
                    "scale_factor",
                    format!("gives an empty output ({oh} x {ow})"),
                );
            }
            if oh * ow > crate::MAX_TENSOR_BYTES as f64 {
                return c.attr("scale_factor", format!("gives {oh} x {ow} pixels"));
            }
            Ok(Resize {
                out_h: oh as usize,
                out_w: ow as usize,
                scale_h: 1.0 / sh,
                scale_w: 1.0 / sw,
                antialias: false,
            })
        }
        (None, Some(v)) => c.attr(
            "scale_factor",
            format!("expected [s_h, s_w], finite and > 0, got {v:?}"),
        ),
        (Some(_), Some(_)) => c.attr("size", "give `size` or `scale_factor`, not both"),
        (None, None) => c.attr("size", "one of `size` or `scale_factor` is required"),
    }
}

pub(super) fn bilinear(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let r = resize_size(c, attrs, x)?;
    let align_corners = c.flag(attrs, "align_corners", false)?;
    let shape = vec![x.shape[0], x.shape[1], r.out_h, r.out_w];
    let node = Node::ResizeBilinear(Bilinear {
        out_h: r.out_h,
        out_w: r.out_w,
        scale_h: r.scale_h,
        scale_w: r.scale_w,
        align_corners,
    });
    Ok((node, vec![TensorSpec { dtype, shape }]))
}

pub(super) fn nearest(
    _op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let r = resize_size(c, attrs, x)?;
    let exact = c.flag(attrs, "exact", false)?;
    // PyTorch's scales: float32, `in / out` divided in float32 (both sizes
    // exact there up to 2^24), `1 / s` in float64 then narrowed (`r`'s
    // scales are `1 / s` where a scale factor was given).
    let factor = attrs.get("scale_factor").is_some();
    let scale = |len: usize, out: usize, wide: f64| {
        if factor {
            wide as f32
        } else {
            len as f32 / out as f32
        }
    };
    let shape = vec![x.shape[0], x.shape[1], r.out_h, r.out_w];
    let node = Node::ResizeNearest(Nearest {
        out_h: r.out_h,
        out_w: r.out_w,
        scale_h: scale(x.shape[2], r.out_h, r.scale_h),
        scale_w: scale(x.shape[3], r.out_w, r.scale_w),
        exact,
    });
    Ok((node, vec![TensorSpec { dtype, shape }]))
}

fn positive_size(c: &Check, attrs: &Attrs) -> Result<Option<[usize; 2]>, CatalogError> {
    match attrs.ints(c.kernel, "size")? {
        None => Ok(None),
        Some(&[h, w]) if h > 0 && w > 0 => Ok(Some([h as usize, w as usize])),
        Some(v) => c.attr("size", format!("expected [out_h, out_w] > 0, got {v:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    /// PyTorch's index maths (checked against `F.interpolate` for sizes 1 to
    /// 40 into 1 to 80 and nine scale factors; docs/validation.md): a kept
    /// axis copies, nearest doubles by halving, the float32 product decides.
    #[test]
    fn bilinear_and_nearest_sources() {
        let attrs = |a: Vec<(&str, AttrValue)>| {
            a.into_iter()
                .fold(Attrs::new(), |acc, (n, v)| acc.with(n, v))
        };
        let sf = |h: f64, w: f64| ("scale_factor", AttrValue::Floats(vec![h, w]));
        let (node, out) = Node::infer(
            Op::ResizeBilinear,
            &attrs(vec![sf(1.05, 0.5)]),
            &[f32s(&[1, 1, 7, 4])],
        )
        .unwrap();
        assert_eq!(out[0].shape, vec![1, 1, 7, 2]);
        let Node::ResizeBilinear(b) = node else {
            panic!("{node:?}")
        };
        assert_eq!(
            b.taps(3, 7, 7, b.scale_h),
            (3, 3, 0.0),
            "a kept axis copies"
        );
        // Half-pixel, clamped at 0: out 0 of 4 -> 2 reads src max(-0.25, 0).
        let (i0, i1, l) = b.taps(0, 2, 4, 0.5);
        assert_eq!((i0, i1, l), (0, 1, 0.0));
        let corners = Bilinear {
            align_corners: true,
            ..b.clone()
        };
        let (i0, i1, l) = corners.taps(2, 5, 9, 0.0);
        assert_eq!((i0, i1), (1, 2));
        assert!((l - 0.0).abs() < 1e-12, "{l}: 2·(4/8) = 1 exactly");
        assert_eq!(corners.taps(8, 5, 9, 0.0).0, 4, "the last corner");
        let (node, _) = Node::infer(
            Op::ResizeNearest,
            &attrs(vec![sf(1.05, 2.0)]),
            &[f32s(&[1, 1, 7, 5])],
        )
        .unwrap();
        let Node::ResizeNearest(n) = node else {
            panic!("{node:?}")
        };
        let rows: Vec<usize> = (0..7).map(|i| n.source(i, 7, 7, n.scale_h)).collect();
        assert_eq!(
            rows,
            [0, 1, 2, 3, 4, 5, 6],
            "kept, though 1/1.05 would repeat 0"
        );
        let cols: Vec<usize> = (0..10).map(|i| n.source(i, 5, 10, n.scale_w)).collect();
        assert_eq!(cols, [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
        let exact = Nearest {
            exact: true,
            ..n.clone()
        };
        // 2x down: corners read 0, 2, 4; centres 1, 3, 5.
        assert_eq!(
            (0..3)
                .map(|i| exact.source(i, 6, 3, 2.0))
                .collect::<Vec<_>>(),
            [1, 3, 5]
        );
        for bad in [
            attrs(vec![]),
            attrs(vec![sf(0.0, 1.0)]),
            attrs(vec![("size", AttrValue::Ints(vec![3, 3])), sf(1.0, 1.0)]),
            attrs(vec![sf(2.0, 2.0), ("exact", AttrValue::Int(2))]),
        ] {
            assert!(Node::infer(Op::ResizeNearest, &bad, &[f32s(&[1, 1, 7, 5])]).is_err());
        }
    }

    #[test]
    fn pil_resizes_share_attributes_and_differ_in_filter() {
        let u8s = |c: usize| TensorSpec::new(DType::U8, &[5, 7, c]);
        let size = Attrs::new().with("size", AttrValue::Ints(vec![3, 9]));
        for (op, filter) in [
            (Op::ResizePilBicubic, PilFilter::Bicubic),
            (Op::ResizePilLanczos, PilFilter::Lanczos),
        ] {
            assert_eq!(Op::lookup(op.name(), 1).unwrap(), op);
            let (node, out) = Node::infer(op, &size, &[u8s(3)]).unwrap();
            assert_eq!(out[0], TensorSpec::new(DType::U8, &[3, 9, 3]));
            let want = PilResize {
                filter,
                out_h: 3,
                out_w: 9,
                vertical_first: false,
                alpha: false,
            };
            assert_eq!(node, Node::ResizePil(want.clone()));
            let attrs = size
                .clone()
                .with("vertical_first", AttrValue::Int(1))
                .with("alpha", AttrValue::Int(1));
            for c in [2, 4] {
                let (node, _) = Node::infer(op, &attrs, &[u8s(c)]).unwrap();
                let want = PilResize {
                    vertical_first: true,
                    alpha: true,
                    ..want.clone()
                };
                assert_eq!(node, Node::ResizePil(want));
            }
            for c in [1, 3, 5] {
                let err = Node::infer(op, &attrs, &[u8s(c)]).unwrap_err();
                assert!(err.to_string().contains("`alpha`"), "{err}");
            }
            let bad = size.clone().with("alpha", AttrValue::Int(2));
            assert!(Node::infer(op, &bad, &[u8s(4)]).is_err());
            assert!(Node::infer(op, &size, &[f32s(&[5, 7, 3])]).is_err());
        }
    }

    #[test]
    fn dinov2_position_embedding_resize_gives_16() {
        let attrs = Attrs::new().with("scale_factor", AttrValue::Floats(vec![16.1 / 37.0; 2]));
        let (node, out) =
            Node::infer(Op::ResizeBicubic, &attrs, &[f32s(&[1, 384, 37, 37])]).unwrap();
        assert_eq!(out[0].shape, vec![1, 384, 16, 16]);
        let Node::ResizeBicubic(r) = node else {
            panic!("wrong node")
        };
        assert!((r.scale_h - 37.0 / 16.1).abs() < 1e-12);
    }
}
