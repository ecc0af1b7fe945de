/* normalization.cu: normalisation over an axis (layer norm, RMS norm,
 * softmax), batch norm, group norm.
 * Part of the one kernel program (common.cu says how it is put together). */

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

/* The exported kernels: vips_{layer_norm,rms_norm,batch_norm,group_norm,softmax}_<dtype>, for
 * each float type. */
/* vsdk.batch_norm (inference): one thread per element, channel axis 1 of [N, C, inner];
 * the statistics unfolded, (x - mean) / sqrt(var + eps) * w + b, in float32. */
template <class T>
__device__ void vips_batch_norm(const T* x, const T* mean, const T* var, const T* w, const T* b, T* out,
                                vips_i64 n, vips_i64 channels, vips_i64 inner, float eps) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    const vips_i64 c = (i / inner) % channels;
    const float s = sqrtf(vips_load(var + c) + eps);
    vips_store(out + i, (vips_load(x + i) - vips_load(mean + c)) / s * vips_load(w + c) + vips_load(b + c));
  }
}

/* vsdk.group_norm: x [N, C, inner] in `groups` groups of `cpg` channels; row r =
 * (n, g) is the cpg · inner contiguous elements of sample n's group g, a block per
 * row as layer norm: the mean, then the biased variance (two passes, float32), then
 * (x − mean) / sqrt(var + eps) · w[c] + b[c] with channel c = g · cpg + j / inner. */
template <class T>
__device__ void vips_group_norm(const T* x, const T* w, const T* b, T* out, vips_i64 rows,
                                vips_i64 groups, vips_i64 cpg, vips_i64 inner, float eps) {
  __shared__ float scratch[VIPS_BLOCK / 32];
  const vips_i64 len = cpg * inner;
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    const vips_i64 base = row * len, c0 = (row % groups) * cpg;
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
      const vips_i64 c = c0 + j / inner;
      const float v = (vips_load(x + base + j) - mean) * inv;
      vips_store(out + base + j, fmaf(v, vips_load(w + c), vips_load(b + c)));
    }
  }
}

#define VIPS_NORMALIZATION_KERNELS(sfx, T)                                                      \
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
  VIPS_KERNEL vips_batch_norm_##sfx(const T* x, const T* mean, const T* var, const T* w, const T* b, \
                                    T* out, vips_i64 n, vips_i64 channels, vips_i64 inner, float eps) { \
    vips_batch_norm<T>(x, mean, var, w, b, out, n, channels, inner, eps);                     \
  }                                                                                            \
  VIPS_REGISTER(vips_batch_norm_##sfx)                                                         \
  VIPS_KERNEL vips_group_norm_##sfx(const T* x, const T* w, const T* b, T* out, vips_i64 rows,  \
                                    vips_i64 groups, vips_i64 cpg, vips_i64 inner, float eps) { \
    vips_group_norm<T>(x, w, b, out, rows, groups, cpg, inner, eps);                          \
  }                                                                                            \
  VIPS_REGISTER(vips_group_norm_##sfx)                                                         \
  VIPS_KERNEL                                     \
      vips_softmax_##sfx(const T* x, T* out, vips_i64 rows, vips_i64 len, vips_i64 inner) {    \
    vips_softmax<T>(x, out, rows, len, inner);                                                       \
  }                                                                                            \
  VIPS_REGISTER(vips_softmax_##sfx)

VIPS_NORMALIZATION_KERNELS(f32, float)
VIPS_NORMALIZATION_KERNELS(f16, vips_f16)
VIPS_NORMALIZATION_KERNELS(bf16, vips_bf16)
