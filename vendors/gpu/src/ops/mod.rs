//! Each catalog operator as launches of the kernel source (`kernels/*.cu`):
//! which kernel, what grid, which arguments. A module per operator family,
//! as the kernel source has a file per family; `dispatch` is the one table
//! from node to family. The structs here mirror the kernel source's field for
//! field; the SIMT provider's tests run every path below on the CPU against
//! the reference provider.

mod attention;
mod elementwise;
mod linear;
mod movement;
mod normalization;
mod raster;
mod reduction;
mod resize;
mod sparse;

use crate::backend::{Backend, DevicePtr};
use std::ffi::c_void;
use vsdk_catalog::{DType, Node};
use vsdk_provider_kit::{ProviderError, TensorArg};

/// Threads per block of every launch (`VIPS_BLOCK`).
const BLOCK: u32 = 256;
/// `VIPS_MAX_RANK`.
const MAX_RANK: usize = 8;
/// Grid-stride kernels get at most this many blocks: enough to fill any GPU.
const MAX_GRID: u64 = 65_535;
/// `VIPS_TILE`: the linear kernel's output tile.
const TILE: usize = 64;
/// Static shared memory every CUDA and HIP device offers a block.
const SHARED_BYTES: usize = 48 << 10;

/// `VipsStrides`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Strides {
    rank: i64,
    dims: [i64; MAX_RANK],
    a: [i64; MAX_RANK],
    b: [i64; MAX_RANK],
}

/// One kernel argument, by value.
enum Arg {
    Ptr(DevicePtr),
    I64(i64),
    I32(i32),
    F32(f32),
    Strides(Strides),
    Conv(linear::Conv),
}

/// The kernels' name suffix for a dtype.
fn suffix(d: DType) -> Result<&'static str, ProviderError> {
    match d {
        DType::F32 => Ok("f32"),
        DType::F16 => Ok("f16"),
        DType::BF16 => Ok("bf16"),
        DType::U8 => Ok("u8"),
        other => Err(ProviderError::unsupported(format!(
            "no GPU kernel computes in {other}"
        ))),
    }
}

/// Every kernel the source exports, as `ops` names them: the compile tests
/// and the SIMT registry are checked against this list.
pub fn kernel_names() -> Vec<String> {
    let mut names = Vec::new();
    for t in ["f32", "f16", "bf16"] {
        for op in [
            "binary",
            "gelu",
            "unary",
            "linear",
            "matmul",
            "conv2d",
            "layer_norm",
            "rms_norm",
            "softmax",
            "sdpa",
            "rotary",
            "batch_norm",
            "group_norm",
            "pool2d",
            "reduce",
            "taps_from",
            "taps_to",
            "resize_bilinear",
            "resize_nearest",
            "segment_mean",
        ] {
            names.push(format!("vips_{op}_{t}"));
        }
    }
    for from in ["u8", "f16", "bf16", "f32"] {
        for to in ["u8", "f16", "bf16", "f32"] {
            names.push(format!("vips_cast_{from}_{to}"));
        }
    }
    for to in ["f16", "bf16", "f32"] {
        names.push(format!("vips_cast_i32_{to}"));
    }
    for t in ["f32", "f16", "bf16"] {
        for rast in ["f32", "f64"] {
            names.push(format!("vips_interpolate_{t}_{rast}"));
        }
    }
    for bytes in [1, 2, 4, 8] {
        names.push(format!("vips_copy_{bytes}"));
        names.push(format!("vips_pad_{bytes}"));
        names.push(format!("vips_rows_{bytes}"));
    }
    for k in [
        "taps_pil_u8",
        "premultiply_u8",
        "unpremultiply_u8",
        "sparse_fill",
        "sparse_check_coords",
        "sparse_insert",
        "sparse_neighbours",
        "sparse_unique",
        "sparse_sort_step",
        "sparse_parents",
        "sparse_inverse",
        "sparse_subdivide",
        "sparse_check_index",
        "sparse_segments",
        "raster_setup",
        "rasterize",
    ] {
        names.push(format!("vips_{k}"));
    }
    names
}

fn int<T: TryFrom<usize>>(v: usize, what: &str) -> Result<T, ProviderError> {
    T::try_from(v).map_err(|_| {
        ProviderError::unsupported(format!("{what} = {v} exceeds what the GPU kernels index"))
    })
}

