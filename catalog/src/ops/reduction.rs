//! Reductions: pooling over 2-D windows (max, average, adaptive average) and
//! sums and means over axes. A pool's windows are defined here once
//! ([`PoolAxis::window`]): the providers and the error model iterate them
//! rather than re-deriving `ceil_mode`, padding and bin edges.

use super::{Check, Inferred};
use crate::{Attrs, DType, Node, Op, TensorSpec};

/// What a pool computes over its window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolKind {
    /// The largest element; NaN if the window holds one. Padding never wins.
    Max,
    /// The sum over the window's input elements, divided by their count or,
    /// with `count_include_pad`, by the window's size clipped to the padded
    /// input (PyTorch's rule).
    Avg { count_include_pad: bool },
}

/// The windows along one spatial axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolAxis {
    /// Window `o` starts at `o·stride − pad_begin`, its taps `dilation` apart.
    Fixed {
        input: usize,
        output: usize,
        kernel: usize,
        stride: usize,
        pad_begin: usize,
        pad_end: usize,
        dilation: usize,
    },
    /// Bin `o` covers `[⌊o·in/out⌋, ⌈(o+1)·in/out⌉)`: bins overlap where
    /// `in` is not a multiple of `out`.
    Adaptive { input: usize, output: usize },
}

/// One window along one axis: the input indices `first + j·step` for `j` in
/// `0..count`, and `padded`, the window's size counting padding (clipped to
/// the padded input), which `count_include_pad` divides by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub first: usize,
    pub count: usize,
    pub step: usize,
    pub padded: usize,
}

impl Window {
    pub fn indices(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.count).map(move |j| self.first + j * self.step)
    }
}

impl PoolAxis {
    pub fn output(&self) -> usize {
        match *self {
            PoolAxis::Fixed { output, .. } | PoolAxis::Adaptive { output, .. } => output,
        }
    }

    /// The window of output `o` (`o < self.output()`).
    pub fn window(&self, o: usize) -> Window {
        match *self {
            PoolAxis::Fixed {
                input,
                kernel,
                stride,
                pad_begin,
                pad_end,
                dilation,
                ..
            } => {
                // In padded coordinates (input index + pad_begin).
                let start = o * stride;
                let span = dilation * (kernel - 1) + 1;
                let end = (start + span).min(input + pad_begin + pad_end);
                // The first tap at or after pad_begin, the last before input + pad_begin.
                let skip = pad_begin.saturating_sub(start).div_ceil(dilation);
                let first = start + skip * dilation;
                let count = if first >= input + pad_begin {
                    0
                } else {
                    ((input + pad_begin - 1 - first) / dilation + 1).min(kernel - skip.min(kernel))
                };
                Window {
                    first: first.saturating_sub(pad_begin),
                    count,
                    step: dilation,
                    padded: (end - start).div_ceil(dilation),
                }
            }
            PoolAxis::Adaptive { input, output } => {
                let first = o * input / output;
                let end = ((o + 1) * input).div_ceil(output);
                Window {
                    first,
                    count: end - first,
                    step: 1,
                    padded: end - first,
                }
            }
        }
    }
}

/// A 2-D pool over the last two axes of `[N, C, H, W]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pool2d {
    pub kind: PoolKind,
    pub axes: [PoolAxis; 2],
}

impl Pool2d {
    /// The divisor of an average at output `(oh, ow)` (1 for max).
    pub fn divisor(&self, oh: usize, ow: usize) -> usize {
        let (h, w) = (self.axes[0].window(oh), self.axes[1].window(ow));
        match self.kind {
            PoolKind::Avg {
                count_include_pad: true,
            } => h.padded * w.padded,
            PoolKind::Avg { .. } => h.count * w.count,
            PoolKind::Max => 1,
        }
    }

    /// The input elements of output `(oh, ow)`'s window.
    pub fn terms(&self, oh: usize, ow: usize) -> usize {
        self.axes[0].window(oh).count * self.axes[1].window(ow).count
    }
}

/// `vsdk.sum` or `vsdk.mean` over `axes` (sorted, distinct).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reduce {
    pub mean: bool,
    pub axes: Vec<usize>,
    pub keepdims: bool,
}

