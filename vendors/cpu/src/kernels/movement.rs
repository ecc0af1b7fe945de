//! Kernels that move elements without arithmetic, for every dtype: they run on
//! an unsigned carrier type of the element's width.

use super::{view, view_mut};
use ndarray::{ArrayViewD, ArrayViewMutD, Axis, Slice};
use vsdk_catalog::Node;
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

unsafe fn typed<C: Copy + Send + Sync>(node: &Node, inputs: &[TensorArg], out: &TensorArg) {
    // SAFETY: forwarded from `run`.
    let ins: Vec<ArrayViewD<C>> = inputs.iter().map(|t| unsafe { view(t) }).collect();
    // SAFETY: forwarded from `run`.
    let mut o: ArrayViewMutD<C> = unsafe { view_mut(out) };
    match node {
        Node::Crop(c) => {
            let window = ins[0].slice_each_axis(|ax| {
                let (off, n) = (c.offsets[ax.axis.index()], c.sizes[ax.axis.index()]);
                Slice::from(off..off + n)
            });
            o.assign(&window);
        }
        Node::Concat { axis } => {
            let mut start = 0;
            for x in &ins {
                let n = x.shape()[*axis];
                o.slice_axis_mut(Axis(*axis), Slice::from(start..start + n))
                    .assign(x);
                start += n;
            }
        }
        Node::Reshape => {
            // Row-major order is what a reshape keeps.
            let dst = o.as_slice_mut().expect("outputs are compact");
            dst.iter_mut().zip(ins[0].iter()).for_each(|(d, s)| *d = *s);
        }
        Node::Permute { perm } => o.assign(&ins[0].view().permuted_axes(perm.as_slice())),
        _ => unreachable!("movement::run is only called for movement nodes"),
    }
}
