/* vips_kernels.cu: every catalog operator of the GPU providers, written once
 * in the common subset of CUDA and HIP (vips_device.h holds the differences)
 * and run unchanged on the CPU by the SIMT emulation (vendors/simt).
 *
 * Semantics are docs/operators.md's. Arithmetic is float32 whatever the
 * storage type; a 16-bit result is rounded once, when stored. The host side
 * (vendors/gpu/src/ops.rs) chooses kernels and launch shapes, computes resize
 * taps, and passes shapes as the structs below, which it mirrors field for
 * field (#[repr(C)]).
 *
 * Every exported kernel is a thin extern "C" wrapper named
 * vips_<operator>_<dtype> around a template, launched with at most
 * VIPS_BLOCK threads per block. */
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

struct VipsConv {
  int n, c, h, w;
  int oc, oh, ow;
  int kh, kw;
  int stride_h, stride_w;
  int pad_top, pad_left;
  int dil_h, dil_w;
  int groups;
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

/* ---- element-wise ---- */

/* op: 0 add, 1 sub, 2 mul, 3 div. `s.a`/`s.b` are the inputs' strides over
 * the (compact) output's shape. */
template <class T>
__device__ void vips_binary(const T* a, const T* b, T* out, VipsStrides s, vips_i64 n, int op) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    vips_i64 ia, ib;
    vips_offsets(s, i, &ia, &ib);
    const float x = vips_load(a + ia), y = vips_load(b + ib);
    float z;
    switch (op) {
      case 0: z = x + y; break;
      case 1: z = x - y; break;
      case 2: z = x * y; break;
      default: z = x / y; break;
    }
    vips_store(out + i, z);
  }
}

/* Exact GELU: x · Φ(x) = x/2 · (1 + erf(x/√2)). */
template <class T>
__device__ void vips_gelu(const T* x, T* out, vips_i64 n) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    const float v = vips_load(x + i);
    vips_store(out + i, 0.5f * v * (1.0f + erff(v * 0.70710678118654752f)));
  }
}

/* x·σ(y) without overflow: exp of a non-positive number only (x·e/(1 + e) for
 * y < 0), so that no Inf/Inf makes a NaN. */
__device__ __forceinline__ float vips_times_sigmoid(float x, float y) {
  if (y >= 0.0f) return x / (1.0f + expf(-y));
  const float e = expf(y);
  return x * e / (1.0f + e);
}

/* Element-wise functions of one input; op: 0 silu, 1 gelu_tanh, 2 sin, 3 cos.
 * sinf/cosf reduce large arguments accurately (TRELLIS's embeddings reach
 * ~1000 rad); __sinf/__cosf and fast-math do not, and must not be used. */
template <class T>
__device__ void vips_unary(const T* x, T* out, vips_i64 n, int op) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    const float v = vips_load(x + i);
    float y;
    switch (op) {
      case 0: y = vips_times_sigmoid(v, v); break;
      /* x/2·(1 + tanh(a)) = x·σ(2a): no cancellation for negative x. */
      case 1: y = vips_times_sigmoid(v, 1.5957691216057308f * (v + 0.044715f * v * v * v)); break;
      case 2: y = sinf(v); break;
      default: y = cosf(v); break;
    }
    vips_store(out + i, y);
  }
}

/* vsdk.cast between uint8, float16, bfloat16 and float32: every value of
 * these types is exact in float32, so one rounding (the store) is all
 * (int32, below, is not). */
template <class S, class D>
__device__ void vips_cast(const S* x, D* out, vips_i64 n) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride())
    vips_store(out + i, vips_load(x + i));
}

/* Data movement (crop, concat, reshape, permute): element i of the index
 * space is read at s.a offsets and written at s.b offsets. */
template <class E>
__device__ void vips_copy(const E* src, E* dst, VipsStrides s, vips_i64 n) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    vips_i64 from, to;
    vips_offsets(s, i, &from, &to);
    dst[to] = src[from];
  }
}

/* ---- linear: out[m, n] = bias[n] + Σ_k x[m, k] · w[n, k] ----
 * 64 × 64 output tiles, 256 threads of 4 × 4 outputs, k in steps of 16
 * staged through shared memory as float32. Grid: (ceil(N/64), ceil(M/64)). */
#define VIPS_TILE 64
#define VIPS_TILE_K 16

template <class T>
__device__ void vips_linear(const T* x, const T* w, const T* bias, T* out, int m, int n, int k) {
  __shared__ float xs[VIPS_TILE_K][VIPS_TILE + 1];
  __shared__ float ws[VIPS_TILE_K][VIPS_TILE + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int m0 = blockIdx.y * VIPS_TILE, n0 = blockIdx.x * VIPS_TILE;
  float acc[4][4];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < k; k0 += VIPS_TILE_K) {
    for (int e = threadIdx.x; e < VIPS_TILE * VIPS_TILE_K; e += VIPS_BLOCK) {
      const int r = e / VIPS_TILE_K, c = e % VIPS_TILE_K;
      const int gk = k0 + c, gm = m0 + r, gn = n0 + r;
      xs[c][r] = (gm < m && gk < k) ? vips_load(x + static_cast<vips_i64>(gm) * k + gk) : 0.0f;
      ws[c][r] = (gn < n && gk < k) ? vips_load(w + static_cast<vips_i64>(gn) * k + gk) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < VIPS_TILE_K; ++kk) {
      float a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = xs[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) b[j] = ws[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < 4; ++i) {
    const int gm = m0 + ty + 16 * i;
    if (gm >= m) continue;
    for (int j = 0; j < 4; ++j) {
      const int gn = n0 + tx + 16 * j;
      if (gn >= n) continue;
      const float b = bias ? vips_load(bias + gn) : 0.0f;
      vips_store(out + static_cast<vips_i64>(gm) * n + gn, acc[i][j] + b);
    }
  }
}

/* ---- conv2d (NCHW, weight [OC, C/groups, kH, kW]): one output per thread ---- */
template <class T>
__device__ void vips_conv2d(const T* x, const T* w, const T* bias, T* out, VipsConv p) {
  const vips_i64 total = static_cast<vips_i64>(p.n) * p.oc * p.oh * p.ow;
  const int cg = p.c / p.groups, og = p.oc / p.groups;
  for (vips_i64 i = vips_global_id(); i < total; i += vips_grid_stride()) {
    vips_i64 r = i;
    const int ox = static_cast<int>(r % p.ow);
    r /= p.ow;
    const int oy = static_cast<int>(r % p.oh);
    r /= p.oh;
    const int o = static_cast<int>(r % p.oc);
    const int b = static_cast<int>(r / p.oc);
    const int c0 = (o / og) * cg;
    float acc = bias ? vips_load(bias + o) : 0.0f;
    for (int ci = 0; ci < cg; ++ci) {
      for (int ky = 0; ky < p.kh; ++ky) {
        const int iy = oy * p.stride_h - p.pad_top + ky * p.dil_h;
        if (iy < 0 || iy >= p.h) continue;
        const T* xrow = x + ((static_cast<vips_i64>(b) * p.c + c0 + ci) * p.h + iy) * p.w;
        const T* wrow = w + ((static_cast<vips_i64>(o) * cg + ci) * p.kh + ky) * p.kw;
        for (int kx = 0; kx < p.kw; ++kx) {
          const int ix = ox * p.stride_w - p.pad_left + kx * p.dil_w;
          if (ix < 0 || ix >= p.w) continue;
          acc = fmaf(vips_load(xrow + ix), vips_load(wrow + kx), acc);
        }
      }
    }
    vips_store(out + i, acc);
  }
}

/* ---- rows: layer norm, softmax, attention. A block per row, blocks striding
 * over the rows (grids are capped); row r of a softmax has `len` elements
 * `inner` apart: x[(r / inner) · len · inner + r % inner + j · inner]. ---- */

__device__ __forceinline__ vips_i64 vips_row_start(vips_i64 row, vips_i64 len, vips_i64 inner) {
  return (row / inner) * len * inner + row % inner;
}

/* Layer norm over `len` contiguous elements (axis … rank-1): weight and bias
 * have `len` elements. Two passes: mean, then the biased variance. */
template <class T>
__device__ void vips_layer_norm(const T* x, const T* w, const T* b, T* out, vips_i64 rows,
                                vips_i64 len, float eps) {
  __shared__ float scratch[VIPS_BLOCK / 32];
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const vips_i64 base = row * len;
    float s = 0.0f;
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x) s += vips_load(x + base + j);
    const float mean = vips_block_sum(s, scratch) / static_cast<float>(len);
    float q = 0.0f;
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x) {
      const float d = vips_load(x + base + j) - mean;
      q = fmaf(d, d, q);
    }
    const float inv = 1.0f / sqrtf(vips_block_sum(q, scratch) / static_cast<float>(len) + eps);
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x) {
      const float v = (vips_load(x + base + j) - mean) * inv;
      vips_store(out + base + j, fmaf(v, vips_load(w + j), vips_load(b + j)));
    }
  }
}

