//! The sparse voxel operators (docs/operators.md, "Sparse voxel tensors") as
//! launches of the kernel source's device hash, bitonic sort and row copies.
//! The convolution gathers each voxel's 27 neighbours into a `[N·27, Cin]`
//! matrix on the device and hands it to the same `linear` as every other
//! GEMM. Flags the device raises for bad input are read back here and
//! explained on the host with the catalog's own check, so the message names
//! the row the CPU provider names.

use super::linear::linear;
use super::{grid_for, int, ptr, suffix, Arg, Call};
use crate::backend::{Backend, DevicePtr};
use vsdk_catalog::voxels::{self, Voxel};
use vsdk_catalog::{Node, MAX_TENSOR_BYTES};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// The kernel source's sort orders (`vips_row_before`).
const BY_PARENT: i32 = 0;
const BY_INDEX: i32 = 1;

/// A device hash of a call's voxels (`shift` 0) or of their parents (1):
/// `rep[i]` is the row whose entry holds row i's key.
struct Hash {
    slots: DevicePtr,
    mask: i64,
    rep: DevicePtr,
}

/// Compact int32 coordinates on the device, checked on the device.
struct Coords {
    ptr: DevicePtr,
    n: usize,
}

pub(super) fn run<B: Backend>(
    c: &mut Call<B>,
    node: &Node,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    match node {
        Node::SparseConv3d => conv3d(c, ins, out),
        Node::SparseDownsampleCoords { voxels } | Node::SparseDownsampleIndex { voxels } => {
            let coords = c.coords(&ins[0])?;
            c.hash(&coords, 0)?;
            let parents = c.hash(&coords, 1)?;
            let (sorted, m) = c.distinct_parents(&coords, &parents, *voxels)?;
            let position = c.temporary(coords.n * 4)?;
            let (parents_out, index_out) = match node {
                Node::SparseDownsampleCoords { .. } => (ptr(out), None),
                _ => (c.temporary(m * 16)?, Some(ptr(out))),
            };
            let args = vec![
                Arg::Ptr(coords.ptr),
                Arg::Ptr(sorted),
                Arg::I64(int(m, "a voxel count")?),
                Arg::Ptr(parents_out),
                Arg::Ptr(position),
            ];
            c.launch("vips_sparse_parents", grid_for(m), 0, args)?;
            match index_out {
                None => Ok(()),
                Some(index) => {
                    let args = vec![
                        Arg::Ptr(parents.rep),
                        Arg::Ptr(position),
                        Arg::I64(int(coords.n, "a voxel count")?),
                        Arg::Ptr(index),
                    ];
                    c.launch("vips_sparse_inverse", grid_for(coords.n), 0, args)
                }
            }
        }
        Node::SegmentMean { segments } => segment_mean(c, ins, *segments, out),
        Node::GatherRows => {
            let index = c.index(&ins[1], ins[0].shape[0])?;
            c.rows(&ins[0], Some(index), out.shape[0], 1, ptr(out))
        }
        Node::RepeatRows { times } => c.rows(&ins[0], None, out.shape[0], *times, ptr(out)),
        Node::SparseSubdivideCoords => {
            let coords = c.coords(&ins[0])?;
            c.hash(&coords, 0)?;
            let args = vec![
                Arg::Ptr(coords.ptr),
                Arg::I64(int(coords.n, "a voxel count")?),
                Arg::Ptr(ptr(out)),
            ];
            c.launch("vips_sparse_subdivide", grid_for(8 * coords.n), 0, args)
        }
        _ => Err(ProviderError::internal(format!(
            "{node:?} reached the sparse kernels"
        ))),
    }
}

