/* attention.cu: scaled dot-product attention.
 * Part of the one kernel program (common.cu says how it is put together). */

/* ---- scaled dot-product attention: out = softmax(scale · q kᵀ + mask) v ----
 * q [B, Lq, D], k [Bkv, Lk, D], v [Bkv, Lk, Dv] (batch dimensions folded into
 * B); a block per (batch, query row) of the `rows` = B · Lq; the row's Lk
 * scores live in dynamic shared memory (Lk floats). Query batch b reads
 * key/value batch (b / hq)·hkv + (b % hq) / group, group = hq / hkv; `mask`
 * (NULL: none) is [B, Lq, Lk]; with causal >= 0, query i sees keys j <= i + causal. */
template <class T>
__device__ void vips_sdpa(const T* q, const T* k, const T* v, const T* mask, T* out, vips_i64 rows,
                          int lq, int lk, int d, int dv, float scale, int hq, int hkv, int group,
                          int causal) {
  VIPS_DYNAMIC_SHARED(float, scores);
  __shared__ float scratch[VIPS_BLOCK / 32];
  for (vips_i64 row = blockIdx.x; row < rows; row += gridDim.x) {
    /* 32-bit head arithmetic: a 64-bit division costs scalar registers (spills on gfx90a). */
    const int batch = static_cast<int>(row / lq), i = static_cast<int>(row - static_cast<vips_i64>(batch) * lq);
    const vips_i64 kv = (batch / hq) * hkv + (batch % hq) / group;
    const T* qrow = q + row * d;
    const T* kb = k + kv * lk * d;
    const T* vb = v + kv * lk * dv;
    float mx = -vips_inf();
    for (int j = threadIdx.x; j < lk; j += blockDim.x) {
      float s = 0.0f;
      for (int e = 0; e < d; ++e)
        s = fmaf(vips_load(qrow + e), vips_load(kb + static_cast<vips_i64>(j) * d + e), s);
      s *= scale;
      if (mask) s += vips_load(mask + row * lk + j);
      if (causal >= 0 && j > i + causal) s = -vips_inf();
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

/* ---- rotary position embedding: x [rows = ... · L, D] by cos, sin [L, half] ----
 * One thread per element: feature f of pair i (f = i or i + half; interleaved:
 * 2i or 2i + 1) becomes x_f·c − x_partner·s (the pair's first) or x_f·c +
 * x_partner·s (its second); features from 2·half on pass through. */
template <class T>
__device__ void vips_rotary(const T* x, const T* cos_t, const T* sin_t, T* out, vips_i64 n, vips_i64 l,
                            vips_i64 d, vips_i64 half, int interleaved) {
  for (vips_i64 e = vips_global_id(); e < n; e += vips_grid_stride()) {
    const vips_i64 f = e % d, row = e / d;
    if (f >= 2 * half) {
      out[e] = x[e];
      continue;
    }
    const vips_i64 i = interleaved ? f / 2 : f % half;
    const int first = interleaved ? (f % 2 == 0) : (f < half);
    const vips_i64 partner = interleaved ? (first ? f + 1 : f - 1) : (first ? f + half : f - half);
    const float c = vips_load(cos_t + (row % l) * half + i), s = vips_load(sin_t + (row % l) * half + i);
    const float xf = vips_load(x + e), xp = vips_load(x + e - f + partner);
    vips_store(out + e, first ? fmaf(xf, c, -xp * s) : fmaf(xf, c, xp * s));
  }
}

/* The exported kernels: vips_sdpa_<dtype>, vips_rotary_<dtype>, for each float type. */
#define VIPS_ATTENTION_KERNELS(sfx, T)                                                          \
  VIPS_KERNEL vips_sdpa_##sfx(                    \
      const T* q, const T* k, const T* v, const T* mask, T* out, vips_i64 rows, int lq, int lk,  \
      int d, int dv, float scale, int hq, int hkv, int group, int causal) {                     \
    vips_sdpa<T>(q, k, v, mask, out, rows, lq, lk, d, dv, scale, hq, hkv, group, causal);      \
  }                                                                                            \
  VIPS_REGISTER(vips_sdpa_##sfx)                                                               \
  VIPS_KERNEL vips_rotary_##sfx(const T* x, const T* cos_t, const T* sin_t, T* out, vips_i64 n, \
                                vips_i64 l, vips_i64 d, vips_i64 half, int interleaved) {      \
    vips_rotary<T>(x, cos_t, sin_t, out, n, l, d, half, interleaved);                          \
  }                                                                                            \
  VIPS_REGISTER(vips_rotary_##sfx)

VIPS_ATTENTION_KERNELS(f32, float)
VIPS_ATTENTION_KERNELS(f16, vips_f16)
VIPS_ATTENTION_KERNELS(bf16, vips_bf16)