/* RMS norm (F.normalize · γ · √len) over `len` contiguous elements: the sum of
 * squares in float32, the norm clamped below by eps (not eps under the root).
 * γ has `glen` elements, whole rows of `len`, repeating over the rows. */
template <class T>
__device__ void vips_rms_norm(const T* x, const T* g, T* out, vips_i64 rows, vips_i64 len,
                              vips_i64 glen, float eps) {
  __shared__ float scratch[VIPS_BLOCK / 32];
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const vips_i64 base = row * len;
    const T* gr = g + base % glen;
    float q = 0.0f;
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x) {
      const float v = vips_load(x + base + j);
      q = fmaf(v, v, q);
    }
    const float scale = sqrtf(static_cast<float>(len)) / fmaxf(sqrtf(vips_block_sum(q, scratch)), eps);
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x)
      vips_store(out + base + j, vips_load(x + base + j) * scale * vips_load(gr + j));
  }
}

template <class T>
__device__ void vips_softmax(const T* x, T* out, vips_i64 rows, vips_i64 len, vips_i64 inner) {
  __shared__ float scratch[VIPS_BLOCK / 32];
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const vips_i64 base = vips_row_start(row, len, inner);
    float mx = -vips_inf();
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x)
      mx = fmaxf(mx, vips_load(x + base + j * inner));
    mx = vips_block_max(mx, scratch);
    float s = 0.0f;
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x)
      s += expf(vips_load(x + base + j * inner) - mx);
    const float inv = 1.0f / vips_block_sum(s, scratch);
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x)
      vips_store(out + base + j * inner, expf(vips_load(x + base + j * inner) - mx) * inv);
  }
}

/* ---- scaled dot-product attention: out = softmax(scale · q kᵀ) v ----
 * q [B, Lq, D], k [B, Lk, D], v [B, Lk, Dv] (batch dimensions folded into
 * B); a block per (batch, query row) of the `rows` = B · Lq; the row's Lk
 * scores live in dynamic shared memory (Lk floats). */
template <class T>
__device__ void vips_sdpa(const T* q, const T* k, const T* v, T* out, vips_i64 rows, int lq,
                          int lk, int d, int dv, float scale) {
  VIPS_DYNAMIC_SHARED(float, scores);
  __shared__ float scratch[VIPS_BLOCK / 32];
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const vips_i64 batch = row / lq;
    const T* qrow = q + row * d;
    const T* kb = k + batch * lk * d;
    const T* vb = v + batch * lk * dv;
    float mx = -vips_inf();
    for (int j = threadIdx.x; j < lk; j += blockDim.x) {
      float s = 0.0f;
      for (int e = 0; e < d; ++e)
        s = fmaf(vips_load(qrow + e), vips_load(kb + static_cast<vips_i64>(j) * d + e), s);
      s *= scale;
      scores[j] = s;
      mx = fmaxf(mx, s);
    }
    mx = vips_block_max(mx, scratch);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < lk; j += blockDim.x) {
      const float p = expf(scores[j] - mx);
      scores[j] = p;
      sum += p;
    }
    const float inv = 1.0f / vips_block_sum(sum, scratch); /* its barriers publish scores[] */
    T* orow = out + row * dv;
    for (int e = threadIdx.x; e < dv; e += blockDim.x) {
      float acc = 0.0f;
      for (int j = 0; j < lk; ++j)
        acc = fmaf(scores[j], vips_load(vb + static_cast<vips_i64>(j) * dv + e), acc);
      vips_store(orow + e, acc * inv);
    }
    __syncthreads(); /* the next row overwrites scores[] */
  }
}

/* ---- separable resizes: one axis at a time ----
 * The input is viewed as [outer, len_in, inner] and the output as
 * [outer, len_out, inner]; output position i along the axis takes the taps
 * offsets[i] .. offsets[i+1] (source index, weight), computed on the host
 * (vsdk_catalog::taps). */
template <class S, class D>
__device__ void vips_taps(const S* x, D* out, const int* index, const float* weight,
                          const int* offsets, vips_i64 outer, int len_in, int len_out,
                          vips_i64 inner) {
  const vips_i64 total = outer * len_out * inner;
  for (vips_i64 t = vips_global_id(); t < total; t += vips_grid_stride()) {
    const vips_i64 c = t % inner;
    const int i = static_cast<int>((t / inner) % len_out);
    const vips_i64 o = t / inner / len_out;
    const S* src = x + o * len_in * inner + c;
    float acc = 0.0f;
    for (int j = offsets[i]; j < offsets[i + 1]; ++j)
      acc += weight[j] * vips_load(src + static_cast<vips_i64>(index[j]) * inner);
    vips_store(out + t, acc);
  }
}