fn compact_strides(shape: &[usize]) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut step = 1;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step *= n;
    }
    strides
}

fn strides(dims: &[usize], a: &[usize], b: &[usize]) -> Result<Strides, ProviderError> {
    if dims.len() > MAX_RANK {
        return Err(ProviderError::unsupported(format!(
            "rank {} exceeds the GPU kernels' {MAX_RANK}",
            dims.len()
        )));
    }
    let mut s = Strides {
        rank: dims.len() as i64,
        dims: [1; MAX_RANK],
        a: [0; MAX_RANK],
        b: [0; MAX_RANK],
    };
    for d in 0..dims.len() {
        s.dims[d] = int(dims[d], "a dimension")?;
        s.a[d] = int(a[d], "a stride")?;
        s.b[d] = int(b[d], "a stride")?;
    }
    Ok(s)
}

/// A grid-stride launch over `n` elements.
fn grid_for(n: usize) -> [u32; 3] {
    [
        (n as u64).div_ceil(u64::from(BLOCK)).clamp(1, MAX_GRID) as u32,
        1,
        1,
    ]
}

/// A launch of one block per row, the blocks striding over the rows: 4096
/// blocks of 256 threads are over a million threads, more than any GPU runs
/// at once (an H100 holds 270,000).
fn row_grid(rows: usize) -> [u32; 3] {
    [(rows as u64).clamp(1, 4096) as u32, 1, 1]
}

fn ptr(t: &TensorArg) -> DevicePtr {
    t.ptr as usize as DevicePtr
}

/// One `execute`: launches, and the temporary buffers they use, freed when
/// the work is done.
struct Call<'a, B: Backend> {
    backend: &'a B,
    temporaries: Vec<DevicePtr>,
}

impl<'a, B: Backend> Call<'a, B> {
    fn launch(
        &self,
        kernel: &str,
        grid: [u32; 3],
        shared_bytes: u32,
        mut args: Vec<Arg>,
    ) -> Result<(), ProviderError> {
        fn param<T>(v: &mut T) -> (*mut c_void, usize) {
            (std::ptr::from_mut(v).cast(), std::mem::size_of::<T>())
        }
        let (params, sizes): (Vec<*mut c_void>, Vec<usize>) = args
            .iter_mut()
            .map(|a| match a {
                Arg::Ptr(v) => param(v),
                Arg::I64(v) => param(v),
                Arg::I32(v) => param(v),
                Arg::F32(v) => param(v),
                Arg::Strides(v) => param(v),
                Arg::Conv(v) => param(v),
            })
            .unzip();
        // SAFETY: each caller (here and in the family modules) passes the
        // argument list of `kernel`'s signature in the kernel source (the
        // SIMT emulation checks the count and runs every one of them in the
        // tests), with device pointers that `execute` checked against live
        // buffers or that this call allocated with the sizes the kernel
        // touches.
        unsafe {
            self.backend
                .launch(kernel, grid, [BLOCK, 1, 1], shared_bytes, &params, &sizes)
        }
    }

    fn temporary(&mut self, bytes: usize) -> Result<DevicePtr, ProviderError> {
        let p = self.backend.alloc(bytes.max(1))?;
        self.temporaries.push(p);
        Ok(p)
    }

    fn upload(&mut self, bytes: &[u8]) -> Result<DevicePtr, ProviderError> {
        let p = self.temporary(bytes.len())?;
        if !bytes.is_empty() {
            self.backend.copy_to_device(p, bytes)?;
        }
        Ok(p)
    }

    /// `t` as a compact row-major buffer: itself, or a compact copy.
    fn compact(&mut self, t: &TensorArg) -> Result<DevicePtr, ProviderError> {
        if t.is_compact() {
            return Ok(ptr(t));
        }
        let n = t.numel();
        let dst = self.temporary(n * t.dtype.size_bytes())?;
        self.copy(
            t,
            ptr(t),
            &t.strides,
            dst,
            &compact_strides(&t.shape),
            &t.shape,
        )?;
        Ok(dst)
    }

