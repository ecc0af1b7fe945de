/* raster.cu: rasterization and interpolation.
 * Part of the one kernel program (common.cu says how it is put together). */

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