/* Pillow's 8-bit pass: integer coefficients with 22 fraction bits, the sum
 * started at half a unit, shifted, clipped to uint8. Exact: any order gives
 * the same bits. */
__device__ void vips_taps_pil(const unsigned char* x, unsigned char* out, const int* index,
                              const int* coeff, const int* offsets, vips_i64 outer, int len_in,
                              int len_out, vips_i64 inner) {
  const vips_i64 total = outer * len_out * inner;
  for (vips_i64 t = vips_global_id(); t < total; t += vips_grid_stride()) {
    const vips_i64 c = t % inner;
    const int i = static_cast<int>((t / inner) % len_out);
    const vips_i64 o = t / inner / len_out;
    const unsigned char* src = x + o * len_in * inner + c;
    vips_i64 acc = static_cast<vips_i64>(1) << 21;
    for (int j = offsets[i]; j < offsets[i + 1]; ++j)
      acc += static_cast<vips_i64>(coeff[j]) * src[static_cast<vips_i64>(index[j]) * inner];
    acc >>= 22;
    out[t] = static_cast<unsigned char>(acc < 0 ? 0 : (acc > 255 ? 255 : acc));
  }
}

/* ---- sparse voxel tensors (docs/operators.md, "Sparse voxel tensors") ----
 * Coordinates are int32 [N, 4] rows (b, x, y, z). The neighbour search is a
 * hash in device memory: `slots` (a power of two, at least twice the keys)
 * hold -1 or the row of a voxel, claimed with atomicCAS on the row index and
 * compared through the coordinates, so a key of any width costs one 32-bit
 * word and no thread ever waits for another (linear probing: a lost race
 * moves on). Invalid input raises a flag word (atomicMin of a row) that the
 * host reads back and explains. */

struct VipsVoxel {
  int b, x, y, z;
};

/* Row r's voxel, or its parent after `shift` = 1 halvings. */
__device__ __forceinline__ VipsVoxel vips_voxel(const int* coords, vips_i64 r, int shift) {
  const int* c = coords + 4 * r;
  VipsVoxel v = {c[0], c[1] >> shift, c[2] >> shift, c[3] >> shift};
  return v;
}

__device__ __forceinline__ bool vips_voxel_eq(VipsVoxel a, VipsVoxel b) {
  return a.b == b.b && a.x == b.x && a.y == b.y && a.z == b.z;
}

__device__ __forceinline__ bool vips_voxel_less(VipsVoxel a, VipsVoxel b) {
  if (a.b != b.b) return a.b < b.b;
  if (a.x != b.x) return a.x < b.x;
  if (a.y != b.y) return a.y < b.y;
  return a.z < b.z;
}

/* A spatial hash (large odd multipliers, xor) finished with murmur3's mix:
 * neighbouring voxels land far apart. */
__device__ __forceinline__ vips_i64 vips_voxel_slot(VipsVoxel v, vips_i64 mask) {
  unsigned int h = static_cast<unsigned int>(v.b) * 0x9e3779b1u;
  h ^= static_cast<unsigned int>(v.x) * 73856093u;
  h ^= static_cast<unsigned int>(v.y) * 19349663u;
  h ^= static_cast<unsigned int>(v.z) * 83492791u;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return static_cast<vips_i64>(h) & mask;
}

/* The row holding `v` (compared at `shift`), or -1. */
__device__ __forceinline__ int vips_voxel_find(const int* coords, const int* slots,
                                               vips_i64 mask, VipsVoxel v, int shift) {
  for (vips_i64 s = vips_voxel_slot(v, mask);; s = (s + 1) & mask) {
    const int held = slots[s];
    if (held < 0 || vips_voxel_eq(vips_voxel(coords, held, shift), v)) return held;
  }
}

/* p[i] = first + step · i. */
VIPS_KERNEL vips_sparse_fill(int* p, vips_i64 n, int first, int step) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride())
    p[i] = first + step * static_cast<int>(i);
}
VIPS_REGISTER(vips_sparse_fill)

/* *bad (the host starts it at n): the first row with an entry outside [0, 2^30). */
VIPS_KERNEL vips_sparse_check_coords(const int* coords, vips_i64 n, int* bad) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    const int* c = coords + 4 * i;
    for (int j = 0; j < 4; ++j)
      if (c[j] < 0 || c[j] >= (1 << 30)) atomicMin(bad, static_cast<int>(i));
  }
}
VIPS_REGISTER(vips_sparse_check_coords)

/* Every row's voxel (shift 0) or parent (shift 1) into the hash; rep[i] is
 * the row whose entry holds i's key. At shift 0 two rows of one voxel are an
 * error: *twice (started at n) takes the later row of the pair seen. */
VIPS_KERNEL vips_sparse_insert(const int* coords, vips_i64 n, int shift, int* slots,
                               vips_i64 mask, int* rep, int* twice) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    const VipsVoxel v = vips_voxel(coords, i, shift);
    for (vips_i64 s = vips_voxel_slot(v, mask);; s = (s + 1) & mask) {
      const int held = atomicCAS(slots + s, -1, static_cast<int>(i));
      if (held < 0) {
        rep[i] = static_cast<int>(i);
        break;
      }
      if (vips_voxel_eq(vips_voxel(coords, held, shift), v)) {
        rep[i] = held;
        if (shift == 0) atomicMin(twice, held > i ? held : static_cast<int>(i));
        break;
      }
    }
  }
}
VIPS_REGISTER(vips_sparse_insert)

/* nbr[i * 27 + k]: the row of voxel i's neighbour at offset k
 * (k = 9(dx+1) + 3(dy+1) + (dz+1)), or -1. */
VIPS_KERNEL vips_sparse_neighbours(const int* coords, vips_i64 n, const int* slots,
                                   vips_i64 mask, int* nbr) {
  for (vips_i64 e = vips_global_id(); e < 27 * n; e += vips_grid_stride()) {
    const vips_i64 i = e / 27;
    const int k = static_cast<int>(e % 27);
    VipsVoxel v = vips_voxel(coords, i, 0);
    v.x += k / 9 - 1;
    v.y += k / 3 % 3 - 1;
    v.z += k % 3 - 1;
    nbr[e] = vips_voxel_find(coords, slots, mask, v, 0);
  }
}
VIPS_REGISTER(vips_sparse_neighbours)

