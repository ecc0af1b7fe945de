/* movement.cu: data movement (crop, pad, concat, reshape, permute).
 * Part of the one kernel program (common.cu says how it is put together). */

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

/* vsdk.pad: output element i (s.dims the output's extents, s.a the input's
 * strides, s.b the output's) reads the input at j = index - edge.a[d] on
 * every axis d, brought inside the input's extent edge.dims[d] by `mode`
 * (0 constant, 1 reflect, 2 replicate, 3 circular; docs/operators.md), or
 * is `fill` where a constant pad has no element to read. */
template <class E>
__device__ void vips_pad(const E* src, E* dst, VipsStrides s, VipsStrides edge, int mode, E fill,
                         vips_i64 n) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    vips_i64 rest = i, from = 0, to = 0;
    bool inside = true;
    for (int d = static_cast<int>(s.rank) - 1; d >= 0; --d) {
      const vips_i64 c = rest % s.dims[d], len = edge.dims[d];
      vips_i64 j = c - edge.a[d];
      rest /= s.dims[d];
      if (j < 0 || j >= len) {
        if (mode == 1) j = j < 0 ? -j : 2 * (len - 1) - j;
        else if (mode == 2) j = j < 0 ? 0 : len - 1;
        else if (mode == 3) j = j < 0 ? j + len : j - len;
        else inside = false;
      }
      from += j * s.a[d];
      to += c * s.b[d];
    }
    dst[to] = inside ? src[from] : fill;
  }
}

/* `fill` holds the constant's bits in its low bytes: the carrier is an
 * unsigned type of the element's width, so the conversion keeps them. */
#define VIPS_PAD_KERNEL(bytes, E)                                                               \
  VIPS_KERNEL                                                                                  \
      vips_pad_##bytes(const E* src, E* dst, VipsStrides s, VipsStrides edge, int mode,        \
                       unsigned long long fill, vips_i64 n) {                                   \
    vips_pad<E>(src, dst, s, edge, mode, static_cast<E>(fill), n);                             \
  }                                                                                            \
  VIPS_REGISTER(vips_pad_##bytes)

VIPS_PAD_KERNEL(1, unsigned char)
VIPS_PAD_KERNEL(2, unsigned short)
VIPS_PAD_KERNEL(4, unsigned int)
VIPS_PAD_KERNEL(8, unsigned long long)
