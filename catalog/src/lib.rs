//! The VIPS operator catalog, version 1: which kernels exist, their attributes,
//! dtypes and shape rules. `docs/operators.md` is the normative text; this
//! crate is its executable half, shared by the host (to allocate outputs and
//! check calls before dispatch) and by providers written in Rust (to validate
//! what they are given). It knows nothing of the C ABI or of memory.

mod attrs;
mod dtype;
mod ops;
pub mod raster;
pub mod rounding;
mod shape;
pub mod taps;
pub mod voxels;

pub use attrs::{AttrValue, Attrs};
pub use dtype::DType;
pub use ops::{
    Bilinear, Conv2d, Crop, Nearest, Node, Op, Pad, PadMode, PilResize, Pool2d, PoolAxis, PoolKind,
    Reduce, Resize, Rotary, Sdpa, Unary, Window, ALL_OPS, CATALOG_VERSION, MAX_SPARSE_COORD,
    SPARSE_OFFSETS, SQRT_2_OVER_PI,
};
pub use shape::{broadcast_shapes, checked_numel, TensorSpec, MAX_TENSOR_BYTES};
pub use taps::PilFilter;

/// Why a call does not fit the catalog. Messages name the kernel and the
/// offending attribute or tensor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogError {
    #[error("unknown kernel `{name}@{version}` (catalog v1 knows: {known})")]
    UnknownKernel {
        name: String,
        version: u32,
        known: String,
    },
    #[error("{kernel}: attribute `{attr}`: {reason}")]
    Attr {
        kernel: &'static str,
        attr: String,
        reason: String,
    },
    #[error("{kernel}: {reason}")]
    Tensors {
        kernel: &'static str,
        reason: String,
    },
}
