//! Sparse voxel kernels (docs/operators.md, "Sparse voxel tensors"). Each
//! call builds a hash of its coordinates (checked: in range, no voxel twice).
//! The submanifold convolution gathers each voxel's 27 neighbours into one
//! row of a dense matrix (zeros where a neighbour is absent) and hands it to
//! this provider's own `linear`, so every dtype path (bfloat16 on AVX512,
//! float16 through float32, the float64 reference's fixed summation order) is
//! the linear's. The others make coordinates and indices, move elements, or
//! average rows in float64 and round once.

use super::view;
use half::{bf16, f16};
use ndarray::ArrayViewD;
use rayon::prelude::*;
use std::collections::HashMap;
use vsdk_catalog::rounding::{bf16_from_f64, f16_from_f64};
use vsdk_catalog::voxels::Voxel;
use vsdk_catalog::{DType, Node, SPARSE_OFFSETS};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// # Safety
/// As `kernels::run`: every tensor is live memory of its dtype and shape, the
/// output compact and distinct from the inputs.
pub unsafe fn run(node: &Node, inputs: &[TensorArg], out: &TensorArg) -> Result<(), ProviderError> {
    // SAFETY (every call): forwarded.
    unsafe {
        match node {
            Node::SparseConv3d => conv3d(inputs, out),
            Node::SparseDownsampleCoords { voxels } => {
                let (parents, _) = downsample(&inputs[0], *voxels)?;
                write_voxels(out_bytes(out, parents.len() * 16), parents.into_iter());
                Ok(())
            }
            Node::SparseDownsampleIndex { voxels } => {
                let (_, inverse) = downsample(&inputs[0], *voxels)?;
                write_i32s(out_bytes(out, inverse.len() * 4), inverse.into_iter());
                Ok(())
            }
            Node::SegmentMean { segments } => segment_mean(&inputs[0], &inputs[1], *segments, out),
            Node::GatherRows => {
                let m = inputs[0].shape[0];
                let index = indices(&inputs[1], m)?;
                copy_rows(&inputs[0], index.into_iter(), out);
                Ok(())
            }
            Node::RepeatRows { times } => {
                let n = inputs[0].shape[0] * times;
                copy_rows(&inputs[0], (0..n).map(|r| r / times), out);
                Ok(())
            }
            Node::SparseSubdivideCoords => {
                let voxels = voxels(&inputs[0]);
                hash(&voxels)?;
                let children = voxels.iter().flat_map(|v| {
                    (0..8).map(move |m| {
                        [
                            v[0],
                            2 * v[1] + (m >> 2),
                            2 * v[2] + ((m >> 1) & 1),
                            2 * v[3] + (m & 1),
                        ]
                    })
                });
                write_voxels(out_bytes(out, voxels.len() * 8 * 16), children);
                Ok(())
            }
            _ => Err(ProviderError::internal(format!(
                "{node:?} reached the sparse kernels"
            ))),
        }
    }
}

/// The coordinates.
///
/// # Safety
/// As [`view`] (an int32 `[N, 4]` tensor).
unsafe fn voxels(t: &TensorArg) -> Vec<Voxel> {
    // SAFETY: forwarded.
    let c: ArrayViewD<i32> = unsafe { view(t) };
    c.outer_iter()
        .map(|row| [row[0], row[1], row[2], row[3]])
        .collect()
}

/// Row of every voxel, the coordinates checked (in range, no voxel twice).
fn hash(voxels: &[Voxel]) -> Result<HashMap<Voxel, u32>, ProviderError> {
    vsdk_catalog::voxels::index(voxels).map_err(ProviderError::invalid)
}

/// Reads element `(row, col)` of a rank-2 tensor through its strides.
#[derive(Clone, Copy)]
struct Rows<'a> {
    t: &'a TensorArg,
    size: usize,
}

// SAFETY: the pointer is only read, while the call that owns it runs.
unsafe impl Send for Rows<'_> {}
// SAFETY: as above.
unsafe impl Sync for Rows<'_> {}

impl Rows<'_> {
    /// # Safety
    /// `row` and `col` lie in the tensor's shape (a live view, per `run`).
    unsafe fn bytes(&self, row: usize, col: usize) -> &[u8] {
        let at = (row * self.t.strides[0] + col * self.t.strides[1]) * self.size;
        // SAFETY: the element lies in the view's memory, per the contract.
        unsafe { std::slice::from_raw_parts(self.t.ptr.add(at), self.size) }
    }

    /// # Safety
    /// As [`Rows::bytes`]; the dtype is a float.
    unsafe fn f64(&self, row: usize, col: usize) -> f64 {
        // SAFETY: forwarded.
        let b = unsafe { self.bytes(row, col) };
        match self.t.dtype {
            DType::F64 => f64::from_ne_bytes(b.try_into().expect("8 bytes")),
            DType::F32 => f64::from(f32::from_ne_bytes(b.try_into().expect("4 bytes"))),
            DType::F16 => f16::from_ne_bytes(b.try_into().expect("2 bytes")).to_f64(),
            _ => bf16::from_ne_bytes(b.try_into().expect("2 bytes")).to_f64(),
        }
    }
}

