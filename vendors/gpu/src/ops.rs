//! Each catalog operator as launches of `kernels/vips_kernels.cu`: which
//! kernel, what grid, which arguments. The structs here mirror the kernel
//! source's field for field; the SIMT provider's tests run every path below
//! on the CPU against the reference provider.

mod raster;
mod sparse;

use crate::backend::{Backend, DevicePtr, Gemm, GemmType};
use std::ffi::c_void;
use vsdk_catalog::{taps, Conv2d, DType, Node, PilResize, Resize};
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

/// `VipsConv`.
#[repr(C)]
#[derive(Clone, Copy)]
struct Conv {
    n: i32,
    c: i32,
    h: i32,
    w: i32,
    oc: i32,
    oh: i32,
    ow: i32,
    kh: i32,
    kw: i32,
    stride_h: i32,
    stride_w: i32,
    pad_top: i32,
    pad_left: i32,
    dil_h: i32,
    dil_w: i32,
    groups: i32,
}

/// One kernel argument, by value.
enum Arg {
    Ptr(DevicePtr),
    I64(i64),
    I32(i32),
    F32(f32),
    Strides(Strides),
    Conv(Conv),
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
            "conv2d",
            "layer_norm",
            "rms_norm",
            "softmax",
            "sdpa",
            "taps_from",
            "taps_to",
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
        // SAFETY: each caller below passes the argument list of `kernel`'s
        // signature in vips_kernels.cu (the SIMT emulation checks the count
        // and runs every one of them in the tests), with device pointers
        // that `execute` checked against live buffers or that this call
        // allocated with the sizes the kernel touches.
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

fn dispatch<B: Backend>(
    c: &mut Call<B>,
    node: &Node,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let n = out.numel();
    let out_strides = compact_strides(&out.shape);
    match node {
        Node::Crop(crop) => {
            let x = &ins[0];
            let offset: usize = crop
                .offsets
                .iter()
                .zip(&x.strides)
                .map(|(o, s)| o * s)
                .sum();
            let src = ptr(x) + (offset * x.dtype.size_bytes()) as u64;
            c.copy(x, src, &x.strides, ptr(out), &out_strides, &out.shape)
        }
        Node::Reshape => {
            let x = &ins[0];
            c.copy(
                x,
                ptr(x),
                &x.strides,
                ptr(out),
                &compact_strides(&x.shape),
                &x.shape,
            )
        }
        Node::Permute { perm } => {
            let x = &ins[0];
            let a: Vec<usize> = perm.iter().map(|&p| x.strides[p]).collect();
            c.copy(x, ptr(x), &a, ptr(out), &out_strides, &out.shape)
        }
        Node::Concat { axis } => {
            let mut along = 0;
            for x in ins {
                let dst = ptr(out) + (along * out_strides[*axis] * out.dtype.size_bytes()) as u64;
                c.copy(x, ptr(x), &x.strides, dst, &out_strides, &x.shape)?;
                along += x.shape[*axis];
            }
            Ok(())
        }
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
        _ if n == 0 => Ok(()),
        Node::Cast(to) => {
            // int32 only to the float types (sparse coordinates as numbers).
            let from = match ins[0].dtype {
                DType::I32 if *to != DType::U8 => "i32",
                d => suffix(d)?,
            };
            let x = c.compact(&ins[0])?;
            let kernel = format!("vips_cast_{from}_{}", suffix(*to)?);
            let args = vec![Arg::Ptr(x), Arg::Ptr(ptr(out)), Arg::I64(int(n, "size")?)];
            c.launch(&kernel, grid_for(n), 0, args)
        }
        Node::Add | Node::Sub | Node::Mul | Node::Div => {
            let op = match node {
                Node::Add => 0,
                Node::Sub => 1,
                Node::Mul => 2,
                _ => 3,
            };
            let broadcast = |t: &TensorArg| -> Vec<usize> {
                let lead = out.shape.len() - t.shape.len();
                (0..out.shape.len())
                    .map(|d| match d.checked_sub(lead) {
                        Some(i) if t.shape[i] != 1 => t.strides[i],
                        _ => 0,
                    })
                    .collect()
            };
            let s = strides(&out.shape, &broadcast(&ins[0]), &broadcast(&ins[1]))?;
            let args = vec![
                Arg::Ptr(ptr(&ins[0])),
                Arg::Ptr(ptr(&ins[1])),
                Arg::Ptr(ptr(out)),
                Arg::Strides(s),
                Arg::I64(int(n, "size")?),
                Arg::I32(op),
            ];
            c.launch(
                &format!("vips_binary_{}", suffix(out.dtype)?),
                grid_for(n),
                0,
                args,
            )
        }
        Node::Gelu => {
            let x = c.compact(&ins[0])?;
            let args = vec![Arg::Ptr(x), Arg::Ptr(ptr(out)), Arg::I64(int(n, "size")?)];
            c.launch(
                &format!("vips_gelu_{}", suffix(out.dtype)?),
                grid_for(n),
                0,
                args,
            )
        }
        Node::Silu | Node::GeluTanh | Node::Sin | Node::Cos => {
            // The source's `vips_unary` op codes.
            let op = match node {
                Node::Silu => 0,
                Node::GeluTanh => 1,
                Node::Sin => 2,
                _ => 3,
            };
            let x = c.compact(&ins[0])?;
            let args = vec![
                Arg::Ptr(x),
                Arg::Ptr(ptr(out)),
                Arg::I64(int(n, "size")?),
                Arg::I32(op),
            ];
            c.launch(
                &format!("vips_unary_{}", suffix(out.dtype)?),
                grid_for(n),
                0,
                args,
            )
        }
        Node::Linear => linear(c, ins, out),
        Node::Conv2d(conv) => conv2d(c, ins, conv, out),
        Node::LayerNorm { axis, eps } => {
            let x = c.compact(&ins[0])?;
            let (w, b) = (c.compact(&ins[1])?, c.compact(&ins[2])?);
            let len: usize = ins[0].shape[*axis..].iter().product();
            let rows = n / len;
            let args = vec![
                Arg::Ptr(x),
                Arg::Ptr(w),
                Arg::Ptr(b),
                Arg::Ptr(ptr(out)),
                Arg::I64(int(rows, "the number of rows")?),
                Arg::I64(int(len, "a row's length")?),
                Arg::F32(*eps as f32),
            ];
            let kernel = format!("vips_layer_norm_{}", suffix(out.dtype)?);
            c.launch(&kernel, row_grid(rows), 0, args)
        }
        Node::RmsNorm { eps } => {
            let (x, g) = (c.compact(&ins[0])?, c.compact(&ins[1])?);
            let len = ins[0].shape.last().copied().unwrap_or(1);
            let rows = n / len.max(1);
            let args = vec![
                Arg::Ptr(x),
                Arg::Ptr(g),
                Arg::Ptr(ptr(out)),
                Arg::I64(int(rows, "the number of rows")?),
                Arg::I64(int(len, "a row's length")?),
                Arg::I64(int(ins[1].numel(), "gamma's length")?),
                // An eps below float32's normal range would flush to 0 and
                // make an all-zero row 0/0.
                Arg::F32((*eps as f32).max(f32::MIN_POSITIVE)),
            ];
            let kernel = format!("vips_rms_norm_{}", suffix(out.dtype)?);
            c.launch(&kernel, row_grid(rows), 0, args)
        }
        Node::Softmax { axis } => {
            let x = c.compact(&ins[0])?;
            let len = ins[0].shape[*axis];
            let inner: usize = ins[0].shape[axis + 1..].iter().product();
            let rows = n / len;
            let args = vec![
                Arg::Ptr(x),
                Arg::Ptr(ptr(out)),
                Arg::I64(int(rows, "the number of rows")?),
                Arg::I64(int(len, "a row's length")?),
                Arg::I64(int(inner, "a row's stride")?),
            ];
            let kernel = format!("vips_softmax_{}", suffix(out.dtype)?);
            c.launch(&kernel, row_grid(rows), 0, args)
        }
        Node::Sdpa(s) => {
            let (q, k, v) = (&ins[0], &ins[1], &ins[2]);
            let r = q.shape.len();
            let (lq, d, lk, dv) = (
                q.shape[r - 2],
                q.shape[r - 1],
                k.shape[r - 2],
                v.shape[r - 1],
            );
            let shared = lk * 4;
            if shared > SHARED_BYTES - 1024 {
                return Err(ProviderError::unsupported(format!(
                    "vsdk.sdpa: {lk} keys need {shared} bytes of shared memory for a query's scores"
                )));
            }
            let rows: usize = q.shape[..r - 1].iter().product();
            let args = vec![
                Arg::Ptr(c.compact(q)?),
                Arg::Ptr(c.compact(k)?),
                Arg::Ptr(c.compact(v)?),
                Arg::Ptr(ptr(out)),
                Arg::I64(int(rows, "the number of query rows")?),
                Arg::I32(int(lq, "Lq")?),
                Arg::I32(int(lk, "Lk")?),
                Arg::I32(int(d, "D")?),
                Arg::I32(int(dv, "Dv")?),
                Arg::F32(s.scale as f32),
            ];
            let kernel = format!("vips_sdpa_{}", suffix(out.dtype)?);
            c.launch(&kernel, row_grid(rows), shared as u32, args)
        }
        Node::ResizeBicubic(r) => resize_bicubic(c, &ins[0], r, out),
        Node::ResizePil(r) => resize_pil(c, &ins[0], r, out),
    }
}

fn linear<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (x, w) = (c.compact(&ins[0])?, c.compact(&ins[1])?);
    let bias = ins.get(2).map(|b| c.compact(b)).transpose()?;
    let (n, k) = (ins[1].shape[0], ins[1].shape[1]);
    let m = out.numel() / n;
    let dtype = match out.dtype {
        DType::F16 => GemmType::F16,
        DType::BF16 => GemmType::BF16,
        _ => GemmType::F32,
    };
    let gemm = Gemm {
        dtype,
        x,
        w,
        bias,
        out: ptr(out),
        m,
        n,
        k,
    };
    if let Some(done) = c.backend.gemm(&gemm) {
        return done;
    }
    let args = vec![
        Arg::Ptr(x),
        Arg::Ptr(w),
        Arg::Ptr(bias.unwrap_or(0)),
        Arg::Ptr(ptr(out)),
        Arg::I32(int(m, "M")?),
        Arg::I32(int(n, "N")?),
        Arg::I32(int(k, "K")?),
    ];
    let row_tiles = m.div_ceil(TILE);
    if row_tiles as u64 > MAX_GRID {
        return Err(ProviderError::unsupported(format!(
            "vsdk.linear: {m} rows exceed the tiled kernel's grid"
        )));
    }
    let grid = [int(n.div_ceil(TILE), "N / 64")?, row_tiles as u32, 1];
    c.launch(
        &format!("vips_linear_{}", suffix(out.dtype)?),
        grid,
        0,
        args,
    )
}

