/* resize.cu: separable resizes (PyTorch's bicubic, Pillow's 8-bit
 * filters), PyTorch's bilinear and nearest.
 * Part of the one kernel program (common.cu says how it is put together). */

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

/* The exported kernels: vips_{taps_from,taps_to}_<dtype>, for each float type. */
#define VIPS_RESIZE_KERNELS(sfx, T)                                                             \
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
  VIPS_REGISTER(vips_taps_to_##sfx)

VIPS_RESIZE_KERNELS(f32, float)
VIPS_RESIZE_KERNELS(f16, vips_f16)
VIPS_RESIZE_KERNELS(bf16, vips_bf16)

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

/* ---- bilinear and nearest: a thread per output element of [planes, out_h, out_w]
 * (planes = N · C, the input compact [planes, h, w]), from per-axis tables the host
 * computes with the catalog's rules (vsdk_catalog::Bilinear::taps and
 * Nearest::source, so every provider shares the index maths). ----
 * Bilinear: output row y reads rows iy[2y] and iy[2y + 1] with weights 1 − ly[y] and
 * ly[y], columns likewise (ix, lx); in float32. A weight of 0 leaves its tap unread
 * (a copied axis, λ = 0 on the host where both taps are one pixel), so the value is
 * that pixel exactly, an infinity beside it included. */
__device__ __forceinline__ float vips_lerp(float p, float q, float l) {
  return l == 0.0f ? p : (1.0f - l) * p + l * q;
}

template <class T>
__device__ void vips_resize_bilinear(const T* x, T* out, const int* iy, const float* ly,
                                     const int* ix, const float* lx, vips_i64 planes, int h,
                                     int w, int oh, int ow) {
  const vips_i64 total = planes * oh * ow;
  for (vips_i64 t = vips_global_id(); t < total; t += vips_grid_stride()) {
    const int ox = static_cast<int>(t % ow);
    const int oy = static_cast<int>((t / ow) % oh);
    const vips_i64 p = t / ow / oh;
    const T* src = x + p * h * w;
    const T* r0 = src + static_cast<vips_i64>(iy[2 * oy]) * w;
    const int x0 = ix[2 * ox], x1 = ix[2 * ox + 1];
    const float a = lx[ox], b = ly[oy];
    float v = vips_lerp(vips_load(r0 + x0), a == 0.0f ? 0.0f : vips_load(r0 + x1), a);
    if (b != 0.0f) {
      const T* r1 = src + static_cast<vips_i64>(iy[2 * oy + 1]) * w;
      v = vips_lerp(v, vips_lerp(vips_load(r1 + x0), a == 0.0f ? 0.0f : vips_load(r1 + x1), a), b);
    }
    vips_store(out + t, v);
  }
}

/* Nearest: output (y, x) is input (iy[y], ix[x]), copied as it is stored (every
 * output element is an input element, bit for bit). */
template <class T>
__device__ void vips_resize_nearest(const T* x, T* out, const int* iy, const int* ix,
                                    vips_i64 planes, int h, int w, int oh, int ow) {
  const vips_i64 total = planes * oh * ow;
  for (vips_i64 t = vips_global_id(); t < total; t += vips_grid_stride()) {
    const int ox = static_cast<int>(t % ow);
    const int oy = static_cast<int>((t / ow) % oh);
    const vips_i64 p = t / ow / oh;
    out[t] = x[(p * h + iy[oy]) * w + ix[ox]];
  }
}

/* The exported kernels: vips_{resize_bilinear,resize_nearest}_<dtype>, for each float type. */
#define VIPS_RESIZE_TABLE_KERNELS(sfx, T)                                                      \
  VIPS_KERNEL                                                                                  \
      vips_resize_bilinear_##sfx(const T* x, T* out, const int* iy, const float* ly,          \
                                 const int* ix, const float* lx, vips_i64 planes, int h,      \
                                 int w, int oh, int ow) {                                     \
    vips_resize_bilinear<T>(x, out, iy, ly, ix, lx, planes, h, w, oh, ow);                    \
  }                                                                                            \
  VIPS_REGISTER(vips_resize_bilinear_##sfx)                                                    \
  VIPS_KERNEL                                                                                  \
      vips_resize_nearest_##sfx(const T* x, T* out, const int* iy, const int* ix,             \
                                vips_i64 planes, int h, int w, int oh, int ow) {              \
    vips_resize_nearest<T>(x, out, iy, ix, planes, h, w, oh, ow);                             \
  }                                                                                            \
  VIPS_REGISTER(vips_resize_nearest_##sfx)

VIPS_RESIZE_TABLE_KERNELS(f32, float)
VIPS_RESIZE_TABLE_KERNELS(f16, vips_f16)
VIPS_RESIZE_TABLE_KERNELS(bf16, vips_bf16)
