/* common.cu, the start of vips_kernels.cu: every catalog operator of the
 * GPU providers, written once in the common subset of CUDA and HIP
 * (vips_device.h holds the differences) and run unchanged on the CPU by the
 * SIMT emulation (vendors/simt).
 *
 * Semantics are docs/operators.md's. Arithmetic is float32 whatever the
 * storage type; a 16-bit result is rounded once, when stored. The host side
 * (vendors/gpu/src/ops/) chooses kernels and launch shapes, computes resize
 * taps, and passes shapes as the structs below, which it mirrors field for
 * field (#[repr(C)]).
 *
 * Every exported kernel is a thin extern "C" wrapper named
 * vips_<operator>_<dtype> around a template, launched with at most
 * VIPS_BLOCK threads per block.
 *
 * The program is one source, kept as one file per operator family: this
 * file (what every family uses), then the families in the order of
 * vsdk_gpu::KERNEL_FILES, concatenated into vsdk_gpu::KERNEL_SOURCE for
 * NVRTC and hiprtc and #included in that order by the SIMT emulation. A
 * compiler's line numbers count in the concatenation. */

#include "vips_device.h"

#define VIPS_MAX_RANK 8

/* An index space of up to VIPS_MAX_RANK dimensions and two operands' element
 * strides over it (a broadcast dimension has stride 0). */
struct VipsStrides {
  vips_i64 rank;
  vips_i64 dims[VIPS_MAX_RANK];
  vips_i64 a[VIPS_MAX_RANK];
  vips_i64 b[VIPS_MAX_RANK];
};

__device__ __forceinline__ vips_i64 vips_global_id() {
  return static_cast<vips_i64>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ vips_i64 vips_grid_stride() {
  return static_cast<vips_i64>(blockDim.x) * gridDim.x;
}

/* The element offsets, in operands a and b, of flat index i of `s`. */
__device__ __forceinline__ void vips_offsets(const VipsStrides& s, vips_i64 i, vips_i64* a,
                                             vips_i64* b) {
  vips_i64 oa = 0, ob = 0;
  for (int d = static_cast<int>(s.rank) - 1; d >= 0; --d) {
    vips_i64 c = i % s.dims[d];
    i /= s.dims[d];
    oa += c * s.a[d];
    ob += c * s.b[d];
  }
  *a = oa;
  *b = ob;
}

/* ---- block reductions: 32-lane shuffles, then partials through shared memory ---- */

__device__ __forceinline__ float vips_lanes_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += VIPS_SHFL_XOR(v, m);
  return v;
}

__device__ __forceinline__ float vips_lanes_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, VIPS_SHFL_XOR(v, m));
  return v;
}

/* Every thread of the block calls these with its partial value and gets the
 * block's total. `scratch` holds VIPS_BLOCK / 32 floats. */
__device__ float vips_block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, group = threadIdx.x / 32, groups = (blockDim.x + 31) / 32;
  v = vips_lanes_sum(v);
  __syncthreads(); /* scratch may still be read by a previous reduction */
  if (lane == 0) scratch[group] = v;
  __syncthreads();
  float total = 0.0f;
  for (int g = 0; g < groups; ++g) total += scratch[g];
  return total;
}

__device__ float vips_block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, group = threadIdx.x / 32, groups = (blockDim.x + 31) / 32;
  v = vips_lanes_max(v);
  __syncthreads();
  if (lane == 0) scratch[group] = v;
  __syncthreads();
  float best = -vips_inf();
  for (int g = 0; g < groups; ++g) best = fmaxf(best, scratch[g]);
  return best;
}
