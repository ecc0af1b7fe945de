use crate::Error;
use half::{bf16, f16};
use rayon::prelude::*;
use vsdk_catalog::{DType, TensorSpec};

/// A Rust type that is the in-memory form of a catalog dtype.
pub trait Element: Copy + 'static {
    const DTYPE: DType;
    /// Writes the value into `out`, which is exactly its size.
    fn put_le(self, out: &mut [u8]);
    fn read_le(bytes: &[u8]) -> Self;
    /// The value as f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:expr, $wide:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn put_le(self, out: &mut [u8]) {
                out.copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("chunk has the element's size"))
            }
            fn to_f64(self) -> f64 {
                $wide(self)
            }
        }
    };
}
element!(f32, DType::F32, f64::from);
element!(f64, DType::F64, |v| v);
element!(u8, DType::U8, f64::from);
element!(i32, DType::I32, f64::from);
element!(i64, DType::I64, |v| v as f64);
element!(f16, DType::F16, f16::to_f64);
element!(bf16, DType::BF16, bf16::to_f64);

/// A tensor in host memory: compact row-major, little-endian bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub spec: TensorSpec,
    pub bytes: Vec<u8>,
}

impl HostTensor {
    pub fn from_vec<T: Element>(shape: &[usize], values: Vec<T>) -> Result<Self, Error> {
        let spec = TensorSpec::new(T::DTYPE, shape);
        if spec.numel() != values.len() {
            return Err(Error::Tensor(format!(
                "shape {shape:?} holds {} elements, {} given",
                spec.numel(),
                values.len()
            )));
        }
        let mut bytes = vec![0u8; spec.size_bytes()];
        bytes
            .chunks_exact_mut(T::DTYPE.size_bytes())
            .zip(values)
            .for_each(|(b, v)| v.put_le(b));
        Ok(HostTensor { spec, bytes })
    }

    pub fn from_bytes(spec: TensorSpec, bytes: Vec<u8>) -> Result<Self, Error> {
        if spec.size_bytes() != bytes.len() {
            return Err(Error::Tensor(format!(
                "{} {:?} needs {} bytes, {} given",
                spec.dtype,
                spec.shape,
                spec.size_bytes(),
                bytes.len()
            )));
        }
        Ok(HostTensor { spec, bytes })
    }

    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, Error> {
        if self.spec.dtype != T::DTYPE {
            return Err(Error::Tensor(format!(
                "tensor is {}, read as {}",
                self.spec.dtype,
                T::DTYPE
            )));
        }
        Ok(self
            .bytes
            .chunks_exact(T::DTYPE.size_bytes())
            .map(T::read_le)
            .collect())
    }

    /// Every element as f64, whatever the dtype.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let read = reader(self.spec.dtype);
        self.bytes
            .chunks_exact(self.spec.dtype.size_bytes())
            .map(read)
            .collect()
    }
}

/// Reads one little-endian element of `dtype` as f64 (exact for every type
/// but i64 beyond 2^53).
pub(crate) fn reader(dtype: DType) -> fn(&[u8]) -> f64 {
    match dtype {
        DType::F16 => |b| f16::read_le(b).to_f64(),
        DType::BF16 => |b| bf16::read_le(b).to_f64(),
        DType::F32 => |b| f32::read_le(b).to_f64(),
        DType::F64 => f64::read_le,
        DType::U8 => |b| f64::from(b[0]),
        DType::I32 => |b| i32::read_le(b).to_f64(),
        DType::I64 => |b| i64::read_le(b).to_f64(),
    }
}

/// Writes an f64 as one little-endian element of `dtype`, as `vsdk.cast`
/// converts: floats round to nearest even (directly from f64), integers round
/// half to even and saturate, NaN becomes 0.
pub(crate) fn writer(dtype: DType) -> fn(f64, &mut [u8]) {
    fn int(v: f64, lo: f64, hi: f64) -> f64 {
        if v.is_nan() {
            0.0
        } else {
            v.round_ties_even().clamp(lo, hi)
        }
    }
    match dtype {
        DType::F64 => |v, b| v.put_le(b),
        DType::F32 => |v, b| (v as f32).put_le(b),
        DType::F16 => |v, b| vsdk_catalog::rounding::f16_from_f64(v).put_le(b),
        DType::BF16 => |v, b| vsdk_catalog::rounding::bf16_from_f64(v).put_le(b),
        DType::U8 => |v, b| b[0] = int(v, 0.0, 255.0) as u8,
        DType::I32 => |v, b| (int(v, i32::MIN.into(), i32::MAX.into()) as i32).put_le(b),
        DType::I64 => |v, b| (int(v, i64::MIN as f64, i64::MAX as f64) as i64).put_le(b),
    }
}

impl HostTensor {
    /// The same values in another dtype: round to nearest even for floats,
    /// round half to even and saturate for integers (as `vsdk.cast`).
    pub fn cast(&self, dtype: DType) -> HostTensor {
        if dtype == self.spec.dtype {
            return self.clone();
        }
        let (read, write) = (reader(self.spec.dtype), writer(dtype));
        let (from, to) = (self.spec.dtype.size_bytes(), dtype.size_bytes());
        let mut bytes = vec![0u8; self.bytes.len() / from * to];
        // Element by element, each exactly once through f64 (exact for every
        // float and every integer up to 2^53), in parallel blocks.
        const BLOCK: usize = 1 << 14;
        bytes
            .par_chunks_mut(BLOCK * to)
            .zip(self.bytes.par_chunks(BLOCK * from))
            .for_each(|(dst, src)| {
                for (d, s) in dst.chunks_exact_mut(to).zip(src.chunks_exact(from)) {
                    write(read(s), d);
                }
            });
        HostTensor {
            spec: TensorSpec::new(dtype, &self.spec.shape),
            bytes,
        }
    }
}