/* list[0 .. *count): the rows that hold a key of the hash, in no order. */
VIPS_KERNEL vips_sparse_unique(const int* rep, vips_i64 n, int* list, int* count) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride())
    if (rep[i] == i) list[atomicAdd(count, 1)] = static_cast<int>(i);
}
VIPS_REGISTER(vips_sparse_unique)

/* The order a sort puts rows in: mode 0 by their parent voxel, mode 1 by
 * (index[row], row); -1 (padding) last. */
__device__ __forceinline__ bool vips_row_before(int a, int b, const int* coords,
                                                const int* index, int mode) {
  if (a < 0 || b < 0) return b < 0 && a >= 0;
  if (mode == 0) return vips_voxel_less(vips_voxel(coords, a, 1), vips_voxel(coords, b, 1));
  return index[a] < index[b] || (index[a] == index[b] && a < b);
}

/* One step (k, j) of a bitonic sort of `count` (a power of two) rows. */
VIPS_KERNEL vips_sparse_sort_step(int* rows, vips_i64 count, vips_i64 k, vips_i64 j,
                                  const int* coords, const int* index, int mode) {
  for (vips_i64 i = vips_global_id(); i < count; i += vips_grid_stride()) {
    const vips_i64 l = i ^ j;
    if (l <= i) continue;
    const int a = rows[i], b = rows[l];
    const bool ascending = (i & k) == 0;
    if (ascending ? vips_row_before(b, a, coords, index, mode)
                  : vips_row_before(a, b, coords, index, mode)) {
      rows[i] = b;
      rows[l] = a;
    }
  }
}
VIPS_REGISTER(vips_sparse_sort_step)

/* out[p] = the parent of row sorted[p]; position[sorted[p]] = p. */
VIPS_KERNEL vips_sparse_parents(const int* coords, const int* sorted, vips_i64 m, int* out,
                                int* position) {
  for (vips_i64 p = vips_global_id(); p < m; p += vips_grid_stride()) {
    const VipsVoxel v = vips_voxel(coords, sorted[p], 1);
    out[4 * p] = v.b;
    out[4 * p + 1] = v.x;
    out[4 * p + 2] = v.y;
    out[4 * p + 3] = v.z;
    position[sorted[p]] = static_cast<int>(p);
  }
}
VIPS_REGISTER(vips_sparse_parents)

VIPS_KERNEL vips_sparse_inverse(const int* rep, const int* position, vips_i64 n, int* out) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) out[i] = position[rep[i]];
}
VIPS_REGISTER(vips_sparse_inverse)

/* Children 8i + m of voxel i at 2c + (dx, dy, dz), m = 4dx + 2dy + dz. */
VIPS_KERNEL vips_sparse_subdivide(const int* coords, vips_i64 n, int* out) {
  for (vips_i64 e = vips_global_id(); e < 8 * n; e += vips_grid_stride()) {
    const VipsVoxel v = vips_voxel(coords, e / 8, 0);
    const int m = static_cast<int>(e % 8);
    out[4 * e] = v.b;
    out[4 * e + 1] = 2 * v.x + (m >> 2);
    out[4 * e + 2] = 2 * v.y + ((m >> 1) & 1);
    out[4 * e + 3] = 2 * v.z + (m & 1);
  }
}
VIPS_REGISTER(vips_sparse_subdivide)

/* *bad (started at n): the first position whose index lies outside [0, rows). */
VIPS_KERNEL vips_sparse_check_index(const int* index, vips_i64 n, int rows, int* bad) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride())
    if (index[i] < 0 || index[i] >= rows) atomicMin(bad, static_cast<int>(i));
}
VIPS_REGISTER(vips_sparse_check_index)

/* With rows sorted by (index, row): segment s is sorted[start[s] .. end[s]). */
VIPS_KERNEL vips_sparse_segments(const int* sorted, const int* index, vips_i64 n, int* start,
                                 int* end) {
  for (vips_i64 p = vips_global_id(); p < n; p += vips_grid_stride()) {
    const int s = index[sorted[p]];
    if (p == 0 || index[sorted[p - 1]] != s) start[s] = static_cast<int>(p);
    if (p == n - 1 || index[sorted[p + 1]] != s) end[s] = static_cast<int>(p + 1);
  }
}
VIPS_REGISTER(vips_sparse_segments)

/* Rows of `cols` elements: out[r] = x[index[r]] (-1: zeros, +0 in every
 * float type), or x[r / times] without an index. */
template <class E>
__device__ void vips_rows(const E* x, const int* index, E* out, vips_i64 rows, vips_i64 cols,
                          vips_i64 times) {
  for (vips_i64 e = vips_global_id(); e < rows * cols; e += vips_grid_stride()) {
    const vips_i64 r = e / cols;
    const vips_i64 src = index ? index[r] : r / times;
    out[e] = src < 0 ? E(0) : x[src * cols + e % cols];
  }
}

/* The mean of each segment's rows, summed in float32 in row order (the sort
 * fixes it, so repeated runs agree bit for bit), divided, rounded once. */
template <class T>
__device__ void vips_segment_mean(const T* x, const int* sorted, const int* start,
                                  const int* end, T* out, vips_i64 segments, vips_i64 cols) {
  for (vips_i64 e = vips_global_id(); e < segments * cols; e += vips_grid_stride()) {
    const vips_i64 s = e / cols, c = e % cols;
    float sum = 0.0f;
    for (int p = start[s]; p < end[s]; ++p) sum += vips_load(x + sorted[p] * cols + c);
    const int count = end[s] - start[s];
    vips_store(out + e, count > 0 ? sum / static_cast<float>(count) : 0.0f);
  }
}

/* ---- rasterization (docs/operators.md, "Rasterization") ----
 * As hardware rasterizes: window coordinates snapped to 8 sub-pixel bits
 * (units of 1/256 pixel, round to nearest), pixel centres at
 * ((2 col + 1) · 128, (2 row + 1) · 128) in the same units, and each edge
 * function E(p) = a·px + b·py + c evaluated exactly in 64-bit integers. The
 * two triangles sharing an edge get exactly opposite values (E_ab = −E_ba
 * with exact integers), so the tie rule on a centre exactly on the edge
 * gives it to exactly one of them; a triangle whose snapped area is 0 covers
 * nothing. A vertex beyond ±2^21 pixels (2^29 units, where products stay
 * below 2^61) makes the edges it ends exact no more: those are
 * evaluated in float64 from their lexicographically smaller endpoint
 * (negated for the other direction), still exactly opposite for the two
 * triangles that share them. Setup writes one VipsRasterTri per (batch
 * entry, triangle); then a block draws a 16 × 16 tile, one thread per
 * pixel: the batch entry's triangles in chunks of VIPS_BLOCK, those whose
 * box meets the tile listed in shared memory, each thread keeping the
 * nearest (z/w, id) pair, so the order of visits does not matter. */