fn rows(t: &TensorArg) -> Rows<'_> {
    Rows {
        t,
        size: t.dtype.size_bytes(),
    }
}

/// A float64 value rounded once to `dtype`, as bytes.
fn store(dtype: DType, v: f64, out: &mut [u8]) {
    match dtype {
        DType::F64 => out.copy_from_slice(&v.to_ne_bytes()),
        DType::F32 => out.copy_from_slice(&(v as f32).to_ne_bytes()),
        DType::F16 => out.copy_from_slice(&f16_from_f64(v).to_ne_bytes()),
        _ => out.copy_from_slice(&bf16_from_f64(v).to_ne_bytes()),
    }
}

/// # Safety
/// `out` is a compact tensor of `len` bytes, written by no one else while
/// the slice lives (the memory is the host's, not `out`'s).
unsafe fn out_bytes<'a>(out: &TensorArg, len: usize) -> &'a mut [u8] {
    // SAFETY: per the contract.
    unsafe { std::slice::from_raw_parts_mut(out.ptr, len) }
}

fn write_voxels(out: &mut [u8], voxels: impl Iterator<Item = Voxel>) {
    for (dst, v) in out.chunks_exact_mut(16).zip(voxels) {
        for (d, x) in dst.chunks_exact_mut(4).zip(v) {
            d.copy_from_slice(&x.to_ne_bytes());
        }
    }
}

/// A host buffer seen as a compact tensor of the call's device.
fn host_arg(like: &TensorArg, dtype: DType, bytes: &mut [u8], shape: Vec<usize>) -> TensorArg {
    let strides = match shape.len() {
        2 => vec![shape[1], 1],
        _ => vec![1],
    };
    TensorArg {
        ptr: bytes.as_mut_ptr(),
        dtype,
        shape,
        strides,
        device: like.device,
    }
}

/// # Safety
/// As [`run`].
unsafe fn conv3d(inputs: &[TensorArg], out: &TensorArg) -> Result<(), ProviderError> {
    let (feats, w) = (&inputs[0], &inputs[2]);
    // SAFETY: forwarded.
    let voxels = unsafe { voxels(&inputs[1]) };
    let index = hash(&voxels)?;
    let (n, cin, cout) = (voxels.len(), feats.shape[1], w.shape[2]);
    let size = feats.dtype.size_bytes();
    let k_len = 27 * cin;
    // The gathered rows, 27 times the features: held to the catalog's
    // tensor limit like any tensor the provider allocates.
    let bytes = (n as u64)
        .checked_mul(k_len as u64 * size as u64)
        .filter(|&b| b <= vsdk_catalog::MAX_TENSOR_BYTES)
        .ok_or_else(|| {
            ProviderError::invalid(format!(
                "{n} voxels x 27 neighbours x {cin} channels: the gathered matrix passes the {} GiB tensor limit",
                vsdk_catalog::MAX_TENSOR_BYTES >> 30
            ))
        })?;
    // All-zero bytes are +0 in every float dtype.
    let mut gathered = vec![0u8; bytes as usize];
    let f = rows(feats);
    gathered
        .par_chunks_mut((k_len * size).max(1))
        .zip(voxels.par_iter())
        .for_each(|(row, v)| {
            for (k, d) in SPARSE_OFFSETS.iter().enumerate() {
                let at = [v[0], v[1] + d[0], v[2] + d[1], v[3] + d[2]];
                if let Some(&j) = index.get(&at) {
                    for c in 0..cin {
                        let dst = (k * cin + c) * size;
                        // SAFETY: j < N and c < Cin lie in feats' shape.
                        row[dst..dst + size].copy_from_slice(unsafe { f.bytes(j as usize, c) });
                    }
                }
            }
        });
    // linear's weight is [Cout, K]: w[k, c, o] at column k·Cin + c of row o.
    let mut weight = vec![0u8; cout * k_len * size];
    for k in 0..27 {
        for c in 0..cin {
            for o in 0..cout {
                let at = (k * w.strides[0] + c * w.strides[1] + o * w.strides[2]) * size;
                let dst = (o * k_len + k * cin + c) * size;
                // SAFETY: (k, c, o) lies in w's shape, a live view.
                let src = unsafe { std::slice::from_raw_parts(w.ptr.add(at), size) };
                weight[dst..dst + size].copy_from_slice(src);
            }
        }
    }
    let x = host_arg(feats, feats.dtype, &mut gathered, vec![n, k_len]);
    let wt = host_arg(w, w.dtype, &mut weight, vec![cout, k_len]);
    let mut linear_inputs = vec![x, wt];
    linear_inputs.extend(inputs.get(3).cloned());
    // The host buffers outlive the call; they are compact and alias nothing.
    super::run(&Node::Linear, &linear_inputs, std::slice::from_ref(out))
}

