/* reduction.cu: 2-D pooling over window tables, sums and means over rows.
 * Part of the one kernel program (common.cu says how it is put together). */

/* vsdk.max_pool2d, vsdk.avg_pool2d, vsdk.adaptive_avg_pool2d: one thread per
 * output of [planes, oh, ow]. The host computes each axis's windows from the
 * catalog (ceil_mode, padding and adaptive bins decided there, once): for
 * output o, 4 ints at rows/cols[4·o]: the first input index, the tap count,
 * the step between taps, and the axis's share of an average's divisor. */
template <class T>
__device__ void vips_pool2d(const T* x, const int* rows, const int* cols, T* out, vips_i64 planes,
                            vips_i64 h, vips_i64 w, vips_i64 oh, vips_i64 ow, int is_max) {
  for (vips_i64 e = vips_global_id(); e < planes * oh * ow; e += vips_grid_stride()) {
    const vips_i64 p = e / (oh * ow), r = (e / ow) % oh, c = e % ow;
    const int* wr = rows + 4 * r;
    const int* wc = cols + 4 * c;
    const T* plane = x + p * h * w;
    float acc = is_max ? -vips_inf() : 0.0f;
    for (int i = 0; i < wr[1]; ++i) {
      const T* row = plane + (static_cast<vips_i64>(wr[0]) + static_cast<vips_i64>(i) * wr[2]) * w;
      for (int j = 0; j < wc[1]; ++j) {
        const float v = vips_load(row + static_cast<vips_i64>(wc[0]) + static_cast<vips_i64>(j) * wc[2]);
        if (!is_max) acc += v;
        else if (v > acc || v != v) acc = v; /* NaN wins and stays: nothing compares above it */
      }
    }
    vips_store(out + e, is_max ? acc : acc / (static_cast<float>(wr[3]) * static_cast<float>(wc[3])));
  }
}

/* vsdk.sum, vsdk.mean: rows of `len` contiguous elements (the host moved the
 * reduced axes last), a block per row, divided by `divisor` (1 or len). */
template <class T>
__device__ void vips_reduce(const T* x, T* out, vips_i64 rows, vips_i64 len, float divisor) {
  __shared__ float scratch[VIPS_BLOCK / 32];
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    float s = 0.0f;
    for (vips_i64 j = threadIdx.x; j < len; j += blockDim.x) s += vips_load(x + row * len + j);
    s = vips_block_sum(s, scratch);
    if (threadIdx.x == 0) vips_store(out + row, s / divisor);
  }
}

/* The exported kernels: vips_{pool2d,reduce}_<dtype>, for each float type. */
#define VIPS_REDUCTION_KERNELS(sfx, T)                                                          \
  VIPS_KERNEL vips_pool2d_##sfx(const T* x, const int* rows, const int* cols, T* out,           \
                                vips_i64 planes, vips_i64 h, vips_i64 w, vips_i64 oh,          \
                                vips_i64 ow, int is_max) {                                     \
    vips_pool2d<T>(x, rows, cols, out, planes, h, w, oh, ow, is_max);                          \
  }                                                                                            \
  VIPS_REGISTER(vips_pool2d_##sfx)                                                             \
  VIPS_KERNEL vips_reduce_##sfx(const T* x, T* out, vips_i64 rows, vips_i64 len, float divisor) { \
    vips_reduce<T>(x, out, rows, len, divisor);                                                  \
  }                                                                                            \
  VIPS_REGISTER(vips_reduce_##sfx)

VIPS_REDUCTION_KERNELS(f32, float)
VIPS_REDUCTION_KERNELS(f16, vips_f16)
VIPS_REDUCTION_KERNELS(bf16, vips_bf16)
