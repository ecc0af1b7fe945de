//! `vsdk.cast`: every catalog dtype to every other. Float to integer rounds
//! half to even and saturates (NaN becomes 0); to a float, round to nearest even.

use super::{view, view_mut};
use half::{bf16, f16};
use ndarray::Zip;
use vsdk_catalog::DType;
use vsdk_provider_kit::{ProviderError, TensorArg};

#[derive(Clone, Copy)]
enum Num {
    F(f64),
    I(i64),
}

impl Num {
    fn to_int(self, lo: i64, hi: i64) -> i64 {
        match self {
            Num::I(i) => i.clamp(lo, hi),
            Num::F(f) if f.is_nan() => 0,
            // `as` saturates; the clamp handles narrower targets.
            Num::F(f) => (f.round_ties_even() as i64).clamp(lo, hi),
        }
    }
    fn to_f64(self) -> f64 {
        match self {
            Num::F(f) => f,
            Num::I(i) => i as f64,
        }
    }
    fn to_f32(self) -> f32 {
        match self {
            Num::F(f) => f as f32,
            Num::I(i) => i as f32,
        }
    }
}

/// # Safety
/// As `kernels::run`.
pub unsafe fn run(x: &TensorArg, out: &TensorArg) -> Result<(), ProviderError> {
    // SAFETY: forwarded; each view's type matches its tensor's dtype.
    let values: Vec<Num> = unsafe {
        match x.dtype {
            DType::F16 => view::<f16>(x).iter().map(|v| Num::F(v.to_f64())).collect(),
            DType::BF16 => view::<bf16>(x).iter().map(|v| Num::F(v.to_f64())).collect(),
            DType::F32 => view::<f32>(x)
                .iter()
                .map(|&v| Num::F(f64::from(v)))
                .collect(),
            DType::F64 => view::<f64>(x).iter().map(|&v| Num::F(v)).collect(),
            DType::U8 => view::<u8>(x)
                .iter()
                .map(|&v| Num::I(i64::from(v)))
                .collect(),
            DType::I32 => view::<i32>(x)
                .iter()
                .map(|&v| Num::I(i64::from(v)))
                .collect(),
            DType::I64 => view::<i64>(x).iter().map(|&v| Num::I(v)).collect(),
        }
    };
    let values = ndarray::ArrayView::from_shape(out.shape.as_slice(), &values)
        .map_err(|e| ProviderError::internal(format!("cast: {e}")))?;
    // SAFETY (each arm): forwarded; the output is compact and of this dtype.
    unsafe {
        macro_rules! store {
            ($t:ty, $f:expr) => {
                Zip::from(&mut view_mut::<$t>(out))
                    .and(&values)
                    .par_for_each(|o, &v| *o = $f(v))
            };
        }
        match out.dtype {
            DType::F16 => store!(f16, |v: Num| vsdk_catalog::rounding::f16_from_f64(
                v.to_f64()
            )),
            DType::BF16 => store!(bf16, |v: Num| vsdk_catalog::rounding::bf16_from_f64(
                v.to_f64()
            )),
            DType::F32 => store!(f32, Num::to_f32),
            DType::F64 => store!(f64, Num::to_f64),
            DType::U8 => store!(u8, |v: Num| v.to_int(0, 255) as u8),
            DType::I32 => store!(i32, |v: Num| v.to_int(i32::MIN.into(), i32::MAX.into())
                as i32),
            DType::I64 => store!(i64, |v: Num| v.to_int(i64::MIN, i64::MAX)),
        }
    }
    Ok(())
}