#define VIPS_RASTER_TILE 16
/* Snapped coordinates within ±2^29 units (2^21 pixels) have exact edges. */
#define VIPS_RASTER_GUARD 536870912.0

/* One triangle of one batch entry, set up. Edge k is the one opposite
 * vertex k, oriented so that the inside is positive: E_k(p) = a·px + b·py
 * + c with e[k] = {a, b, c}, integers where bit k of `exact` is set, else
 * the bits of float64 values. A centre with E_k = 0 is covered when bit k
 * of `owns` is set (the tie rule). E_0 + E_1 + E_2 = `area` (twice the
 * snapped area, > 0), so λ_k = E_k / area. `box`: the columns and rows
 * (inclusive) of the centres within its snapped bounding box, clipped to
 * the raster; box[0] > box[1] when it covers nothing (degenerate, or
 * outside). */
struct VipsRasterTri {
  long long e[3][3];
  double depth[3];
  double inv_w[3];
  double area;
  int box[4];
  int exact;
  int owns;
};
static_assert(sizeof(VipsRasterTri) == 152, "ops/raster.rs allocates 152 bytes per triangle");

__device__ __forceinline__ double vips_bits_double(long long v) {
  union {
    long long i;
    double d;
  } c;
  c.i = v;
  return c.d;
}

__device__ __forceinline__ long long vips_double_bits(double d) {
  union {
    long long i;
    double d;
  } c;
  c.d = d;
  return c.i;
}

/* Without isfinite, which NVRTC lacks: Inf − Inf and NaN − NaN are NaN. */
__device__ __forceinline__ bool vips_finite(double v) { return v - v == 0.0; }

/* The columns (or rows) whose centres (2i + 1) · 128 lie in [lo, hi] units,
 * clipped to [0, n); first > last when there are none. */
__device__ __forceinline__ void vips_centre_range(double lo, double hi, int n, int* first,
                                                  int* last) {
  double f = ceil((lo - 128.0) / 256.0), l = floor((hi - 128.0) / 256.0);
  f = f < 0.0 ? 0.0 : f;
  l = l > n - 1.0 ? n - 1.0 : l;
  if (!(f <= l)) {
    *first = 1;
    *last = 0;
    return;
  }
  *first = static_cast<int>(f);
  *last = static_cast<int>(l);
}

/* A clip-space vertex's window coordinates (the catalog's, in float64)
 * snapped to 1/256 pixel, its depth z/w and 1/w. False unless w > 0 and every
 * value is finite (then the window coordinates are finite too: float32
 * values cannot overflow them in float64). */
__device__ __forceinline__ bool vips_raster_vertex(const float* p, int height, int width, double* x,
                                                   double* y, double* depth, double* inv_w) {
  const double cx = p[0], cy = p[1], cz = p[2], cw = p[3];
  if (!(cw > 0.0) || !vips_finite(cx) || !vips_finite(cy) || !vips_finite(cz) || !vips_finite(cw))
    return false;
  *x = rint((cx / cw + 1.0) * 0.5 * width * 256.0);
  *y = rint((cy / cw + 1.0) * 0.5 * height * 256.0);
  *depth = cz / cw;
  *inv_w = 1.0 / cw;
  return true;
}

__device__ __forceinline__ bool vips_raster_in_band(double x, double y) {
  return fabs(x) <= VIPS_RASTER_GUARD && fabs(y) <= VIPS_RASTER_GUARD;
}

/* The edge from (fx, fy) to (tx, ty) of a triangle (`flip`: clockwise, every
 * edge negated so that the inside is positive) as e = {a, b, c}. Returns
 * bit 0: exact (integers), bit 1: the triangle owns centres on it. */
__device__ __forceinline__ int vips_raster_edge(double fx, double fy, double tx, double ty,
                                                bool flip, long long* e) {
  if (vips_raster_in_band(fx, fy) && vips_raster_in_band(tx, ty)) {
    const long long ix = static_cast<long long>(fx), iy = static_cast<long long>(fy);
    long long a = iy - static_cast<long long>(ty), b = static_cast<long long>(tx) - ix;
    long long c = -(a * ix + b * iy);
    if (flip) {
      a = -a;
      b = -b;
      c = -c;
    }
    e[0] = a;
    e[1] = b;
    e[2] = c;
    return 1 | ((a > 0 || (a == 0 && b > 0)) ? 2 : 0);
  }
  /* From the lexicographically smaller endpoint, negated for the other direction. */
  const bool forward = fx < tx || (fx == tx && fy <= ty);
  const double ox = forward ? fx : tx, oy = forward ? fy : ty;
  const double dx = forward ? tx : fx, dy = forward ? ty : fy;
  double a = oy - dy, b = dx - ox;
  double c = -(a * ox + b * oy);
  if (forward == flip) {
    a = -a;
    b = -b;
    c = -c;
  }
  e[0] = vips_double_bits(a);
  e[1] = vips_double_bits(b);
  e[2] = vips_double_bits(c);
  return (a > 0.0 || (a == 0.0 && b > 0.0)) ? 2 : 0;
}

/* out[b · faces + f]: triangle f of batch entry b set up from clip-space
 * pos [batch, vertices, 4] and tri [faces, 3] (indices already checked).
 * A vertex a triangle uses needs w > 0 and finite values: *bad (started at
 * batch · faces) takes the first (b, f) that has one. */
