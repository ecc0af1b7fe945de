/*
 * template.c: a complete VIPS SDK provider in plain C99.
 *
 * Copy this file to start your own driver. It implements every kernel of
 * operator catalog v1 (docs/operators.md) for float32 (and uint8 where the
 * catalog says so) on "device memory" that is ordinary host memory. Replace
 * the memory functions with your allocator and the kernels with calls into
 * your hardware; keep the checks.
 *
 * How the host uses this library (include/vips_sdk/provider.h has the rules):
 *   1. dlopen, then dlsym("vsdk_get_provider_api"): our only exported symbol.
 *   2. It passes the highest ABI version it speaks; we answer with ours and
 *      return our function table, or NULL to refuse.
 *   3. It validates the table (struct_size, no NULL required slot), calls
 *      `create`, then queries devices and kernels.
 *   4. For each kernel call it allocates the outputs with our `alloc`, with the
 *      shapes the catalog's rules give, and calls `execute`.
 *   5. Every failure goes back as a status object from `make_status`: a code
 *      and a message that names the kernel and what was wrong. Say enough for
 *      the person reading the conformance report to find the bug.
 *
 * Conventions of this file: every kernel first copies its inputs into compact
 * row-major buffers (`compact_copy`), so the arithmetic is plain loops over
 * flat arrays; outputs are always compact (the host guarantees it, we check).
 */

/*
 * Contents. The kernels are grouped by operator family, in this order:
 *
 *   Status objects
 *   The provider instance, its device and its memory
 *   Helpers for kernels: attributes and tensors
 *   Kernels, by family:
 *     element-wise          vsdk.gelu, vsdk.gelu_tanh, vsdk.silu, vsdk.sin,
 *                           vsdk.cos, vsdk.relu, vsdk.clamp, vsdk.sigmoid,
 *                           vsdk.tanh, vsdk.exp, vsdk.sqrt, vsdk.rsqrt,
 *                           vsdk.hardswish, vsdk.hardsigmoid, vsdk.add, vsdk.sub,
 *                           vsdk.mul, vsdk.div, vsdk.cast
 *     data movement         vsdk.crop, vsdk.pad, vsdk.concat, vsdk.reshape,
 *                           vsdk.permute
 *     linear, convolution   vsdk.linear, vsdk.conv2d, vsdk.matmul
 *     normalisation         vsdk.softmax, vsdk.layer_norm, vsdk.rms_norm,
 *                           vsdk.batch_norm, vsdk.group_norm
 *     reductions            vsdk.max_pool2d, vsdk.avg_pool2d,
 *                           vsdk.adaptive_avg_pool2d, vsdk.mean, vsdk.sum
 *     attention             vsdk.sdpa, vsdk.rotary_embedding
 *     resizes               vsdk.resize_pil_bicubic, vsdk.resize_pil_lanczos,
 *                           vsdk.resize_bicubic, vsdk.resize_bilinear,
 *                           vsdk.resize_nearest
 *     sparse voxel tensors  vsdk.sparse_conv3d, vsdk.sparse_downsample_coords,
 *                           vsdk.sparse_downsample_index, vsdk.segment_mean,
 *                           vsdk.gather_rows, vsdk.repeat_rows,
 *                           vsdk.sparse_subdivide_coords
 *     rasterization         vsdk.rasterize, vsdk.interpolate
 *   Dispatch: `execute`, one line per kernel, family by family
 *   The table and the entry point
 *
 * A new operator goes into its family's section, gets its line in `execute`
 * and its name in KERNELS (whose order is the one `kernel_info` reports).
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <vips_sdk/provider.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------- */
/* Status objects                                                            */
/* ------------------------------------------------------------------------- */

/* The opaque `vsdk_status_t` is ours to define. The host only touches it
 * through status_code / status_message / status_destroy below. */
struct vsdk_status {
  vsdk_status_code_t code;
  int is_static; /* the out-of-memory fallback is never freed */
  char message[512];
};

static struct vsdk_status g_oom_status = {VSDK_STATUS_OUT_OF_MEMORY, 1,
                                          "out of memory while reporting an error"};

static vsdk_status_t* make_status(vsdk_status_code_t code, const char* fmt, ...) {
  vsdk_status_t* s = (vsdk_status_t*)malloc(sizeof *s);
  va_list args;
  if (s == NULL) return &g_oom_status;
  s->code = code;
  s->is_static = 0;
  va_start(args, fmt);
  vsnprintf(s->message, sizeof s->message, fmt, args);
  va_end(args);
  return s;
}

static vsdk_status_code_t status_code(const vsdk_status_t* s) { return s ? s->code : VSDK_STATUS_OK; }
static const char* status_message(const vsdk_status_t* s) { return s ? s->message : ""; }
static void status_destroy(vsdk_status_t* s) {
  if (s != NULL && !s->is_static) free(s);
}

#define INVALID(...) make_status(VSDK_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define UNSUPPORTED(...) make_status(VSDK_STATUS_UNSUPPORTED, __VA_ARGS__)
#define OOM(...) make_status(VSDK_STATUS_OUT_OF_MEMORY, __VA_ARGS__)
/* Propagates a non-NULL status to the caller. */
#define TRY(expr)                        \
  do {                                   \
    vsdk_status_t* try_status_ = (expr); \
    if (try_status_ != NULL) return try_status_; \
  } while (0)

/* ------------------------------------------------------------------------- */
/* The provider instance, its device and its memory                          */
/* ------------------------------------------------------------------------- */

struct vsdk_provider {
  int unused; /* a real driver keeps its device handles, queues, ... here */
};

static const char* const KERNELS[] = {
    "vsdk.resize_pil_bicubic", "vsdk.resize_pil_lanczos", "vsdk.resize_bicubic", "vsdk.crop", "vsdk.cast",
    "vsdk.add", "vsdk.sub", "vsdk.mul", "vsdk.div", "vsdk.conv2d", "vsdk.concat",
    "vsdk.reshape", "vsdk.permute", "vsdk.linear", "vsdk.layer_norm", "vsdk.rms_norm", "vsdk.softmax",
    "vsdk.sdpa", "vsdk.gelu", "vsdk.gelu_tanh", "vsdk.silu", "vsdk.sin", "vsdk.cos",
    "vsdk.sparse_conv3d", "vsdk.sparse_downsample_coords", "vsdk.sparse_downsample_index", "vsdk.segment_mean",
    "vsdk.gather_rows", "vsdk.repeat_rows", "vsdk.sparse_subdivide_coords", "vsdk.rasterize", "vsdk.interpolate",
    "vsdk.relu", "vsdk.clamp", "vsdk.sigmoid", "vsdk.tanh", "vsdk.exp", "vsdk.sqrt", "vsdk.rsqrt",
    "vsdk.hardswish", "vsdk.hardsigmoid", "vsdk.batch_norm", "vsdk.max_pool2d", "vsdk.avg_pool2d",
    "vsdk.adaptive_avg_pool2d", "vsdk.mean", "vsdk.sum", "vsdk.rotary_embedding", "vsdk.pad",
    "vsdk.resize_bilinear", "vsdk.resize_nearest", "vsdk.group_norm", "vsdk.matmul",
};
#define NUM_KERNELS (sizeof KERNELS / sizeof KERNELS[0])

static vsdk_status_t* create(const vsdk_create_options_t* options, vsdk_provider_t** out) {
  vsdk_provider_t* p;
  if (options == NULL || out == NULL) return INVALID("create: NULL argument");
  p = (vsdk_provider_t*)calloc(1, sizeof *p);
  if (p == NULL) return OOM("create: cannot allocate the instance");
  *out = p; /* outputs are written only on success */
  return NULL;
}

static void destroy(vsdk_provider_t* p) { free(p); }

/* Out-structs: the host sets struct_size to the size it knows. Write a field
 * only if it fits, so an older host with a shorter struct is not overrun. */
#define FITS(out, type, field) (offsetof(type, field) + sizeof(((type*)0)->field) <= (out)->struct_size)

static vsdk_status_t* get_info(vsdk_provider_t* p, vsdk_provider_info_t* out) {
  if (p == NULL || out == NULL) return INVALID("get_info: NULL argument");
  if (FITS(out, vsdk_provider_info_t, name)) out->name = "template-c";
  if (FITS(out, vsdk_provider_info_t, vendor)) out->vendor = "VIPS SDK template";
  if (FITS(out, vsdk_provider_info_t, version)) out->version = "0.1.0";
  if (FITS(out, vsdk_provider_info_t, description)) out->description = "plain-C vendor template (float32, uint8)";
  return NULL;
}

static vsdk_status_t* device_count(vsdk_provider_t* p, uint32_t* out) {
  if (p == NULL || out == NULL) return INVALID("device_count: NULL argument");
  *out = 1;
  return NULL;
}

static vsdk_status_t* device_info(vsdk_provider_t* p, uint32_t index, vsdk_device_info_t* out) {
  if (p == NULL || out == NULL) return INVALID("device_info: NULL argument");
  if (index != 0) return INVALID("device_info: device %u does not exist (1 device)", index);
  if (FITS(out, vsdk_device_info_t, device)) {
    out->device.device_type = VSDK_DEVICE_CPU;
    out->device.device_id = 0;
  }
  if (FITS(out, vsdk_device_info_t, name)) out->name = "template-c host device";
  if (FITS(out, vsdk_device_info_t, driver_version)) out->driver_version = "template-c 0.1.0";
  if (FITS(out, vsdk_device_info_t, stable_id)) out->stable_id = "template-c:0";
  if (FITS(out, vsdk_device_info_t, memory_bytes)) out->memory_bytes = 0; /* unknown */
  return NULL;
}

static vsdk_status_t* kernel_count(vsdk_provider_t* p, uint64_t* out) {
  if (p == NULL || out == NULL) return INVALID("kernel_count: NULL argument");
  *out = NUM_KERNELS;
  return NULL;
}

static vsdk_status_t* kernel_info(vsdk_provider_t* p, uint64_t index, vsdk_kernel_info_t* out) {
  if (p == NULL || out == NULL) return INVALID("kernel_info: NULL argument");
  if (index >= NUM_KERNELS) return INVALID("kernel_info: index %llu out of range", (unsigned long long)index);
  if (FITS(out, vsdk_kernel_info_t, name)) out->name = KERNELS[index];
  if (FITS(out, vsdk_kernel_info_t, version)) out->version = 1;
  return NULL;
}

static int is_dtype(vsdk_dtype_t d, uint8_t code, uint8_t bits) {
  return d.code == code && d.bits == bits && d.lanes == 1;
}
static int is_f32(vsdk_dtype_t d) { return is_dtype(d, VSDK_DTYPE_FLOAT, 32); }
static int is_u8(vsdk_dtype_t d) { return is_dtype(d, VSDK_DTYPE_UINT, 8); }
static int is_i32(vsdk_dtype_t d) { return is_dtype(d, VSDK_DTYPE_INT, 32); }

/* Which (kernel, dtype) pairs this template runs. The host asks before every
 * dispatch and reports a stage NOT SUPPORTED rather than calling us. */
static vsdk_status_t* kernel_supports(vsdk_provider_t* p, uint32_t device, const char* kernel,
                                      uint32_t version, vsdk_dtype_t dtype, int32_t* out) {
  size_t i;
  int known = 0;
  if (p == NULL || kernel == NULL || out == NULL) return INVALID("kernel_supports: NULL argument");
  if (device != 0) return INVALID("kernel_supports: device %u does not exist", device);
  for (i = 0; i < NUM_KERNELS; i++) known |= strcmp(kernel, KERNELS[i]) == 0;
  if (!known || version != 1) {
    *out = 0;
  } else if (!strcmp(kernel, "vsdk.resize_pil_bicubic") || !strcmp(kernel, "vsdk.resize_pil_lanczos")) {
    *out = is_u8(dtype);
  } else if (!strcmp(kernel, "vsdk.cast")) {
    *out = is_u8(dtype) || is_f32(dtype) || is_i32(dtype); /* the source dtype */
  } else if (!strcmp(kernel, "vsdk.crop") || !strcmp(kernel, "vsdk.pad") || !strcmp(kernel, "vsdk.concat") ||
             !strcmp(kernel, "vsdk.reshape") || !strcmp(kernel, "vsdk.permute")) {
    *out = is_u8(dtype) || is_f32(dtype) || is_i32(dtype); /* element copies */
  } else if (!strcmp(kernel, "vsdk.gather_rows") || !strcmp(kernel, "vsdk.repeat_rows")) {
    *out = is_u8(dtype) || is_f32(dtype) || is_i32(dtype);
  } else if (!strcmp(kernel, "vsdk.sparse_downsample_coords") || !strcmp(kernel, "vsdk.sparse_downsample_index") ||
             !strcmp(kernel, "vsdk.sparse_subdivide_coords")) {
    *out = is_i32(dtype);
  } else {
    *out = is_f32(dtype);
  }
  return NULL;
}

/* "Device" memory. A real driver allocates on its device here and returns a
 * device address; the host never dereferences it. */
static vsdk_status_t* mem_alloc(vsdk_provider_t* p, uint32_t device, uint64_t size, uint64_t alignment, void** out) {
  void* ptr = NULL;
  if (p == NULL || out == NULL) return INVALID("alloc: NULL argument");
  if (device != 0) return INVALID("alloc: device %u does not exist", device);
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  if ((alignment & (alignment - 1)) != 0) return INVALID("alloc: alignment %llu is not a power of two", (unsigned long long)alignment);
  if (posix_memalign(&ptr, (size_t)alignment, size ? (size_t)size : 1) != 0)
    return OOM("alloc: cannot allocate %llu bytes", (unsigned long long)size);
  *out = ptr;
  return NULL;
}

static void mem_free(vsdk_provider_t* p, uint32_t device, void* ptr) {
  (void)p;
  (void)device;
  free(ptr);
}

static vsdk_status_t* copy_to_device(vsdk_provider_t* p, uint32_t device, void* dst, uint64_t dst_offset,
                                     const void* src, uint64_t size) {
  if (p == NULL || dst == NULL || src == NULL) return INVALID("copy_to_device: NULL argument");
  if (device != 0) return INVALID("copy_to_device: device %u does not exist", device);
  memcpy((char*)dst + dst_offset, src, (size_t)size);
  return NULL;
}

static vsdk_status_t* copy_to_host(vsdk_provider_t* p, uint32_t device, void* dst, const void* src,
                                   uint64_t src_offset, uint64_t size) {
  if (p == NULL || dst == NULL || src == NULL) return INVALID("copy_to_host: NULL argument");
  if (device != 0) return INVALID("copy_to_host: device %u does not exist", device);
  memcpy(dst, (const char*)src + src_offset, (size_t)size);
  return NULL;
}

/* Our kernels run synchronously, so there is never anything to wait for. A
 * driver with queues waits for them here and reports deferred errors. */
