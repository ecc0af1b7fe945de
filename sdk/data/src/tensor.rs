use crate::Error;
use half::{bf16, f16};
use rayon::prelude::*;
use std::sync::Arc;
use vsdk_catalog::{DType, TensorSpec};

/// A Rust type that is the in-memory form of a catalog dtype.
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: DType;
    /// Writes the value into `out`, which is exactly its size.
    fn put_le(self, out: &mut [u8]);
    fn read_le(bytes: &[u8]) -> Self;
    /// The value as f64 (exact for every type but i64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// An f64 converted as `vsdk.cast` converts: floats round to nearest even
    /// (directly from f64), integers round half to even and saturate, NaN
    /// becomes 0.
    fn from_f64(v: f64) -> Self;
}

fn to_int(v: f64, lo: f64, hi: f64) -> f64 {
    if v.is_nan() {
        0.0
    } else {
        v.round_ties_even().clamp(lo, hi)
    }
}

macro_rules! element {
    ($t:ty, $d:expr, $wide:expr, $narrow:expr) => {
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
            fn from_f64(v: f64) -> Self {
                $narrow(v)
            }
        }
    };
}
element!(f32, DType::F32, f64::from, |v| v as f32);
element!(f64, DType::F64, |v| v, |v| v);
element!(u8, DType::U8, f64::from, |v| to_int(v, 0.0, 255.0) as u8);
element!(
    i32,
    DType::I32,
    f64::from,
    |v| to_int(v, i32::MIN.into(), i32::MAX.into()) as i32
);
element!(
    i64,
    DType::I64,
    |v| v as f64,
    |v| to_int(v, i64::MIN as f64, i64::MAX as f64) as i64
);
element!(
    f16,
    DType::F16,
    f16::to_f64,
    vsdk_catalog::rounding::f16_from_f64
);
element!(
    bf16,
    DType::BF16,
    bf16::to_f64,
    vsdk_catalog::rounding::bf16_from_f64
);

/// Calls `$f::<T>($args)` with the Rust type `T` of a dtype.
macro_rules! with_element {
    ($dtype:expr, $f:ident $(:: <$($g:ty),*>)?, ($($arg:expr),*)) => {
        match $dtype {
            DType::F16 => $f::<$($($g,)*)? f16>($($arg),*),
            DType::BF16 => $f::<$($($g,)*)? bf16>($($arg),*),
            DType::F32 => $f::<$($($g,)*)? f32>($($arg),*),
            DType::F64 => $f::<$($($g,)*)? f64>($($arg),*),
            DType::U8 => $f::<$($($g,)*)? u8>($($arg),*),
            DType::I32 => $f::<$($($g,)*)? i32>($($arg),*),
            DType::I64 => $f::<$($($g,)*)? i64>($($arg),*),
        }
    };
}

/// Elements per parallel block of a conversion.
const BLOCK: usize = 1 << 14;

/// `dst[i] = D::from_f64(S::read(src[i]).to_f64())`, in parallel blocks:
/// every element exactly once through f64 (exact for every float and every
/// integer up to 2^53).
fn convert<S: Element, D: Element>(src: &[u8], dst: &mut [u8]) {
    let (from, to) = (S::DTYPE.size_bytes(), D::DTYPE.size_bytes());
    dst.par_chunks_mut(BLOCK * to)
        .zip(src.par_chunks(BLOCK * from))
        .for_each(|(dst, src)| {
            for (d, s) in dst.chunks_exact_mut(to).zip(src.chunks_exact(from)) {
                D::from_f64(S::read_le(s).to_f64()).put_le(d);
            }
        });
}

fn convert_from<S: Element>(src: &[u8], to: DType, dst: &mut [u8]) {
    with_element!(to, convert::<S>, (src, dst))
}

fn widen<S: Element>(src: &[u8]) -> Vec<f64> {
    let mut out = vec![0.0; src.len() / S::DTYPE.size_bytes()];
    out.par_chunks_mut(BLOCK)
        .zip(src.par_chunks(BLOCK * S::DTYPE.size_bytes()))
        .for_each(|(d, s)| {
            for (d, s) in d.iter_mut().zip(s.chunks_exact(S::DTYPE.size_bytes())) {
                *d = S::read_le(s).to_f64();
            }
        });
    out
}

/// A tensor in host memory: compact row-major, little-endian bytes.
///
/// The bytes are shared: a clone is a reference, so the runner can hand the
/// same weights to its maps, the program and the judge without copying them
/// (tensors are written once, when they are made).
#[derive(Debug, Clone, PartialEq)]
pub struct HostTensor {
    pub spec: TensorSpec,
    pub bytes: Arc<Vec<u8>>,
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
        Ok(HostTensor {
            spec,
            bytes: Arc::new(bytes),
        })
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
        Ok(HostTensor {
            spec,
            bytes: Arc::new(bytes),
        })
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
        with_element!(self.spec.dtype, widen, (&self.bytes))
    }

    /// [`HostTensor::to_f64_vec`] without the copy where the tensor is
    /// float64 already (its bytes are the slice: little-endian, and aligned
    /// as every allocation of that size is; otherwise a copy).
    pub fn f64_values(&self) -> std::borrow::Cow<'_, [f64]> {
        if cfg!(target_endian = "little") && self.spec.dtype == DType::F64 {
            if let Ok(v) = bytemuck::try_cast_slice(&self.bytes) {
                return std::borrow::Cow::Borrowed(v);
            }
        }
        std::borrow::Cow::Owned(self.to_f64_vec())
    }
}

/// Writes an f64 as one little-endian element of `dtype`, as `vsdk.cast`
/// converts ([`Element::from_f64`]).
pub(crate) fn writer(dtype: DType) -> fn(f64, &mut [u8]) {
    fn write<T: Element>() -> fn(f64, &mut [u8]) {
        |v, out| T::from_f64(v).put_le(out)
    }
    with_element!(dtype, write, ())
}

impl HostTensor {
    /// The same values in another dtype: round to nearest even for floats,
    /// round half to even and saturate for integers (as `vsdk.cast`).
    pub fn cast(&self, dtype: DType) -> HostTensor {
        if dtype == self.spec.dtype {
            return self.clone();
        }
        let mut bytes =
            vec![0u8; self.bytes.len() / self.spec.dtype.size_bytes() * dtype.size_bytes()];
        with_element!(
            self.spec.dtype,
            convert_from,
            (&self.bytes, dtype, &mut bytes)
        );
        HostTensor {
            spec: TensorSpec::new(dtype, &self.spec.shape),
            bytes: Arc::new(bytes),
        }
    }
}
