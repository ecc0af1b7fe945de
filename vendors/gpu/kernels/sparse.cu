/* sparse.cu: sparse voxel tensors.
 * Part of the one kernel program (common.cu says how it is put together). */

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

/* The exported kernels: vips_segment_mean_<dtype>, for each float type. */
#define VIPS_SPARSE_KERNELS(sfx, T)                                                             \
  VIPS_KERNEL                                     \
      vips_segment_mean_##sfx(const T* x, const int* sorted, const int* start, const int* end, \
                              T* out, vips_i64 segments, vips_i64 cols) {                      \
    vips_segment_mean<T>(x, sorted, start, end, out, segments, cols);                          \
  }                                                                                            \
  VIPS_REGISTER(vips_segment_mean_##sfx)

VIPS_SPARSE_KERNELS(f32, float)
VIPS_SPARSE_KERNELS(f16, vips_f16)
VIPS_SPARSE_KERNELS(bf16, vips_bf16)

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
