use crate::DType;

/// Largest tensor the catalog admits, in bytes (2^34, 16 GiB): every shape
/// product and byte size is computed with overflow detection and checked
/// against this before any output is allocated. A guard against corrupt or
/// hostile shapes, far above any real suite.
pub const MAX_TENSOR_BYTES: u64 = 1 << 34;

/// The dtype and shape of a tensor, without its data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorSpec {
    pub dtype: DType,
    pub shape: Vec<usize>,
}

impl TensorSpec {
    pub fn new(dtype: DType, shape: &[usize]) -> Self {
        TensorSpec {
            dtype,
            shape: shape.to_vec(),
        }
    }

    /// The element count; saturates at `usize::MAX` rather than wrapping
    /// (a spec that overflows never matches a real buffer). Specs the
    /// catalog admits have a [`checked_size_bytes`](Self::checked_size_bytes).
    pub fn numel(&self) -> usize {
        checked_numel(&self.shape).unwrap_or(usize::MAX)
    }

    /// The byte size; saturates at `usize::MAX` rather than wrapping.
    pub fn size_bytes(&self) -> usize {
        self.checked_size_bytes().unwrap_or(usize::MAX)
    }

    /// The byte size, or None if it overflows.
    pub fn checked_size_bytes(&self) -> Option<usize> {
        checked_numel(&self.shape)?.checked_mul(self.dtype.size_bytes())
    }

    /// The byte size if it is at most [`MAX_TENSOR_BYTES`], else why not.
    pub fn bounded_size_bytes(&self) -> Result<usize, String> {
        match self.checked_size_bytes() {
            Some(b) if b as u64 <= MAX_TENSOR_BYTES => Ok(b),
            Some(b) => Err(format!(
                "{} {:?} is {b} bytes, above the {MAX_TENSOR_BYTES}-byte tensor limit",
                self.dtype, self.shape
            )),
            None => Err(format!(
                "{} {:?}: the element count overflows (the tensor limit is {MAX_TENSOR_BYTES} bytes)",
                self.dtype, self.shape
            )),
        }
    }
}

/// The product of `shape`, or None if it overflows `usize` (a shape with a
/// zero dimension holds 0 elements, whatever its other dimensions).
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// NumPy broadcasting: shapes are aligned at the right; each pair of
/// dimensions must be equal or one of them 1.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(n).map_or(1, |j| s[j]);
    (0..n)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(
            broadcast_shapes(&[3, 1, 1], &[1, 3, 4, 5]),
            Some(vec![1, 3, 4, 5])
        );
        assert_eq!(broadcast_shapes(&[], &[2, 2]), Some(vec![2, 2]));
        assert_eq!(broadcast_shapes(&[384], &[257, 384]), Some(vec![257, 384]));
        assert_eq!(broadcast_shapes(&[2, 3], &[3, 2]), None);
    }

    #[test]
    fn sizes_never_wrap() {
        let huge = TensorSpec::new(DType::F32, &[(1 << 62) + 1, 128]);
        assert_eq!(huge.checked_size_bytes(), None);
        assert_eq!(huge.numel(), usize::MAX);
        assert!(huge.bounded_size_bytes().unwrap_err().contains("overflows"));
        let big = TensorSpec::new(DType::U8, &[1 << 20, 1 << 15]);
        assert!(big.bounded_size_bytes().unwrap_err().contains("above"));
        assert_eq!(TensorSpec::new(DType::F64, &[usize::MAX, 0]).numel(), 0);
        assert_eq!(
            TensorSpec::new(DType::F64, &[3, 4]).bounded_size_bytes(),
            Ok(96)
        );
    }
}
