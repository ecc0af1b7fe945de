use crate::Error;
use half::{bf16, f16};
use vsdk_catalog::{DType, TensorSpec};

/// A Rust type that is the in-memory form of a catalog dtype.
pub trait Element: Copy + 'static {
    const DTYPE: DType;
    fn write_le(self, out: &mut Vec<u8>);
    fn read_le(bytes: &[u8]) -> Self;
    /// The value as f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
}

macro_rules! element {
    ($t:ty, $d:expr, $wide:expr) => {
        impl Element for $t {
            const DTYPE: DType = $d;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
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
        let mut bytes = Vec::with_capacity(spec.size_bytes());
        values.into_iter().for_each(|v| v.write_le(&mut bytes));
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
        fn all<T: Element>(b: &[u8]) -> Vec<f64> {
            b.chunks_exact(T::DTYPE.size_bytes())
                .map(|c| T::read_le(c).to_f64())
                .collect()
        }
        match self.spec.dtype {
            DType::F16 => all::<f16>(&self.bytes),
            DType::BF16 => all::<bf16>(&self.bytes),
            DType::F32 => all::<f32>(&self.bytes),
            DType::F64 => all::<f64>(&self.bytes),
            DType::U8 => all::<u8>(&self.bytes),
            DType::I32 => all::<i32>(&self.bytes),
            DType::I64 => all::<i64>(&self.bytes),
        }
    }
}

impl HostTensor {
    /// The same values in another dtype: round to nearest even for floats,
    /// round half to even and saturate for integers (as `vsdk.cast`).
    pub fn cast(&self, dtype: DType) -> HostTensor {
        if dtype == self.spec.dtype {
            return self.clone();
        }
        let values = self.to_f64_vec();
        let int = |v: f64, lo: f64, hi: f64| {
            if v.is_nan() {
                0.0
            } else {
                v.round_ties_even().clamp(lo, hi)
            }
        };
        let mut bytes = Vec::with_capacity(values.len() * dtype.size_bytes());
        for v in values {
            match dtype {
                DType::F64 => v.write_le(&mut bytes),
                DType::F32 => (v as f32).write_le(&mut bytes),
                DType::F16 => vsdk_catalog::rounding::f16_from_f64(v).write_le(&mut bytes),
                DType::BF16 => vsdk_catalog::rounding::bf16_from_f64(v).write_le(&mut bytes),
                DType::U8 => (int(v, 0.0, 255.0) as u8).write_le(&mut bytes),
                DType::I32 => {
                    (int(v, i32::MIN.into(), i32::MAX.into()) as i32).write_le(&mut bytes)
                }
                DType::I64 => {
                    (int(v, i64::MIN as f64, i64::MAX as f64) as i64).write_le(&mut bytes)
                }
            }
        }
        HostTensor {
            spec: TensorSpec::new(dtype, &self.spec.shape),
            bytes,
        }
    }
}