/// The sorted distinct parents of the coordinates and each voxel's row
/// among them; `voxels` must be their number.
///
/// # Safety
/// As [`voxels`].
unsafe fn downsample(
    coords: &TensorArg,
    voxels_out: usize,
) -> Result<(Vec<Voxel>, Vec<u32>), ProviderError> {
    // SAFETY: forwarded.
    let voxels = unsafe { voxels(coords) };
    hash(&voxels)?;
    let parent = |v: &Voxel| [v[0], v[1] >> 1, v[2] >> 1, v[3] >> 1];
    let mut parents: Vec<Voxel> = voxels.iter().map(parent).collect();
    parents.sort_unstable();
    parents.dedup();
    if parents.len() != voxels_out {
        return Err(ProviderError::invalid(format!(
            "the coordinates have {} distinct parents; the call's `voxels` is {voxels_out}",
            parents.len()
        )));
    }
    let inverse = voxels
        .iter()
        .map(|v| {
            parents
                .binary_search(&parent(v))
                .map_or(u32::MAX, |m| m as u32)
        })
        .collect();
    Ok((parents, inverse))
}

/// An int32 index, every entry checked to lie in `[0, rows)`.
///
/// # Safety
/// As [`view`] (an int32 `[N]` tensor).
unsafe fn indices(t: &TensorArg, rows: usize) -> Result<Vec<usize>, ProviderError> {
    // SAFETY: forwarded.
    let idx: ArrayViewD<i32> = unsafe { view(t) };
    idx.iter()
        .enumerate()
        .map(|(i, &j)| {
            usize::try_from(j)
                .ok()
                .filter(|&j| j < rows)
                .ok_or_else(|| {
                    ProviderError::invalid(format!("index[{i}] is {j}: rows are 0..{rows}"))
                })
        })
        .collect()
}

/// `out[r] = x[source(r)]`, element bytes copied.
///
/// # Safety
/// As [`run`]; every source row lies in `x`.
unsafe fn copy_rows(x: &TensorArg, source: impl Iterator<Item = usize>, out: &TensorArg) {
    let (c, size) = (x.shape[1], x.dtype.size_bytes());
    let rows_out = out.shape[0];
    let src = rows(x);
    // SAFETY: compact output of rows_out·C elements.
    let dst = unsafe { out_bytes(out, rows_out * c * size) };
    if c == 0 {
        return;
    }
    for (row, j) in dst.chunks_exact_mut(c * size).zip(source) {
        for ch in 0..c {
            // SAFETY: j is a row of x, ch < C.
            row[ch * size..(ch + 1) * size].copy_from_slice(unsafe { src.bytes(j, ch) });
        }
    }
}

/// # Safety
/// As [`run`].
unsafe fn segment_mean(
    x: &TensorArg,
    index: &TensorArg,
    segments: usize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    // SAFETY: forwarded.
    let index = unsafe { indices(index, segments) }?;
    let (c, size) = (x.shape[1], x.dtype.size_bytes());
    // Sums in float64, in row order; divided once and rounded once.
    let mut sums = vec![0.0f64; segments * c];
    let mut counts = vec![0u32; segments];
    let f = rows(x);
    for (i, &m) in index.iter().enumerate() {
        counts[m] += 1;
        for (ch, s) in sums[m * c..(m + 1) * c].iter_mut().enumerate() {
            // SAFETY: i < N, ch < C.
            *s += unsafe { f.f64(i, ch) };
        }
    }
    // SAFETY: compact output of M·C elements.
    let dst = unsafe { out_bytes(out, sums.len() * size) };
    for (e, (d, s)) in dst.chunks_exact_mut(size).zip(&sums).enumerate() {
        let n = counts[e / c];
        store(x.dtype, if n == 0 { 0.0 } else { s / f64::from(n) }, d);
    }
    Ok(())
}

fn write_i32s(out: &mut [u8], values: impl Iterator<Item = u32>) {
    for (d, v) in out.chunks_exact_mut(4).zip(values) {
        d.copy_from_slice(&(v as i32).to_ne_bytes());
    }
}
