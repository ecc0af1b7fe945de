//! Kernels that move elements without arithmetic, for every dtype: they run on
//! an unsigned carrier type of the element's width.

use super::{view, view_mut};
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, IxDyn, Slice, Zip};
use vsdk_catalog::{Node, Pad};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// # Safety
/// As `kernels::run`.
pub unsafe fn run(node: &Node, inputs: &[TensorArg], out: &TensorArg) -> Result<(), ProviderError> {
    // SAFETY: forwarded; a carrier has the element's size and alignment.
    unsafe {
        match out.dtype.size_bytes() {
            1 => typed::<u8>(node, inputs, out),
            2 => typed::<u16>(node, inputs, out),
            4 => typed::<u32>(node, inputs, out),
            8 => typed::<u64>(node, inputs, out),
            n => return Err(ProviderError::unsupported(format!("{n}-byte elements"))),
        }
    }
    Ok(())
}

unsafe fn typed<C: Copy + Send + Sync + num_traits::NumCast>(
    node: &Node,
    inputs: &[TensorArg],
    out: &TensorArg,
) {
    // SAFETY: forwarded from `run`.
    let ins: Vec<ArrayViewD<C>> = inputs.iter().map(|t| unsafe { view(t) }).collect();
    // SAFETY: forwarded from `run`.
    let mut o: ArrayViewMutD<C> = unsafe { view_mut(out) };
    match node {
        Node::Crop(c) => {
            let window = ins[0].slice_each_axis(|ax| {
                let d = ax.axis.index();
                let (off, n, step) = (c.offsets[d], c.sizes[d], c.steps[d]);
                // Up to just past the last element read (the catalog
                // checked it is inside); an empty window stays empty.
                let end = if n == 0 {
                    off
                } else {
                    off + (n - 1) * step + 1
                };
                Slice::new(off as isize, Some(end as isize), step as isize)
            });
            copy_into(window, o);
        }
        Node::Pad(p) => {
            let width = 8 * std::mem::size_of::<C>();
            let bits = p.fill_bits(out.dtype) & (u64::MAX >> (64 - width));
            let fill: C = num_traits::cast(bits).expect("masked to the carrier's width");
            pad(&ins[0], p, fill, o);
        }
        Node::Concat { axis } => {
            let mut start = 0;
            for x in &ins {
                let n = x.shape()[*axis];
                copy_into(
                    x.view(),
                    o.slice_axis_mut(Axis(*axis), Slice::from(start..start + n)),
                );
                start += n;
            }
        }
        Node::Reshape => {
            // Row-major order is what a reshape keeps.
            let dst = o.as_slice_mut().expect("outputs are compact");
            match ins[0].as_slice() {
                Some(src) => dst.copy_from_slice(src),
                None => dst.iter_mut().zip(ins[0].iter()).for_each(|(d, s)| *d = *s),
            }
        }
        Node::Permute { perm } => copy_into(ins[0].view().permuted_axes(perm.as_slice()), o),
        _ => unreachable!("movement::run is only called for movement nodes"),
    }
}

/// `vsdk.pad`: each output element from its source index on every axis
/// (tables per axis), or `fill`.
fn pad<C: Copy>(x: &ArrayViewD<C>, p: &Pad, fill: C, mut o: ArrayViewMutD<C>) {
    let n = x.shape();
    let sources: Vec<Vec<Option<usize>>> = o
        .shape()
        .iter()
        .enumerate()
        .map(|(d, &len)| (0..len).map(|i| p.source(d, i, n[d])).collect())
        .collect();
    let mut at = vec![0usize; n.len()];
    for (index, v) in o.indexed_iter_mut() {
        let inside = (0..at.len()).all(|d| match sources[d][index[d]] {
            Some(j) => {
                at[d] = j;
                true
            }
            None => false,
        });
        *v = if inside { x[IxDyn(&at)] } else { fill };
    }
}

/// `dst = src` (same shape): one `memcpy` when both are in standard layout,
/// one per innermost row when that axis is contiguous in both (crops,
/// concatenations and permutations that keep the last axis), element by
/// element otherwise.
fn copy_into<C: Copy>(src: ArrayViewD<C>, mut dst: ArrayViewMutD<C>) {
    if let (Some(s), Some(d)) = (src.as_slice(), dst.as_slice_mut()) {
        return d.copy_from_slice(s);
    }
    let Some(last) = src.ndim().checked_sub(1) else {
        return dst.assign(&src);
    };
    if src.strides()[last] != 1 || dst.strides()[last] != 1 {
        return dst.assign(&src);
    }
    Zip::from(dst.lanes_mut(Axis(last)))
        .and(src.lanes(Axis(last)))
        .for_each(|mut d, s| {
            let d = d.as_slice_mut().expect("a unit-stride lane is a slice");
            d.copy_from_slice(s.as_slice().expect("a unit-stride lane is a slice"));
        });
}