VIPS_KERNEL vips_raster_setup(const float* pos, const int* tri, vips_i64 batch, vips_i64 vertices,
                              vips_i64 faces, int height, int width, VipsRasterTri* out,
                              int* bad) {
  for (vips_i64 i = vips_global_id(); i < batch * faces; i += vips_grid_stride()) {
    const vips_i64 b = i / faces, f = i % faces;
    VipsRasterTri* t = out + i;
    t->box[0] = t->box[2] = 1; /* empty unless set up below */
    t->box[1] = t->box[3] = 0;
    t->exact = t->owns = 0;
    t->area = 0.0;
    const float* p = pos + b * vertices * 4;
    const int* v = tri + 3 * f;
    double x0, y0, x1, y1, x2, y2;
    if (!vips_raster_vertex(p + 4 * static_cast<vips_i64>(v[0]), height, width, &x0, &y0,
                            &t->depth[0], &t->inv_w[0]) ||
        !vips_raster_vertex(p + 4 * static_cast<vips_i64>(v[1]), height, width, &x1, &y1,
                            &t->depth[1], &t->inv_w[1]) ||
        !vips_raster_vertex(p + 4 * static_cast<vips_i64>(v[2]), height, width, &x2, &y2,
                            &t->depth[2], &t->inv_w[2])) {
      atomicMin(bad, static_cast<int>(i));
      continue;
    }
    /* Twice the signed area: exact from integers, else in float64. */
    double area;
    if (vips_raster_in_band(x0, y0) && vips_raster_in_band(x1, y1) && vips_raster_in_band(x2, y2)) {
      const long long ix = static_cast<long long>(x0), iy = static_cast<long long>(y0);
      area = static_cast<double>(
          (static_cast<long long>(x1) - ix) * (static_cast<long long>(y2) - iy) -
          (static_cast<long long>(y1) - iy) * (static_cast<long long>(x2) - ix));
    } else {
      area = (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0);
    }
    if (area == 0.0 || !vips_finite(area)) continue; /* degenerate: covers nothing */
    const bool flip = area < 0.0;
    t->area = flip ? -area : area;
    const int e0 = vips_raster_edge(x1, y1, x2, y2, flip, t->e[0]);
    const int e1 = vips_raster_edge(x2, y2, x0, y0, flip, t->e[1]);
    const int e2 = vips_raster_edge(x0, y0, x1, y1, flip, t->e[2]);
    t->exact = (e0 & 1) | (e1 & 1) << 1 | (e2 & 1) << 2;
    t->owns = (e0 >> 1) | (e1 >> 1) << 1 | (e2 >> 1) << 2;
    vips_centre_range(fmin(x0, fmin(x1, x2)), fmax(x0, fmax(x1, x2)), width, &t->box[0],
                      &t->box[1]);
    vips_centre_range(fmin(y0, fmin(y1, y2)), fmax(y0, fmax(y1, y2)), height, &t->box[2],
                      &t->box[3]);
  }
}
VIPS_REGISTER(vips_raster_setup)

/* Whether the centre (px, py) lies on the inside of edge k of t (the tie
 * rule on the edge); *e its edge function there. */
__device__ __forceinline__ bool vips_raster_inside(const VipsRasterTri& t, int k, long long px,
                                                   long long py, double* e) {
  const bool owns = (t.owns >> k) & 1;
  if ((t.exact >> k) & 1) {
    const long long v = t.e[k][0] * px + t.e[k][1] * py + t.e[k][2];
    *e = static_cast<double>(v);
    return v > 0 || (v == 0 && owns);
  }
  const double v = vips_bits_double(t.e[k][0]) * static_cast<double>(px) +
                   vips_bits_double(t.e[k][1]) * static_cast<double>(py) +
                   vips_bits_double(t.e[k][2]);
  *e = v;
  return v > 0.0 || (v == 0.0 && owns);
}

/* out [batch, height, width, 4]: (u, v, z/w, id + 1) of the nearest
 * triangle covering each centre with −1 ≤ z/w ≤ 1 (at equal depth the lower
 * id), 0 where none does. A block per 16 × 16 tile, striding over the
 * tiles of every batch entry. */
VIPS_KERNEL vips_rasterize(const VipsRasterTri* tris, vips_i64 batch, vips_i64 faces, int height,
                           int width, float* out) {
  __shared__ int listed[VIPS_BLOCK];
  __shared__ int count;
  const vips_i64 tiles_x = (width + VIPS_RASTER_TILE - 1) / VIPS_RASTER_TILE;
  const vips_i64 tiles_y = (height + VIPS_RASTER_TILE - 1) / VIPS_RASTER_TILE;
  const vips_i64 tiles = tiles_x * tiles_y * batch;
  for (vips_i64 tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const vips_i64 b = tile / (tiles_x * tiles_y);
    const int col0 = static_cast<int>(tile % tiles_x) * VIPS_RASTER_TILE;
    const int row0 = static_cast<int>(tile / tiles_x % tiles_y) * VIPS_RASTER_TILE;
    const int col1 = (col0 + VIPS_RASTER_TILE < width ? col0 + VIPS_RASTER_TILE : width) - 1;
    const int row1 = (row0 + VIPS_RASTER_TILE < height ? row0 + VIPS_RASTER_TILE : height) - 1;
    const int col = col0 + static_cast<int>(threadIdx.x) % VIPS_RASTER_TILE;
    const int row = row0 + static_cast<int>(threadIdx.x) / VIPS_RASTER_TILE;
    const bool here = col <= col1 && row <= row1;
    const long long px = (2LL * col + 1) * 128, py = (2LL * row + 1) * 128;
    const VipsRasterTri* batch_tris = tris + b * faces;
    double best_depth = 0.0, best0 = 0.0, best1 = 0.0, best2 = 0.0;
    vips_i64 best = -1;
    for (vips_i64 base = 0; base < faces; base += VIPS_BLOCK) {
      if (threadIdx.x == 0) count = 0;
      __syncthreads();
      const vips_i64 f = base + threadIdx.x;
      if (f < faces) {
        const int* box = batch_tris[f].box;
        if (box[0] <= col1 && box[1] >= col0 && box[2] <= row1 && box[3] >= row0)
          listed[atomicAdd(&count, 1)] = static_cast<int>(threadIdx.x);
      }
      __syncthreads();
      const int n = count;
      for (int j = 0; here && j < n; ++j) {
        const vips_i64 id = base + listed[j];
        const VipsRasterTri& t = batch_tris[id];
        if (col < t.box[0] || col > t.box[1] || row < t.box[2] || row > t.box[3]) continue;
        double e0, e1, e2;
        if (!vips_raster_inside(t, 0, px, py, &e0) || !vips_raster_inside(t, 1, px, py, &e1) ||
            !vips_raster_inside(t, 2, px, py, &e2))
          continue;
        const double l0 = e0 / t.area, l1 = e1 / t.area, l2 = e2 / t.area;
        const double depth = l0 * t.depth[0] + l1 * t.depth[1] + l2 * t.depth[2];
        if (!(depth >= -1.0 && depth <= 1.0)) continue;
        if (best >= 0 && !(depth < best_depth || (depth == best_depth && id < best))) continue;
        best = id;
        best_depth = depth;
        best0 = l0;
        best1 = l1;
        best2 = l2;
      }
      __syncthreads(); /* the next chunk overwrites the list */
    }
    if (!here) continue;
    float* o = out + ((b * height + row) * width + col) * 4;
    if (best < 0) {
      o[0] = o[1] = o[2] = o[3] = 0.0f;
      continue;
    }
    /* Perspective-correct: b_k = (λ_k / w_k) / Σ_m λ_m / w_m; u = b_0, v = b_1. */
    const VipsRasterTri& t = batch_tris[best];
    const double q0 = best0 * t.inv_w[0], q1 = best1 * t.inv_w[1], q2 = best2 * t.inv_w[2];
    const double s = q0 + q1 + q2;
    o[0] = static_cast<float>(q0 / s);
    o[1] = static_cast<float>(q1 / s);
    o[2] = static_cast<float>(best_depth);
    o[3] = static_cast<float>(best + 1);
  }
}
VIPS_REGISTER(vips_rasterize)

