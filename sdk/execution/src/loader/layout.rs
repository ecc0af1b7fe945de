//! How a tensor lies in its buffer when it is not compact row-major: what a
//! kernel call's views are made of.

use serde::{Deserialize, Serialize};
use vips_data::limits::MAX_TENSOR_BYTES;
use vips_data::HostTensor;
use vsdk_catalog::TensorSpec;

/// How an input lies in its buffer when it is not compact row-major: a
/// stride per axis in elements (0 repeats the axis, as a broadcast view
/// does) and an offset in elements. Elements the view never addresses
/// (padding, the offset) hold [`Layout::FILLER`], a NaN in every float
/// dtype: a kernel that ignores the strides reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    pub strides: Vec<u64>,
    pub offset: u64,
}

impl Layout {
    pub const FILLER: u8 = 0xFF;

    /// The elements of the buffer the view spans from element 0, refused
    /// when the strides do not fit the shape or the span passes
    /// [`MAX_TENSOR_BYTES`].
    pub fn span(&self, spec: &TensorSpec) -> Result<u64, String> {
        if self.strides.len() != spec.shape.len() {
            return Err(format!(
                "a layout of {} strides for a tensor of rank {}",
                self.strides.len(),
                spec.shape.len()
            ));
        }
        let last = if spec.numel() == 0 {
            Some(0)
        } else {
            spec.shape
                .iter()
                .zip(&self.strides)
                .try_fold(self.offset + 1, |acc, (&n, &s)| {
                    (n as u64 - 1)
                        .checked_mul(s)
                        .and_then(|d| acc.checked_add(d))
                })
        };
        last.filter(|&n| {
            n.checked_mul(spec.dtype.size_bytes() as u64)
                .is_some_and(|b| b <= MAX_TENSOR_BYTES)
        })
        .ok_or_else(|| {
            format!(
                "a view of shape {:?} spans more than the tensor limit",
                spec.shape
            )
        })
    }

    /// The buffer element of each element of the tensor, in row-major order.
    pub fn positions(&self, shape: &[usize]) -> Vec<u64> {
        let mut out = vec![self.offset];
        for (&n, &s) in shape.iter().zip(&self.strides) {
            out = out
                .iter()
                .flat_map(|&base| (0..n as u64).map(move |i| base + i * s))
                .collect();
        }
        out
    }

    /// The view's bytes: `t`'s elements at their positions, filler elsewhere
    /// (`span` elements).
    pub fn scatter(&self, t: &HostTensor, span: u64) -> Vec<u8> {
        let width = t.spec.dtype.size_bytes();
        let mut bytes = vec![Self::FILLER; span as usize * width];
        for (e, p) in t.bytes.chunks(width).zip(self.positions(&t.spec.shape)) {
            let at = p as usize * width;
            bytes[at..at + width].copy_from_slice(e);
        }
        bytes
    }
}
