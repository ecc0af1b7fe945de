/* elementwise.cu: element-wise operators (binary with broadcasting,
 * activations, cast).
 * Part of the one kernel program (common.cu says how it is put together). */

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

/* Element-wise functions of one input; op: 0 silu, 1 gelu_tanh, 2 sin, 3 cos, 4 relu,
 * 5 clamp (to [lo, hi]), 6 sigmoid, 7 tanh, 8 exp, 9 sqrt, 10 rsqrt, 11 hardswish,
 * 12 hardsigmoid.
 * sinf/cosf reduce large arguments accurately (TRELLIS's embeddings reach
 * ~1000 rad); __sinf/__cosf and fast-math do not, and must not be used. */
template <class T>
__device__ void vips_unary(const T* x, T* out, vips_i64 n, int op, float lo, float hi) {
  for (vips_i64 i = vips_global_id(); i < n; i += vips_grid_stride()) {
    const float v = vips_load(x + i);
    /* fmaxf and fminf return the other operand for NaN: the selections test
     * for it first (relu, clamp and hardsigmoid of NaN are NaN). */
    const bool nan = v != v;
    float y;
    switch (op) {
      case 0: y = vips_times_sigmoid(v, v); break;
      /* x/2·(1 + tanh(a)) = x·σ(2a): no cancellation for negative x. */
      case 1: y = vips_times_sigmoid(v, 1.5957691216057308f * (v + 0.044715f * v * v * v)); break;
      case 2: y = sinf(v); break;
      case 3: y = cosf(v); break;
      case 4: y = nan ? v : fmaxf(v, 0.0f); break;
      case 5: y = nan ? v : fminf(fmaxf(v, lo), hi); break;
      case 6: y = vips_times_sigmoid(1.0f, v); break;
      case 7: y = tanhf(v); break;
      case 8: y = expf(v); break;
      case 9: y = sqrtf(v); break;
      case 10: y = 1.0f / sqrtf(v); break;
      /* PyTorch's forms: x·relu6(x + 3)/6 and relu6(x + 3)/6. */
      case 11: y = v * fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f; break;
      default: y = nan ? v : fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f; break;
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

/* The exported kernels: vips_{binary,gelu,unary}_<dtype>, for each float type. */
#define VIPS_ELEMENTWISE_KERNELS(sfx, T)                                                        \
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
      vips_unary_##sfx(const T* x, T* out, vips_i64 n, int op, float lo, float hi) {           \
    vips_unary<T>(x, out, n, op, lo, hi);                                                      \
  }                                                                                            \
  VIPS_REGISTER(vips_unary_##sfx)

VIPS_ELEMENTWISE_KERNELS(f32, float)
VIPS_ELEMENTWISE_KERNELS(f16, vips_f16)
VIPS_ELEMENTWISE_KERNELS(bf16, vips_bf16)

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