/* out [B, H, W, A] = u·attr[t0] + v·attr[t1] + (1 − u − v)·attr[t2] in
 * float32 (t = tri[id], (u, v, _, id + 1) = rast [B, H, W, 4]), 0 where
 * id + 1 = 0 (or −0). A thread per pixel. An id + 1 that is not an integer
 * in [1, faces] raises *bad (started at the pixel count): the first such
 * pixel. */
template <class T, class R>
__device__ void vips_interpolate(const T* attr, const R* rast, const int* tri, vips_i64 plane,
                                 vips_i64 pixels, vips_i64 vertices, int faces, int channels, T* out,
                                 int* bad) {
  for (vips_i64 p = vips_global_id(); p < pixels; p += vips_grid_stride()) {
    const R* px = rast + 4 * p;
    const double id = static_cast<double>(px[3]);
    T* o = out + p * channels;
    const bool valid = id >= 1.0 && id <= static_cast<double>(faces) && id == floor(id);
    if (!valid) {
      if (id != 0.0) atomicMin(bad, static_cast<int>(p));
      for (int ch = 0; ch < channels; ++ch) vips_store(o + ch, 0.0f);
      continue;
    }
    const int* t = tri + 3 * (static_cast<vips_i64>(id) - 1);
    const T* a = attr + p / plane * vertices * channels;
    const T *a0 = a + static_cast<vips_i64>(t[0]) * channels, *a1 = a + static_cast<vips_i64>(t[1]) * channels,
            *a2 = a + static_cast<vips_i64>(t[2]) * channels;
    const float u = static_cast<float>(px[0]), v = static_cast<float>(px[1]);
    const float w = 1.0f - u - v;
    for (int ch = 0; ch < channels; ++ch)
      vips_store(o + ch, u * vips_load(a0 + ch) + v * vips_load(a1 + ch) + w * vips_load(a2 + ch));
  }
}

/* ---- the exported kernels ---- */

#define VIPS_FLOAT_KERNELS(sfx, T)                                                              \
  VIPS_KERNEL                                     \
      vips_binary_##sfx(const T* a, const T* b, T* out, VipsStrides s, vips_i64 n, int op) {   \
    vips_binary<T>(a, b, out, s, n, op);                                                       \
  }                                                                                            \
  VIPS_REGISTER(vips_binary_##sfx)                                                             \
  VIPS_KERNEL                                     \
      vips_gelu_##sfx(const T* x, T* out, vips_i64 n) {                                        \
    vips_gelu<T>(x, out, n);                                                                   \
  }                                                                                            \
  VIPS_REGISTER(vips_gelu_##sfx)                                                               \
  VIPS_KERNEL                                     \
      vips_unary_##sfx(const T* x, T* out, vips_i64 n, int op) {                               \
    vips_unary<T>(x, out, n, op);                                                              \
  }                                                                                            \
  VIPS_REGISTER(vips_unary_##sfx)                                                              \
  VIPS_KERNEL vips_linear_##sfx(                  \
      const T* x, const T* w, const T* bias, T* out, int m, int n, int k) {                    \
    vips_linear<T>(x, w, bias, out, m, n, k);                                                  \
  }                                                                                            \
  VIPS_REGISTER(vips_linear_##sfx)                                                             \
  VIPS_KERNEL                                     \
      vips_conv2d_##sfx(const T* x, const T* w, const T* bias, T* out, VipsConv p) {           \
    vips_conv2d<T>(x, w, bias, out, p);                                                        \
  }                                                                                            \
  VIPS_REGISTER(vips_conv2d_##sfx)                                                             \
  VIPS_KERNEL vips_layer_norm_##sfx(              \
      const T* x, const T* w, const T* b, T* out, vips_i64 rows, vips_i64 len, float eps) {    \
    vips_layer_norm<T>(x, w, b, out, rows, len, eps);                                                \
  }                                                                                            \
  VIPS_REGISTER(vips_layer_norm_##sfx)                                                         \
  VIPS_KERNEL vips_rms_norm_##sfx(                \
      const T* x, const T* g, T* out, vips_i64 rows, vips_i64 len, vips_i64 glen, float eps) {  \
    vips_rms_norm<T>(x, g, out, rows, len, glen, eps);                                         \
  }                                                                                            \
  VIPS_REGISTER(vips_rms_norm_##sfx)                                                           \
  VIPS_KERNEL                                     \
      vips_softmax_##sfx(const T* x, T* out, vips_i64 rows, vips_i64 len, vips_i64 inner) {    \
    vips_softmax<T>(x, out, rows, len, inner);                                                       \
  }                                                                                            \
  VIPS_REGISTER(vips_softmax_##sfx)                                                            \
  VIPS_KERNEL vips_sdpa_##sfx(                    \
      const T* q, const T* k, const T* v, T* out, vips_i64 rows, int lq, int lk, int d, int dv,  \
      float scale) {                                                                           \
    vips_sdpa<T>(q, k, v, out, rows, lq, lk, d, dv, scale);                                          \
  }                                                                                            \
  VIPS_REGISTER(vips_sdpa_##sfx)                                                               \
  VIPS_KERNEL                                     \
      vips_taps_from_##sfx(const T* x, float* out, const int* index, const float* weight,     \
                            const int* offsets, vips_i64 outer, int len_in, int len_out,       \
                            vips_i64 inner) {                                                  \
    vips_taps<T, float>(x, out, index, weight, offsets, outer, len_in, len_out, inner);        \
  }                                                                                            \
  VIPS_REGISTER(vips_taps_from_##sfx)                                                         \
  VIPS_KERNEL                                     \
      vips_taps_to_##sfx(const float* x, T* out, const int* index, const float* weight,       \
                          const int* offsets, vips_i64 outer, int len_in, int len_out,         \
                          vips_i64 inner) {                                                    \
    vips_taps<float, T>(x, out, index, weight, offsets, outer, len_in, len_out, inner);        \
  }                                                                                            \
  VIPS_REGISTER(vips_taps_to_##sfx)                                                         \
  VIPS_KERNEL                                     \
      vips_segment_mean_##sfx(const T* x, const int* sorted, const int* start, const int* end, \
                              T* out, vips_i64 segments, vips_i64 cols) {                      \
    vips_segment_mean<T>(x, sorted, start, end, out, segments, cols);                          \
  }                                                                                            \
  VIPS_REGISTER(vips_segment_mean_##sfx)

VIPS_FLOAT_KERNELS(f32, float)
VIPS_FLOAT_KERNELS(f16, vips_f16)
VIPS_FLOAT_KERNELS(bf16, vips_bf16)

#define VIPS_CAST_KERNEL(from, S, to, D)                                                        \
  VIPS_KERNEL                                     \
      vips_cast_##from##_##to(const S* x, D* out, vips_i64 n) {                                \
    vips_cast<S, D>(x, out, n);                                                                \
  }                                                                                            \
  VIPS_REGISTER(vips_cast_##from##_##to)

#define VIPS_CAST_FROM(from, S)            \
  VIPS_CAST_KERNEL(from, S, u8, unsigned char) \
  VIPS_CAST_KERNEL(from, S, f16, vips_f16)  \
  VIPS_CAST_KERNEL(from, S, bf16, vips_bf16) \
  VIPS_CAST_KERNEL(from, S, f32, float)

/* int32 to the float types: sparse coordinates as numbers. float32 and
 * float16 round once (every int32 within float16's range is exact in
 * float32); bfloat16 would round twice through float32, so its kernel rounds
 * the integer to 8 significant bits itself (exact in float32), ties to even. */
__device__ __forceinline__ float vips_int_to_bf16_exact(int v) {
  const long long a = v < 0 ? -static_cast<long long>(v) : v;
  int shift = 0;
  while ((a >> shift) >= 256) ++shift;
  long long q = a >> shift;
  if (shift > 0) {
    const long long rem = a & ((1LL << shift) - 1), half = 1LL << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
  }
  const float f = static_cast<float>(q << shift);
  return v < 0 ? -f : f;
}

VIPS_KERNEL vips_cast_i32_bf16(const int* x, vips_bf16* out, vips_i64 n) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride())
    vips_store(out + i, vips_int_to_bf16_exact(x[i]));
}
VIPS_REGISTER(vips_cast_i32_bf16)
VIPS_CAST_KERNEL(i32, int, f16, vips_f16)
VIPS_CAST_KERNEL(i32, int, f32, float)
VIPS_CAST_FROM(u8, unsigned char)
VIPS_CAST_FROM(f16, vips_f16)
VIPS_CAST_FROM(bf16, vips_bf16)
VIPS_CAST_FROM(f32, float)

