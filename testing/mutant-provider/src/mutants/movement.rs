//! Data movement: a crop that starts one row lower.

use super::{named, Rewrite};
use vsdk_provider_kit::ffi::*;

/// `crop_off_by_one`: a crop of uint8 data starts one row lower.
///
/// # Safety
/// `keep.attrs` and `inputs` are a valid call's (provider.h).
pub(super) unsafe fn crop_off_by_one(keep: &mut Rewrite, inputs: &[vsdk_tensor_t]) -> bool {
    if inputs[0].dtype.code != VSDK_DTYPE_UINT {
        return false;
    }
    let Some(o) = keep.attrs.iter().position(|a| named(a, c"offsets")) else {
        return false;
    };
    // SAFETY: `offsets` is an int list of the input's rank.
    let mut offsets = unsafe {
        let l = keep.attrs[o].value.ints;
        std::slice::from_raw_parts(l.data, l.len as usize).to_vec()
    };
    offsets[0] += 1;
    keep.ints.push(offsets);
    let list = vsdk_int_list_t {
        data: keep.ints[0].as_ptr(),
        len: keep.ints[0].len() as u64,
    };
    keep.attrs[o].value = vsdk_attr_value_t { ints: list };
    true
}
