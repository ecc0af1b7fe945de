//! Element-wise operators: GELU by its tanh approximation, a cast that
//! truncates.

use super::{read, write};
use vsdk_catalog::DType;
use vsdk_provider_kit::{KernelCall, ProviderError};

/// GELU by its tanh approximation, `x/2·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`,
/// where the catalog's `vsdk.gelu` is the exact `x·Φ(x)`.
pub(super) fn gelu_tanh(call: &KernelCall) -> Result<(), ProviderError> {
    let x = read(&call.inputs[0])?;
    let c = (2.0f32 / std::f32::consts::PI).sqrt();
    let y: Vec<f32> = x
        .iter()
        .map(|&x| 0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh()))
        .collect();
    write(&call.outputs[0], &y, false);
    Ok(())
}

/// A float-to-integer `vsdk.cast` by truncation toward zero (C's and Rust's
/// `as`, saturating, NaN to 0) where the catalog rounds half to even.
pub(super) fn cast_truncate(call: &KernelCall) -> Result<(), ProviderError> {
    let (x, out) = (read(&call.inputs[0])?, &call.outputs[0]);
    for (i, &v) in x.iter().enumerate() {
        // SAFETY: a compact integer output of `x.len()` elements, in host memory.
        unsafe {
            let p = out.ptr.add(i * out.dtype.size_bytes());
            match out.dtype {
                DType::U8 => p.write(v as u8),
                DType::I32 => p.cast::<i32>().write_unaligned(v as i32),
                DType::I64 => p.cast::<i64>().write_unaligned(v as i64),
                d => return Err(ProviderError::invalid(format!("cast_truncate: to {d}"))),
            }
        }
    }
    Ok(())
}

/// Only float-to-integer casts truncate; others are the target's.
pub(super) fn truncating(call: &KernelCall) -> bool {
    call.inputs[0].dtype.is_float() && !call.outputs[0].dtype.is_float()
}