impl Reduce {
    /// The input elements of each output.
    pub fn terms(&self, shape: &[usize]) -> usize {
        self.axes.iter().map(|&a| shape[a]).product()
    }
}

/// The largest kernel side a pool accepts: a window is walked element by
/// element, and a bound keeps `o·stride + span` far from overflow.
const MAX_SIDE: i64 = 1 << 24;

pub(super) fn pool2d(
    op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    c.rank("input [N, C, H, W]", x, 4)?;
    let (h, w) = (x.shape[2], x.shape[3]);
    // A plane side past 2^31 fits the byte limit only beside an empty axis: refused, so that
    // window arithmetic (`(o + 1)·in`, the GPU's int taps) stays far from overflow.
    if h.max(w) > i32::MAX as usize {
        return c.fail(format!("a plane side of {:?} exceeds 2^31 - 1", x.shape));
    }
    let axes = if op == Op::AdaptiveAvgPool2d {
        let size = match attrs.ints(c.kernel, "output_size")? {
            Some(&[oh, ow]) if (1..=MAX_SIDE).contains(&oh) && (1..=MAX_SIDE).contains(&ow) => {
                [oh as usize, ow as usize]
            }
            Some(v) => return c.attr("output_size", format!("expected [H, W] >= 1, got {v:?}")),
            None => return c.attr("output_size", "required"),
        };
        if h == 0 || w == 0 {
            return c.fail(format!("input {:?} has an empty plane", x.shape));
        }
        [
            PoolAxis::Adaptive {
                input: h,
                output: size[0],
            },
            PoolAxis::Adaptive {
                input: w,
                output: size[1],
            },
        ]
    } else {
        let kernel = match attrs.ints(c.kernel, "kernel")? {
            Some(&[a, b]) if (1..=MAX_SIDE).contains(&a) && (1..=MAX_SIDE).contains(&b) => {
                [a as usize, b as usize]
            }
            Some(v) => return c.attr("kernel", format!("expected [kH, kW] >= 1, got {v:?}")),
            None => return c.attr("kernel", "required"),
        };
        let strides = c.pair(attrs, "strides", 1, 1)?;
        let dilations = c.pair(attrs, "dilations", 1, 1)?;
        let pads = match attrs.ints(c.kernel, "pads")? {
            None => [0; 4],
            Some(&[t, l, b, r]) if [t, l, b, r].iter().all(|p| (0..MAX_SIDE).contains(p)) => {
                [t as usize, l as usize, b as usize, r as usize]
            }
            Some(v) => {
                return c.attr(
                    "pads",
                    format!("expected [top, left, bottom, right] >= 0, got {v:?}"),
                )
            }
        };
        if strides
            .iter()
            .chain(&dilations)
            .any(|&s| s as i64 > MAX_SIDE)
        {
            return c.fail(format!(
                "strides {strides:?} or dilations {dilations:?} exceed {MAX_SIDE}"
            ));
        }
        let ceil_mode = c.flag(attrs, "ceil_mode", false)?;
        let mut axes = [PoolAxis::Adaptive {
            input: 0,
            output: 0,
        }; 2];
        for a in 0..2 {
            let input = x.shape[2 + a];
            let (pad_begin, pad_end) = (pads[a], pads[a + 2]);
            let span = dilations[a] * (kernel[a] - 1) + 1;
            let padded = input + pad_begin + pad_end;
            if input == 0 || padded < span {
                return c.fail(format!(
                    "axis {}: the window (kernel {}, dilation {}) spans {span}, more than the padded input {padded}",
                    2 + a,
                    kernel[a],
                    dilations[a]
                ));
            }
            let steps = padded - span;
            let mut output = if ceil_mode {
                steps.div_ceil(strides[a]) + 1
            } else {
                steps / strides[a] + 1
            };
            // PyTorch's rule: the last window must start inside the input or
            // its leading padding, never in the trailing padding.
            if ceil_mode && (output - 1) * strides[a] >= input + pad_begin {
                output -= 1;
            }
            let axis = PoolAxis::Fixed {
                input,
                output,
                kernel: kernel[a],
                stride: strides[a],
                pad_begin,
                pad_end,
                dilation: dilations[a],
            };
            // Only a window reaching into the padding can be empty: those at either end.
            let lead = pad_begin.div_ceil(strides[a]).min(output);
            let tail = (output.saturating_sub((span + pad_end).div_ceil(strides[a]) + 1)).max(lead);
            if let Some(o) = (0..lead)
                .chain(tail..output)
                .find(|&o| axis.window(o).count == 0)
            {
                return c.fail(format!(
                    "axis {}: window {o} lies wholly in the padding (pads {pads:?}, kernel {kernel:?})",
                    2 + a
                ));
            }
            axes[a] = axis;
        }
        axes
    };
    let kind = match op {
        Op::MaxPool2d => PoolKind::Max,
        Op::AvgPool2d => PoolKind::Avg {
            count_include_pad: c.flag(attrs, "count_include_pad", true)?,
        },
        _ => PoolKind::Avg {
            count_include_pad: false,
        },
    };
    let shape = vec![x.shape[0], x.shape[1], axes[0].output(), axes[1].output()];
    Ok((
        Node::Pool2d(Pool2d { kind, axes }),
        vec![TensorSpec { dtype, shape }],
    ))
}

