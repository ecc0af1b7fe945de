//! The calling contract rather than an operator: strides or broadcasts
//! ignored, one scratch buffer shared by concurrent calls, a serial provider
//! that fails when calls overlap. They concern every kernel, so `execute`
//! applies them itself instead of through the table.

use super::Rewrite;
use vsdk_provider_kit::ffi::*;
use vsdk_provider_kit::ProviderError;

/// `ignore_strides` / `ignore_broadcast`: the inputs with compact strides
/// (all of them, or those with a stride-0 axis), laid out in `keep`; `None`
/// when nothing changes.
///
/// # Safety
/// `call` is a valid call per provider.h.
pub(crate) unsafe fn compacted(
    mutation: &str,
    call: &vsdk_kernel_call_t,
    keep: &mut Rewrite,
) -> Option<Vec<vsdk_tensor_t>> {
    let all = match mutation {
        "ignore_strides" => true,
        "ignore_broadcast" => false,
        _ => return None,
    };
    // SAFETY: per the contract: `num_inputs` descriptors, each with `ndim`
    // shape and stride entries.
    let inputs = unsafe { std::slice::from_raw_parts(call.inputs, call.num_inputs as usize) };
    let mut out = inputs.to_vec();
    for (i, t) in inputs.iter().enumerate() {
        let n = t.ndim.max(0) as usize;
        // SAFETY: as above.
        let (shape, strides) = unsafe {
            if n == 0 {
                (&[][..], &[][..])
            } else {
                (
                    std::slice::from_raw_parts(t.shape, n),
                    std::slice::from_raw_parts(t.strides, n),
                )
            }
        };
        if !all && !strides.contains(&0) {
            continue;
        }
        let mut compact = vec![1i64; n];
        for d in (0..n.saturating_sub(1)).rev() {
            compact[d] = compact[d + 1] * shape[d + 1];
        }
        keep.ints.push(compact);
        out[i].strides = keep.ints.last().expect("just pushed").as_ptr();
    }
    Some(out)
}

/// One scratch buffer for every call (the bug: a provider that declares
/// itself thread safe).
static SCRATCH: std::sync::Mutex<Vec<u8>> = std::sync::Mutex::new(Vec::new());

/// Copies each output into [`SCRATCH`], waits a little (as a kernel using
/// it would), and copies it back: a call overlapping this one overwrites it.
pub(crate) fn through_scratch(call: &vsdk_provider_kit::KernelCall) {
    for out in &call.outputs {
        let n = out.numel() * out.dtype.size_bytes();
        {
            let mut s = SCRATCH
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            s.clear();
            // SAFETY: a compact output of `n` bytes in host memory, written by the target.
            s.extend_from_slice(unsafe { std::slice::from_raw_parts(out.ptr, n) });
        }
        std::thread::sleep(std::time::Duration::from_micros(300));
        let s = SCRATCH
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        // SAFETY: as above; the copy is clipped to the output's size.
        unsafe { std::ptr::copy_nonoverlapping(s.as_ptr(), out.ptr, n.min(s.len())) };
    }
}

/// `serial_overlap`: calls in flight; a second one at once is an error.
pub(crate) struct InFlight;

static IN_FLIGHT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl InFlight {
    pub(crate) fn enter() -> Result<InFlight, ProviderError> {
        use std::sync::atomic::Ordering;
        let before = IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        let guard = InFlight;
        if before > 0 {
            return Err(ProviderError::internal(
                "called while another call was running, though the table declares VSDK_CONCURRENCY_SERIAL",
            ));
        }
        // Long enough for an overlapping call to arrive.
        std::thread::sleep(std::time::Duration::from_micros(200));
        Ok(guard)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_FLIGHT.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}