impl<B: Backend> Call<'_, B> {
    /// `n` int32s on the device: `first + step · i`.
    pub(super) fn fill(
        &self,
        p: DevicePtr,
        n: usize,
        first: i32,
        step: i32,
    ) -> Result<(), ProviderError> {
        if n == 0 {
            return Ok(());
        }
        let args = vec![
            Arg::Ptr(p),
            Arg::I64(int(n, "a fill's length")?),
            Arg::I32(first),
            Arg::I32(step),
        ];
        self.launch("vips_sparse_fill", grid_for(n), 0, args)
    }

    pub(super) fn read_i32(&self, p: DevicePtr) -> Result<i32, ProviderError> {
        let mut b = [0u8; 4];
        self.backend.copy_to_host(&mut b, p)?;
        Ok(i32::from_ne_bytes(b))
    }

    /// A flag word started at `n` (no row), for a kernel's atomicMin.
    pub(super) fn flag(&mut self, n: i32) -> Result<DevicePtr, ProviderError> {
        let f = self.temporary(4)?;
        self.fill(f, 1, n, 0)?;
        Ok(f)
    }

    /// The coordinates, compact, every entry checked to lie in `[0, 2^30)`.
    fn coords(&mut self, t: &TensorArg) -> Result<Coords, ProviderError> {
        let coords = Coords {
            ptr: self.compact(t)?,
            n: t.shape[0],
        };
        let n: i32 = int(coords.n, "a voxel count")?;
        let bad = self.flag(n)?;
        let args = vec![Arg::Ptr(coords.ptr), Arg::I64(n.into()), Arg::Ptr(bad)];
        self.launch("vips_sparse_check_coords", grid_for(coords.n), 0, args)?;
        if self.read_i32(bad)? < n {
            return Err(self.explain(&coords));
        }
        Ok(coords)
    }

    /// What the catalog's check says of coordinates the device flagged.
    fn explain(&self, coords: &Coords) -> ProviderError {
        let mut bytes = vec![0u8; coords.n * 16];
        if let Err(e) = self.backend.copy_to_host(&mut bytes, coords.ptr) {
            return e;
        }
        let rows: Vec<Voxel> = bytes
            .chunks_exact(16)
            .map(|r| {
                std::array::from_fn(|j| {
                    i32::from_ne_bytes([r[4 * j], r[4 * j + 1], r[4 * j + 2], r[4 * j + 3]])
                })
            })
            .collect();
        match voxels::index(&rows) {
            Err(why) => ProviderError::invalid(why),
            Ok(_) => ProviderError::internal(
                "the device flagged these coordinates, the host's check finds them valid",
            ),
        }
    }

    /// The hash of every voxel (`shift` 0: a voxel given twice is an error)
    /// or of every parent (`shift` 1).
    fn hash(&mut self, coords: &Coords, shift: i32) -> Result<Hash, ProviderError> {
        let n: i32 = int(coords.n, "a voxel count")?;
        let capacity = (2 * coords.n).next_power_of_two().max(2);
        let hash = Hash {
            slots: self.temporary(capacity * 4)?,
            mask: int(capacity - 1, "a hash's size")?,
            rep: self.temporary(coords.n * 4)?,
        };
        self.fill(hash.slots, capacity, -1, 0)?;
        let twice = self.flag(n)?;
        let args = vec![
            Arg::Ptr(coords.ptr),
            Arg::I64(n.into()),
            Arg::I32(shift),
            Arg::Ptr(hash.slots),
            Arg::I64(hash.mask),
            Arg::Ptr(hash.rep),
            Arg::Ptr(twice),
        ];
        self.launch("vips_sparse_insert", grid_for(coords.n), 0, args)?;
        if shift == 0 && self.read_i32(twice)? < n {
            return Err(self.explain(coords));
        }
        Ok(hash)
    }

    /// The rows holding each distinct parent, sorted by parent; their number
    /// must be the call's `voxels`.
    fn distinct_parents(
        &mut self,
        coords: &Coords,
        parents: &Hash,
        voxels: usize,
    ) -> Result<(DevicePtr, usize), ProviderError> {
        let padded = coords.n.next_power_of_two().max(1);
        let list = self.temporary(padded * 4)?;
        self.fill(list, padded, -1, 0)?;
        let count = self.flag(0)?;
        let args = vec![
            Arg::Ptr(parents.rep),
            Arg::I64(int(coords.n, "a voxel count")?),
            Arg::Ptr(list),
            Arg::Ptr(count),
        ];
        self.launch("vips_sparse_unique", grid_for(coords.n), 0, args)?;
        let m = self.read_i32(count)? as usize;
        if m != voxels {
            return Err(ProviderError::invalid(format!(
                "the coordinates have {m} distinct parents; the call's `voxels` is {voxels}"
            )));
        }
        self.sort(list, padded, coords.ptr, 0, BY_PARENT)?;
        Ok((list, m))
    }

    /// A bitonic sort of `count` (a power of two) row numbers, -1 last.
    fn sort(
        &self,
        rows: DevicePtr,
        count: usize,
        coords: DevicePtr,
        index: DevicePtr,
        mode: i32,
    ) -> Result<(), ProviderError> {
        let mut k = 2;
        while k <= count {
            let mut j = k / 2;
            while j > 0 {
                let args = vec![
                    Arg::Ptr(rows),
                    Arg::I64(int(count, "a sort's length")?),
                    Arg::I64(int(k, "a sort step")?),
                    Arg::I64(int(j, "a sort step")?),
                    Arg::Ptr(coords),
                    Arg::Ptr(index),
                    Arg::I32(mode),
                ];
                self.launch("vips_sparse_sort_step", grid_for(count), 0, args)?;
                j /= 2;
            }
            k *= 2;
        }
        Ok(())
    }

    /// An int32 index, compact, every entry checked to lie in `[0, rows)`.
    fn index(&mut self, t: &TensorArg, rows: usize) -> Result<DevicePtr, ProviderError> {
        let index = self.compact(t)?;
        let n: i32 = int(t.numel(), "an index's length")?;
        let bad = self.flag(n)?;
        let args = vec![
            Arg::Ptr(index),
            Arg::I64(n.into()),
            Arg::I32(int(rows, "a row count")?),
            Arg::Ptr(bad),
        ];
        self.launch("vips_sparse_check_index", grid_for(t.numel()), 0, args)?;
        let i = self.read_i32(bad)?;
        if i < n {
            let j = self.read_i32(index + 4 * i as u64)?;
            return Err(ProviderError::invalid(format!(
                "index[{i}] is {j}: rows are 0..{rows}"
            )));
        }
        Ok(index)
    }

    /// `out[r] = x[index[r]]` (-1: zeros), or `x[r / times]` without an index.
    fn rows(
        &mut self,
        x: &TensorArg,
        index: Option<DevicePtr>,
        rows: usize,
        times: usize,
        out: DevicePtr,
    ) -> Result<(), ProviderError> {
        let cols = x.shape[1];
        if rows * cols == 0 {
            return Ok(());
        }
        let args = vec![
            Arg::Ptr(self.compact(x)?),
            Arg::Ptr(index.unwrap_or(0)),
            Arg::Ptr(out),
            Arg::I64(int(rows, "a row count")?),
            Arg::I64(int(cols, "a row's length")?),
            Arg::I64(int(times, "a repeat count")?),
        ];
        let kernel = format!("vips_rows_{}", x.dtype.size_bytes());
        self.launch(&kernel, grid_for(rows * cols), 0, args)
    }
}