pub(super) fn reduce(
    op: Op,
    c: &Check,
    attrs: &Attrs,
    inputs: &[TensorSpec],
    dtype: DType,
) -> Inferred {
    let x = &inputs[0];
    let rank = x.shape.len();
    let Some(list) = attrs.ints(c.kernel, "axes")? else {
        return c.attr("axes", "required (the axes to reduce)");
    };
    if list.is_empty() || rank == 0 {
        return c.attr("axes", "at least one axis of an input of rank >= 1");
    }
    let mut axes = list
        .iter()
        .map(|&a| c.axis("axes", a, rank))
        .collect::<Result<Vec<_>, _>>()?;
    axes.sort_unstable();
    if axes.windows(2).any(|p| p[0] == p[1]) {
        return c.attr("axes", format!("an axis appears twice in {list:?}"));
    }
    let keepdims = c.flag(attrs, "keepdims", false)?;
    if axes
        .iter()
        .try_fold(1usize, |n, &a| n.checked_mul(x.shape[a]))
        .is_none()
    {
        return c.fail(format!("the terms per output of {:?} overflow", x.shape));
    }
    let mean = op == Op::Mean;
    if mean && axes.iter().any(|&a| x.shape[a] == 0) {
        return c.fail(format!(
            "the mean over an empty axis of {:?} is 0/0",
            x.shape
        ));
    }
    let shape = (0..rank)
        .filter_map(|a| match (axes.contains(&a), keepdims) {
            (false, _) => Some(x.shape[a]),
            (true, true) => Some(1),
            (true, false) => None,
        })
        .collect();
    Ok((
        Node::Reduce(Reduce {
            mean,
            axes,
            keepdims,
        }),
        vec![TensorSpec { dtype, shape }],
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AttrValue;

    fn f32s(shape: &[usize]) -> TensorSpec {
        TensorSpec::new(DType::F32, shape)
    }

    fn ints(v: &[i64]) -> AttrValue {
        AttrValue::Ints(v.to_vec())
    }

    fn pool(op: Op, attrs: &Attrs, shape: &[usize]) -> Result<Pool2d, crate::CatalogError> {
        let (node, out) = Node::infer(op, attrs, &[f32s(shape)])?;
        let Node::Pool2d(p) = node else {
            panic!("{node:?}")
        };
        assert_eq!(
            out[0].shape,
            vec![shape[0], shape[1], p.axes[0].output(), p.axes[1].output()]
        );
        Ok(p)
    }

    /// Windows of one axis as (first input index, count, padded size).
    fn windows(a: &PoolAxis) -> Vec<(usize, usize, usize)> {
        (0..a.output())
            .map(|o| {
                let w = a.window(o);
                (w.first, w.count, w.padded)
            })
            .collect()
    }

    #[test]
    fn resnet_stem_max_pool_and_ceil_mode() {
        // ResNet's 3x3/2 pad 1 on 112: 56 either way.
        let a = Attrs::new()
            .with("kernel", ints(&[3, 3]))
            .with("strides", ints(&[2, 2]))
            .with("pads", ints(&[1, 1, 1, 1]));
        let p = pool(Op::MaxPool2d, &a, &[1, 64, 112, 112]).unwrap();
        assert_eq!(p.axes[0].output(), 56);
        // 3x3/2 on 6 without padding: 2 windows, 3 with ceil_mode, the last
        // hanging one past the edge (a single element, index 4..5).
        let a = Attrs::new()
            .with("kernel", ints(&[3, 3]))
            .with("strides", ints(&[2, 2]));
        let floor = pool(Op::MaxPool2d, &a, &[1, 1, 6, 6]).unwrap();
        assert_eq!(windows(&floor.axes[0]), [(0, 3, 3), (2, 3, 3)]);
        let ceil = a.clone().with("ceil_mode", AttrValue::Int(1));
        let p = pool(Op::MaxPool2d, &ceil, &[1, 1, 6, 6]).unwrap();
        assert_eq!(windows(&p.axes[0]), [(0, 3, 3), (2, 3, 3), (4, 2, 2)]);
        // ceil_mode never starts a window in the trailing padding: 2/2 pad 1
        // on 5 gives 3 windows, not 4 (the fourth would be padding alone).
        let a = Attrs::new()
            .with("kernel", ints(&[2, 2]))
            .with("strides", ints(&[2, 2]))
            .with("pads", ints(&[1, 1, 1, 1]))
            .with("ceil_mode", AttrValue::Int(1));
        let p = pool(Op::MaxPool2d, &a, &[1, 1, 5, 5]).unwrap();
        assert_eq!(windows(&p.axes[0]), [(0, 1, 2), (1, 2, 2), (3, 2, 2)]);
    }

    #[test]
    fn avg_pool_divisors_follow_count_include_pad() {
        let a = Attrs::new()
            .with("kernel", ints(&[3, 3]))
            .with("strides", ints(&[2, 2]))
            .with("pads", ints(&[1, 1, 1, 1]))
            .with("ceil_mode", AttrValue::Int(1));
        // 3/2 pad 1 on 6 with ceil: windows at -1, 1, 3, 5; the last clipped
        // to the padded end 7: padded size 2, one input element.
        let p = pool(Op::AvgPool2d, &a, &[1, 1, 6, 6]).unwrap();
        assert_eq!(
            windows(&p.axes[0]),
            [(0, 2, 3), (1, 3, 3), (3, 3, 3), (5, 1, 2)]
        );
        assert_eq!(p.divisor(0, 0), 9);
        assert_eq!(p.divisor(3, 3), 4);
        assert_eq!(p.terms(0, 0), 4);
        let excl = a.with("count_include_pad", AttrValue::Int(0));
        let p = pool(Op::AvgPool2d, &excl, &[1, 1, 6, 6]).unwrap();
        assert_eq!((p.divisor(0, 0), p.divisor(3, 3)), (4, 1));
    }

    #[test]
    fn dilated_windows_skip_the_padding() {
        let a = Attrs::new()
            .with("kernel", ints(&[3, 1]))
            .with("dilations", ints(&[2, 1]))
            .with("pads", ints(&[2, 0, 2, 0]));
        // Taps at -2, 0, 2 / -1, 1, 3 / 0, 2, 4 ... on 5.
        let p = pool(Op::MaxPool2d, &a, &[1, 1, 5, 1]).unwrap();
        assert_eq!(
            windows(&p.axes[0])
                .iter()
                .map(|w| (w.0, w.1))
                .collect::<Vec<_>>(),
            [(0, 2), (1, 2), (0, 3), (1, 2), (2, 2)]
        );
        // A window of padding alone is an error, not a -inf: taps at -1 and 1 of 1.
        let a = Attrs::new()
            .with("kernel", ints(&[2, 1]))
            .with("dilations", ints(&[2, 1]))
            .with("pads", ints(&[1, 0, 1, 0]));
        let err = pool(Op::MaxPool2d, &a, &[1, 1, 1, 1]).unwrap_err();
        assert!(err.to_string().contains("wholly in the padding"), "{err}");
        let a = Attrs::new().with("kernel", ints(&[4, 1]));
        let err = pool(Op::MaxPool2d, &a, &[1, 1, 3, 1]).unwrap_err();
        assert!(err.to_string().contains("spans"), "{err}");
    }

    #[test]
    fn adaptive_bins_floor_their_start_and_ceil_their_end() {
        let a = Attrs::new().with("output_size", ints(&[3, 1]));
        let p = pool(Op::AdaptiveAvgPool2d, &a, &[1, 1, 7, 5]).unwrap();
        // 7 into 3: [0, 3), [2, 5), [4, 7).
        assert_eq!(windows(&p.axes[0]), [(0, 3, 3), (2, 3, 3), (4, 3, 3)]);
        assert_eq!(windows(&p.axes[1]), [(0, 5, 5)]);
        // Upsampling bins repeat elements: 2 into 3.
        let a = Attrs::new().with("output_size", ints(&[3, 3]));
        let p = pool(Op::AdaptiveAvgPool2d, &a, &[1, 1, 2, 2]).unwrap();
        assert_eq!(windows(&p.axes[0]), [(0, 1, 1), (0, 2, 2), (1, 1, 1)]);
        assert!(pool(Op::AdaptiveAvgPool2d, &Attrs::new(), &[1, 1, 2, 2]).is_err());
    }

    #[test]
    fn pool_attributes_are_checked() {
        let k = Attrs::new().with("kernel", ints(&[2, 2]));
        for (name, bad) in [
            ("kernel", ints(&[0, 2])),
            ("strides", ints(&[0, 1])),
            ("pads", ints(&[-1, 0, 0, 0])),
            ("pads", ints(&[1, 1])),
            ("ceil_mode", AttrValue::Int(2)),
            ("count_include_pad", AttrValue::Int(-1)),
        ] {
            let a = k.clone().with(name, bad.clone());
            let err = pool(Op::AvgPool2d, &a, &[1, 1, 4, 4]).unwrap_err();
            assert!(err.to_string().contains(name), "{name} {bad:?}: {err}");
        }
        assert!(pool(Op::MaxPool2d, &Attrs::new(), &[1, 1, 4, 4]).is_err());
        assert!(Node::infer(Op::MaxPool2d, &k, &[f32s(&[1, 4, 4])]).is_err());
        // count_include_pad is average pooling's alone.
        let a = k.with("count_include_pad", AttrValue::Int(0));
        assert!(pool(Op::MaxPool2d, &a, &[1, 1, 4, 4]).is_err());
    }

    #[test]
    fn sums_and_means_over_axes() {
        let x = [f32s(&[2, 3, 4, 5])];
        let a = Attrs::new().with("axes", ints(&[-1, 2]));
        let (node, out) = Node::infer(Op::Mean, &a, &x).unwrap();
        assert_eq!(out[0].shape, [2, 3]);
        assert_eq!(
            node,
            Node::Reduce(Reduce {
                mean: true,
                axes: vec![2, 3],
                keepdims: false
            })
        );
        let keep = a.clone().with("keepdims", AttrValue::Int(1));
        let (node, out) = Node::infer(Op::Sum, &keep, &x).unwrap();
        assert_eq!(out[0].shape, [2, 3, 1, 1]);
        let Node::Reduce(r) = node else { panic!() };
        assert_eq!((r.mean, r.terms(&x[0].shape)), (false, 20));
        for bad in [ints(&[]), ints(&[4]), ints(&[1, -3])] {
            let a = Attrs::new().with("axes", bad.clone());
            assert!(Node::infer(Op::Sum, &a, &x).is_err(), "{bad:?}");
        }
        assert!(Node::infer(Op::Sum, &Attrs::new(), &x).is_err());
        let empty = [f32s(&[2, 0])];
        let a = Attrs::new().with("axes", ints(&[1]));
        assert!(Node::infer(Op::Mean, &a, &empty).is_err());
        assert_eq!(Node::infer(Op::Sum, &a, &empty).unwrap().1[0].shape, [2]);
    }
}