    /// Element i of `dims` read at `a` strides from `src`, written at `b` strides to `dst`.
    fn copy(
        &self,
        t: &TensorArg,
        src: DevicePtr,
        a: &[usize],
        dst: DevicePtr,
        b: &[usize],
        dims: &[usize],
    ) -> Result<(), ProviderError> {
        let n: usize = dims.iter().product();
        if n == 0 {
            return Ok(());
        }
        let kernel = format!("vips_copy_{}", t.dtype.size_bytes());
        let args = vec![
            Arg::Ptr(src),
            Arg::Ptr(dst),
            Arg::Strides(strides(dims, a, b)?),
            Arg::I64(int(n, "an element count")?),
        ];
        self.launch(&kernel, grid_for(n), 0, args)
    }

    fn finish(self, result: Result<(), ProviderError>) -> Result<(), ProviderError> {
        // The queue runs in order: temporaries are free once it drains.
        let synced = if self.temporaries.is_empty() {
            Ok(())
        } else {
            self.backend.synchronize()
        };
        for p in &self.temporaries {
            self.backend.free(*p);
        }
        result.and(synced)
    }
}

/// Runs a node checked by `abi::execute`: catalog shapes and dtypes, compact
/// outputs, every tensor inside a live buffer of this device.
pub fn run<B: Backend>(
    backend: &B,
    node: &Node,
    ins: &[TensorArg],
    outs: &[TensorArg],
) -> Result<(), ProviderError> {
    let mut call = Call {
        backend,
        temporaries: Vec::new(),
    };
    let result = dispatch(&mut call, node, ins, &outs[0]);
    call.finish(result)
}

/// The one table of this layer: each node to its family's launches.
fn dispatch<B: Backend>(
    c: &mut Call<B>,
    node: &Node,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    match node {
        Node::Crop(crop) => movement::crop(c, ins, crop, out),
        Node::Pad(pad) => movement::pad(c, ins, pad, out),
        Node::Reshape => movement::reshape(c, ins, out),
        Node::Permute { perm } => movement::permute(c, ins, perm, out),
        Node::Concat { axis } => movement::concat(c, ins, axis, out),
        // Their coordinates and indices are checked even when nothing is written.
        Node::SparseConv3d
        | Node::SparseDownsampleCoords { .. }
        | Node::SparseDownsampleIndex { .. }
        | Node::SegmentMean { .. }
        | Node::GatherRows
        | Node::RepeatRows { .. }
        | Node::SparseSubdivideCoords => sparse::run(c, node, ins, out),
        // Their triangles are checked even when nothing is drawn.
        Node::Rasterize { height, width } => raster::rasterize(c, ins, (*height, *width), out),
        Node::Interpolate => raster::interpolate(c, ins, out),
        _ if out.numel() == 0 => Ok(()),
        Node::Cast(to) => elementwise::cast(c, ins, to, out),
        Node::Add | Node::Sub | Node::Mul | Node::Div => elementwise::binary(c, node, ins, out),
        Node::Gelu => elementwise::gelu(c, ins, out),
        Node::Unary(f) => elementwise::unary(c, *f, ins, out),
        Node::Linear => linear::linear(c, ins, out),
        Node::Matmul => linear::matmul(c, ins, out),
        Node::Conv2d(conv) => linear::conv2d(c, ins, conv, out),
        Node::LayerNorm { axis, eps } => normalization::layer_norm(c, ins, axis, eps, out),
        Node::RmsNorm { eps } => normalization::rms_norm(c, ins, eps, out),
        Node::BatchNorm { eps } => normalization::batch_norm(c, ins, eps, out),
        Node::GroupNorm { groups, eps } => normalization::group_norm(c, ins, groups, eps, out),
        Node::Softmax { axis } => normalization::softmax(c, ins, axis, out),
        Node::Pool2d(p) => reduction::pool2d(c, &ins[0], p, out),
        Node::Reduce(r) => reduction::reduce(c, &ins[0], r, out),
        Node::Sdpa(s) => attention::sdpa(c, ins, s, out),
        Node::Rotary(r) => attention::rotary(c, ins, r, out),
        Node::ResizeBicubic(r) => resize::bicubic(c, &ins[0], r, out),
        Node::ResizePil(r) => resize::pil(c, &ins[0], r, out),
        Node::ResizeBilinear(r) => resize::bilinear(c, &ins[0], r, out),
        Node::ResizeNearest(r) => resize::nearest(c, &ins[0], r, out),
    }
}