/// A device buffer seen as a compact tensor, for `linear`.
fn device_arg(like: &TensorArg, p: DevicePtr, shape: [usize; 2]) -> TensorArg {
    TensorArg {
        ptr: p as usize as *mut u8,
        dtype: like.dtype,
        shape: shape.to_vec(),
        strides: vec![shape[1], 1],
        device: like.device,
    }
}

fn conv3d<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (feats, w) = (&ins[0], &ins[2]);
    let coords = c.coords(&ins[1])?;
    let hash = c.hash(&coords, 0)?;
    if out.numel() == 0 {
        return Ok(());
    }
    let (n, cin, cout) = (coords.n, feats.shape[1], w.shape[2]);
    let k_len = 27 * cin;
    // The gathered rows, 27 times the features: held to the catalog's
    // tensor limit like any tensor (the CPU provider's rule).
    let size = feats.dtype.size_bytes();
    let bytes = (n as u64)
        .checked_mul(k_len as u64 * size as u64)
        .filter(|&b| b <= MAX_TENSOR_BYTES)
        .ok_or_else(|| {
            ProviderError::invalid(format!(
                "{n} voxels x 27 neighbours x {cin} channels: the gathered matrix passes the {} GiB tensor limit",
                MAX_TENSOR_BYTES >> 30
            ))
        })?;
    let neighbours = c.temporary(27 * n * 4)?;
    let args = vec![
        Arg::Ptr(coords.ptr),
        Arg::I64(int(n, "a voxel count")?),
        Arg::Ptr(hash.slots),
        Arg::I64(hash.mask),
        Arg::Ptr(neighbours),
    ];
    c.launch("vips_sparse_neighbours", grid_for(27 * n), 0, args)?;
    let gathered = c.temporary(bytes as usize)?;
    c.rows(feats, Some(neighbours), 27 * n, 1, gathered)?;
    // linear's weight is [Cout, 27·Cin]: w[k, c, o] at column k·Cin + c of row o.
    let wc = c.compact(w)?;
    let weight = c.temporary(cout * k_len * size)?;
    c.copy(w, wc, &[1, cout], weight, &[k_len, 1], &[cout, k_len])?;
    let mut linear_ins = vec![
        device_arg(feats, gathered, [n, k_len]),
        device_arg(w, weight, [cout, k_len]),
    ];
    linear_ins.extend(ins.get(3).cloned());
    linear(c, &linear_ins, out)
}

fn segment_mean<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    segments: usize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (x, n, cols) = (&ins[0], ins[0].shape[0], ins[0].shape[1]);
    let index = c.index(&ins[1], segments)?;
    if segments * cols == 0 {
        return Ok(());
    }
    // Rows sorted by (segment, row): each segment's rows in row order.
    let padded = n.next_power_of_two().max(1);
    let sorted = c.temporary(padded * 4)?;
    c.fill(sorted, n, 0, 1)?;
    c.fill(sorted + 4 * n as u64, padded - n, -1, 0)?;
    c.sort(sorted, padded, 0, index, BY_INDEX)?;
    let (start, end) = (c.temporary(segments * 4)?, c.temporary(segments * 4)?);
    c.fill(start, segments, 0, 0)?;
    c.fill(end, segments, 0, 0)?;
    if n > 0 {
        let args = vec![
            Arg::Ptr(sorted),
            Arg::Ptr(index),
            Arg::I64(int(n, "a row count")?),
            Arg::Ptr(start),
            Arg::Ptr(end),
        ];
        c.launch("vips_sparse_segments", grid_for(n), 0, args)?;
    }
    let args = vec![
        Arg::Ptr(c.compact(x)?),
        Arg::Ptr(sorted),
        Arg::Ptr(start),
        Arg::Ptr(end),
        Arg::Ptr(ptr(out)),
        Arg::I64(int(segments, "a segment count")?),
        Arg::I64(int(cols, "a row's length")?),
    ];
    let kernel = format!("vips_segment_mean_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(segments * cols), 0, args)
}