fn conv2d<B: Backend>(
    c: &mut Call<B>,
    ins: &[TensorArg],
    conv: &Conv2d,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (xs, ws) = (&ins[0].shape, &ins[1].shape);
    let os = &out.shape;
    let i = |v: usize| int::<i32>(v, "a conv2d size");
    let p = Conv {
        n: i(xs[0])?,
        c: i(xs[1])?,
        h: i(xs[2])?,
        w: i(xs[3])?,
        oc: i(os[1])?,
        oh: i(os[2])?,
        ow: i(os[3])?,
        kh: i(ws[2])?,
        kw: i(ws[3])?,
        stride_h: i(conv.strides[0])?,
        stride_w: i(conv.strides[1])?,
        pad_top: i(conv.pads[0])?,
        pad_left: i(conv.pads[1])?,
        dil_h: i(conv.dilations[0])?,
        dil_w: i(conv.dilations[1])?,
        groups: i(conv.groups)?,
    };
    let args = vec![
        Arg::Ptr(c.compact(&ins[0])?),
        Arg::Ptr(c.compact(&ins[1])?),
        Arg::Ptr(ins.get(2).map(|b| c.compact(b)).transpose()?.unwrap_or(0)),
        Arg::Ptr(ptr(out)),
        Arg::Conv(p),
    ];
    let kernel = format!("vips_conv2d_{}", suffix(out.dtype)?);
    c.launch(&kernel, grid_for(out.numel()), 0, args)
}

