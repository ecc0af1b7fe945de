/* movement.cu: data movement (crop, concat, reshape, permute).
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
