//! Paths of the deliberately broken provider libraries built from
//! `c/fixture.c`, one per failure the loader must report clearly.

/// A working minimal provider (vsdk.gelu on float32), the control case.
pub const WORKING: &str = env!("VSDK_FIXTURE_WORKING");
/// Exports no `vsdk_get_provider_api`.
pub const NO_ENTRY: &str = env!("VSDK_FIXTURE_NO_ENTRY");
/// Answers ABI version 99 and refuses.
pub const WRONG_ABI: &str = env!("VSDK_FIXTURE_WRONG_ABI");
/// Leaves the required `execute` slot NULL.
pub const NULL_EXECUTE: &str = env!("VSDK_FIXTURE_NULL_EXECUTE");
/// Declares a table that ends before the `alloc` slot.
pub const SHORT_TABLE: &str = env!("VSDK_FIXTURE_SHORT_TABLE");
/// `execute` fails with DEVICE_ERROR "fixture: the device lost its queue".
pub const KERNEL_FAILS: &str = env!("VSDK_FIXTURE_KERNEL_FAILS");
/// `create` fails with OUT_OF_MEMORY.
pub const CREATE_FAILS: &str = env!("VSDK_FIXTURE_CREATE_FAILS");
/// Reports version "1.0", not a semantic version.
pub const BAD_VERSION: &str = env!("VSDK_FIXTURE_BAD_VERSION");