fn ne_bytes<T: Copy, const N: usize>(v: &[T], to: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| to(x)).collect()
}

/// One axis's taps in the kernels' form: source indices, weights, and each
/// output position's range of them.
struct AxisTaps<W> {
    index: Vec<i32>,
    weight: Vec<W>,
    offsets: Vec<i32>,
}

impl<W: Copy> AxisTaps<W> {
    fn new(per_output: impl Iterator<Item = Vec<(usize, W)>>) -> Result<Self, ProviderError> {
        let mut t = AxisTaps {
            index: Vec::new(),
            weight: Vec::new(),
            offsets: vec![0],
        };
        for taps in per_output {
            for (i, w) in taps {
                t.index.push(int(i, "a source index")?);
                t.weight.push(w);
            }
            t.offsets.push(int(t.index.len(), "the number of taps")?);
        }
        Ok(t)
    }
}

/// One pass of a separable resize along an axis of `[outer, len_in, inner]`.
struct Pass {
    outer: usize,
    len_in: usize,
    len_out: usize,
    inner: usize,
}

impl<B: Backend> Call<'_, B> {
    fn taps_pass<W: Copy>(
        &mut self,
        kernel: &str,
        (src, dst): (DevicePtr, DevicePtr),
        taps: &AxisTaps<W>,
        weight_bytes: impl Fn(W) -> [u8; 4],
        p: Pass,
    ) -> Result<(), ProviderError> {
        let index = self.upload(&ne_bytes(&taps.index, i32::to_ne_bytes))?;
        let weight = self.upload(&ne_bytes(&taps.weight, weight_bytes))?;
        let offsets = self.upload(&ne_bytes(&taps.offsets, i32::to_ne_bytes))?;
        let total = p.outer * p.len_out * p.inner;
        let args = vec![
            Arg::Ptr(src),
            Arg::Ptr(dst),
            Arg::Ptr(index),
            Arg::Ptr(weight),
            Arg::Ptr(offsets),
            Arg::I64(int(p.outer, "a resize's outer size")?),
            Arg::I32(int(p.len_in, "a resize's input length")?),
            Arg::I32(int(p.len_out, "a resize's output length")?),
            Arg::I64(int(p.inner, "a resize's inner size")?),
        ];
        self.launch(kernel, grid_for(total), 0, args)
    }
}

