/* linear.cu: linear layers, batched matrix products and convolution.
 * Part of the one kernel program (common.cu says how it is put together). */

struct VipsConv {
  int n, c, h, w;
  int oc, oh, ow;
  int kh, kw;
  int stride_h, stride_w;
  int pad_top, pad_left;
  int dil_h, dil_w;
  int groups;
};

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

/* ---- matmul: out[z, m, n] = Σ_k a[z, m, k] · b[z, k, n], z the flat index of the
 * output's batch axes (batch.dims; batch.rank 0 for plain matrices). The operands are
 * read in place through their element strides: batch.a and batch.b over the batch
 * axes (0 on a broadcast axis, one of length 1 or missing), a_m, a_k and b_k, b_n
 * over the matrices. 16 × 16 output tiles, a thread each, k in steps of 16 staged
 * through shared memory, float32 accumulation. Grid (n tiles, m tiles, batches),
 * each capped: the blocks stride over the rest. ---- */
#define VIPS_MM_TILE 16
/* A thread per output of the tile: the block is exactly one tile (and
 * vips_linear's 16 x 16 threads of 4 x 4 outputs rely on the same size). */
static_assert(VIPS_BLOCK == VIPS_MM_TILE * VIPS_MM_TILE, "a matmul block is one 16 x 16 tile");

template <class T>
__device__ void vips_matmul(const T* a, const T* b, T* out, VipsStrides batch, vips_i64 batches,
                            int m, int n, int k, vips_i64 a_m, vips_i64 a_k, vips_i64 b_k,
                            vips_i64 b_n) {
  __shared__ float as[VIPS_MM_TILE][VIPS_MM_TILE + 1];
  __shared__ float bs[VIPS_MM_TILE][VIPS_MM_TILE + 1];
  const int tx = threadIdx.x % VIPS_MM_TILE, ty = threadIdx.x / VIPS_MM_TILE;
  const int m_tiles = (m + VIPS_MM_TILE - 1) / VIPS_MM_TILE;
  const int n_tiles = (n + VIPS_MM_TILE - 1) / VIPS_MM_TILE;
  for (vips_i64 z = blockIdx.z; z < batches; z += gridDim.z) {
    vips_i64 oa, ob;
    vips_offsets(batch, z, &oa, &ob);
    const T* az = a + oa;
    const T* bz = b + ob;
    T* oz = out + z * m * n;
    for (int ti = blockIdx.y; ti < m_tiles; ti += gridDim.y) {
      for (int tj = blockIdx.x; tj < n_tiles; tj += gridDim.x) {
        const int row = ti * VIPS_MM_TILE + ty, col = tj * VIPS_MM_TILE + tx;
        float acc = 0.0f;
        for (int k0 = 0; k0 < k; k0 += VIPS_MM_TILE) {
          const int ka = k0 + tx, kb = k0 + ty;
          as[ty][tx] = (row < m && ka < k) ? vips_load(az + row * a_m + ka * a_k) : 0.0f;
          bs[ty][tx] = (kb < k && col < n) ? vips_load(bz + kb * b_k + col * b_n) : 0.0f;
          __syncthreads();
          for (int kk = 0; kk < VIPS_MM_TILE; ++kk) acc = fmaf(as[ty][kk], bs[kk][tx], acc);
          __syncthreads();
        }
        if (row < m && col < n) vips_store(oz + static_cast<vips_i64>(row) * n + col, acc);
      }
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

/* The exported kernels: vips_{linear,matmul,conv2d}_<dtype>, for each float type. */
#define VIPS_LINEAR_KERNELS(sfx, T)                                                             \
  VIPS_KERNEL vips_linear_##sfx(                  \
      const T* x, const T* w, const T* bias, T* out, int m, int n, int k) {                    \
    vips_linear<T>(x, w, bias, out, m, n, k);                                                  \
  }                                                                                            \
  VIPS_REGISTER(vips_linear_##sfx)                                                             \
  VIPS_KERNEL vips_matmul_##sfx(const T* a, const T* b, T* out, VipsStrides batch,             \
                                vips_i64 batches, int m, int n, int k, vips_i64 a_m,           \
                                vips_i64 a_k, vips_i64 b_k, vips_i64 b_n) {                    \
    vips_matmul<T>(a, b, out, batch, batches, m, n, k, a_m, a_k, b_k, b_n);                    \
  }                                                                                            \
  VIPS_REGISTER(vips_matmul_##sfx)                                                             \
  VIPS_KERNEL                                     \
      vips_conv2d_##sfx(const T* x, const T* w, const T* bias, T* out, VipsConv p) {           \
    vips_conv2d<T>(x, w, bias, out, p);                                                        \
  }                                                                                            \
  VIPS_REGISTER(vips_conv2d_##sfx)

VIPS_LINEAR_KERNELS(f32, float)
VIPS_LINEAR_KERNELS(f16, vips_f16)
VIPS_LINEAR_KERNELS(bf16, vips_bf16)