#define VIPS_COPY_KERNEL(bytes, E)                                                              \
  VIPS_KERNEL                                     \
      vips_copy_##bytes(const E* src, E* dst, VipsStrides s, vips_i64 n) {                     \
    vips_copy<E>(src, dst, s, n);                                                              \
  }                                                                                            \
  VIPS_REGISTER(vips_copy_##bytes)

VIPS_COPY_KERNEL(1, unsigned char)
VIPS_COPY_KERNEL(2, unsigned short)
VIPS_COPY_KERNEL(4, unsigned int)
VIPS_COPY_KERNEL(8, unsigned long long)

#define VIPS_ROWS_KERNEL(bytes, E)                                                              \
  VIPS_KERNEL                                     \
      vips_rows_##bytes(const E* x, const int* index, E* out, vips_i64 rows, vips_i64 cols,     \
                        vips_i64 times) {                                                      \
    vips_rows<E>(x, index, out, rows, cols, times);                                            \
  }                                                                                            \
  VIPS_REGISTER(vips_rows_##bytes)

VIPS_ROWS_KERNEL(1, unsigned char)
VIPS_ROWS_KERNEL(2, unsigned short)
VIPS_ROWS_KERNEL(4, unsigned int)
VIPS_ROWS_KERNEL(8, unsigned long long)

VIPS_KERNEL
    vips_taps_pil_u8(const unsigned char* x, unsigned char* out, const int* index,
                     const int* coeff, const int* offsets, vips_i64 outer, int len_in,
                     int len_out, vips_i64 inner) {
  vips_taps_pil(x, out, index, coeff, offsets, outer, len_in, len_out, inner);
}
VIPS_REGISTER(vips_taps_pil_u8)

/* Pillow's alpha handling around an 8-bit resize of an LA or RGBA image
 * (Convert.c): each pixel's `channels - 1` colour values times its alpha
 * (the last channel), MULDIV255 = round(v * a / 255); after the passes, the
 * colour values divided by the resized alpha, truncated and clipped, left as
 * they are where alpha is 0 or 255. */
VIPS_KERNEL
    vips_premultiply_u8(const unsigned char* x, unsigned char* out, vips_i64 pixels,
                        int channels) {
  for (vips_i64 p = vips_global_id(); p < pixels; p += vips_grid_stride()) {
    const unsigned char* px = x + p * channels;
    const unsigned int a = px[channels - 1];
    for (int ch = 0; ch + 1 < channels; ++ch) {
      const unsigned int t = px[ch] * a + 128u;
      out[p * channels + ch] = static_cast<unsigned char>(((t >> 8) + t) >> 8);
    }
    out[p * channels + channels - 1] = static_cast<unsigned char>(a);
  }
}
VIPS_REGISTER(vips_premultiply_u8)

VIPS_KERNEL
    vips_unpremultiply_u8(unsigned char* x, vips_i64 pixels, int channels) {
  for (vips_i64 p = vips_global_id(); p < pixels; p += vips_grid_stride()) {
    unsigned char* px = x + p * channels;
    const unsigned int a = px[channels - 1];
    if (a == 0u || a == 255u) continue;
    for (int ch = 0; ch + 1 < channels; ++ch) {
      const unsigned int v = 255u * px[ch] / a;
      px[ch] = static_cast<unsigned char>(v > 255u ? 255u : v);
    }
  }
}
VIPS_REGISTER(vips_unpremultiply_u8)

#define VIPS_INTERPOLATE_KERNEL(sfx, T, rsfx, R)                                                \
  VIPS_KERNEL vips_interpolate_##sfx##_##rsfx(const T* attr, const R* rast, const int* tri,     \
                                              vips_i64 plane, vips_i64 pixels,                  \
                                              vips_i64 vertices, int faces, int channels,       \
                                              T* out, int* bad) {                               \
    vips_interpolate<T, R>(attr, rast, tri, plane, pixels, vertices, faces, channels, out, bad); \
  }                                                                                            \
  VIPS_REGISTER(vips_interpolate_##sfx##_##rsfx)

/* The rasterizer's output in float32 or float64 (the catalog allows both). */
VIPS_INTERPOLATE_KERNEL(f32, float, f32, float)
VIPS_INTERPOLATE_KERNEL(f32, float, f64, double)
VIPS_INTERPOLATE_KERNEL(f16, vips_f16, f32, float)
VIPS_INTERPOLATE_KERNEL(f16, vips_f16, f64, double)
VIPS_INTERPOLATE_KERNEL(bf16, vips_bf16, f32, float)
VIPS_INTERPOLATE_KERNEL(bf16, vips_bf16, f64, double)