/// PyTorch-style bicubic on [N, C, H, W]: along W into a float32 buffer,
/// then along H into the output (the CPU reference's order).
fn resize_bicubic<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &Resize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (nc, h, w) = (x.shape[0] * x.shape[1], x.shape[2], x.shape[3]);
    let float_taps = |taps: Vec<Vec<(usize, f64)>>| {
        AxisTaps::new(
            taps.into_iter()
                .map(|t| t.into_iter().map(|(i, w)| (i, w as f32)).collect()),
        )
    };
    let tx = float_taps(taps::axis_taps(w, r.out_w, r.scale_w, r.antialias))?;
    let ty = float_taps(taps::axis_taps(h, r.out_h, r.scale_h, r.antialias))?;
    let src = c.compact(x)?;
    let tmp = c.temporary(nc * h * r.out_w * 4)?;
    let t = suffix(out.dtype)?;
    let horizontal = Pass {
        outer: nc * h,
        len_in: w,
        len_out: r.out_w,
        inner: 1,
    };
    c.taps_pass(
        &format!("vips_taps_from_{t}"),
        (src, tmp),
        &tx,
        f32::to_ne_bytes,
        horizontal,
    )?;
    let vertical = Pass {
        outer: nc,
        len_in: h,
        len_out: r.out_h,
        inner: r.out_w,
    };
    c.taps_pass(
        &format!("vips_taps_to_{t}"),
        (tmp, ptr(out)),
        &ty,
        f32::to_ne_bytes,
        vertical,
    )
}