/// The C template with GELU computed by the tanh approximation.
pub const MUTANT_GELU_TANH: &str = env!("VSDK_MUTANT_GELU_TANH");
/// The C template whose `vsdk.silu` returns σ(x) (the x forgotten).
pub const MUTANT_SILU_SIGMOID: &str = env!("VSDK_MUTANT_SILU_SIGMOID");
/// The C template whose `vsdk.gelu_tanh` is the exact (erf) GELU.
pub const MUTANT_GELU_TANH_ERF: &str = env!("VSDK_MUTANT_GELU_TANH_ERF");
/// The C template with `vsdk.sin` and `vsdk.cos` swapped.
pub const MUTANT_SIN_COS_SWAPPED: &str = env!("VSDK_MUTANT_SIN_COS_SWAPPED");
/// The C template whose `vsdk.sin` and `vsdk.cos` reduce with a float32 2π.
pub const MUTANT_TRIG_F32_2PI: &str = env!("VSDK_MUTANT_TRIG_F32_2PI");
/// The C template whose `vsdk.sparse_conv3d` numbers its offsets x fastest.
pub const MUTANT_SPARSE_OFFSETS_X_FASTEST: &str = env!("VSDK_MUTANT_SPARSE_OFFSETS_X_FASTEST");
/// The C template whose `vsdk.sparse_conv3d` reads its weight with Cin and Cout swapped.
pub const MUTANT_SPARSE_WEIGHT_TRANSPOSED: &str = env!("VSDK_MUTANT_SPARSE_WEIGHT_TRANSPOSED");
/// The C template whose `vsdk.sparse_conv3d` misses neighbours with a coordinate 0.
pub const MUTANT_SPARSE_BOUNDARY_DROPPED: &str = env!("VSDK_MUTANT_SPARSE_BOUNDARY_DROPPED");
/// The C template whose `vsdk.segment_mean` returns the sum.
pub const MUTANT_SEGMENT_SUM: &str = env!("VSDK_MUTANT_SEGMENT_SUM");
/// The C template whose `vsdk.gather_rows` copies the row after the indexed one.
pub const MUTANT_GATHER_NEXT_ROW: &str = env!("VSDK_MUTANT_GATHER_NEXT_ROW");
/// The C template whose `vsdk.relu` is `fmaxf(x, 0)` (NaN becomes 0).
pub const MUTANT_RELU_FMAXF: &str = env!("VSDK_MUTANT_RELU_FMAXF");
/// The C template whose `vsdk.hardsigmoid` is Keras's `clip(0.2·x + 0.5, 0, 1)`.
pub const MUTANT_HARDSIGMOID_KERAS: &str = env!("VSDK_MUTANT_HARDSIGMOID_KERAS");
/// The C template whose `vsdk.sigmoid` is `exp(x)/(1 + exp(x))` (NaN past x = 88.7).
pub const MUTANT_SIGMOID_OVERFLOWING: &str = env!("VSDK_MUTANT_SIGMOID_OVERFLOWING");
/// The C template whose `vsdk.tanh` is `(exp(2x) − 1)/(exp(2x) + 1)` (NaN past x = 44.4).
pub const MUTANT_TANH_OVERFLOWING: &str = env!("VSDK_MUTANT_TANH_OVERFLOWING");
/// The C template whose `vsdk.batch_norm` uses eps 1e-3 (Keras's default) whatever the call says.
pub const MUTANT_BATCH_NORM_EPS: &str = env!("VSDK_MUTANT_BATCH_NORM_EPS");
/// The C template whose pools ignore `ceil_mode` (the floor-mode output size always).
pub const MUTANT_POOL_CEIL_IGNORED: &str = env!("VSDK_MUTANT_POOL_CEIL_IGNORED");
/// The C template whose pools shift a window hanging over the padded end back inside.
pub const MUTANT_POOL_WINDOW_SHIFTED: &str = env!("VSDK_MUTANT_POOL_WINDOW_SHIFTED");
/// The C template whose `vsdk.avg_pool2d` divides a hanging window by the whole kernel.
pub const MUTANT_AVG_POOL_OVERHANG_COUNTED: &str = env!("VSDK_MUTANT_AVG_POOL_OVERHANG_COUNTED");
/// The C template whose `vsdk.avg_pool2d` ignores `count_include_pad` (divides by the valid count).
pub const MUTANT_AVG_POOL_PAD_EXCLUDED: &str = env!("VSDK_MUTANT_AVG_POOL_PAD_EXCLUDED");
/// The C template whose `vsdk.adaptive_avg_pool2d` rounds its bin edges.
pub const MUTANT_ADAPTIVE_BINS_ROUNDED: &str = env!("VSDK_MUTANT_ADAPTIVE_BINS_ROUNDED");
/// The C template whose `vsdk.sdpa` maps query head h to key/value head h % Hkv.
pub const MUTANT_SDPA_GQA_MODULO: &str = env!("VSDK_MUTANT_SDPA_GQA_MODULO");
/// The C template whose causal `vsdk.sdpa` rows stop one key short of their position.
pub const MUTANT_SDPA_CAUSAL_ONE_OFF: &str = env!("VSDK_MUTANT_SDPA_CAUSAL_ONE_OFF");
/// The C template whose `vsdk.rotary_embedding` pairs features in the other layout than the call's.
pub const MUTANT_ROTARY_LAYOUT_SWAPPED: &str = env!("VSDK_MUTANT_ROTARY_LAYOUT_SWAPPED");
/// The C template whose `vsdk.crop` ignores its `steps` (a contiguous window).
pub const MUTANT_CROP_STEP_IGNORED: &str = env!("VSDK_MUTANT_CROP_STEP_IGNORED");
/// The C template whose `reflect` `vsdk.pad` repeats the edge element
/// (NumPy's `symmetric`): every mirrored element one off.
pub const MUTANT_PAD_REFLECT_SYMMETRIC: &str = env!("VSDK_MUTANT_PAD_REFLECT_SYMMETRIC");
/// The C template whose `vsdk.resize_bilinear` uses the other `align_corners` convention.
pub const MUTANT_BILINEAR_CORNERS_FLIPPED: &str = env!("VSDK_MUTANT_BILINEAR_CORNERS_FLIPPED");
/// The C template whose `vsdk.resize_nearest` swaps `nearest` and `nearest-exact`.
pub const MUTANT_NEAREST_CENTRES_FLIPPED: &str = env!("VSDK_MUTANT_NEAREST_CENTRES_FLIPPED");
/// The C template whose `vsdk.group_norm` divides by count − 1 (the unbiased variance).
pub const MUTANT_GROUP_NORM_UNBIASED: &str = env!("VSDK_MUTANT_GROUP_NORM_UNBIASED");
/// The C template whose `vsdk.matmul` reads a broadcast operand's first matrix for every batch.
pub const MUTANT_MATMUL_BATCH_FIRST: &str = env!("VSDK_MUTANT_MATMUL_BATCH_FIRST");
