//! Image resizes: Pillow's 8-bit filters (bit-exact) and PyTorch's bicubic.

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
    let out = |shape: Vec<usize>| vec![TensorSpec { dtype, shape }];
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
    let r = match (size, factor) {
        (Some([oh, ow]), None) => Resize {
            out_h: oh,
            out_w: ow,
            scale_h: in_h as f64 / oh as f64,
            scale_w: in_w as f64 / ow as f64,
            antialias: false,
        },
        (None, Some(&[sh, sw])) if sh > 0.0 && sw > 0.0 && sh.is_finite() && sw.is_finite() => {
            let (oh, ow) = ((in_h as f64 * sh).floor(), (in_w as f64 * sw).floor());
            if oh < 1.0 || ow < 1.0 {
                return c.attr(
                    "scale_factor",
                    format!("gives an empty output ({oh} x {ow})"),
                );
            }
            Resize {
                out_h: oh as usize,
                out_w: ow as usize,
                scale_h: 1.0 / sh,
                scale_w: 1.0 / sw,
                antialias: false,
            }
        }
        (None, Some(v)) => {
            return c.attr(
                "scale_factor",
                format!("expected [s_h, s_w], finite and > 0, got {v:?}"),
            )
        }
        (Some(_), Some(_)) => return c.attr("size", "give `size` or `scale_factor`, not both"),
        (None, None) => return c.attr("size", "one of `size` or `scale_factor` is required"),
    };
    let antialias = c.flag(attrs, "antialias", false)?;
    let shape = vec![x.shape[0], x.shape[1], r.out_h, r.out_w];
    Ok((Node::ResizeBicubic(Resize { antialias, ..r }), out(shape)))
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