/// Pillow's BICUBIC on [H, W, C] uint8: two passes, each rounded and clipped
/// to uint8, in the order the node says.
fn resize_pil<B: Backend>(
    c: &mut Call<B>,
    x: &TensorArg,
    r: &PilResize,
    out: &TensorArg,
) -> Result<(), ProviderError> {
    let (h, w, ch) = (x.shape[0], x.shape[1], x.shape[2]);
    let (oh, ow) = (r.out_h, r.out_w);
    if r.is_copy(h, w) {
        return c.copy(
            x,
            ptr(x),
            &x.strides,
            ptr(out),
            &compact_strides(&out.shape),
            &x.shape,
        );
    }
    let fixed_taps = |(first, coeffs): (Vec<usize>, Vec<Vec<i32>>)| {
        AxisTaps::new(
            first
                .into_iter()
                .zip(coeffs)
                .map(|(f, k)| k.into_iter().enumerate().map(|(j, k)| (f + j, k)).collect()),
        )
    };
    let tx = fixed_taps(taps::pil_coeffs(w, ow, r.filter))?;
    let ty = fixed_taps(taps::pil_coeffs(h, oh, r.filter))?;
    let mut src = c.compact(x)?;
    let pixels = |n: usize| int::<i64>(n, "a resize's pixel count");
    let channels: i32 = int(ch, "a resize's channel count")?;
    if r.alpha {
        let premultiplied = c.temporary(h * w * ch)?;
        let args = vec![
            Arg::Ptr(src),
            Arg::Ptr(premultiplied),
            Arg::I64(pixels(h * w)?),
            Arg::I32(channels),
        ];
        c.launch("vips_premultiply_u8", grid_for(h * w), 0, args)?;
        src = premultiplied;
    }
    let kernel = "vips_taps_pil_u8";
    if r.vertical_first {
        let tmp = c.temporary(oh * w * ch)?;
        let v = Pass {
            outer: 1,
            len_in: h,
            len_out: oh,
            inner: w * ch,
        };
        c.taps_pass(kernel, (src, tmp), &ty, i32::to_ne_bytes, v)?;
        let hz = Pass {
            outer: oh,
            len_in: w,
            len_out: ow,
            inner: ch,
        };
        c.taps_pass(kernel, (tmp, ptr(out)), &tx, i32::to_ne_bytes, hz)?;
    } else {
        let tmp = c.temporary(h * ow * ch)?;
        let hz = Pass {
            outer: h,
            len_in: w,
            len_out: ow,
            inner: ch,
        };
        c.taps_pass(kernel, (src, tmp), &tx, i32::to_ne_bytes, hz)?;
        let v = Pass {
            outer: 1,
            len_in: h,
            len_out: oh,
            inner: ow * ch,
        };
        c.taps_pass(kernel, (tmp, ptr(out)), &ty, i32::to_ne_bytes, v)?;
    }
    if r.alpha {
        let args = vec![
            Arg::Ptr(ptr(out)),
            Arg::I64(pixels(oh * ow)?),
            Arg::I32(channels),
        ];
        c.launch("vips_unpremultiply_u8", grid_for(oh * ow), 0, args)?;
    }
    Ok(())
}