static vsdk_status_t* synchronize(vsdk_provider_t* p, uint32_t device) {
  if (p == NULL) return INVALID("synchronize: NULL provider");
  if (device != 0) return INVALID("synchronize: device %u does not exist", device);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Helpers for kernels: attributes and tensors                               */
/* ------------------------------------------------------------------------- */

#define MAX_RANK 8

static const vsdk_attr_t* find_attr(const vsdk_kernel_call_t* c, const char* name) {
  uint64_t i;
  for (i = 0; i < c->num_attrs; i++)
    if (c->attrs[i].name != NULL && strcmp(c->attrs[i].name, name) == 0) return &c->attrs[i];
  return NULL;
}

/* Reads an int attribute, or `fallback` when absent. */
static vsdk_status_t* attr_int(const vsdk_kernel_call_t* c, const char* name, int64_t fallback, int64_t* out) {
  const vsdk_attr_t* a = find_attr(c, name);
  *out = fallback;
  if (a == NULL) return NULL;
  if (a->kind != VSDK_ATTR_INT) return INVALID("%s: attribute `%s` must be an int", c->kernel, name);
  *out = a->value.i;
  return NULL;
}

/* Reads a float attribute (an int is accepted), or `fallback` when absent. */
static vsdk_status_t* attr_float(const vsdk_kernel_call_t* c, const char* name, double fallback, double* out) {
  const vsdk_attr_t* a = find_attr(c, name);
  *out = fallback;
  if (a == NULL) return NULL;
  if (a->kind == VSDK_ATTR_FLOAT) *out = a->value.f;
  else if (a->kind == VSDK_ATTR_INT) *out = (double)a->value.i;
  else return INVALID("%s: attribute `%s` must be a float", c->kernel, name);
  return NULL;
}

/* Reads an int-list attribute of exactly `len` values; `*found` says whether it was given. */
static vsdk_status_t* attr_ints(const vsdk_kernel_call_t* c, const char* name, uint64_t len, int64_t* out, int* found) {
  const vsdk_attr_t* a = find_attr(c, name);
  *found = a != NULL;
  if (a == NULL) return NULL;
  if (a->kind != VSDK_ATTR_INTS || a->value.ints.len != len)
    return INVALID("%s: attribute `%s` must be a list of %llu ints", c->kernel, name, (unsigned long long)len);
  memcpy(out, a->value.ints.data, (size_t)len * sizeof(int64_t));
  return NULL;
}

/* The largest tensor this template accepts, in bytes: the catalog's limit
 * (2^34). `execute` checks every tensor of a call against it, with overflow
 * detection, before any kernel runs, so that `numel` below and every size
 * computed from one tensor's shape fits in size_t and int64_t. Never trust
 * a shape to multiply out: a shape of [2^62 + 1, 128] wraps to 128. */
#define MAX_TENSOR_BYTES ((uint64_t)1 << 34)

/* a * b for a, b >= 0, or 0 (and *out untouched) when it exceeds `limit`. */
static int mul_within(uint64_t a, uint64_t b, uint64_t limit, uint64_t* out) {
  if (a != 0 && b > limit / a) return 0;
  *out = a * b;
  return 1;
}

/* Checks one tensor of a call: rank, dimensions >= 0, and an element count
 * and byte size that fit MAX_TENSOR_BYTES, computed without overflow. */
static vsdk_status_t* check_tensor(const vsdk_kernel_call_t* c, const vsdk_tensor_t* t, const char* what, uint64_t i) {
  uint64_t n = 1, bytes;
  int32_t d;
  if (t->ndim < 0 || t->ndim > MAX_RANK)
    return UNSUPPORTED("%s: %s %llu has rank %d (this template handles 0 to %d)", c->kernel, what, (unsigned long long)i, t->ndim, MAX_RANK);
  if (t->ndim > 0 && t->shape == NULL) return INVALID("%s: %s %llu has a NULL shape", c->kernel, what, (unsigned long long)i);
  for (d = 0; d < t->ndim; d++)
    if (t->shape[d] < 0) return INVALID("%s: %s %llu: dimension %d is negative", c->kernel, what, (unsigned long long)i, d);
  for (d = 0; d < t->ndim; d++) {
    if (t->shape[d] == 0) return NULL; /* no elements, whatever the other dimensions */
  }
  for (d = 0; d < t->ndim; d++)
    if (!mul_within(n, (uint64_t)t->shape[d], MAX_TENSOR_BYTES, &n))
      return INVALID("%s: %s %llu: the element count overflows or exceeds the %llu-byte tensor limit", c->kernel, what,
                     (unsigned long long)i, (unsigned long long)MAX_TENSOR_BYTES);
  if (!mul_within(n, t->dtype.bits / 8u, MAX_TENSOR_BYTES, &bytes))
    return INVALID("%s: %s %llu is larger than the %llu-byte tensor limit", c->kernel, what, (unsigned long long)i,
                   (unsigned long long)MAX_TENSOR_BYTES);
  return NULL;
}

/* The element count of a tensor `execute` has checked. */
static size_t numel(const vsdk_tensor_t* t) {
  size_t n = 1;
  int32_t i;
  for (i = 0; i < t->ndim; i++) n *= (size_t)t->shape[i];
  return n;
}

static size_t elem_size(const vsdk_tensor_t* t) { return t->dtype.bits / 8u; }

/* Copies a (possibly strided) tensor into a new compact row-major buffer.
 * The caller frees it. Works for any element size. */
static vsdk_status_t* compact_copy(const vsdk_kernel_call_t* c, const vsdk_tensor_t* t, void** out) {
  size_t n = numel(t), es = elem_size(t), i;
  int64_t idx[MAX_RANK] = {0};
  const char* base = (const char*)t->data + t->byte_offset;
  char* dst;
  int32_t d;
  if (t->ndim < 0 || t->ndim > MAX_RANK) return UNSUPPORTED("%s: rank %d exceeds this template's %d", c->kernel, t->ndim, MAX_RANK);
  dst = (char*)malloc(n ? n * es : 1);
  if (dst == NULL) return OOM("%s: cannot allocate a %zu-byte scratch buffer", c->kernel, n * es);
  for (i = 0; i < n; i++) {
    int64_t off = 0;
    for (d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    memcpy(dst + i * es, base + (size_t)off * es, es);
    /* advance the multi-index, last axis fastest */
    for (d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < t->shape[d]) break;
      idx[d] = 0;
    }
  }
  *out = dst;
  return NULL;
}

/* Checks the output the host allocated: dtype, rank, shape, compactness. */
static vsdk_status_t* check_output(const vsdk_kernel_call_t* c, vsdk_dtype_t dtype, int32_t ndim, const int64_t* shape) {
  const vsdk_tensor_t* o;
  int64_t expected_stride = 1;
  int32_t d;
  if (c->num_outputs != 1) return INVALID("%s: expected 1 output, got %llu", c->kernel, (unsigned long long)c->num_outputs);
  o = &c->outputs[0];
  if (!is_dtype(o->dtype, dtype.code, dtype.bits) || o->ndim != ndim)
    return INVALID("%s: output has the wrong dtype or rank", c->kernel);
  for (d = ndim - 1; d >= 0; d--) {
    if (o->shape[d] != shape[d])
      return INVALID("%s: output dimension %d is %lld, expected %lld", c->kernel, d, (long long)o->shape[d], (long long)shape[d]);
    if (o->shape[d] != 1 && o->strides[d] != expected_stride) return INVALID("%s: output is not compact", c->kernel);
    expected_stride *= o->shape[d];
  }
  return NULL;
}

static void* out_data(const vsdk_kernel_call_t* c) { return (char*)c->outputs[0].data + c->outputs[0].byte_offset; }

static vsdk_status_t* need_inputs(const vsdk_kernel_call_t* c, uint64_t lo, uint64_t hi) {
  uint64_t i;
  if (c->num_inputs < lo || c->num_inputs > hi)
    return INVALID("%s: takes %llu to %llu inputs, got %llu", c->kernel, (unsigned long long)lo,
                   (unsigned long long)hi, (unsigned long long)c->num_inputs);
  for (i = 0; i < c->num_inputs; i++)
    if (c->inputs[i].ndim > MAX_RANK) return UNSUPPORTED("%s: rank above %d", c->kernel, MAX_RANK);
  return NULL;
}

static vsdk_status_t* need_f32(const vsdk_kernel_call_t* c) {
  uint64_t i;
  for (i = 0; i < c->num_inputs; i++)
    if (!is_f32(c->inputs[i].dtype)) return UNSUPPORTED("%s: input %llu is not float32", c->kernel, (unsigned long long)i);
  return NULL;
}

/* Loads inputs[i] as a compact float array (caller frees). */
static vsdk_status_t* load_f32(const vsdk_kernel_call_t* c, uint64_t i, float** out) {
  return compact_copy(c, &c->inputs[i], (void**)out);
}

static const vsdk_dtype_t F32 = {VSDK_DTYPE_FLOAT, 32, 1};

/* Splits a shape around `axis` into outer x len x inner, for row-wise kernels. */
static void split_axis(const vsdk_tensor_t* t, int32_t axis, size_t* outer, size_t* len, size_t* inner) {
  int32_t d;
  *outer = *inner = 1;
  for (d = 0; d < axis; d++) *outer *= (size_t)t->shape[d];
  *len = (size_t)t->shape[axis];
  for (d = axis + 1; d < t->ndim; d++) *inner *= (size_t)t->shape[d];
}

static vsdk_status_t* norm_axis(const vsdk_kernel_call_t* c, int64_t fallback, int32_t* axis) {
  int64_t a;
  int32_t r = c->inputs[0].ndim;
  TRY(attr_int(c, "axis", fallback, &a));
  if (a < 0) a += r;
  if (r < 1 || a < 0 || a >= r) return INVALID("%s: axis out of range for rank %d", c->kernel, r);
  *axis = (int32_t)a;
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Kernels                                                                   */
/* ------------------------------------------------------------------------- */

/* --- element-wise -------------------------------------------------------- */

/* vsdk.gelu: x/2 * (1 + erf(x / sqrt(2))). Not the tanh approximation. */
static vsdk_status_t* k_gelu(const vsdk_kernel_call_t* c) {
  float* x;
  float* y = (float*)out_data(c);
  size_t i, n;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(check_output(c, F32, c->inputs[0].ndim, c->inputs[0].shape));
  TRY(load_f32(c, 0, &x));
  n = numel(&c->inputs[0]);
  for (i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678118654752f));
  free(x);
  return NULL;
}

/* vsdk.gelu_tanh: x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))), as PyTorch
 * writes it. x^3 may overflow to +-Inf: tanh is then +-1 and the result x or -0. */
static float gelu_tanh_f(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* vsdk.silu: x / (1 + exp(-x)), with exp of a non-positive number only, so that
 * nothing overflows (x * exp(x) / (1 + exp(x)) would be Inf/Inf = NaN). */
static float silu_f(float x) {
  float e;
  if (x >= 0.0f) return x / (1.0f + expf(-x));
  e = expf(x);
  return x * e / (1.0f + e);
}

/* vsdk.sin, vsdk.cos: the C library's sinf/cosf reduce large arguments exactly
 * (TRELLIS's embeddings reach ~1000 rad). Never a fast approximation. */
static float sin_f(float x) { return sinf(x); }
static float cos_f(float x) { return cosf(x); }

/* vsdk.relu: NaN stays NaN (fmaxf(NaN, 0) would be 0: the classic port mistake). */
static float relu_f(float x) { return x != x ? x : (x > 0.0f ? x : 0.0f); }

/* vsdk.sigmoid: 1 / (1 + exp(-x)), exp of a non-positive number only, like silu. */
static float sigmoid_f(float x) {
  float e;
  if (x >= 0.0f) return 1.0f / (1.0f + expf(-x));
  e = expf(x);
  return e / (1.0f + e);
}

static float tanh_f(float x) { return tanhf(x); }
static float exp_f(float x) { return expf(x); }
static float sqrt_f(float x) { return sqrtf(x); }
static float rsqrt_f(float x) { return 1.0f / sqrtf(x); }

/* vsdk.hardswish, vsdk.hardsigmoid: PyTorch's x * relu6(x + 3) / 6 and relu6(x + 3) / 6
 * (comparisons, not fmaxf/fminf: NaN stays NaN). */
static float relu6_f(float x) { return x < 0.0f ? 0.0f : (x > 6.0f ? 6.0f : x); }
static float hardswish_f(float x) { return x * relu6_f(x + 3.0f) / 6.0f; }
static float hardsigmoid_f(float x) { return relu6_f(x + 3.0f) / 6.0f; }

/* Element-wise functions of one input. */
static vsdk_status_t* k_unary(const vsdk_kernel_call_t* c, float (*f)(float)) {
  float* x;
  float* y = (float*)out_data(c);
  size_t i, n;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(check_output(c, F32, c->inputs[0].ndim, c->inputs[0].shape));
  TRY(load_f32(c, 0, &x));
  n = numel(&c->inputs[0]);
  for (i = 0; i < n; i++) y[i] = f(x[i]);
  free(x);
  return NULL;
}

/* vsdk.clamp: min(max(x, lo), hi), either bound optional (at least one given);
 * NaN stays NaN. The bounds are compared in float32. */
static vsdk_status_t* k_clamp(const vsdk_kernel_call_t* c) {
  double lo, hi;
  float *x, *y = (float*)out_data(c);
  size_t i, n;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(attr_float(c, "min", -HUGE_VAL, &lo));
  TRY(attr_float(c, "max", HUGE_VAL, &hi));
  if (find_attr(c, "min") == NULL && find_attr(c, "max") == NULL) return INVALID("%s: one of min and max is required", c->kernel);
  if (lo != lo || hi != hi || lo > hi) return INVALID("%s: bounds [%g, %g] are not in order", c->kernel, lo, hi);
  TRY(check_output(c, F32, c->inputs[0].ndim, c->inputs[0].shape));
  TRY(load_f32(c, 0, &x));
  n = numel(&c->inputs[0]);
  for (i = 0; i < n; i++) {
    float v = x[i];
    if (v == v) {
      if (v < (float)lo) v = (float)lo;
      if (v > (float)hi) v = (float)hi;
    }
    y[i] = v;
  }
  free(x);
  return NULL;
}

/* vsdk.add / sub / mul / div with NumPy broadcasting. */
static vsdk_status_t* k_binary(const vsdk_kernel_call_t* c, char op) {
  const vsdk_tensor_t *a = &c->inputs[0], *b = &c->inputs[1];
  int64_t shape[MAX_RANK], sa[MAX_RANK], sb[MAX_RANK], idx[MAX_RANK] = {0};
  int32_t r, d;
  float *x, *y, *out = (float*)out_data(c);
  size_t i, n = 1;
  TRY(need_inputs(c, 2, 2));
  TRY(need_f32(c));
  r = a->ndim > b->ndim ? a->ndim : b->ndim;
  /* Align shapes at the right; a dimension of 1 is stretched (stride 0). */
  for (d = 0; d < r; d++) {
    int32_t da = d - (r - a->ndim), db = d - (r - b->ndim);
    int64_t na = da >= 0 ? a->shape[da] : 1, nb = db >= 0 ? b->shape[db] : 1;
    if (na != nb && na != 1 && nb != 1) return INVALID("%s: shapes do not broadcast at axis %d", c->kernel, d);
    shape[d] = na > nb ? na : nb;
    if (na == 0 || nb == 0) shape[d] = 0;
    n *= (size_t)shape[d];
  }
  /* element strides of the compact inputs, 0 on a stretched axis */
  {
    int64_t ea = 1, eb = 1;
    for (d = r - 1; d >= 0; d--) {
      int32_t da = d - (r - a->ndim), db = d - (r - b->ndim);
      int64_t na = da >= 0 ? a->shape[da] : 1, nb = db >= 0 ? b->shape[db] : 1;
      sa[d] = na == 1 ? 0 : ea;
      sb[d] = nb == 1 ? 0 : eb;
      ea *= na;
      eb *= nb;
    }
  }
  TRY(check_output(c, F32, r, shape));
  TRY(load_f32(c, 0, &x));
  if (load_f32(c, 1, &y) != NULL) {
    free(x);
    return OOM("%s: scratch", c->kernel);
  }
  for (i = 0; i < n; i++) {
    int64_t oa = 0, ob = 0;
    float u, v;
    for (d = 0; d < r; d++) {
      oa += idx[d] * sa[d];
      ob += idx[d] * sb[d];
    }
    u = x[oa];
    v = y[ob];
    out[i] = op == '+' ? u + v : op == '-' ? u - v : op == '*' ? u * v : u / v;
    for (d = r - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  free(x);
  free(y);
  return NULL;
}

/* vsdk.cast between float32 and uint8 (float -> uint8 rounds half to even and
 * saturates; NaN becomes 0), and int32 to float32 (sparse coordinates as
 * numbers: the position embedding's). */
static vsdk_status_t* k_cast(const vsdk_kernel_call_t* c) {
  const vsdk_attr_t* a = find_attr(c, "dtype");
  const vsdk_tensor_t* t = &c->inputs[0];
  vsdk_dtype_t to;
  size_t i, n = numel(t);
  void* src;
  TRY(need_inputs(c, 1, 1));
  if (a == NULL || a->kind != VSDK_ATTR_STRING) return INVALID("%s: attribute `dtype` (string) is required", c->kernel);
  if (strcmp(a->value.s, "float32") == 0) to = F32;
  else if (strcmp(a->value.s, "uint8") == 0) { to.code = VSDK_DTYPE_UINT; to.bits = 8; to.lanes = 1; }
  else return UNSUPPORTED("%s: this template casts only between float32 and uint8, not to %s", c->kernel, a->value.s);
  if (!is_f32(t->dtype) && !is_u8(t->dtype) && !(is_i32(t->dtype) && is_f32(to)))
    return UNSUPPORTED("%s: input must be float32 or uint8 (or int32, to float32)", c->kernel);
  TRY(check_output(c, to, t->ndim, t->shape));
  TRY(compact_copy(c, t, &src));
  for (i = 0; i < n; i++) {
    double v = is_f32(t->dtype) ? ((float*)src)[i]
               : is_i32(t->dtype) ? (double)((int32_t*)src)[i]
                                  : ((unsigned char*)src)[i];
    if (is_f32(to)) {
      ((float*)out_data(c))[i] = (float)v;
    } else {
      double r = v != v ? 0.0 : nearbyint(v); /* default rounding mode: half to even */
      ((unsigned char*)out_data(c))[i] = (unsigned char)(r < 0 ? 0 : r > 255 ? 255 : r);
    }
  }
  free(src);
  return NULL;
}

/* --- data movement: any element size ------------------------------------- */

static vsdk_status_t* same_dtype_out(const vsdk_kernel_call_t* c, int32_t ndim, const int64_t* shape) {
  return check_output(c, c->inputs[0].dtype, ndim, shape);
}

/* The input index on one axis of a crop's output index i; called as
 * `(crop_source)(...)`, so that a test's mutant can swap it (see pool_out_len). */
static int64_t crop_source(int64_t off, int64_t i, int64_t step) { return off + i * step; }

/* vsdk.crop: out[i] = x[offsets[d] + i * steps[d]] on every axis d, sizes[d]
 * of them (steps default to 1: a plain window). */
static vsdk_status_t* k_crop(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* t = &c->inputs[0];
  int64_t off[MAX_RANK], sz[MAX_RANK], step[MAX_RANK], idx[MAX_RANK] = {0};
  int found, found2, found3;
  int32_t d;
  size_t es = elem_size(t), i, n = 1;
  char *src, *dst = (char*)out_data(c);
  TRY(need_inputs(c, 1, 1));
  TRY(attr_ints(c, "offsets", (uint64_t)t->ndim, off, &found));
  TRY(attr_ints(c, "sizes", (uint64_t)t->ndim, sz, &found2));
  TRY(attr_ints(c, "steps", (uint64_t)t->ndim, step, &found3));
  if (!found || !found2) return INVALID("%s: `offsets` and `sizes` are required", c->kernel);
  for (d = 0; d < t->ndim; d++) {
    if (!found3) step[d] = 1;
    if (off[d] < 0 || sz[d] < 0 || step[d] < 1 || off[d] > t->shape[d])
      return INVALID("%s: window outside axis %d", c->kernel, d);
    /* The last element read, off + (sz - 1) * step < shape, written so that
     * it cannot overflow. */
    if (sz[d] > 0 && (off[d] >= t->shape[d] || sz[d] - 1 > (t->shape[d] - 1 - off[d]) / step[d]))
      return INVALID("%s: window outside axis %d", c->kernel, d);
    n *= (size_t)sz[d];
  }
  TRY(same_dtype_out(c, t->ndim, sz));
  TRY(compact_copy(c, t, (void**)&src));
  for (i = 0; i < n; i++) {
    int64_t flat = 0;
    for (d = 0; d < t->ndim; d++) flat = flat * t->shape[d] + (crop_source)(off[d], idx[d], step[d]);
    memcpy(dst + i * es, src + (size_t)flat * es, es);
    for (d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < sz[d]) break;
      idx[d] = 0;
    }
  }
  free(src);
  return NULL;
}

/* Pad modes, in the order of docs/operators.md's table. */
enum { PAD_CONSTANT, PAD_REFLECT, PAD_REPLICATE, PAD_CIRCULAR };

/* The input index on one axis (extent n) that output index i reads after
 * `before` padded elements, or -1 for the constant; called as
 * `(pad_source)(...)` so that a test's mutant can swap it (see pool_out_len). */
static int64_t pad_source(int mode, int64_t i, int64_t before, int64_t n) {
  int64_t j = i - before;
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case PAD_REFLECT: return j < 0 ? -j : 2 * (n - 1) - j;
    case PAD_REPLICATE: return j < 0 ? 0 : n - 1;
    case PAD_CIRCULAR: return j < 0 ? j + n : j - n;
    default: return -1;
  }
}

/* vsdk.pad: pads[d] elements before and pads[rank + d] after every axis d,
 * filled by `mode` (constant `value`, reflect, replicate, circular). */
static vsdk_status_t* k_pad(const vsdk_kernel_call_t* c) {
  static const char* const MODES[] = {"constant", "reflect", "replicate", "circular"};
  const vsdk_tensor_t* t = &c->inputs[0];
  const vsdk_attr_t* m = find_attr(c, "mode");
  int64_t pads[2 * MAX_RANK], shape[MAX_RANK], idx[MAX_RANK] = {0};
  int found, mode = PAD_CONSTANT;
  int32_t d;
  double value;
  size_t es = elem_size(t), i, n = 1;
  char fill[8], *src, *dst = (char*)out_data(c);
  TRY(need_inputs(c, 1, 1));
  if (!is_f32(t->dtype) && !is_i32(t->dtype) && !is_u8(t->dtype))
    return UNSUPPORTED("%s: this template pads float32, int32 and uint8", c->kernel);
  TRY(attr_ints(c, "pads", 2 * (uint64_t)t->ndim, pads, &found));
  TRY(attr_float(c, "value", 0.0, &value));
  if (!found) return INVALID("%s: `pads` (2 x rank ints) is required", c->kernel);
  if (m != NULL) {
    if (m->kind != VSDK_ATTR_STRING) return INVALID("%s: `mode` must be a string", c->kernel);
    for (mode = 0; mode < 4 && strcmp(m->value.s, MODES[mode]) != 0; mode++) {}
    if (mode == 4) return INVALID("%s: unknown mode `%s`", c->kernel, m->value.s);
  }
  if (mode != PAD_CONSTANT && find_attr(c, "value") != NULL)
    return INVALID("%s: only `constant` padding has a value", c->kernel);
  /* The value must be one of the dtype's (exact in an integer dtype): no
   * out-of-range conversion below. */
  if (value != value) return INVALID("%s: NaN is not a pad value", c->kernel);
  if (!is_f32(t->dtype) && (value != floor(value) || value < (is_u8(t->dtype) ? 0.0 : -2147483648.0) ||
                            value > (is_u8(t->dtype) ? 255.0 : 2147483647.0)))
    return INVALID("%s: %g is not a value of the input's integer dtype", c->kernel, value);
  for (d = 0; d < t->ndim; d++) {
    int64_t b = pads[d], e = pads[t->ndim + d], len = t->shape[d];
    int64_t most = mode == PAD_REFLECT ? (len > 0 ? len - 1 : 0)
                   : mode == PAD_CIRCULAR ? len
                   : mode == PAD_REPLICATE && len == 0 ? 0
                                                       : INT64_MAX;
    if (b < 0 || e < 0 || b > most || e > most) return INVALID("%s: pads of axis %d do not fit its mode", c->kernel, d);
    if (b > INT64_MAX / 4 || e > INT64_MAX / 4 - b) return INVALID("%s: pads of axis %d overflow", c->kernel, d);
    shape[d] = len + b + e;
    n *= (size_t)shape[d];
  }
  TRY(same_dtype_out(c, t->ndim, shape));
  if (is_f32(t->dtype)) {
    float f = (float)value; /* to nearest, ties to even */
    memcpy(fill, &f, 4);
  } else if (is_i32(t->dtype)) {
    int32_t v = (int32_t)value;
    memcpy(fill, &v, 4);
  } else {
    unsigned char v = (unsigned char)value;
    memcpy(fill, &v, 1);
  }
  TRY(compact_copy(c, t, (void**)&src));
  for (i = 0; i < n; i++) {
    int64_t flat = 0;
    for (d = 0; d < t->ndim && flat >= 0; d++) {
      int64_t j = (pad_source)(mode, idx[d], pads[d], t->shape[d]);
      flat = j < 0 ? -1 : flat * t->shape[d] + j;
    }
    memcpy(dst + i * es, flat < 0 ? fill : src + (size_t)flat * es, es);
    for (d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  free(src);
  return NULL;
}

/* vsdk.concat along `axis` (default 0). */
static vsdk_status_t* k_concat(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* t0 = &c->inputs[0];
  int32_t axis, d;
  int64_t shape[MAX_RANK];
  uint64_t in;
  size_t outer, len, inner, es = elem_size(t0), o, placed = 0, total;
  char* dst = (char*)out_data(c);
  TRY(need_inputs(c, 1, (uint64_t)-1));
  TRY(norm_axis(c, 0, &axis));
  memcpy(shape, t0->shape, (size_t)t0->ndim * sizeof(int64_t));
  shape[axis] = 0;
  for (in = 0; in < c->num_inputs; in++) {
    const vsdk_tensor_t* t = &c->inputs[in];
    if (t->ndim != t0->ndim || !is_dtype(t->dtype, t0->dtype.code, t0->dtype.bits)) return INVALID("%s: inputs disagree", c->kernel);
    for (d = 0; d < t->ndim; d++)
      if (d != axis && t->shape[d] != t0->shape[d]) return INVALID("%s: input %llu differs off the axis", c->kernel, (unsigned long long)in);
    if (t->shape[axis] > INT64_MAX - shape[axis]) return INVALID("%s: the concatenated axis overflows", c->kernel);
    shape[axis] += t->shape[axis];
  }
  TRY(same_dtype_out(c, t0->ndim, shape));
  total = (size_t)shape[axis];
  for (in = 0; in < c->num_inputs; in++) {
    char* src;
    split_axis(&c->inputs[in], axis, &outer, &len, &inner);
    TRY(compact_copy(c, &c->inputs[in], (void**)&src));
    for (o = 0; o < outer; o++) memcpy(dst + ((o * total + placed) * inner) * es, src + o * len * inner * es, len * inner * es);
    placed += len;
    free(src);
  }
  return NULL;
}

/* vsdk.reshape: same elements in row-major order; `shape` may hold one -1. */
static vsdk_status_t* k_reshape(const vsdk_kernel_call_t* c) {
  const vsdk_attr_t* a = find_attr(c, "shape");
  int64_t shape[MAX_RANK], known = 1, infer = -1;
  uint64_t d;
  char* src;
  TRY(need_inputs(c, 1, 1));
  if (a == NULL || a->kind != VSDK_ATTR_INTS || a->value.ints.len > MAX_RANK) return INVALID("%s: `shape` is required", c->kernel);
  for (d = 0; d < a->value.ints.len; d++) {
    uint64_t k;
    shape[d] = a->value.ints.data[d];
    if (shape[d] < -1 || (shape[d] == -1 && infer >= 0)) return INVALID("%s: `shape` has a dimension < -1 or two -1", c->kernel);
    if (shape[d] == -1) {
      infer = (int64_t)d;
    } else {
      if (!mul_within((uint64_t)known, (uint64_t)shape[d], MAX_TENSOR_BYTES, &k))
        return INVALID("%s: `shape` overflows or exceeds the tensor limit", c->kernel);
      known = (int64_t)k;
    }
  }
  if (infer >= 0) shape[infer] = known ? (int64_t)numel(&c->inputs[0]) / known : 0;
  TRY(same_dtype_out(c, (int32_t)a->value.ints.len, shape));
  if (numel(&c->outputs[0]) != numel(&c->inputs[0])) return INVALID("%s: element counts differ", c->kernel);
  TRY(compact_copy(c, &c->inputs[0], (void**)&src));
  memcpy(out_data(c), src, numel(&c->inputs[0]) * elem_size(&c->inputs[0]));
  free(src);
  return NULL;
}

/* vsdk.permute: out axis d is input axis perm[d]. */
static vsdk_status_t* k_permute(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* t = &c->inputs[0];
  int64_t perm[MAX_RANK], shape[MAX_RANK], in_strides[MAX_RANK], idx[MAX_RANK] = {0}, s = 1;
  int found;
  int32_t d;
  size_t es = elem_size(t), i, n = numel(t);
  char *src, *dst = (char*)out_data(c);
  TRY(need_inputs(c, 1, 1));
  TRY(attr_ints(c, "perm", (uint64_t)t->ndim, perm, &found));
  if (!found) return INVALID("%s: `perm` is required", c->kernel);
  for (d = t->ndim - 1; d >= 0; d--) {
    in_strides[d] = s;
    s *= t->shape[d];
  }
  for (d = 0; d < t->ndim; d++) {
    if (perm[d] < 0 || perm[d] >= t->ndim) return INVALID("%s: bad permutation", c->kernel);
    shape[d] = t->shape[perm[d]];
  }
  TRY(same_dtype_out(c, t->ndim, shape));
  TRY(compact_copy(c, t, (void**)&src));
  for (i = 0; i < n; i++) {
    int64_t off = 0;
    for (d = 0; d < t->ndim; d++) off += idx[d] * in_strides[perm[d]];
    memcpy(dst + i * es, src + (size_t)off * es, es);
    for (d = t->ndim - 1; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  free(src);
  return NULL;
}

/* --- linear and convolution ---------------------------------------------- */

/* vsdk.linear: y[..., n] = sum_k x[..., k] * w[n, k] + b[n]. */
static vsdk_status_t* k_linear(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* xt = &c->inputs[0];
  float *x, *w, *b = NULL, *y = (float*)out_data(c);
  int64_t shape[MAX_RANK];
  size_t m, n, k, i, j, kk;
  TRY(need_inputs(c, 2, 3));
  TRY(need_f32(c));
  if (xt->ndim < 1 || c->inputs[1].ndim != 2 || c->inputs[1].shape[1] != xt->shape[xt->ndim - 1])
    return INVALID("%s: expected x [..., K] and weight [N, K]", c->kernel);
  k = (size_t)xt->shape[xt->ndim - 1];
  n = (size_t)c->inputs[1].shape[0];
  m = k ? numel(xt) / k : 0;
  memcpy(shape, xt->shape, (size_t)xt->ndim * sizeof(int64_t));
  shape[xt->ndim - 1] = (int64_t)n;
  if (c->num_inputs == 3 && (c->inputs[2].ndim != 1 || (size_t)c->inputs[2].shape[0] != n))
    return INVALID("%s: bias must have shape [N]", c->kernel);
  TRY(check_output(c, F32, xt->ndim, shape));
  if (k == 0) m = numel(&c->outputs[0]) / (n ? n : 1);
  TRY(load_f32(c, 0, &x));
  TRY(load_f32(c, 1, &w));
  if (c->num_inputs == 3) TRY(load_f32(c, 2, &b));
  for (i = 0; i < m; i++)
    for (j = 0; j < n; j++) {
      double acc = b ? b[j] : 0.0;
      for (kk = 0; kk < k; kk++) acc += (double)x[i * k + kk] * w[j * k + kk];
      y[i * n + j] = (float)acc;
    }
  free(x);
  free(w);
  free(b);
  return NULL;
}

/* vsdk.conv2d: NCHW, weight [O, C/groups, kH, kW], optional bias [O]. */
static vsdk_status_t* k_conv2d(const vsdk_kernel_call_t* c) {
  int64_t strides[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, groups, shape[4];
  int found;
  float *x, *w, *b = NULL, *y = (float*)out_data(c);
  int64_t N, C, H, W, O, kh, kw, OH, OW, cg, og, n, o, oy, ox, ci, i, j;
  TRY(need_inputs(c, 2, 3));
  TRY(need_f32(c));
  TRY(attr_ints(c, "strides", 2, strides, &found));
  TRY(attr_ints(c, "dilations", 2, dil, &found));
  TRY(attr_ints(c, "pads", 4, pads, &found));
  TRY(attr_int(c, "groups", 1, &groups));
  if (c->inputs[0].ndim != 4 || c->inputs[1].ndim != 4 || groups < 1) return INVALID("%s: expected 4-d input and weight", c->kernel);
  /* Bounded so that the output size below cannot overflow int64_t. */
  for (i = 0; i < 4; i++)
    if (pads[i] < 0 || pads[i] > INT32_MAX) return INVALID("%s: `pads` must lie in [0, 2^31)", c->kernel);
  for (i = 0; i < 2; i++)
    if (strides[i] < 1 || strides[i] > INT32_MAX || dil[i] < 1 || dil[i] > INT32_MAX)
      return INVALID("%s: `strides` and `dilations` must lie in [1, 2^31)", c->kernel);
  if (c->inputs[1].shape[2] > INT32_MAX || c->inputs[1].shape[3] > INT32_MAX) return INVALID("%s: kernel too large", c->kernel);
  N = c->inputs[0].shape[0]; C = c->inputs[0].shape[1]; H = c->inputs[0].shape[2]; W = c->inputs[0].shape[3];
  O = c->inputs[1].shape[0]; kh = c->inputs[1].shape[2]; kw = c->inputs[1].shape[3];
  cg = C / groups;
  og = O / groups;
  if (C % groups || O % groups || c->inputs[1].shape[1] != cg) return INVALID("%s: channels and groups disagree", c->kernel);
  OH = (H + pads[0] + pads[2] - dil[0] * (kh - 1) - 1) / strides[0] + 1;
  OW = (W + pads[1] + pads[3] - dil[1] * (kw - 1) - 1) / strides[1] + 1;
  shape[0] = N; shape[1] = O; shape[2] = OH; shape[3] = OW;
  TRY(check_output(c, F32, 4, shape));
  TRY(load_f32(c, 0, &x));
  TRY(load_f32(c, 1, &w));
  if (c->num_inputs == 3) TRY(load_f32(c, 2, &b));
  for (n = 0; n < N; n++)
    for (o = 0; o < O; o++) {
      int64_t g = o / og;
      for (oy = 0; oy < OH; oy++)
        for (ox = 0; ox < OW; ox++) {
          double acc = b ? b[o] : 0.0;
          for (ci = 0; ci < cg; ci++)
            for (i = 0; i < kh; i++)
              for (j = 0; j < kw; j++) {
                int64_t yy = oy * strides[0] + i * dil[0] - pads[0];
                int64_t xx = ox * strides[1] + j * dil[1] - pads[1];
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue; /* zero padding */
                acc += (double)x[((n * C + g * cg + ci) * H + yy) * W + xx] * w[((o * cg + ci) * kh + i) * kw + j];
              }
          y[((n * O + o) * OH + oy) * OW + ox] = (float)acc;
        }
    }
  free(x);
  free(w);
  free(b);
  return NULL;
}

/* The length of output batch axis d (of r - 2) in an operand of rank `ndim` and shape
 * `shape`, its batch axes aligned at the right: 1 where it has no such axis (NumPy's
 * broadcasting). */
static int64_t matmul_batch_dim(const int64_t* shape, int32_t ndim, int32_t r, int32_t d) {
  int32_t td = d - (r - ndim);
  return td < 0 ? 1 : shape[td];
}

/* Which of an operand's matrices (rank `ndim`, shape `shape`, compact) output batch
 * index idx (r - 2 axes) reads: an axis of length 1 repeats (index 0 whatever idx[d]),
 * a missing one counts as 1. Called as `(matmul_batch)(...)` so that a test's mutant
 * can swap it (see pool_out_len), e.g. for one that follows a's batch only. */
static size_t matmul_batch(const int64_t* shape, int32_t ndim, int32_t r, const int64_t* idx) {
  size_t flat = 0;
  int32_t d;
  for (d = r - ndim; d < r - 2; d++) {
    int64_t len = matmul_batch_dim(shape, ndim, r, d);
    flat = flat * (size_t)len + (size_t)(len == 1 ? 0 : idx[d]);
  }
  return flat;
}

/* vsdk.matmul: out[..., m, n] = sum_k a[..., m, k] * b[..., k, n], a [..., M, K] and
 * b [..., K, N] of rank >= 2 whose batch axes broadcast (NumPy's rule). Not linear's
 * layout: b is [K, N]. */
static vsdk_status_t* k_matmul(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t *at = &c->inputs[0], *bt = &c->inputs[1];
  int64_t shape[MAX_RANK], idx[MAX_RANK] = {0};
  int32_t ra, rb, r, d;
  size_t m, k, n, batches = 1, bi, i, j, kk;
  float *a, *b, *y = (float*)out_data(c);
  vsdk_status_t* st;
  TRY(need_inputs(c, 2, 2));
  TRY(need_f32(c));
  ra = at->ndim;
  rb = bt->ndim;
  if (ra < 2 || rb < 2)
    return INVALID("%s: a [..., M, K] and b [..., K, N] must have rank >= 2, got ranks %d and %d", c->kernel, ra, rb);
  m = (size_t)at->shape[ra - 2];
  k = (size_t)at->shape[ra - 1];
  n = (size_t)bt->shape[rb - 1];
  if (bt->shape[rb - 2] != at->shape[ra - 1])
    return INVALID("%s: a has K = %lld but b has %lld rows (expected [..., K, N])", c->kernel,
                   (long long)at->shape[ra - 1], (long long)bt->shape[rb - 2]);
  r = ra > rb ? ra : rb;
  for (d = 0; d < r - 2; d++) {
    int64_t da = matmul_batch_dim(at->shape, ra, r, d), db = matmul_batch_dim(bt->shape, rb, r, d);
    if (da != db && da != 1 && db != 1)
      return INVALID("%s: batch axis %d: %lld and %lld do not broadcast", c->kernel, d, (long long)da, (long long)db);
    shape[d] = da == 1 ? db : da;
    batches *= (size_t)shape[d];
  }
  shape[r - 2] = (int64_t)m;
  shape[r - 1] = (int64_t)n;
  TRY(check_output(c, F32, r, shape));
  /* An empty output has nothing to compute; its batch axes may be huge (the
   * size bound counts bytes, and an empty tensor has none). */
  if (numel(&c->outputs[0]) == 0) return NULL;
  TRY(load_f32(c, 0, &a));
  if ((st = load_f32(c, 1, &b)) != NULL) {
    free(a);
    return st;
  }
  for (bi = 0; bi < batches; bi++) {
    const float* am = a + (matmul_batch)(at->shape, ra, r, idx) * m * k;
    const float* bm = b + (matmul_batch)(bt->shape, rb, r, idx) * k * n;
    float* ym = y + bi * m * n;
    for (i = 0; i < m; i++)
      for (j = 0; j < n; j++) {
        double acc = 0.0;
        for (kk = 0; kk < k; kk++) acc += (double)am[i * k + kk] * bm[kk * n + j];
        ym[i * n + j] = (float)acc;
      }
    for (d = r - 3; d >= 0; d--) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  free(a);
  free(b);
  return NULL;
}

/* --- normalisation ------------------------------------------------------- */

/* vsdk.softmax along `axis`: exp(x - max) / sum. */
static vsdk_status_t* k_softmax(const vsdk_kernel_call_t* c) {
  int32_t axis;
  size_t outer, len, inner, o, i, k;
  float *x, *y = (float*)out_data(c);
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(norm_axis(c, -1, &axis));
  TRY(check_output(c, F32, c->inputs[0].ndim, c->inputs[0].shape));
  TRY(load_f32(c, 0, &x));
  split_axis(&c->inputs[0], axis, &outer, &len, &inner);
  for (o = 0; o < outer; o++)
    for (i = 0; i < inner; i++) {
      const float* row = x + o * len * inner + i;
      float* out = y + o * len * inner + i;
      float mx = -INFINITY;
      double sum = 0.0;
      for (k = 0; k < len; k++) mx = row[k * inner] > mx ? row[k * inner] : mx;
      for (k = 0; k < len; k++) sum += out[k * inner] = expf(row[k * inner] - mx);
      for (k = 0; k < len; k++) out[k * inner] = (float)(out[k * inner] / sum);
    }
  free(x);
  return NULL;
}

/* vsdk.layer_norm over axes axis..end, biased variance, then * weight + bias. */
static vsdk_status_t* k_layer_norm(const vsdk_kernel_call_t* c) {
  int32_t axis, d;
  double eps;
  size_t rows, dsz = 1, r, i;
  float *x, *g, *b, *y = (float*)out_data(c);
  TRY(need_inputs(c, 3, 3));
  TRY(need_f32(c));
  TRY(norm_axis(c, -1, &axis));
  TRY(attr_float(c, "eps", 1e-5, &eps));
  for (d = axis; d < c->inputs[0].ndim; d++) dsz *= (size_t)c->inputs[0].shape[d];
  if (numel(&c->inputs[1]) != dsz || numel(&c->inputs[2]) != dsz)
    return INVALID("%s: weight and bias must have the normalized shape", c->kernel);
  TRY(check_output(c, F32, c->inputs[0].ndim, c->inputs[0].shape));
  rows = dsz ? numel(&c->inputs[0]) / dsz : 0;
  TRY(load_f32(c, 0, &x));
  TRY(load_f32(c, 1, &g));
  TRY(load_f32(c, 2, &b));
  for (r = 0; r < rows; r++) {
    const float* row = x + r * dsz;
    double mean = 0.0, var = 0.0, rstd;
    for (i = 0; i < dsz; i++) mean += row[i];
    mean /= (double)dsz;
    for (i = 0; i < dsz; i++) var += (row[i] - mean) * (row[i] - mean);
    var /= (double)dsz;
    rstd = 1.0 / sqrt(var + eps);
    for (i = 0; i < dsz; i++) y[r * dsz + i] = (float)((row[i] - mean) * rstd * g[i] + b[i]);
  }
  free(x);
  free(g);
  free(b);
  return NULL;
}

/* vsdk.rms_norm: x / max(||x||, eps) * sqrt(d) * gamma over the last axis (F.normalize's
 * clamp, not eps under the root); gamma has a trailing shape of x's and repeats over rows. */
static vsdk_status_t* k_rms_norm(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t *xt = &c->inputs[0], *gt = &c->inputs[1];
  int32_t d;
  double eps;
  size_t dsz, gsz, rows, r, i;
  float *x, *g, *y = (float*)out_data(c);
  vsdk_status_t* st;
  TRY(need_inputs(c, 2, 2));
  TRY(need_f32(c));
  TRY(attr_float(c, "eps", 1e-12, &eps));
  if (!(eps > 0.0) || isinf(eps)) return INVALID("%s: eps must be finite and > 0", c->kernel);
  if (xt->ndim < 1 || gt->ndim < 1 || gt->ndim > xt->ndim)
    return INVALID("%s: gamma must have a trailing shape of the input", c->kernel);
  for (d = 1; d <= gt->ndim; d++)
    if (gt->shape[gt->ndim - d] != xt->shape[xt->ndim - d])
      return INVALID("%s: gamma must have a trailing shape of the input", c->kernel);
  TRY(check_output(c, F32, xt->ndim, xt->shape));
  dsz = (size_t)xt->shape[xt->ndim - 1];
  gsz = numel(gt);
  rows = dsz ? numel(xt) / dsz : 0;
  TRY(load_f32(c, 0, &x));
  if ((st = load_f32(c, 1, &g)) != NULL) {
    free(x);
    return st;
  }
  for (r = 0; r < rows; r++) {
    const float* row = x + r * dsz;
    const float* gr = g + (r * dsz) % gsz; /* gamma holds whole rows of d */
    double q = 0.0, scale;
    for (i = 0; i < dsz; i++) q += (double)row[i] * row[i];
    scale = sqrt((double)dsz) / fmax(sqrt(q), eps);
    for (i = 0; i < dsz; i++) y[r * dsz + i] = (float)(row[i] * scale * gr[i]);
  }
  free(x);
  free(g);
  return NULL;
}

/* vsdk.batch_norm (inference): (x - mean[c]) / sqrt(var[c] + eps) * weight[c] + bias[c],
 * channel axis 1 of [N, C, ...]. eps is the call's attribute (PyTorch's default 1e-5, but
 * models set their own: never a constant here). */
static float bn_eps_f(double eps) { return (float)eps; }

static vsdk_status_t* k_batch_norm(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* xt = &c->inputs[0];
  double eps;
  size_t ch, inner = 1, n, i, k;
  float *x, *p[4], *y = (float*)out_data(c);
  vsdk_status_t* st = NULL;
  int32_t d;
  TRY(need_inputs(c, 5, 5));
  TRY(need_f32(c));
  TRY(attr_float(c, "eps", 1e-5, &eps));
  if (!(eps > 0.0) || isinf(eps)) return INVALID("%s: eps must be finite and > 0", c->kernel);
  if (xt->ndim < 2) return INVALID("%s: input must be [N, C, ...]", c->kernel);
  ch = (size_t)xt->shape[1];
  for (k = 1; k < 5; k++)
    if (c->inputs[k].ndim != 1 || (size_t)c->inputs[k].shape[0] != ch)
      return INVALID("%s: input %u must have one value per channel", c->kernel, (unsigned)k);
  for (d = 2; d < xt->ndim; d++) inner *= (size_t)xt->shape[d];
  TRY(check_output(c, F32, xt->ndim, xt->shape));
  TRY(load_f32(c, 0, &x));
  for (k = 0; k < 4; k++) p[k] = NULL;
  for (k = 0; k < 4 && st == NULL; k++) st = load_f32(c, (uint64_t)(k + 1), &p[k]);
  if (st == NULL) {
    n = numel(xt);
    for (i = 0; i < n; i++) {
      size_t ci = ch ? (i / (inner ? inner : 1)) % ch : 0;
      /* (bn_eps_f)(...), not bn_eps_f(...): a test's mutant of this template swaps the function. */
      float s = sqrtf(p[1][ci] + (bn_eps_f)(eps));
      y[i] = (x[i] - p[0][ci]) / s * p[2][ci] + p[3][ci];
    }
  }
  free(x);
  for (k = 0; k < 4; k++) free(p[k]);
  return st;
}

/* The mean and the biased variance (divided by the count, not count - 1) of one
 * group: `channels` channels of `inner` elements each, contiguous from x. Two
 * passes in double. Called as `(group_stats)(...)` so that a test's mutant can
 * swap it (see pool_out_len). */
static void group_stats(const float* x, size_t channels, size_t inner, double* mean, double* var) {
  size_t count = channels * inner, i;
  double s = 0.0, q = 0.0;
  for (i = 0; i < count; i++) s += x[i];
  s /= (double)count;
  for (i = 0; i < count; i++) q += (x[i] - s) * (x[i] - s);
  *mean = s;
  *var = q / (double)count;
}

/* vsdk.group_norm: x [N, C, ...] in `groups` groups of C / groups channels; per sample
 * and group, mean and biased variance over the group's channels and all spatial
 * positions, then (x - mean) / sqrt(var + eps) * weight[c] + bias[c] with the channel's
 * own weight and bias. */
static vsdk_status_t* k_group_norm(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* xt = &c->inputs[0];
  int64_t groups;
  double eps;
  size_t ch, cpg, inner = 1, batch, s, g, j, e;
  float *x, *w = NULL, *b = NULL, *y = (float*)out_data(c);
  vsdk_status_t* st;
  int32_t d;
  TRY(need_inputs(c, 3, 3));
  TRY(need_f32(c));
  if (find_attr(c, "groups") == NULL) return INVALID("%s: attribute `groups` is required", c->kernel);
  TRY(attr_int(c, "groups", 1, &groups));
  TRY(attr_float(c, "eps", 1e-5, &eps));
  if (!(eps >= 0.0) || isinf(eps)) return INVALID("%s: eps must be finite and >= 0", c->kernel);
  if (xt->ndim < 2) return INVALID("%s: input must be [N, C, ...] (rank >= 2)", c->kernel);
  ch = (size_t)xt->shape[1];
  if (groups < 1 || (uint64_t)ch % (uint64_t)groups != 0)
    return INVALID("%s: groups = %lld does not divide the %llu channels into equal groups", c->kernel,
                   (long long)groups, (unsigned long long)ch);
  for (j = 1; j < 3; j++)
    if (c->inputs[j].ndim != 1 || (size_t)c->inputs[j].shape[0] != ch)
      return INVALID("%s: %s must have shape [%llu] (one per channel)", c->kernel, j == 1 ? "weight" : "bias",
                     (unsigned long long)ch);
  for (d = 2; d < xt->ndim; d++) inner *= (size_t)xt->shape[d];
  TRY(check_output(c, F32, xt->ndim, xt->shape));
  batch = (size_t)xt->shape[0];
  cpg = ch / (size_t)groups;
  if (numel(xt) == 0) return NULL;
  TRY(load_f32(c, 0, &x));
  if ((st = load_f32(c, 1, &w)) != NULL || (st = load_f32(c, 2, &b)) != NULL) {
    free(x);
    free(w);
    return st;
  }
  for (s = 0; s < batch; s++)
    for (g = 0; g < (size_t)groups; g++) {
      size_t base = (s * ch + g * cpg) * inner;
      double mean, var, rstd;
      (group_stats)(x + base, cpg, inner, &mean, &var);
      rstd = 1.0 / sqrt(var + eps);
      for (j = 0; j < cpg; j++) {
        size_t ci = g * cpg + j;
        for (e = 0; e < inner; e++) {
          size_t at = base + j * inner + e;
          y[at] = (float)((x[at] - mean) * rstd * w[ci] + b[ci]);
        }
      }
    }
  free(x);
  free(w);
  free(b);
  return NULL;
}

/* --- reductions ---------------------------------------------------------- */

/* The window rules of a pool axis, as docs/operators.md gives them. Calls are
 * written `(pool_out_len)(...)`: a test's mutant of this file swaps a rule
 * (as for bn_eps_f). */

/* Outputs along an axis of `in` elements, padded p0 before and p1 after: the
 * window spans dil·(k−1)+1; with ceil_mode the last window may hang over the
 * end but must start inside the input or its leading padding (PyTorch).
 * -1 when the window does not fit. */
static int64_t pool_out_len(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t dil, int ceil_mode) {
  int64_t span = dil * (k - 1) + 1, padded = in + p0 + p1, out;
  if (in < 1 || padded < span) return -1;
  out = (ceil_mode ? (padded - span + s - 1) / s : (padded - span) / s) + 1;
  if (ceil_mode && (out - 1) * s >= in + p0) out--;
  return out;
}

/* Window o: the in-bounds taps first, first + dil, ... (`count` of them), and
 * its size counting padding, clipped to the padded end (`padded`). */
static void pool_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t dil,
                        int64_t* first, int64_t* count, int64_t* padded) {
  int64_t start = o * s - p0, end = start + dil * (k - 1) + 1, j, n = 0;
  *first = -1;
  for (j = 0; j < k; j++) {
    int64_t i = start + j * dil;
    if (i < 0 || i >= in) continue;
    if (*first < 0) *first = i;
    n++;
  }
  *count = n;
  if (end > in + p1) end = in + p1;
  *padded = (end - start + dil - 1) / dil;
}

/* An average's divisor from its window along both axes. */
static double pool_divisor(int64_t count, int64_t padded, int include_pad) {
  return (double)(include_pad ? padded : count);
}

/* Adaptive bin o of `in` into `out`: [floor(o·in/out), ceil((o+1)·in/out)). */
static int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return o * in / out; }
static int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

enum { POOL_MAX, POOL_AVG, POOL_ADAPTIVE };

/* vsdk.max_pool2d, vsdk.avg_pool2d, vsdk.adaptive_avg_pool2d over [N, C, H, W].
 * Max: NaN if the window holds one (PyTorch); padding never wins. */
static vsdk_status_t* k_pool2d(const vsdk_kernel_call_t* c, int kind) {
  int64_t k[2] = {1, 1}, s[2] = {1, 1}, dil[2] = {1, 1}, pads[4] = {0, 0, 0, 0}, size[2] = {1, 1};
  int64_t ceil_mode = 0, include_pad = 1, shape[4], in[2], out[2], a, o, plane, planes;
  int64_t *first[2] = {NULL, NULL}, *count[2] = {NULL, NULL}, *padded[2] = {NULL, NULL};
  int found;
  float *x, *y = (float*)out_data(c);
  vsdk_status_t* st = NULL;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  if (c->inputs[0].ndim != 4) return INVALID("%s: input must be [N, C, H, W]", c->kernel);
  if (kind == POOL_ADAPTIVE) {
    TRY(attr_ints(c, "output_size", 2, size, &found));
    if (!found || size[0] < 1 || size[1] < 1 || size[0] > INT32_MAX || size[1] > INT32_MAX)
      return INVALID("%s: `output_size` must be two sizes >= 1", c->kernel);
  } else {
    TRY(attr_ints(c, "kernel", 2, k, &found));
    if (!found) return INVALID("%s: `kernel` is required", c->kernel);
    TRY(attr_ints(c, "strides", 2, s, &found));
    TRY(attr_ints(c, "pads", 4, pads, &found));
    TRY(attr_int(c, "ceil_mode", 0, &ceil_mode));
    if (kind == POOL_MAX) TRY(attr_ints(c, "dilations", 2, dil, &found));
    if (kind == POOL_AVG) TRY(attr_int(c, "count_include_pad", 1, &include_pad));
    for (a = 0; a < 2; a++)
      if (k[a] < 1 || k[a] > INT32_MAX || s[a] < 1 || s[a] > INT32_MAX || dil[a] < 1 || dil[a] > INT32_MAX)
        return INVALID("%s: `kernel`, `strides` and `dilations` must lie in [1, 2^31)", c->kernel);
    for (a = 0; a < 4; a++)
      if (pads[a] < 0 || pads[a] > INT32_MAX) return INVALID("%s: `pads` must lie in [0, 2^31)", c->kernel);
  }
  for (a = 0; a < 2; a++) {
    in[a] = c->inputs[0].shape[2 + a];
    out[a] = kind == POOL_ADAPTIVE ? size[a] : (pool_out_len)(in[a], k[a], s[a], pads[a], pads[a + 2], dil[a], ceil_mode != 0);
    if (out[a] < 1 || in[a] < 1) return INVALID("%s: the window does not fit axis %d of the input", c->kernel, (int)(2 + a));
  }
  shape[0] = c->inputs[0].shape[0]; shape[1] = c->inputs[0].shape[1]; shape[2] = out[0]; shape[3] = out[1];
  TRY(check_output(c, F32, 4, shape));
  for (a = 0; a < 2 && st == NULL; a++) {
    first[a] = (int64_t*)malloc((size_t)out[a] * sizeof(int64_t));
    count[a] = (int64_t*)malloc((size_t)out[a] * sizeof(int64_t));
    padded[a] = (int64_t*)malloc((size_t)out[a] * sizeof(int64_t));
    if (!first[a] || !count[a] || !padded[a]) { st = OOM("%s: window tables", c->kernel); break; }
    for (o = 0; o < out[a]; o++) {
      if (kind == POOL_ADAPTIVE) {
        first[a][o] = (adaptive_start)(o, in[a], out[a]);
        count[a][o] = padded[a][o] = (adaptive_end)(o, in[a], out[a]) - first[a][o];
      } else {
        (pool_window)(o, in[a], k[a], s[a], pads[a], pads[a + 2], dil[a], &first[a][o], &count[a][o], &padded[a][o]);
      }
      if (count[a][o] < 1) st = INVALID("%s: window %lld of axis %d lies wholly in the padding", c->kernel, (long long)o, (int)(2 + a));
    }
  }
  if (st == NULL) st = load_f32(c, 0, &x);
  if (st == NULL) {
    planes = shape[0] * shape[1];
    for (plane = 0; plane < planes; plane++)
      for (o = 0; o < out[0] * out[1]; o++) {
        int64_t r = o / out[1], q = o % out[1], jr, jq;
        int64_t step0 = kind == POOL_MAX ? dil[0] : 1, step1 = kind == POOL_MAX ? dil[1] : 1;
        double acc = kind == POOL_MAX ? -INFINITY : 0.0;
        for (jr = 0; jr < count[0][r]; jr++)
          for (jq = 0; jq < count[1][q]; jq++) {
            float v = x[(plane * in[0] + first[0][r] + jr * step0) * in[1] + first[1][q] + jq * step1];
            if (kind != POOL_MAX) acc += v;
            else if (v != v || v > acc) acc = v; /* nothing compares above a NaN: it stays */
          }
        if (kind != POOL_MAX)
          acc /= (pool_divisor)(count[0][r], padded[0][r], include_pad != 0) *
                 (pool_divisor)(count[1][q], padded[1][q], include_pad != 0);
        y[plane * out[0] * out[1] + o] = (float)acc;
      }
    free(x);
  }
  for (a = 0; a < 2; a++) {
    free(first[a]);
    free(count[a]);
    free(padded[a]);
  }
  return st;
}

/* vsdk.sum, vsdk.mean over the `axes` list (keepdims: reduced axes kept as 1).
 * Sums in double, one rounding at the output. */
static vsdk_status_t* k_reduce(const vsdk_kernel_call_t* c, int mean) {
  const vsdk_attr_t* axes = find_attr(c, "axes");
  const vsdk_tensor_t* xt = &c->inputs[0];
  int reduced[MAX_RANK] = {0};
  int64_t keepdims = 0, shape[MAX_RANK], terms = 1;
  int32_t rank = xt->ndim, d, nd = 0;
  size_t n, e, outn = 1;
  float *x, *y = (float*)out_data(c);
  double* acc;
  uint64_t i;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(attr_int(c, "keepdims", 0, &keepdims));
  if (axes == NULL || axes->kind != VSDK_ATTR_INTS || axes->value.ints.len == 0 || rank < 1)
    return INVALID("%s: `axes` must list the axes to reduce", c->kernel);
  for (i = 0; i < axes->value.ints.len; i++) {
    int64_t ax = axes->value.ints.data[i];
    if (ax < -rank || ax >= rank) return INVALID("%s: axis %lld out of range", c->kernel, (long long)ax);
    if (ax < 0) ax += rank;
    if (reduced[ax]) return INVALID("%s: axis %lld appears twice", c->kernel, (long long)ax);
    reduced[ax] = 1;
  }
  for (d = 0; d < rank; d++) {
    if (reduced[d]) terms *= xt->shape[d];
    if (!reduced[d]) shape[nd++] = xt->shape[d];
    else if (keepdims) shape[nd++] = 1;
  }
  if (mean && terms == 0) return INVALID("%s: the mean over an empty axis", c->kernel);
  TRY(check_output(c, F32, nd, shape));
  outn = numel(&c->outputs[0]);
  TRY(load_f32(c, 0, &x));
  acc = (double*)calloc(outn ? outn : 1, sizeof(double));
  if (acc == NULL) {
    free(x);
    return OOM("%s: accumulators", c->kernel);
  }
  n = numel(xt);
  for (e = 0; e < n; e++) {
    /* The output index of element e: its coordinates on the kept axes. */
    size_t rest = e, o = 0, stride = 1;
    for (d = rank - 1; d >= 0; d--) {
      size_t coord = rest % (size_t)xt->shape[d];
      rest /= (size_t)xt->shape[d];
      if (!reduced[d]) {
        o += coord * stride;
        stride *= (size_t)xt->shape[d];
      }
    }
    acc[o] += x[e];
  }
  for (e = 0; e < outn; e++) y[e] = (float)(mean ? acc[e] / (double)terms : acc[e]);
  free(x);
  free(acc);
  return NULL;
}

/* --- attention ----------------------------------------------------------- */

/* Grouped key/value heads: query head h of hq reads key/value head h / (hq / hkv)
 * (PyTorch's enable_gqa, transformers' repeat_kv). Calls are written `(kv_head)(...)`
 * and `(causal_sees)(...)`: a test's mutant of this file swaps one (as bn_eps_f). */
static size_t kv_head(size_t h, size_t hq, size_t hkv) { return h / (hq / hkv); }

/* A causal row: query i sees key j when j <= i + offset (offset = the keys already
 * in a KV cache before the first query; 0 is PyTorch's is_causal). */
static int causal_sees(size_t i, size_t j, int64_t offset) { return (int64_t)j <= (int64_t)i + offset; }

/* vsdk.sdpa: softmax(scale * q k^T + mask) v over the last two axes; q [..., Hq, Lq, D],
 * k and v [..., Hkv, Lk, *]; the optional mask broadcasts to [..., Hq, Lq, Lk]. */
static vsdk_status_t* k_sdpa(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t *qt = &c->inputs[0], *kt = &c->inputs[1], *vt = &c->inputs[2];
  const vsdk_tensor_t* mt = c->num_inputs == 4 ? &c->inputs[3] : NULL;
  int32_t r = qt->ndim, d;
  size_t batch = 1, lq, lk, dk, dv, bi, kb, i, j, e, hq = 1, hkv = 1;
  size_t mstride[MAX_RANK];
  int64_t shape[MAX_RANK], offset = -1;
  double scale;
  float *q = NULL, *k = NULL, *v = NULL, *m = NULL, *y = (float*)out_data(c), *s;
  vsdk_status_t* st = NULL;
  TRY(need_inputs(c, 3, 4));
  TRY(need_f32(c));
  if (r < 2 || kt->ndim != r || vt->ndim != r) return INVALID("%s: q, k, v need one rank >= 2", c->kernel);
  if (r >= 3) {
    hq = (size_t)qt->shape[r - 3];
    hkv = (size_t)kt->shape[r - 3];
    if (hkv == 0 || hq % hkv != 0) return INVALID("%s: key/value heads must divide the query heads", c->kernel);
  }
  for (d = 0; d < r - 2; d++) {
    if ((d < r - 3 && kt->shape[d] != qt->shape[d]) || vt->shape[d] != kt->shape[d])
      return INVALID("%s: batch dimensions differ", c->kernel);
    batch *= (size_t)qt->shape[d];
  }
  lq = (size_t)qt->shape[r - 2];
  dk = (size_t)qt->shape[r - 1];
  lk = (size_t)kt->shape[r - 2];
  dv = (size_t)vt->shape[r - 1];
  if ((size_t)kt->shape[r - 1] != dk || (size_t)vt->shape[r - 2] != lk || lk == 0)
    return INVALID("%s: expected q [..., Lq, D], k [..., Lk, D], v [..., Lk, Dv]", c->kernel);
  TRY(attr_float(c, "scale", 1.0 / sqrt((double)(dk ? dk : 1)), &scale));
  TRY(attr_int(c, "causal_offset", -1, &offset));
  if (find_attr(c, "causal_offset") != NULL && offset < 0) return INVALID("%s: causal_offset must be >= 0", c->kernel);
  if (offset > (int64_t)lk) offset = (int64_t)lk; /* every key seen from there on; i + offset cannot overflow */
  /* The mask's stride along each logits axis [..., Lq, Lk]: 0 where it broadcasts. */
  if (mt != NULL) {
    size_t step = 1;
    if (mt->ndim > r) return INVALID("%s: the mask has a higher rank than the logits", c->kernel);
    for (d = r - 1; d >= 0; d--) {
      int32_t md = d - (r - mt->ndim);
      int64_t want = d == r - 1 ? (int64_t)lk : qt->shape[d];
      int64_t have = md >= 0 ? mt->shape[md] : 1;
      if (have != 1 && have != want) return INVALID("%s: the mask does not broadcast to the logits", c->kernel);
      mstride[d] = have == 1 ? 0 : step;
      step *= (size_t)have;
    }
  }
  memcpy(shape, qt->shape, (size_t)r * sizeof(int64_t));
  shape[r - 1] = (int64_t)dv;
  TRY(check_output(c, F32, r, shape));
  s = (float*)malloc(lk * sizeof(float));
  if (s == NULL) return OOM("%s: scratch", c->kernel);
  st = load_f32(c, 0, &q);
  if (st == NULL) st = load_f32(c, 1, &k);
  if (st == NULL) st = load_f32(c, 2, &v);
  if (st == NULL && mt != NULL) st = load_f32(c, 3, &m);
  for (bi = 0; st == NULL && bi < batch; bi++) {
    kb = (bi / hq) * hkv + (kv_head)(bi % hq, hq, hkv);
    /* The mask's row of batch index bi: bi unflattened over the leading axes. */
    size_t mrow = 0, rest = bi;
    for (d = r - 3; m != NULL && d >= 0; d--) {
      mrow += (rest % (size_t)qt->shape[d]) * mstride[d];
      rest /= (size_t)qt->shape[d];
    }
    for (i = 0; i < lq; i++) {
      const float* qi = q + (bi * lq + i) * dk;
      float mx = -INFINITY;
      double sum = 0.0;
      for (j = 0; j < lk; j++) {
        double dot = 0.0;
        for (e = 0; e < dk; e++) dot += (double)qi[e] * k[(kb * lk + j) * dk + e];
        dot *= scale;
        if (m != NULL) dot += m[mrow + i * mstride[r - 2] + j * mstride[r - 1]];
        s[j] = offset >= 0 && !(causal_sees)(i, j, offset) ? -INFINITY : (float)dot;
        mx = s[j] > mx ? s[j] : mx;
      }
      for (j = 0; j < lk; j++) sum += s[j] = expf(s[j] - mx);
      for (e = 0; e < dv; e++) {
        double acc = 0.0;
        for (j = 0; j < lk; j++) acc += (double)s[j] * v[(kb * lk + j) * dv + e];
        y[(bi * lq + i) * dv + e] = (float)(acc / sum);
      }
    }
  }
  free(s);
  free(q);
  free(k);
  free(v);
  free(m);
  return st;
}

/* The features of rotary pair i: (i, i + half) for the rotate-half layout of GPT-NeoX and
 * Llama, (2i, 2i + 1) for GPT-J's interleaved pairs. Called as `(rotary_pair)(...)`: a
 * test's mutant of this file swaps it (as bn_eps_f). */
static void rotary_pair(size_t i, size_t half, int interleaved, size_t* a, size_t* b) {
  *a = interleaved ? 2 * i : i;
  *b = interleaved ? 2 * i + 1 : i + half;
}

/* vsdk.rotary_embedding: x [..., L, D] turned pair by pair by cos, sin [L, half]; features
 * from 2·half on pass through. */
static vsdk_status_t* k_rotary(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* xt = &c->inputs[0];
  int32_t r = xt->ndim;
  size_t l, d, half, rows, row, i, n;
  int64_t interleaved = 0;
  float *x = NULL, *ct = NULL, *st_ = NULL, *y = (float*)out_data(c);
  vsdk_status_t* st = NULL;
  TRY(need_inputs(c, 3, 3));
  TRY(need_f32(c));
  TRY(attr_int(c, "interleaved", 0, &interleaved));
  if (r < 2 || c->inputs[1].ndim != 2 || c->inputs[2].ndim != 2 || c->inputs[2].shape[0] != c->inputs[1].shape[0] ||
      c->inputs[2].shape[1] != c->inputs[1].shape[1])
    return INVALID("%s: expected x [..., L, D], cos and sin [L, R/2]", c->kernel);
  l = (size_t)xt->shape[r - 2];
  d = (size_t)xt->shape[r - 1];
  half = (size_t)c->inputs[1].shape[1];
  if ((size_t)c->inputs[1].shape[0] != l || 2 * half > d || half == 0) return INVALID("%s: the tables do not fit x", c->kernel);
  TRY(check_output(c, F32, r, xt->shape));
  st = load_f32(c, 0, &x);
  if (st == NULL) st = load_f32(c, 1, &ct);
  if (st == NULL) st = load_f32(c, 2, &st_);
  n = numel(xt);
  rows = d ? n / d : 0;
  for (row = 0; st == NULL && row < rows; row++) {
    const float* xr = x + row * d;
    float* yr = y + row * d;
    const float* cr = ct + (row % l) * half;
    const float* sr = st_ + (row % l) * half;
    memcpy(yr, xr, d * sizeof(float));
    for (i = 0; i < half; i++) {
      size_t a, b;
      (rotary_pair)(i, half, interleaved != 0, &a, &b);
      yr[a] = (float)((double)xr[a] * cr[i] - (double)xr[b] * sr[i]);
      yr[b] = (float)((double)xr[b] * cr[i] + (double)xr[a] * sr[i]);
    }
  }
  free(x);
  free(ct);
  free(st_);
  return st;
}

/* --- resizes --------------------------------------------------------------- */

/* The cubic filter of Pillow and of PyTorch's antialiased bicubic, a = -0.5. */
static double cubic_half(double x) {
  const double a = -0.5;
  if (x < 0) x = -x;
  if (x < 1) return ((a + 2) * x - (a + 3)) * x * x + 1;
  if (x < 2) return (((x - 5) * x + 8) * x - 4) * a;
  return 0;
}

/* Pillow's Lanczos filter, a = 3: sinc(x) sinc(x / 3) on [-3, 3), with
 * sinc(x) = sin(pi x) / (pi x) computed as Pillow does (x * pi first). */
static double sinc(double x) {
  if (x == 0.0) return 1.0;
  x = x * 3.14159265358979323846;
  return sin(x) / x;
}

static double lanczos3(double x) {
  if (-3.0 <= x && x < 3.0) return sinc(x) * sinc(x / 3);
  return 0.0;
}

typedef double (*filter_fn)(double);

/* Antialiased taps of one axis (Pillow's precompute_coeffs) for a filter of
 * the given support at scale 1: for output i, weights w[i*ksize + j] of
 * source pixels first[i] + j, j < count[i]. */
static vsdk_status_t* aa_taps(const vsdk_kernel_call_t* c, int64_t in, int64_t out, double scale, filter_fn filter,
                              double filter_support, int64_t** first, int64_t** count, double** w, int64_t* ksize) {
  double filterscale = scale < 1.0 ? 1.0 : scale, support = filter_support * filterscale;
  double inv_filterscale = 1.0 / filterscale;
  int64_t i, j;
  *ksize = (int64_t)ceil(support) * 2 + 1;
  *first = (int64_t*)malloc((size_t)out * sizeof(int64_t));
  *count = (int64_t*)malloc((size_t)out * sizeof(int64_t));
  *w = (double*)calloc((size_t)(out * *ksize), sizeof(double));
  if (!*first || !*count || !*w) return OOM("%s: scratch", c->kernel);
  for (i = 0; i < out; i++) {
    double center = (i + 0.5) * scale, total = 0.0;
    int64_t lo = (int64_t)(center - support + 0.5), hi = (int64_t)(center + support + 0.5);
    if (lo < 0) lo = 0;
    if (hi > in) hi = in;
    (*first)[i] = lo;
    (*count)[i] = hi - lo;
    for (j = 0; j < hi - lo; j++) total += (*w)[i * *ksize + j] = filter((j + lo - center + 0.5) * inv_filterscale);
    if (total != 0.0)
      for (j = 0; j < hi - lo; j++) (*w)[i * *ksize + j] /= total;
  }
  return NULL;
}

/* vsdk.resize_pil_bicubic and vsdk.resize_pil_lanczos: Pillow's
 * Image.resize(size, BICUBIC or LANCZOS) on uint8 HWC. Fixed point with 22
 * fractional bits; one pass per axis, each clipped to uint8: horizontal first,
 * or vertical first when `vertical_first` is 1. With `alpha` = 1 (Pillow's LA
 * and RGBA) the colour channels are premultiplied by the last one before the
 * passes and divided by it after them; an unchanged size is a copy. */
#define PIL_BITS 22
static unsigned char clip8(int64_t acc) {
  acc >>= PIL_BITS;
  return (unsigned char)(acc < 0 ? 0 : acc > 255 ? 255 : acc);
}

static vsdk_status_t* pil_fixed(const vsdk_kernel_call_t* c, int64_t in, int64_t out, filter_fn filter,
                                double support, int64_t** first, int64_t** count, int32_t** k, int64_t* ksize) {
  double* w;
  int64_t i;
  TRY(aa_taps(c, in, out, (double)in / (double)out, filter, support, first, count, &w, ksize));
  *k = (int32_t*)malloc((size_t)(out * *ksize) * sizeof(int32_t));
  if (*k == NULL) return OOM("%s: scratch", c->kernel);
  for (i = 0; i < out * *ksize; i++) {
    double v = w[i] * (1 << PIL_BITS);
    (*k)[i] = (int32_t)(w[i] < 0 ? v - 0.5 : v + 0.5);
  }
  free(w);
  return NULL;
}

/* One 1-D pass over `lines` lines of `outs` outputs and C channels: element
 * (line l, tap t, channel ch) of `in` is at l * in_line + t * in_tap + ch, and
 * output o at l * out_line + o * out_step + ch (strides in bytes). */
static void pil_pass(const unsigned char* in, unsigned char* out, int64_t lines, int64_t outs, int64_t C,
                     int64_t in_line, int64_t in_tap, int64_t out_line, int64_t out_step, const int64_t* first,
                     const int64_t* count, const int32_t* k, int64_t ksize) {
  int64_t l, o, ch, j;
  for (l = 0; l < lines; l++)
    for (o = 0; o < outs; o++)
      for (ch = 0; ch < C; ch++) {
        int64_t acc = (int64_t)1 << (PIL_BITS - 1);
        for (j = 0; j < count[o]; j++) acc += (int64_t)in[l * in_line + (first[o] + j) * in_tap + ch] * k[o * ksize + j];
        out[l * out_line + o * out_step + ch] = clip8(acc);
      }
}

static vsdk_status_t* k_resize_pil(const vsdk_kernel_call_t* c, filter_fn filter, double support) {
  int64_t size[2], shape[3], H, W, C, OH, OW, kx_size, ky_size, vertical_first = 0, alpha = 0, p, ch;
  int64_t *fx, *nx, *fy, *ny;
  int32_t *kx, *ky;
  int found;
  unsigned char *src, *tmp, *dst = (unsigned char*)out_data(c);
  TRY(need_inputs(c, 1, 1));
  if (!is_u8(c->inputs[0].dtype) || c->inputs[0].ndim != 3) return UNSUPPORTED("%s: input must be uint8 [H, W, C]", c->kernel);
  TRY(attr_ints(c, "size", 2, size, &found));
  if (!found || size[0] < 1 || size[1] < 1) return INVALID("%s: attribute `size` [out_h, out_w] is required", c->kernel);
  TRY(attr_int(c, "vertical_first", 0, &vertical_first));
  if (vertical_first != 0 && vertical_first != 1) return INVALID("%s: attribute `vertical_first` must be 0 or 1", c->kernel);
  TRY(attr_int(c, "alpha", 0, &alpha));
  H = c->inputs[0].shape[0]; W = c->inputs[0].shape[1]; C = c->inputs[0].shape[2];
  if ((alpha != 0 && alpha != 1) || (alpha && C != 2 && C != 4))
    return INVALID("%s: attribute `alpha` must be 0, or 1 with 2 or 4 channels", c->kernel);
  OH = shape[0] = size[0];
  OW = shape[1] = size[1];
  shape[2] = C;
  {
    vsdk_dtype_t u8 = {VSDK_DTYPE_UINT, 8, 1};
    TRY(check_output(c, u8, 3, shape));
  }
  TRY(compact_copy(c, &c->inputs[0], (void**)&src));
  if (OH == H && OW == W) { /* Pillow returns a copy: no pass, no premultiplication */
    memcpy(dst, src, (size_t)(H * W * C));
    free(src);
    return NULL;
  }
  if (alpha) /* Convert.c rgbA2rgba / lA2la: MULDIV255 */
    for (p = 0; p < H * W; p++)
      for (ch = 0; ch + 1 < C; ch++) {
        unsigned int t = (unsigned int)src[p * C + ch] * src[p * C + C - 1] + 128;
        src[p * C + ch] = (unsigned char)(((t >> 8) + t) >> 8);
      }
  TRY(pil_fixed(c, W, OW, filter, support, &fx, &nx, &kx, &kx_size));
  TRY(pil_fixed(c, H, OH, filter, support, &fy, &ny, &ky, &ky_size));
  /* [H, W, C] -> [H, OW, C] -> [OH, OW, C], or through [OH, W, C]. */
  {
    uint64_t lines = (uint64_t)(vertical_first ? OH : H), len = (uint64_t)(vertical_first ? W : OW), n;
    if (!mul_within(lines, len, MAX_TENSOR_BYTES, &n) || !mul_within(n, (uint64_t)C, MAX_TENSOR_BYTES, &n))
      return INVALID("%s: the intermediate image exceeds the tensor limit", c->kernel);
    tmp = (unsigned char*)malloc((size_t)n + 1);
  }
  if (tmp == NULL) return OOM("%s: scratch", c->kernel);
  if (vertical_first) {
    pil_pass(src, tmp, W, OH, C, C, W * C, C, W * C, fy, ny, ky, ky_size);
    pil_pass(tmp, dst, OH, OW, C, W * C, C, OW * C, C, fx, nx, kx, kx_size);
  } else {
    pil_pass(src, tmp, H, OW, C, W * C, C, OW * C, C, fx, nx, kx, kx_size);
    pil_pass(tmp, dst, OW, OH, C, C, OW * C, C, OW * C, fy, ny, ky, ky_size);
  }
  if (alpha) /* Convert.c rgba2rgbA / la2lA: truncating division, clipped */
    for (p = 0; p < OH * OW; p++) {
      unsigned int a = dst[p * C + C - 1];
      if (a == 0 || a == 255) continue;
      for (ch = 0; ch + 1 < C; ch++) {
        unsigned int v = 255u * dst[p * C + ch] / a;
        dst[p * C + ch] = (unsigned char)(v > 255 ? 255 : v);
      }
    }
  free(fx); free(nx); free(kx); free(fy); free(ny); free(ky); free(src); free(tmp);
  return NULL;
}

/* Non-antialiased PyTorch bicubic taps: 4 clamped neighbours, a = -0.75. */
static void cubic_taps(int64_t in, int64_t i, double scale, int64_t idx[4], double w[4]) {
  const double A = -0.75;
  double real = scale * (i + 0.5) - 0.5, t;
  int64_t i0 = (int64_t)floor(real), j;
  if (i0 > in - 1) i0 = in - 1;
  t = real - (double)i0;
  t = t < 0 ? 0 : t > 1 ? 1 : t;
  w[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
  w[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
  w[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
  w[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
  for (j = 0; j < 4; j++) {
    int64_t k = i0 - 1 + j;
    idx[j] = k < 0 ? 0 : k > in - 1 ? in - 1 : k;
  }
}

/* Taps of one axis in the general (first, count, weights) form. With antialias,
 * an axis whose length does not change is copied, whatever `scale` says (PyTorch's
 * CPU kernel skips that pass: scale_factor with floor(in * s) == in is an identity). */
static vsdk_status_t* axis_taps(const vsdk_kernel_call_t* c, int64_t in, int64_t out, double scale, int antialias,
                                int64_t** first, int64_t** count, double** w, int64_t** idx, int64_t* ksize) {
  int64_t i, j;
  if (antialias && in == out) {
    *ksize = 1;
    *first = (int64_t*)malloc((size_t)out * sizeof(int64_t) + 1);
    *count = (int64_t*)malloc((size_t)out * sizeof(int64_t) + 1);
    *w = (double*)malloc((size_t)out * sizeof(double) + 1);
    *idx = (int64_t*)malloc((size_t)out * sizeof(int64_t) + 1);
    if (!*first || !*count || !*w || !*idx) return OOM("%s: scratch", c->kernel);
    for (i = 0; i < out; i++) {
      (*first)[i] = (*idx)[i] = i;
      (*count)[i] = 1;
      (*w)[i] = 1.0;
    }
    return NULL;
  }
  if (antialias) {
    TRY(aa_taps(c, in, out, scale, cubic_half, 2.0, first, count, w, ksize));
    *idx = (int64_t*)malloc((size_t)(out * *ksize) * sizeof(int64_t));
    if (*idx == NULL) return OOM("%s: scratch", c->kernel);
    for (i = 0; i < out; i++)
      for (j = 0; j < *ksize; j++) (*idx)[i * *ksize + j] = (*first)[i] + j;
    return NULL;
  }
  *ksize = 4;
  *first = (int64_t*)malloc((size_t)out * sizeof(int64_t));
  *count = (int64_t*)malloc((size_t)out * sizeof(int64_t));
  *w = (double*)malloc((size_t)out * 4 * sizeof(double));
  *idx = (int64_t*)malloc((size_t)out * 4 * sizeof(int64_t));
  if (!*first || !*count || !*w || !*idx) return OOM("%s: scratch", c->kernel);
  for (i = 0; i < out; i++) {
    (*count)[i] = 4;
    cubic_taps(in, i, scale, *idx + i * 4, *w + i * 4);
  }
  return NULL;
}

/* vsdk.resize_bicubic: PyTorch F.interpolate(mode="bicubic", align_corners=False)
 * on NCHW float32, `size` or `scale_factor`, antialias 0 or 1. */
static vsdk_status_t* k_resize_bicubic(const vsdk_kernel_call_t* c) {
  int64_t size[2], shape[4], N, C, H, W, OH, OW, aa, p, y, x, j;
  double sf[2], sh, sw;
  int has_size;
  const vsdk_attr_t* sfa = find_attr(c, "scale_factor");
  int64_t *fx, *nx, *ix, *fy, *ny, *iy, ksx, ksy;
  double *wx, *wy;
  float *src, *tmp, *dst = (float*)out_data(c);
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  if (c->inputs[0].ndim != 4) return INVALID("%s: input must be [N, C, H, W]", c->kernel);
  N = c->inputs[0].shape[0]; C = c->inputs[0].shape[1]; H = c->inputs[0].shape[2]; W = c->inputs[0].shape[3];
  TRY(attr_ints(c, "size", 2, size, &has_size));
  TRY(attr_int(c, "antialias", 0, &aa));
  if (has_size == (sfa != NULL)) return INVALID("%s: give exactly one of `size` and `scale_factor`", c->kernel);
  if (has_size) {
    OH = size[0];
    OW = size[1];
    sh = (double)H / (double)OH;
    sw = (double)W / (double)OW;
  } else {
    if (sfa->kind != VSDK_ATTR_FLOATS || sfa->value.floats.len != 2) return INVALID("%s: `scale_factor` is 2 floats", c->kernel);
    sf[0] = sfa->value.floats.data[0];
    sf[1] = sfa->value.floats.data[1];
    OH = (int64_t)floor((double)H * sf[0]); /* PyTorch: floor(in * s), coordinates use 1/s */
    OW = (int64_t)floor((double)W * sf[1]);
    sh = 1.0 / sf[0];
    sw = 1.0 / sf[1];
  }
  shape[0] = N; shape[1] = C; shape[2] = OH; shape[3] = OW;
  TRY(check_output(c, F32, 4, shape));
  TRY(axis_taps(c, W, OW, sw, (int)aa, &fx, &nx, &wx, &ix, &ksx));
  TRY(axis_taps(c, H, OH, sh, (int)aa, &fy, &ny, &wy, &iy, &ksy));
  TRY(load_f32(c, 0, &src));
  {
    uint64_t n;
    if (!mul_within((uint64_t)(N * C), (uint64_t)H, MAX_TENSOR_BYTES, &n) || !mul_within(n, (uint64_t)OW, MAX_TENSOR_BYTES / sizeof(float), &n))
      return INVALID("%s: the intermediate image exceeds the tensor limit", c->kernel);
    tmp = (float*)malloc((size_t)n * sizeof(float) + 1);
  }
  if (tmp == NULL) return OOM("%s: scratch", c->kernel);
  for (p = 0; p < N * C; p++) {
    for (y = 0; y < H; y++)
      for (x = 0; x < OW; x++) {
        double acc = 0;
        for (j = 0; j < nx[x]; j++) acc += wx[x * ksx + j] * src[(p * H + y) * W + ix[x * ksx + j]];
        tmp[(p * H + y) * OW + x] = (float)acc;
      }
    for (y = 0; y < OH; y++)
      for (x = 0; x < OW; x++) {
        double acc = 0;
        for (j = 0; j < ny[y]; j++) acc += wy[y * ksy + j] * tmp[(p * H + iy[y * ksy + j]) * OW + x];
        dst[(p * OH + y) * OW + x] = (float)acc;
      }
  }
  free(fx); free(nx); free(ix); free(wx); free(fy); free(ny); free(iy); free(wy); free(src); free(tmp);
  return NULL;
}

/* The output size of vsdk.resize_bilinear or vsdk.resize_nearest on [N, C, H, W], from
 * exactly one of `size` and `scale_factor` as vsdk.resize_bicubic: out = size, or
 * floor(in * s) with `scale_factor` (`*factor` set, its values in sf). Checks the
 * output's shape. */
static vsdk_status_t* resize_out_size(const vsdk_kernel_call_t* c, int64_t out[2], double sf[2], int* factor) {
  const vsdk_tensor_t* x = &c->inputs[0];
  const vsdk_attr_t* sfa = find_attr(c, "scale_factor");
  int64_t shape[4];
  int has_size, a;
  if (x->ndim != 4) return INVALID("%s: input must be [N, C, H, W]", c->kernel);
  if (x->shape[2] < 1 || x->shape[3] < 1) return INVALID("%s: input has an empty spatial dimension", c->kernel);
  TRY(attr_ints(c, "size", 2, out, &has_size));
  if (has_size == (sfa != NULL)) return INVALID("%s: give exactly one of `size` and `scale_factor`", c->kernel);
  if (!has_size && (sfa->kind != VSDK_ATTR_FLOATS || sfa->value.floats.len != 2))
    return INVALID("%s: `scale_factor` is 2 floats", c->kernel);
  *factor = !has_size;
  for (a = 0; a < 2; a++) {
    if (has_size) {
      if (out[a] < 1) return INVALID("%s: `size` must be two sizes >= 1", c->kernel);
      sf[a] = 0.0;
    } else {
      double s = sfa->value.floats.data[a], o;
      if (!(s > 0.0) || isinf(s)) return INVALID("%s: `scale_factor` must be finite and > 0", c->kernel);
      o = floor((double)x->shape[2 + a] * s); /* PyTorch: floor(in * s), coordinates use 1/s */
      if (o < 1.0) return INVALID("%s: `scale_factor` gives an empty output", c->kernel);
      if (o > (double)MAX_TENSOR_BYTES) return INVALID("%s: `scale_factor` gives an output beyond the tensor limit", c->kernel);
      out[a] = (int64_t)o;
      sf[a] = s;
    }
  }
  shape[0] = x->shape[0]; shape[1] = x->shape[1]; shape[2] = out[0]; shape[3] = out[1];
  return check_output(c, F32, 4, shape);
}

/* The source coordinate of output index i on an axis of `in` pixels resized to `out`
 * (docs/operators.md, vsdk.resize_bilinear@1): an axis whose length does not change
 * is copied (i itself, whatever the scale); align_corners maps the corner pixels'
 * centres onto each other; otherwise half-pixel centres, clamped at 0. Called as
 * `(bilinear_source)(...)` so that a test's mutant can swap it (see pool_out_len). */
static double bilinear_source(int64_t i, int64_t in, int64_t out, double scale, int align_corners) {
  double src;
  if (out == in) return (double)i;
  if (align_corners) return out > 1 ? (double)(in - 1) / (double)(out - 1) * (double)i : 0.0;
  src = scale * ((double)i + 0.5) - 0.5;
  return src < 0.0 ? 0.0 : src;
}

/* The two taps of every output index of one axis: sources idx[2i], idx[2i + 1] with
 * weights w[2i] = 1 - lambda, w[2i + 1] = lambda (one tap of weight 1 where both are
 * the same pixel). */
static vsdk_status_t* bilinear_axis(const vsdk_kernel_call_t* c, int64_t in, int64_t out, double scale, int align_corners,
                                    int64_t** idx, double** w) {
  int64_t i;
  *idx = (int64_t*)malloc((size_t)out * 2 * sizeof(int64_t));
  *w = (double*)malloc((size_t)out * 2 * sizeof(double));
  if (*idx == NULL || *w == NULL) {
    free(*idx);
    free(*w);
    *idx = NULL;
    *w = NULL;
    return OOM("%s: scratch", c->kernel);
  }
  for (i = 0; i < out; i++) {
    double src = (bilinear_source)(i, in, out, scale, align_corners), lambda;
    int64_t i0 = (int64_t)floor(src), i1;
    /* Kept inside the input whatever the rule says (a mutant's coordinate may
     * leave it): lambda then extrapolates from the edge pixels. */
    if (i0 > in - 1) i0 = in - 1;
    if (i0 < 0) i0 = 0;
    i1 = i0 + 1 < in ? i0 + 1 : in - 1;
    lambda = src - (double)i0;
    (*idx)[2 * i] = i0;
    (*idx)[2 * i + 1] = i1;
    (*w)[2 * i] = i1 == i0 ? 1.0 : 1.0 - lambda;
    (*w)[2 * i + 1] = i1 == i0 ? 0.0 : lambda;
  }
  return NULL;
}

/* vsdk.resize_bilinear: PyTorch F.interpolate(mode="bilinear", antialias=False) on NCHW
 * float32, `size` or `scale_factor`, align_corners 0 or 1. Coordinates and weights in
 * double; a tap of weight 0 is not read (an infinity beside a copied pixel stays out). */
static vsdk_status_t* k_resize_bilinear(const vsdk_kernel_call_t* c) {
  int64_t out[2], N, C, H, W, OH, OW, ac, p, y, x, u, v;
  int64_t *iy = NULL, *ix = NULL;
  double sf[2], *wy = NULL, *wx = NULL;
  int factor;
  float *src, *dst = (float*)out_data(c);
  vsdk_status_t* st;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(attr_int(c, "align_corners", 0, &ac));
  if (ac != 0 && ac != 1) return INVALID("%s: attribute `align_corners` must be 0 or 1", c->kernel);
  TRY(resize_out_size(c, out, sf, &factor));
  N = c->inputs[0].shape[0]; C = c->inputs[0].shape[1]; H = c->inputs[0].shape[2]; W = c->inputs[0].shape[3];
  OH = out[0];
  OW = out[1];
  if (N * C == 0) return NULL;
  TRY(bilinear_axis(c, H, OH, factor ? 1.0 / sf[0] : (double)H / (double)OH, (int)ac, &iy, &wy));
  if ((st = bilinear_axis(c, W, OW, factor ? 1.0 / sf[1] : (double)W / (double)OW, (int)ac, &ix, &wx)) != NULL) {
    free(iy);
    free(wy);
    return st;
  }
  if ((st = load_f32(c, 0, &src)) != NULL) {
    free(iy); free(wy); free(ix); free(wx);
    return st;
  }
  for (p = 0; p < N * C; p++)
    for (y = 0; y < OH; y++)
      for (x = 0; x < OW; x++) {
        double acc = 0.0;
        for (u = 0; u < 2; u++) {
          if (wy[2 * y + u] == 0.0) continue;
          for (v = 0; v < 2; v++) {
            if (wx[2 * x + v] == 0.0) continue;
            acc += wy[2 * y + u] * wx[2 * x + v] * src[(p * H + iy[2 * y + u]) * W + ix[2 * x + v]];
          }
        }
        dst[(p * OH + y) * OW + x] = (float)acc;
      }
  free(iy); free(wy); free(ix); free(wx); free(src);
  return NULL;
}

/* The input index output index i reads on an axis of `in` pixels resized to `out`
 * (docs/operators.md, vsdk.resize_nearest@1), in PyTorch's float32 arithmetic:
 * `scale` is a float32; nearest (exact = 0) reads i on an unchanged axis and i / 2 on
 * a doubled one, else floor(fl32(fl32(i) * scale)); nearest-exact (exact = 1) reads
 * floor(fl32((i + 0.5) * scale)) with the product in double; both at most in - 1.
 * Called as `(nearest_source)(...)` so that a test's mutant can swap it (see
 * pool_out_len). */
static int64_t nearest_source(int64_t i, int64_t in, int64_t out, float scale, int exact) {
  float src;
  int64_t j;
  if (!exact && out == in) return i;
  if (!exact && out == 2 * in) return i / 2;
  if (exact) src = (float)(((double)i + 0.5) * (double)scale);
  else src = (float)i * scale;
  j = (int64_t)floorf(src);
  return j < in - 1 ? j : in - 1;
}

/* vsdk.resize_nearest: PyTorch F.interpolate(mode="nearest" or "nearest-exact") on NCHW
 * float32, `size` or `scale_factor`, exact 0 or 1. A copy of input elements. */
static vsdk_status_t* k_resize_nearest(const vsdk_kernel_call_t* c) {
  int64_t out[2], N, C, H, W, OH, OW, exact, p, y, x, j;
  int64_t *iy, *ix;
  double sf[2];
  float sh, sw;
  int factor;
  float *src, *dst = (float*)out_data(c);
  vsdk_status_t* st;
  TRY(need_inputs(c, 1, 1));
  TRY(need_f32(c));
  TRY(attr_int(c, "exact", 0, &exact));
  if (exact != 0 && exact != 1) return INVALID("%s: attribute `exact` must be 0 or 1", c->kernel);
  TRY(resize_out_size(c, out, sf, &factor));
  N = c->inputs[0].shape[0]; C = c->inputs[0].shape[1]; H = c->inputs[0].shape[2]; W = c->inputs[0].shape[3];
  OH = out[0];
  OW = out[1];
  if (N * C == 0) return NULL;
  /* PyTorch's scales: in / out divided in float32, or 1 / s in double then rounded. */
  sh = factor ? (float)(1.0 / sf[0]) : (float)H / (float)OH;
  sw = factor ? (float)(1.0 / sf[1]) : (float)W / (float)OW;
  iy = (int64_t*)malloc((size_t)OH * sizeof(int64_t));
  ix = (int64_t*)malloc((size_t)OW * sizeof(int64_t));
  if (iy == NULL || ix == NULL) {
    free(iy);
    free(ix);
    return OOM("%s: scratch", c->kernel);
  }
  for (j = 0; j < OH; j++) {
    iy[j] = (nearest_source)(j, H, OH, sh, (int)exact);
    iy[j] = iy[j] < 0 ? 0 : iy[j] > H - 1 ? H - 1 : iy[j]; /* inside the input whatever the rule says */
  }
  for (j = 0; j < OW; j++) {
    ix[j] = (nearest_source)(j, W, OW, sw, (int)exact);
    ix[j] = ix[j] < 0 ? 0 : ix[j] > W - 1 ? W - 1 : ix[j];
  }
  if ((st = load_f32(c, 0, &src)) != NULL) {
    free(iy);
    free(ix);
    return st;
  }
  for (p = 0; p < N * C; p++)
    for (y = 0; y < OH; y++)
      for (x = 0; x < OW; x++) dst[(p * OH + y) * OW + x] = src[(p * H + iy[y]) * W + ix[x]];
  free(iy); free(ix); free(src);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Sparse voxel tensors (docs/operators.md, "Sparse voxel tensors")          */
/* ------------------------------------------------------------------------- */

/* Coordinates (b, x, y, z) in [0, 2^30), each voxel once. A device port does
 * the same with a hash table in device memory: one thread per voxel inserts
 * (atomic compare-and-swap on the key), then one thread per (voxel, offset)
 * looks its neighbour up. Here: open addressing, linear probing. */
typedef struct {
  int32_t* keys; /* 4 per slot; b = -1 marks an empty slot */
  int64_t* rows;
  size_t mask;
} voxel_hash;

static size_t voxel_slot(const int32_t* v, size_t mask) {
  uint64_t h = ((uint64_t)(uint32_t)v[0] << 32 | (uint32_t)v[1]) * 0x9E3779B97F4A7C15ull;
  h ^= ((uint64_t)(uint32_t)v[2] << 32 | (uint32_t)v[3]) * 0xC2B2AE3D27D4EB4Full;
  h ^= h >> 31;
  return (size_t)(h * 0x94D049BB133111EBull >> 17) & mask;
}

static int64_t voxel_find(const voxel_hash* h, const int32_t* v) {
  size_t s = voxel_slot(v, h->mask);
  for (;; s = (s + 1) & h->mask) {
    const int32_t* k = h->keys + 4 * s;
    if (k[0] < 0) return -1;
    if (k[0] == v[0] && k[1] == v[1] && k[2] == v[2] && k[3] == v[3]) return h->rows[s];
  }
}

static void voxel_hash_free(voxel_hash* h) {
  free(h->keys);
  free(h->rows);
}

/* Loads input `i` as compact int32 coordinates [N, 4], checked, into `*coords`
 * (caller frees), and hashes them when `h` is not NULL. */
static vsdk_status_t* load_voxels(const vsdk_kernel_call_t* c, uint64_t i, int32_t** coords, size_t* n, voxel_hash* h) {
  const vsdk_tensor_t* t = &c->inputs[i];
  size_t r, slots = 16;
  if (!is_dtype(t->dtype, VSDK_DTYPE_INT, 32) || t->ndim != 2 || t->shape[1] != 4)
    return INVALID("%s: input %llu must be coords [N, 4] int32", c->kernel, (unsigned long long)i);
  *n = (size_t)t->shape[0];
  TRY(compact_copy(c, t, (void**)coords));
  for (r = 0; r < 4 * *n; r++) {
    if ((*coords)[r] < 0 || (*coords)[r] >= (1 << 30)) {
      int32_t bad = (*coords)[r];
      free(*coords);
      return INVALID("%s: coords row %zu has %d: every entry lies in [0, 2^30)", c->kernel, r / 4, bad);
    }
  }
  if (h == NULL) return NULL;
  while (slots < 2 * *n) slots *= 2;
  h->mask = slots - 1;
  h->keys = (int32_t*)malloc(slots * 4 * sizeof(int32_t));
  h->rows = (int64_t*)malloc(slots * sizeof(int64_t));
  if (h->keys == NULL || h->rows == NULL) {
    voxel_hash_free(h);
    free(*coords);
    return OOM("%s: cannot allocate a hash of %zu slots", c->kernel, slots);
  }
  memset(h->keys, 0xFF, slots * 4 * sizeof(int32_t));
  for (r = 0; r < *n; r++) {
    const int32_t* v = *coords + 4 * r;
    size_t s = voxel_slot(v, h->mask);
    for (;; s = (s + 1) & h->mask) {
      int32_t* k = h->keys + 4 * s;
      if (k[0] < 0) break;
      if (k[0] == v[0] && k[1] == v[1] && k[2] == v[2] && k[3] == v[3]) {
        int64_t first = h->rows[s];
        voxel_hash_free(h);
        free(*coords);
        return INVALID("%s: coords rows %lld and %zu are the same voxel", c->kernel, (long long)first, r);
      }
    }
    memcpy(h->keys + 4 * s, v, 4 * sizeof(int32_t));
    h->rows[s] = (int64_t)r;
  }
  return NULL;
}

/* The small rules a port gets wrong, one function each. (A name defined in
 * parentheses is not expanded by a function-like macro of the same name: the
 * deliberately broken test builds, testing/broken-providers/c/mutant_*.c,
 * replace the calls and leave these definitions unused.) */

/* Offset k of the 3x3x3 neighbourhood: k = 9(dx+1) + 3(dy+1) + (dz+1), z fastest. */
static void(neighbour_offset)(int k, int32_t d[3]) {
  d[0] = k / 9 - 1;
  d[1] = k / 3 % 3 - 1;
  d[2] = k % 3 - 1;
}

/* Element (k, c, o) of a [27, Cin, Cout] weight. */
static float(conv_weight)(const float* w, int k, size_t c, size_t o, size_t cin, size_t cout) {
  return w[((size_t)k * cin + c) * cout + o];
}

/* The voxel at `v`'s row, or -1 if inactive (a coordinate may be 0: nothing clamps). */
static int64_t(neighbour_row)(const voxel_hash* h, const int32_t* v) { return voxel_find(h, v); }

/* A segment's mean from its sum and row count; 0 for a segment with no rows. */
static float(segment_mean_of)(double sum, size_t count) { return count ? (float)(sum / (double)count) : 0.0f; }

/* The source row of a gather's output row r. */
static size_t(gather_row)(const int32_t* index, size_t r) { return (size_t)index[r]; }

/* vsdk.sparse_conv3d: submanifold, 3x3x3, out[i] = b + sum over active
 * neighbours j at offset k = 9(dx+1) + 3(dy+1) + (dz+1) of feats[j] . w[k]. */
static vsdk_status_t* k_sparse_conv3d(const vsdk_kernel_call_t* c) {
  float *x, *w, *b = NULL, *y = (float*)out_data(c);
  int32_t* coords;
  voxel_hash h;
  size_t n, cin, cout, i, o, ch;
  int k;
  int64_t shape[2];
  TRY(need_inputs(c, 3, 4));
  if (!is_f32(c->inputs[0].dtype) || !is_f32(c->inputs[2].dtype) || (c->num_inputs == 4 && !is_f32(c->inputs[3].dtype)))
    return UNSUPPORTED("%s: this template runs float32 features and weights", c->kernel);
  if (c->inputs[0].ndim != 2 || c->inputs[2].ndim != 3 || c->inputs[2].shape[0] != 27 ||
      c->inputs[2].shape[1] != c->inputs[0].shape[1])
    return INVALID("%s: expected feats [N, Cin] and w [27, Cin, Cout]", c->kernel);
  cin = (size_t)c->inputs[0].shape[1];
  cout = (size_t)c->inputs[2].shape[2];
  if (c->num_inputs == 4 && (c->inputs[3].ndim != 1 || (size_t)c->inputs[3].shape[0] != cout))
    return INVALID("%s: bias must have shape [Cout]", c->kernel);
  shape[0] = c->inputs[0].shape[0];
  shape[1] = (int64_t)cout;
  TRY(check_output(c, F32, 2, shape));
  TRY(load_voxels(c, 1, &coords, &n, &h));
  if (n != (size_t)c->inputs[0].shape[0]) {
    voxel_hash_free(&h);
    free(coords);
    return INVALID("%s: feats has %lld rows, coords %zu", c->kernel, (long long)c->inputs[0].shape[0], n);
  }
  TRY(load_f32(c, 0, &x));
  TRY(load_f32(c, 2, &w));
  if (c->num_inputs == 4) TRY(load_f32(c, 3, &b));
  for (i = 0; i < n; i++) {
    int64_t nb[27]; /* the row of each neighbour, -1 where inactive */
    for (k = 0; k < 27; k++) {
      int32_t at[4], d[3];
      neighbour_offset(k, d);
      at[0] = coords[4 * i];
      at[1] = coords[4 * i + 1] + d[0];
      at[2] = coords[4 * i + 2] + d[1];
      at[3] = coords[4 * i + 3] + d[2];
      nb[k] = neighbour_row(&h, at);
    }
    for (o = 0; o < cout; o++) {
      double acc = b ? b[o] : 0.0;
      for (k = 0; k < 27; k++) {
        if (nb[k] < 0) continue;
        for (ch = 0; ch < cin; ch++) acc += (double)x[(size_t)nb[k] * cin + ch] * conv_weight(w, k, ch, o, cin, cout);
      }
      y[i * cout + o] = (float)acc;
    }
  }
  voxel_hash_free(&h);
  free(coords);
  free(x);
  free(w);
  free(b);
  return NULL;
}

static int voxel_cmp(const void* a, const void* b) {
  const int32_t *p = (const int32_t*)a, *q = (const int32_t*)b;
  int d;
  for (d = 0; d < 4; d++)
    if (p[d] != q[d]) return p[d] < q[d] ? -1 : 1;
  return 0;
}

/* The sorted distinct parents (b, x/2, y/2, z/2) of the coordinates (caller
 * frees); `voxels` must be their number. */
static vsdk_status_t* parents_of(const vsdk_kernel_call_t* c, int32_t** coords, size_t* n, int32_t** parents,
                                 size_t* count) {
  voxel_hash h;
  int64_t voxels;
  size_t i, m = 0;
  int32_t* p;
  TRY(need_inputs(c, 1, 1));
  TRY(attr_int(c, "voxels", -1, &voxels));
  if (voxels < 0) return INVALID("%s: `voxels` (the number of distinct parents) is required", c->kernel);
  TRY(load_voxels(c, 0, coords, n, &h)); /* hashed only to refuse a voxel given twice */
  voxel_hash_free(&h);
  p = (int32_t*)malloc(*n ? *n * 4 * sizeof(int32_t) : 1);
  if (p == NULL) {
    free(*coords);
    return OOM("%s: cannot allocate %zu parents", c->kernel, *n);
  }
  for (i = 0; i < 4 * *n; i++) p[i] = i % 4 ? (*coords)[i] / 2 : (*coords)[i];
  qsort(p, *n, 4 * sizeof(int32_t), voxel_cmp);
  for (i = 0; i < *n; i++)
    if (m == 0 || voxel_cmp(p + 4 * i, p + 4 * (m - 1)) != 0) memmove(p + 4 * m++, p + 4 * i, 4 * sizeof(int32_t));
  if ((int64_t)m != voxels) {
    free(p);
    free(*coords);
    return INVALID("%s: the coordinates have %zu distinct parents; the call's `voxels` is %lld", c->kernel, m,
                   (long long)voxels);
  }
  *parents = p;
  *count = m;
  return NULL;
}

static vsdk_status_t* k_sparse_downsample(const vsdk_kernel_call_t* c, int index) {
  int32_t *coords = NULL, *parents = NULL, *y = (int32_t*)out_data(c);
  size_t n = 0, m = 0, i;
  int64_t shape[2];
  static const vsdk_dtype_t I32 = {VSDK_DTYPE_INT, 32, 1};
  TRY(parents_of(c, &coords, &n, &parents, &m));
  shape[0] = index ? (int64_t)n : (int64_t)m;
  shape[1] = 4;
  {
    vsdk_status_t* st = check_output(c, I32, index ? 1 : 2, shape);
    if (st != NULL) {
      free(coords);
      free(parents);
      return st;
    }
  }
  if (!index) {
    memcpy(y, parents, m * 4 * sizeof(int32_t));
  } else {
    for (i = 0; i < n; i++) {
      int32_t v[4];
      const int32_t* found;
      v[0] = coords[4 * i];
      v[1] = coords[4 * i + 1] / 2;
      v[2] = coords[4 * i + 2] / 2;
      v[3] = coords[4 * i + 3] / 2;
      found = (const int32_t*)bsearch(v, parents, m, 4 * sizeof(int32_t), voxel_cmp);
      y[i] = (int32_t)((found - parents) / 4);
    }
  }
  free(coords);
  free(parents);
  return NULL;
}

/* An int32 index [N] whose entries lie in [0, rows) (caller frees). */
static vsdk_status_t* load_index(const vsdk_kernel_call_t* c, uint64_t at, size_t rows, int32_t** idx, size_t* n) {
  const vsdk_tensor_t* t = &c->inputs[at];
  size_t i;
  if (!is_dtype(t->dtype, VSDK_DTYPE_INT, 32) || t->ndim != 1) return INVALID("%s: index must be [N] int32", c->kernel);
  *n = (size_t)t->shape[0];
  TRY(compact_copy(c, t, (void**)idx));
  for (i = 0; i < *n; i++)
    if ((*idx)[i] < 0 || (size_t)(*idx)[i] >= rows) {
      int32_t bad = (*idx)[i];
      free(*idx);
      return INVALID("%s: index[%zu] is %d: rows are 0..%zu", c->kernel, i, bad, rows);
    }
  return NULL;
}

/* vsdk.segment_mean: out[m] = mean of the rows i with index[i] = m (0 if none). */
static vsdk_status_t* k_segment_mean(const vsdk_kernel_call_t* c) {
  float *x, *y = (float*)out_data(c);
  int32_t* idx;
  int64_t segments, shape[2];
  size_t n, cols, i, ch;
  double* sums;
  size_t* counts;
  TRY(need_inputs(c, 2, 2));
  if (!is_f32(c->inputs[0].dtype)) return UNSUPPORTED("%s: this template runs float32", c->kernel);
  if (c->inputs[0].ndim != 2) return INVALID("%s: x must be [N, C]", c->kernel);
  TRY(attr_int(c, "segments", -1, &segments));
  if (segments < 0) return INVALID("%s: `segments` is required", c->kernel);
  cols = (size_t)c->inputs[0].shape[1];
  shape[0] = segments;
  shape[1] = (int64_t)cols;
  TRY(check_output(c, F32, 2, shape));
  TRY(load_index(c, 1, (size_t)segments, &idx, &n));
  if (n != (size_t)c->inputs[0].shape[0]) {
    free(idx);
    return INVALID("%s: index must give one segment per row of x", c->kernel);
  }
  sums = (double*)calloc((size_t)segments * cols + 1, sizeof(double));
  counts = (size_t*)calloc((size_t)segments + 1, sizeof(size_t));
  if (sums == NULL || counts == NULL) {
    free(sums);
    free(counts);
    free(idx);
    return OOM("%s: cannot allocate the sums", c->kernel);
  }
  TRY(load_f32(c, 0, &x));
  for (i = 0; i < n; i++) {
    counts[idx[i]]++;
    for (ch = 0; ch < cols; ch++) sums[(size_t)idx[i] * cols + ch] += x[i * cols + ch];
  }
  for (i = 0; i < (size_t)segments * cols; i++) y[i] = segment_mean_of(sums[i], counts[i / cols]);
  free(sums);
  free(counts);
  free(idx);
  free(x);
  return NULL;
}

/* vsdk.gather_rows (out[i] = x[index[i]]) and vsdk.repeat_rows (out[r] =
 * x[r / times]): element bytes copied, any dtype. */
static vsdk_status_t* k_rows(const vsdk_kernel_call_t* c, int gather) {
  const vsdk_tensor_t* t = &c->inputs[0];
  char *src, *dst = (char*)out_data(c);
  int32_t* idx = NULL;
  int64_t times = 0, shape[2];
  size_t rows, n, r, row_bytes;
  TRY(need_inputs(c, gather ? 2 : 1, gather ? 2 : 1));
  if (t->ndim != 2) return INVALID("%s: x must be [rows, C]", c->kernel);
  rows = (size_t)t->shape[0];
  row_bytes = (size_t)t->shape[1] * elem_size(t);
  if (gather) {
    TRY(load_index(c, 1, rows, &idx, &n));
  } else {
    TRY(attr_int(c, "times", 0, &times));
    if (times < 1) return INVALID("%s: `times` must be >= 1", c->kernel);
    n = rows * (size_t)times;
  }
  shape[0] = (int64_t)n;
  shape[1] = t->shape[1];
  {
    vsdk_status_t* st = same_dtype_out(c, 2, shape);
    if (st == NULL) st = compact_copy(c, t, (void**)&src);
    if (st != NULL) {
      free(idx);
      return st;
    }
  }
  for (r = 0; r < n; r++) memcpy(dst + r * row_bytes, src + (gather ? gather_row(idx, r) : r / (size_t)times) * row_bytes, row_bytes);
  free(src);
  free(idx);
  return NULL;
}

/* vsdk.sparse_subdivide_coords: row 8i + m, m = 4dx + 2dy + dz, is the child
 * (b, 2x + dx, 2y + dy, 2z + dz) of voxel i. */
static vsdk_status_t* k_sparse_subdivide_coords(const vsdk_kernel_call_t* c) {
  int32_t *coords, *y = (int32_t*)out_data(c);
  voxel_hash h;
  size_t n, i;
  int m;
  int64_t shape[2];
  static const vsdk_dtype_t I32 = {VSDK_DTYPE_INT, 32, 1};
  TRY(need_inputs(c, 1, 1));
  if (c->inputs[0].ndim != 2) return INVALID("%s: coords must be [N, 4]", c->kernel);
  shape[0] = 8 * c->inputs[0].shape[0];
  shape[1] = 4;
  TRY(check_output(c, I32, 2, shape));
  TRY(load_voxels(c, 0, &coords, &n, &h));
  voxel_hash_free(&h);
  for (i = 0; i < n; i++)
    for (m = 0; m < 8; m++) {
      int32_t* o = y + 4 * (8 * i + (size_t)m);
      o[0] = coords[4 * i];
      o[1] = 2 * coords[4 * i + 1] + (m >> 2);
      o[2] = 2 * coords[4 * i + 2] + ((m >> 1) & 1);
      o[3] = 2 * coords[4 * i + 3] + (m & 1);
    }
  free(coords);
  return NULL;
}

/* ------------------------------------------------------------------------- */
/* Rasterization (docs/operators.md, "Rasterization")                        */
/* ------------------------------------------------------------------------- */

/* Triangle ids are discrete: a pixel centre exactly on an edge two triangles
 * share must go to the one the catalog names, so this section evaluates the
 * reference's float64 formulas in the reference's order (catalog/src/raster.rs).
 * Keep two things when you port it:
 *   - the edge function from the lexicographically smaller endpoint (edge()):
 *     both triangles of a shared edge then get exactly opposite values;
 *   - no fused multiply-add: a*b - c*d fused rounds differently. GCC in ISO
 *     mode (-std=c99) never fuses; clang fuses within an expression unless
 *     told not to (below); other compilers: -ffp-contract=off or equivalent.
 * A GPU port does the same per pixel (or per tile of triangles), in float64
 * or in exact fixed point that decides every centre as these doubles do. */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define RASTER_MAX_SIDE 16384                   /* per axis, as nvdiffrast */
#define RASTER_MAX_TRIANGLES ((int64_t)1 << 24) /* id + 1 exact in float32 */

static int is_f64(vsdk_dtype_t d) { return is_dtype(d, VSDK_DTYPE_FLOAT, 64); }

/* A vertex in window coordinates: pixels with y up (row 0 at the bottom),
 * its depth z/w, and 1/w for perspective-correct barycentrics. */
typedef struct {
  double x, y, depth, inv_w;
} window_vertex;

/* Clip-space (x, y, z, w) to window coordinates of a height x width raster:
 * x/w in [-1, 1] spans the columns, pixel i's centre at i + 0.5. Returns 0
 * unless w > 0 and every value is finite (version 1 does not clip). */
static int window_of(const float* clip, int64_t height, int64_t width, window_vertex* out) {
  double x = clip[0], y = clip[1], z = clip[2], w = clip[3];
  if (!(w > 0.0) || !isfinite(x) || !isfinite(y) || !isfinite(z) || !isfinite(w)) return 0;
  out->x = (x / w + 1.0) * 0.5 * (double)width;
  out->y = (y / w + 1.0) * 0.5 * (double)height;
  out->depth = z / w;
  out->inv_w = 1.0 / w;
  return isfinite(out->x) && isfinite(out->y) && isfinite(out->depth) && isfinite(out->inv_w);
}

/* (b - a) x (p - a): positive when p lies left of a -> b (y up). */
static double raw_edge(const window_vertex* a, const window_vertex* b, double px, double py) {
  return (b->x - a->x) * (py - a->y) - (b->y - a->y) * (px - a->x);
}

/* The edge function, evaluated from the lexicographically smaller endpoint
 * and negated for the other direction. */
static double edge(const window_vertex* a, const window_vertex* b, double px, double py) {
  if (a->x < b->x || (a->x == b->x && a->y <= b->y)) return raw_edge(a, b, px, py);
  return -raw_edge(b, a, px, py);
}

/* One triangle in window coordinates, in its own vertex order. */
typedef struct {
  window_vertex v[3];
  double area; /* twice the signed area, positive counter-clockwise (y up) */
} raster_triangle;

/* Screen-space barycentrics of p (extrapolated outside), in vertex order. */
static void lambdas(const raster_triangle* t, double px, double py, double l[3]) {
  l[0] = edge(&t->v[1], &t->v[2], px, py) / t->area;
  l[1] = edge(&t->v[2], &t->v[0], px, py) / t->area;
  l[2] = edge(&t->v[0], &t->v[1], px, py) / t->area;
}

/* The tie rule for a centre exactly on the edge opposite vertex k: it belongs
 * to the triangle whose counter-clockwise traversal runs that edge downward,
 * or along +x when it is horizontal. The two triangles sharing an edge
 * traverse it in opposite directions: exactly one owns it. */
static int owns_edge(const raster_triangle* t, int k) {
  const window_vertex *from = &t->v[(k + 1) % 3], *to = &t->v[(k + 2) % 3];
  double dx, dy;
  if (!(t->area > 0.0)) { /* clockwise: the counter-clockwise traversal is to -> from */
    const window_vertex* swap = from;
    from = to;
    to = swap;
  }
  dx = to->x - from->x;
  dy = to->y - from->y;
  return dy < 0.0 || (dy == 0.0 && dx > 0.0);
}

/* Whether the (non-degenerate) triangle covers a centre with barycentrics l.
 * Both windings count: no back-face culling. */
static int covers(const raster_triangle* t, const double l[3]) {
  int k;
  for (k = 0; k < 3; k++)
    if (!(l[k] > 0.0 || (l[k] == 0.0 && owns_edge(t, k)))) return 0;
  return 1;
}

/* The pixels [*first, *last] whose centres i + 0.5 lie in [lo, hi], clipped
 * to [0, n); 0 when there are none. */
static int centre_range(double lo, double hi, int64_t n, int64_t* first, int64_t* last) {
  double f = ceil(lo - 0.5), l = floor(hi - 0.5);
  if (f < 0.0) f = 0.0;
  if (l > (double)(n - 1)) l = (double)(n - 1);
  if (!(f <= l)) return 0;
  *first = (int64_t)f;
  *last = (int64_t)l;
  return 1;
}

/* Triangles tri [F, 3] int32 (input `at`), F <= 2^24, every entry a vertex
 * row in [0, vertices); compact in *tri (caller frees). */
static vsdk_status_t* load_triangles(const vsdk_kernel_call_t* c, uint64_t at, int64_t vertices, int32_t** tri,
                                     size_t* count) {
  const vsdk_tensor_t* t = &c->inputs[at];
  size_t i;
  if (!is_i32(t->dtype) || t->ndim != 2 || t->shape[1] != 3)
    return INVALID("%s: tri must be [F, 3] int32 vertex indices", c->kernel);
  if (t->shape[0] > RASTER_MAX_TRIANGLES)
    return INVALID("%s: %lld triangles: at most 2^24 (ids + 1 are stored in float32)", c->kernel, (long long)t->shape[0]);
  *count = (size_t)t->shape[0];
  TRY(compact_copy(c, t, (void**)tri));
  for (i = 0; i < 3 * *count; i++)
    if ((*tri)[i] < 0 || (*tri)[i] >= vertices) {
      int32_t bad = (*tri)[i];
      free(*tri);
      *tri = NULL;
      return INVALID("%s: tri[%zu, %zu] = %d: vertex indices lie in [0, %lld)", c->kernel, i / 3, i % 3, bad,
                     (long long)vertices);
    }
  return NULL;
}

/* The raster's side `name`: required, in [1, 16384]. */
static vsdk_status_t* raster_side(const vsdk_kernel_call_t* c, const char* name, int64_t* out) {
  if (find_attr(c, name) == NULL) return INVALID("%s: attribute `%s` is required", c->kernel, name);
  TRY(attr_int(c, name, 0, out));
  if (*out < 1 || *out > RASTER_MAX_SIDE)
    return INVALID("%s: attribute `%s` must lie in [1, %d], got %lld", c->kernel, name, RASTER_MAX_SIDE, (long long)*out);
  return NULL;
}

/* Rasterizes batch entry b into out ([H, W, 4], zeroed): every triangle's
 * window-space box, each centre in it tested; the nearest covering triangle
 * with -1 <= z/w <= 1 wins. `win`, `valid` ([V]) and `nearest` ([H * W]) are
 * scratch. */
static vsdk_status_t* rasterize_one(const vsdk_kernel_call_t* c, const float* pos, const int32_t* tri, size_t F,
                                    size_t b, size_t V, int64_t H, int64_t W, window_vertex* win, int* valid,
                                    double* nearest, float* out) {
  size_t i, f;
  int k;
  /* Window coordinates of every vertex; a vertex a triangle uses must be valid. */
  for (i = 0; i < V; i++) valid[i] = window_of(pos + 4 * i, H, W, &win[i]);
  for (f = 0; f < F; f++)
    for (k = 0; k < 3; k++) {
      size_t v = (size_t)tri[3 * f + (size_t)k];
      if (!valid[v])
        return INVALID("%s: pos[%zu, %zu] = (%.9g, %.9g, %.9g, %.9g) (a vertex of triangle %zu): w must be > 0 and every "
                       "value finite (version 1 does not clip)",
                       c->kernel, b, v, pos[4 * v], pos[4 * v + 1], pos[4 * v + 2], pos[4 * v + 3], f);
    }
  for (i = 0; i < (size_t)(H * W); i++) nearest[i] = INFINITY;
  /* In triangle order, replacing only at a strictly smaller depth: at equal
   * depth the lower index stays (OpenGL's GL_LESS drawing in order). */
  for (f = 0; f < F; f++) {
    raster_triangle t;
    double xlo = INFINITY, xhi = -INFINITY, ylo = INFINITY, yhi = -INFINITY;
    int64_t r0, r1, c0, c1, r, col;
    for (k = 0; k < 3; k++) {
      t.v[k] = win[tri[3 * f + (size_t)k]];
      xlo = fmin(xlo, t.v[k].x);
      xhi = fmax(xhi, t.v[k].x);
      ylo = fmin(ylo, t.v[k].y);
      yhi = fmax(yhi, t.v[k].y);
    }
    t.area = edge(&t.v[0], &t.v[1], t.v[2].x, t.v[2].y);
    if (t.area == 0.0 || !isfinite(t.area)) continue; /* degenerate: covers nothing */
    if (!centre_range(ylo, yhi, H, &r0, &r1) || !centre_range(xlo, xhi, W, &c0, &c1)) continue;
    for (r = r0; r <= r1; r++)
      for (col = c0; col <= c1; col++) {
        double px = (double)col + 0.5, py = (double)r + 0.5; /* row 0 is the bottom row */
        double l[3], q[3], s, depth;
        size_t at = (size_t)(r * W + col);
        lambdas(&t, px, py, l);
        if (!covers(&t, l)) continue;
        depth = l[0] * t.v[0].depth + l[1] * t.v[1].depth + l[2] * t.v[2].depth;
        if (!(depth >= -1.0 && depth <= 1.0) || !(depth < nearest[at])) continue;
        nearest[at] = depth;
        /* Perspective-correct: b_k = (l_k / w_k) / sum_m (l_m / w_m); u = b_0, v = b_1. */
        for (k = 0; k < 3; k++) q[k] = l[k] * t.v[k].inv_w;
        s = q[0] + q[1] + q[2];
        out[4 * at] = (float)(q[0] / s);
        out[4 * at + 1] = (float)(q[1] / s);
        out[4 * at + 2] = (float)depth;
        out[4 * at + 3] = (float)(f + 1); /* 0 is empty */
      }
  }
  return NULL;
}

/* vsdk.rasterize: pos [B, V, 4] clip space, tri [F, 3]; per pixel (u, v, z/w,
 * id + 1) of the nearest triangle covering its centre, 0 where none does. */
static vsdk_status_t* k_rasterize(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t* pt = &c->inputs[0];
  int64_t H, W, shape[4];
  size_t B, V, F = 0, b, plane;
  float *pos = NULL, *out = (float*)out_data(c);
  int32_t* tri = NULL;
  window_vertex* win = NULL;
  int* valid = NULL;
  double* nearest = NULL;
  vsdk_status_t* st;
  TRY(need_inputs(c, 2, 2));
  if (!is_f32(pt->dtype)) return UNSUPPORTED("%s: this template runs float32 positions", c->kernel);
  if (pt->ndim != 3 || pt->shape[2] != 4) return INVALID("%s: pos must be [B, V, 4] clip-space (x, y, z, w)", c->kernel);
  TRY(raster_side(c, "height", &H));
  TRY(raster_side(c, "width", &W));
  B = (size_t)pt->shape[0];
  V = (size_t)pt->shape[1];
  shape[0] = pt->shape[0];
  shape[1] = H;
  shape[2] = W;
  shape[3] = 4;
  TRY(check_output(c, F32, 4, shape));
  plane = (size_t)(H * W);
  memset(out, 0, B * plane * 4 * sizeof(float));
  TRY(load_triangles(c, 1, pt->shape[1], &tri, &F));
  st = load_f32(c, 0, &pos);
  if (st == NULL) {
    win = (window_vertex*)malloc(V * sizeof *win + 1);
    valid = (int*)malloc(V * sizeof *valid + 1);
    nearest = (double*)malloc(plane * sizeof *nearest);
    if (win == NULL || valid == NULL || nearest == NULL) st = OOM("%s: cannot allocate the depth buffer", c->kernel);
  }
  for (b = 0; st == NULL && b < B; b++)
    st = rasterize_one(c, pos + b * V * 4, tri, F, b, V, H, W, win, valid, nearest, out + b * plane * 4);
  free(pos);
  free(tri);
  free(win);
  free(valid);
  free(nearest);
  return st;
}

/* vsdk.interpolate: attr [B, V, A], rast [B, H, W, 4] (float32 or float64),
 * tri [F, 3]; where id + 1 = rast[..., 3] > 0, t = tri[id] and (u, v) =
 * rast[..., 0:2]: u attr[t0] + v attr[t1] + (1 - u - v) attr[t2] in float64,
 * rounded once; 0 where id + 1 = 0. */
static vsdk_status_t* k_interpolate(const vsdk_kernel_call_t* c) {
  const vsdk_tensor_t *at = &c->inputs[0], *rt = &c->inputs[1];
  int64_t shape[4];
  size_t B, V, A, H, W, F = 0, pixels, p, ch;
  float *attr = NULL, *out = (float*)out_data(c);
  void* rast = NULL;
  int32_t* tri = NULL;
  int wide;
  vsdk_status_t* st;
  TRY(need_inputs(c, 3, 3));
  if (!is_f32(at->dtype)) return UNSUPPORTED("%s: this template runs float32 attributes", c->kernel);
  if (at->ndim != 3) return INVALID("%s: attr must be [B, V, A]", c->kernel);
  if (!(is_f32(rt->dtype) || is_f64(rt->dtype)) || rt->ndim != 4 || rt->shape[3] != 4 || rt->shape[0] != at->shape[0])
    return INVALID("%s: rast must be a rasterizer's output [B = %lld, H, W, 4], float32 or float64", c->kernel,
                   (long long)at->shape[0]);
  B = (size_t)at->shape[0];
  V = (size_t)at->shape[1];
  A = (size_t)at->shape[2];
  H = (size_t)rt->shape[1];
  W = (size_t)rt->shape[2];
  wide = is_f64(rt->dtype);
  shape[0] = at->shape[0];
  shape[1] = rt->shape[1];
  shape[2] = rt->shape[2];
  shape[3] = at->shape[2];
  TRY(check_output(c, F32, 4, shape));
  TRY(load_triangles(c, 2, at->shape[1], &tri, &F));
  st = load_f32(c, 0, &attr);
  if (st == NULL) st = compact_copy(c, rt, &rast);
  pixels = B * H * W;
  for (p = 0; st == NULL && p < pixels; p++) {
    double px[4], id, u, v;
    const float* a[3];
    int k;
    for (k = 0; k < 4; k++) px[k] = wide ? ((const double*)rast)[4 * p + (size_t)k] : ((const float*)rast)[4 * p + (size_t)k];
    id = px[3];
    if (id == 0.0) { /* empty */
      for (ch = 0; ch < A; ch++) out[p * A + ch] = 0.0f;
      continue;
    }
    if (!(id >= 1.0 && id <= (double)F && id == floor(id))) {
      st = INVALID("%s: rast[%zu, %zu, %zu, 3] = %.9g: a triangle id + 1 in [1, %zu] or 0 (empty)", c->kernel,
                   p / (H * W), p % (H * W) / W, p % W, id, F);
      break;
    }
    for (k = 0; k < 3; k++) a[k] = attr + (p / (H * W) * V + (size_t)tri[3 * ((size_t)id - 1) + (size_t)k]) * A;
    u = px[0];
    v = px[1];
    for (ch = 0; ch < A; ch++) out[p * A + ch] = (float)(u * a[0][ch] + v * a[1][ch] + (1.0 - u - v) * a[2][ch]);
  }
  free(attr);
  free(rast);
  free(tri);
  return st;
}

/* ------------------------------------------------------------------------- */
/* Dispatch                                                                  */
/* ------------------------------------------------------------------------- */

static vsdk_status_t* execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  const char* k;
  uint64_t i;
  if (p == NULL || c == NULL || c->kernel == NULL) return INVALID("execute: NULL argument");
  if (c->struct_size < sizeof(vsdk_kernel_call_t)) return INVALID("execute: call struct from an unknown older ABI");
  if (c->device_index != 0) return INVALID("%s: device %u does not exist", c->kernel, c->device_index);
  if (c->version != 1) return UNSUPPORTED("%s@%u: this template implements version 1", c->kernel, c->version);
  if (c->num_inputs == 0) return INVALID("%s: no inputs", c->kernel);
  if (c->inputs == NULL || (c->num_outputs > 0 && c->outputs == NULL)) return INVALID("%s: NULL tensor array", c->kernel);
  for (i = 0; i < c->num_inputs; i++) TRY(check_tensor(c, &c->inputs[i], "input", i));
  for (i = 0; i < c->num_outputs; i++) TRY(check_tensor(c, &c->outputs[i], "output", i));
  k = c->kernel;
  if (!strcmp(k, "vsdk.gelu")) return k_gelu(c);
  if (!strcmp(k, "vsdk.gelu_tanh")) return k_unary(c, gelu_tanh_f);
  if (!strcmp(k, "vsdk.silu")) return k_unary(c, silu_f);
  if (!strcmp(k, "vsdk.sin")) return k_unary(c, sin_f);
  if (!strcmp(k, "vsdk.cos")) return k_unary(c, cos_f);
  if (!strcmp(k, "vsdk.relu")) return k_unary(c, relu_f);
  if (!strcmp(k, "vsdk.clamp")) return k_clamp(c);
  if (!strcmp(k, "vsdk.sigmoid")) return k_unary(c, sigmoid_f);
  if (!strcmp(k, "vsdk.tanh")) return k_unary(c, tanh_f);
  if (!strcmp(k, "vsdk.exp")) return k_unary(c, exp_f);
  if (!strcmp(k, "vsdk.sqrt")) return k_unary(c, sqrt_f);
  if (!strcmp(k, "vsdk.rsqrt")) return k_unary(c, rsqrt_f);
  if (!strcmp(k, "vsdk.hardswish")) return k_unary(c, hardswish_f);
  if (!strcmp(k, "vsdk.hardsigmoid")) return k_unary(c, hardsigmoid_f);
  if (!strcmp(k, "vsdk.add")) return k_binary(c, '+');
  if (!strcmp(k, "vsdk.sub")) return k_binary(c, '-');
  if (!strcmp(k, "vsdk.mul")) return k_binary(c, '*');
  if (!strcmp(k, "vsdk.div")) return k_binary(c, '/');
  if (!strcmp(k, "vsdk.cast")) return k_cast(c);
  if (!strcmp(k, "vsdk.crop")) return k_crop(c);
  if (!strcmp(k, "vsdk.pad")) return k_pad(c);
  if (!strcmp(k, "vsdk.concat")) return k_concat(c);
  if (!strcmp(k, "vsdk.reshape")) return k_reshape(c);
  if (!strcmp(k, "vsdk.permute")) return k_permute(c);
  if (!strcmp(k, "vsdk.linear")) return k_linear(c);
  if (!strcmp(k, "vsdk.conv2d")) return k_conv2d(c);
  if (!strcmp(k, "vsdk.matmul")) return k_matmul(c);
  if (!strcmp(k, "vsdk.softmax")) return k_softmax(c);
  if (!strcmp(k, "vsdk.layer_norm")) return k_layer_norm(c);
  if (!strcmp(k, "vsdk.rms_norm")) return k_rms_norm(c);
  if (!strcmp(k, "vsdk.batch_norm")) return k_batch_norm(c);
  if (!strcmp(k, "vsdk.group_norm")) return k_group_norm(c);
  if (!strcmp(k, "vsdk.max_pool2d")) return k_pool2d(c, POOL_MAX);
  if (!strcmp(k, "vsdk.avg_pool2d")) return k_pool2d(c, POOL_AVG);
  if (!strcmp(k, "vsdk.adaptive_avg_pool2d")) return k_pool2d(c, POOL_ADAPTIVE);
  if (!strcmp(k, "vsdk.mean")) return k_reduce(c, 1);
  if (!strcmp(k, "vsdk.sum")) return k_reduce(c, 0);
  if (!strcmp(k, "vsdk.sdpa")) return k_sdpa(c);
  if (!strcmp(k, "vsdk.rotary_embedding")) return k_rotary(c);
  if (!strcmp(k, "vsdk.resize_pil_bicubic")) return k_resize_pil(c, cubic_half, 2.0);
  if (!strcmp(k, "vsdk.resize_pil_lanczos")) return k_resize_pil(c, lanczos3, 3.0);
  if (!strcmp(k, "vsdk.resize_bicubic")) return k_resize_bicubic(c);
  if (!strcmp(k, "vsdk.resize_bilinear")) return k_resize_bilinear(c);
  if (!strcmp(k, "vsdk.resize_nearest")) return k_resize_nearest(c);
  if (!strcmp(k, "vsdk.sparse_conv3d")) return k_sparse_conv3d(c);
  if (!strcmp(k, "vsdk.sparse_downsample_coords")) return k_sparse_downsample(c, 0);
  if (!strcmp(k, "vsdk.sparse_downsample_index")) return k_sparse_downsample(c, 1);
  if (!strcmp(k, "vsdk.segment_mean")) return k_segment_mean(c);
  if (!strcmp(k, "vsdk.gather_rows")) return k_rows(c, 1);
  if (!strcmp(k, "vsdk.repeat_rows")) return k_rows(c, 0);
  if (!strcmp(k, "vsdk.sparse_subdivide_coords")) return k_sparse_subdivide_coords(c);
  if (!strcmp(k, "vsdk.rasterize")) return k_rasterize(c);
  if (!strcmp(k, "vsdk.interpolate")) return k_interpolate(c);
  return UNSUPPORTED("%s: unknown kernel", k);
}

/* ------------------------------------------------------------------------- */
/* The table and the entry point                                             */
/* ------------------------------------------------------------------------- */

static const vsdk_provider_api_t TABLE = {
    sizeof(vsdk_provider_api_t), /* struct_size: the host reads no further */
    VSDK_ABI_VERSION,
    VSDK_CONCURRENCY_SERIAL, /* we keep no locks: the host serialises our calls */
    status_code,
    status_message,
    status_destroy,
    create,
    destroy,
    get_info,
    device_count,
    device_info,
    kernel_count,
    kernel_info,
    kernel_supports,
    mem_alloc,
    mem_free,
    copy_to_device,
    copy_to_host,
    synchronize,
    execute,
    NULL, /* copy_on_device is optional: the host goes through host memory */
};

VSDK_EXPORT const vsdk_provider_api_t* vsdk_get_provider_api(uint32_t host_abi_version, uint32_t* provider_abi_version) {
  if (provider_abi_version != NULL) *provider_abi_version = VSDK_ABI_VERSION;
  /* A host older than our ABI cannot read our table: refuse. */
  return host_abi_version >= VSDK_ABI_VERSION ? &TABLE : NULL;
}
