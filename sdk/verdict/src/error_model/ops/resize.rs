//! Resampling: the bicubic filters' magnitude bound.

use super::*;

/// `factor·max|x|` over each `[H, W]` plane of an NCHW tensor, spread over
/// the output plane. Both bicubic variants have `Σ|w| ≤ 1.375` per axis, so
/// `Σ|w|·|x| ≤ 1.89·max|x|` in 2-D.
pub(super) fn plane_max(
    x: &HostTensor,
    out_shape: &[usize],
    factor: f64,
) -> Result<Vec<f64>, Error> {
    let planes = out_shape[0] * out_shape[1];
    let (plane_in, plane_out) = (
        x.spec.shape[2] * x.spec.shape[3],
        out_shape[2] * out_shape[3],
    );
    let v = x.f64_values();
    if v.len() != planes * plane_in {
        return Err(Error::Tensor("resize bound: unexpected input shape".into()));
    }
    Ok(v.chunks(plane_in.max(1))
        .flat_map(|p| {
            let m = factor * p.iter().fold(0.0f64, |m, x| m.max(x.abs()));
            std::iter::repeat_n(m, plane_out)
        })
        .collect())
}
