/*
 * Clean-room VIPS provider (issue 48).
 *
 * Written from docs/operators.md, docs/runner.md, docs/error-model.md and
 * include/vips_sdk/provider.h ONLY: no provider, template or test source was
 * read. See README.md beside this file for the protocol and the gaps found.
 *
 * Every float kernel gathers its inputs through their strides into `real`
 * (float64 by default, float32 with -DCLEANROOM_REAL=float), computes in it
 * and rounds once, to nearest even, to the output dtype.
 * Data-movement kernels copy element bytes through the strides.
 *
 * Build: cc -std=c11 -O2 -fPIC -shared -fvisibility=hidden -I include \
 *          testing/clean-room/provider.c -lm -o /tmp/cleanroom/libcleanroom.so
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdarg.h>
#include <tgmath.h> /* exp, sqrt, tanh follow `real` */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vips_sdk/provider.h"

/* The compute type of the float kernels. Default double: every float kernel
 * computes in float64 and rounds once to the output dtype. Built with
 * -DCLEANROOM_REAL=float it computes in float32 (accumulations included), as
 * a float32 device would: docs/operators.md, "Precision", allows both
 * ("in the tensor's dtype or wider"; float32 for float16/bfloat16); the
 * float32 build then does not claim float64 tensors. */
#ifndef CLEANROOM_REAL
#define CLEANROOM_REAL double
#endif
typedef CLEANROOM_REAL real;
#define REAL_IS_FLOAT (sizeof(real) < sizeof(double))

#define MAXR 32 /* the docs state no rank limit; we refuse (UNSUPPORTED) beyond this */

/* ------------------------------------------------------------------------- */
/* Status objects                                                             */
/* ------------------------------------------------------------------------- */

struct vsdk_status {
  vsdk_status_code_t code;
  int is_static;
  char msg[512];
};

static struct vsdk_status g_oom_status = {VSDK_STATUS_OUT_OF_MEMORY, 1,
                                          "cleanroom: out of memory"};

static vsdk_status_t* st_make(vsdk_status_code_t code, const char* fmt, ...) {
  struct vsdk_status* s = (struct vsdk_status*)malloc(sizeof *s);
  if (!s) return &g_oom_status;
  s->code = code;
  s->is_static = 0;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->msg, sizeof s->msg, fmt, ap);
  va_end(ap);
  return s;
}
#define INVALID(...) st_make(VSDK_STATUS_INVALID_ARGUMENT, __VA_ARGS__)
#define UNSUP(...) st_make(VSDK_STATUS_UNSUPPORTED, __VA_ARGS__)
#define OOM() (&g_oom_status)

static vsdk_status_code_t api_status_code(const vsdk_status_t* s) {
  return s ? s->code : VSDK_STATUS_OK;
}
static const char* api_status_message(const vsdk_status_t* s) {
  return s ? s->msg : "";
}
static void api_status_destroy(vsdk_status_t* s) {
  if (s && !s->is_static) free(s);
}

/* ------------------------------------------------------------------------- */
/* Dtypes and scalar conversion                                               */
/* ------------------------------------------------------------------------- */

enum { DT_F16, DT_BF16, DT_F32, DT_F64, DT_U8, DT_I32, DT_I64, DT_BAD };

static int dt_of(vsdk_dtype_t d) {
  if (d.lanes != 1) return DT_BAD;
  if (d.code == VSDK_DTYPE_FLOAT && d.bits == 16) return DT_F16;
  if (d.code == VSDK_DTYPE_FLOAT && d.bits == 32) return DT_F32;
  if (d.code == VSDK_DTYPE_FLOAT && d.bits == 64) return DT_F64;
  if (d.code == VSDK_DTYPE_BFLOAT && d.bits == 16) return DT_BF16;
  if (d.code == VSDK_DTYPE_UINT && d.bits == 8) return DT_U8;
  if (d.code == VSDK_DTYPE_INT && d.bits == 32) return DT_I32;
  if (d.code == VSDK_DTYPE_INT && d.bits == 64) return DT_I64;
  return DT_BAD;
}
static int dt_is_float(int t) { return t == DT_F16 || t == DT_BF16 || t == DT_F32 || t == DT_F64; }
static int dt_size(int t) {
  switch (t) {
    case DT_F16: case DT_BF16: return 2;
    case DT_F32: case DT_I32: return 4;
    case DT_F64: case DT_I64: return 8;
    case DT_U8: return 1;
    default: return 0;
  }
}

static double f16_to_d(uint16_t h) {
  int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) v = ldexp((double)m, -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = ldexp((double)(m | 0x400), e - 25);
  return s ? -v : v;
}
static double bf16_to_d(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return (double)f;
}

/* Round a double once, to nearest even, to a binary format with `mbits`
 * explicit mantissa bits, exponent bias `bias` and all-ones exponent `emax_field`. */
static uint16_t d_to_small(double d, int mbits, int bias, int emax_field, uint16_t qnan) {
  uint16_t sign = signbit(d) ? (uint16_t)0x8000u : 0;
  if (isnan(d)) return (uint16_t)(sign | qnan);
  double a = fabs(d);
  uint16_t inf = (uint16_t)(emax_field << mbits);
  if (isinf(a)) return (uint16_t)(sign | inf);
  if (a == 0) return sign;
  int min_exp = 1 - bias; /* exponent of the smallest normal */
  int E;
  frexp(a, &E);
  int e = E - 1; /* a in [2^e, 2^(e+1)) */
  long long bits;
  if (e < min_exp) {
    double q = rint(ldexp(a, mbits - min_exp)); /* units of the subnormal quantum */
    bits = (long long)q;                        /* carries into the normal range naturally */
  } else {
    double q = rint(ldexp(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
    bits = ((long long)(e + bias) << mbits) + ((long long)q - (1LL << mbits));
  }
  if (bits >= (long long)inf) bits = inf;
  return (uint16_t)(sign | (uint16_t)bits);
}
static uint16_t d_to_f16(double d) { return d_to_small(d, 10, 15, 31, 0x7e00); }
static uint16_t d_to_bf16(double d) { return d_to_small(d, 7, 127, 255, 0x7fc0); }

static inline double load_f(const char* p, int t) {
  switch (t) {
    case DT_F16: { uint16_t h; memcpy(&h, p, 2); return f16_to_d(h); }
    case DT_BF16: { uint16_t h; memcpy(&h, p, 2); return bf16_to_d(h); }
    case DT_F32: { float f; memcpy(&f, p, 4); return (double)f; }
    case DT_F64: { double f; memcpy(&f, p, 8); return f; }
    default: return NAN;
  }
}
static inline void store_f(char* p, int t, double v) {
  switch (t) {
    case DT_F16: { uint16_t h = d_to_f16(v); memcpy(p, &h, 2); break; }
    case DT_BF16: { uint16_t h = d_to_bf16(v); memcpy(p, &h, 2); break; }
    case DT_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
    case DT_F64: memcpy(p, &v, 8); break;
    default: break;
  }
}

/* ------------------------------------------------------------------------- */
/* Views                                                                      */
/* ------------------------------------------------------------------------- */

typedef struct {
  char* base; /* data + byte_offset */
  int dt, esz, nd;
  int64_t shape[MAXR];
  int64_t st[MAXR]; /* element strides */
} view_t;

static vsdk_status_t* mkview(const vsdk_tensor_t* t, view_t* v, const char* what) {
  v->dt = dt_of(t->dtype);
  if (v->dt == DT_BAD) return INVALID("%s: dtype code %u bits %u lanes %u is not a catalog dtype", what,
                                       t->dtype.code, t->dtype.bits, t->dtype.lanes);
  if (t->ndim < 0) return INVALID("%s: negative ndim", what);
  if (t->ndim > MAXR) return UNSUP("%s: rank %d above this provider's limit %d", what, t->ndim, MAXR);
  if (!t->data) return INVALID("%s: NULL data", what);
  if (t->ndim > 0 && (!t->shape || !t->strides)) return INVALID("%s: NULL shape or strides", what);
  v->esz = dt_size(v->dt);
  v->nd = t->ndim;
  v->base = (char*)t->data + t->byte_offset;
  for (int k = 0; k < t->ndim; k++) {
    if (t->shape[k] < 0) return INVALID("%s: negative dimension", what);
    if (t->strides[k] < 0) return INVALID("%s: negative stride", what);
    v->shape[k] = t->shape[k];
    v->st[k] = t->strides[k];
  }
  return NULL;
}
static int64_t numel(const view_t* v) {
  int64_t n = 1;
  for (int k = 0; k < v->nd; k++) n *= v->shape[k];
  return n;
}

/* Visit every element of a view in row-major order, giving its element offset. */
#define FOR_EACH_OFFSET(V, OFF, BODY)                                        \
  do {                                                                       \
    const view_t* v__ = (V);                                                 \
    int64_t n__ = numel(v__);                                                \
    int64_t idx__[MAXR];                                                     \
    memset(idx__, 0, sizeof idx__);                                          \
    int64_t OFF = 0;                                                         \
    for (int64_t e__ = 0; e__ < n__; e__++) {                                \
      BODY;                                                                  \
      for (int k__ = v__->nd - 1; k__ >= 0; k__--) {                         \
        if (++idx__[k__] < v__->shape[k__]) { OFF += v__->st[k__]; break; }  \
        OFF -= v__->st[k__] * (idx__[k__] - 1);                              \
        idx__[k__] = 0;                                                      \
      }                                                                      \
    }                                                                        \
  } while (0)

/* A float view gathered compactly into float64 (row-major). */
static real* gather(const view_t* v) {
  int64_t n = numel(v);
  real* out = (real*)malloc((size_t)(n > 0 ? n : 1) * sizeof(real));
  if (!out) return NULL;
  int64_t i = 0;
  FOR_EACH_OFFSET(v, off, { out[i++] = load_f(v->base + off * v->esz, v->dt); });
  return out;
}
static void scatter(const view_t* v, const real* in) {
  int64_t i = 0;
  FOR_EACH_OFFSET(v, off, { store_f(v->base + off * v->esz, v->dt, in[i++]); });
}
/* Element bytes from a source view (any shape/strides) to a destination view, both row-major order. */
static void copy_elems(const view_t* src, const view_t* dst) {
  int64_t n = numel(src);
  if (n == 0) return;
  int64_t* offs = (int64_t*)malloc((size_t)n * sizeof(int64_t));
  if (offs) {
    int64_t i = 0;
    FOR_EACH_OFFSET(src, off, { offs[i++] = off; });
    i = 0;
    FOR_EACH_OFFSET(dst, off, { memcpy(dst->base + off * dst->esz, src->base + offs[i] * src->esz, (size_t)src->esz); i++; });
    free(offs);
  }
}

/* ------------------------------------------------------------------------- */
/* Attributes                                                                 */
/* ------------------------------------------------------------------------- */

typedef struct {
  const vsdk_kernel_call_t* c;
} attrs_t;

static const vsdk_attr_t* attr_find(const vsdk_kernel_call_t* c, const char* name) {
  for (uint64_t i = 0; i < c->num_attrs; i++)
    if (c->attrs[i].name && strcmp(c->attrs[i].name, name) == 0) return &c->attrs[i];
  return NULL;
}
/* Every attribute must be one of `allowed` (NULL-terminated) and appear once. */
static vsdk_status_t* attr_check_names(const vsdk_kernel_call_t* c, const char* const* allowed) {
  for (uint64_t i = 0; i < c->num_attrs; i++) {
    const char* n = c->attrs[i].name;
    if (!n) return INVALID("%s: attribute with NULL name", c->kernel);
    int ok = 0;
    for (const char* const* a = allowed; *a; a++)
      if (strcmp(*a, n) == 0) ok = 1;
    if (!ok) return INVALID("%s: unknown attribute `%s`", c->kernel, n);
    for (uint64_t j = 0; j < i; j++)
      if (strcmp(c->attrs[j].name, n) == 0) return INVALID("%s: attribute `%s` given twice", c->kernel, n);
  }
  return NULL;
}
static vsdk_status_t* attr_int(const vsdk_kernel_call_t* c, const char* name, int64_t dflt, int* present,
                               int64_t* out) {
  const vsdk_attr_t* a = attr_find(c, name);
  if (present) *present = a != NULL;
  if (!a) { *out = dflt; return NULL; }
  if (a->kind != VSDK_ATTR_INT) return INVALID("%s: attribute `%s` must be an int", c->kernel, name);
  *out = a->value.i;
  return NULL;
}
static vsdk_status_t* attr_float(const vsdk_kernel_call_t* c, const char* name, double dflt, int* present,
                                 double* out) {
  const vsdk_attr_t* a = attr_find(c, name);
  if (present) *present = a != NULL;
  if (!a) { *out = dflt; return NULL; }
  if (a->kind == VSDK_ATTR_FLOAT) *out = a->value.f;
  else if (a->kind == VSDK_ATTR_INT) *out = (double)a->value.i;
  else return INVALID("%s: attribute `%s` must be a float", c->kernel, name);
  return NULL;
}
/* An int list; `want` > 0 requires that length. Absent: *len = -1. */
static vsdk_status_t* attr_ints(const vsdk_kernel_call_t* c, const char* name, int want, const int64_t** data,
                                int64_t* len) {
  const vsdk_attr_t* a = attr_find(c, name);
  if (!a) { *data = NULL; *len = -1; return NULL; }
  if (a->kind != VSDK_ATTR_INTS) return INVALID("%s: attribute `%s` must be an int list", c->kernel, name);
  if (want > 0 && a->value.ints.len != (uint64_t)want)
    return INVALID("%s: attribute `%s` must have %d entries", c->kernel, name, want);
  if (a->value.ints.len > 0 && !a->value.ints.data) return INVALID("%s: `%s` NULL data", c->kernel, name);
  *data = a->value.ints.data;
  *len = (int64_t)a->value.ints.len;
  return NULL;
}

#define TRY(expr)                    \
  do {                               \
    vsdk_status_t* s__ = (expr);     \
    if (s__) return s__;             \
  } while (0)

/* ------------------------------------------------------------------------- */
/* Call helpers                                                               */
/* ------------------------------------------------------------------------- */

static vsdk_status_t* check_out(const vsdk_kernel_call_t* c, const view_t* o, int dt, int nd,
                                const int64_t* shape) {
  if (o->dt != dt) return INVALID("%s: output dtype does not match", c->kernel);
  if (o->nd != nd) return INVALID("%s: output rank %d, expected %d", c->kernel, o->nd, nd);
  for (int k = 0; k < nd; k++)
    if (o->shape[k] != shape[k])
      return INVALID("%s: output dim %d is %lld, expected %lld", c->kernel, k, (long long)o->shape[k],
                     (long long)shape[k]);
  return NULL;
}
static vsdk_status_t* want_io(const vsdk_kernel_call_t* c, uint64_t min_in, uint64_t max_in) {
  if (c->num_inputs < min_in || c->num_inputs > max_in)
    return INVALID("%s: %llu inputs", c->kernel, (unsigned long long)c->num_inputs);
  if (c->num_outputs != 1) return INVALID("%s: %llu outputs, expected 1", c->kernel,
                                          (unsigned long long)c->num_outputs);
  if (c->num_inputs && !c->inputs) return INVALID("%s: NULL inputs", c->kernel);
  if (!c->outputs) return INVALID("%s: NULL outputs", c->kernel);
  return NULL;
}
/* Load inputs as views; all share the first input's dtype, which must be float if `flt`. */
static vsdk_status_t* load_views(const vsdk_kernel_call_t* c, view_t* in, view_t* out, int flt) {
  for (uint64_t i = 0; i < c->num_inputs; i++) {
    TRY(mkview(&c->inputs[i], &in[i], "input"));
    if (in[i].dt != in[0].dt) return INVALID("%s: inputs of different dtypes", c->kernel);
  }
  TRY(mkview(&c->outputs[0], out, "output"));
  if (flt && c->num_inputs && !dt_is_float(in[0].dt)) return UNSUP("%s: float kernel on a non-float dtype", c->kernel);
  if (flt && c->num_inputs && REAL_IS_FLOAT && in[0].dt == DT_F64)
    return UNSUP("%s: this float32 build does not run float64", c->kernel);
  return NULL;
}
static int norm_axis(int64_t a, int rank, int64_t* out) {
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) return 0;
  *out = a;
  return 1;
}

/* ------------------------------------------------------------------------- */
/* Kernels                                                                    */
/* ------------------------------------------------------------------------- */

/* --- element-wise of one input --- */
typedef real (*unary_fn)(real);
static real f_relu(real x) { return isnan(x) ? x : (x > 0 ? x : (real)0.0); }
static real relu6(real y) { return y < 0 ? 0 : (y > 6 ? 6 : y); }
static real f_hardsigmoid(real x) { return isnan(x) ? x : relu6(x + (real)3.0) / (real)6.0; }
static real f_hardswish(real x) { return isnan(x) ? x : x * relu6(x + (real)3.0) / (real)6.0; }
static real f_silu(real x) {
  if (isnan(x)) return x;
  if (x >= 0) return x / ((real)1.0 + exp(-x));
  real e = exp(x);
  return x * e / ((real)1.0 + e);
}
static real f_rsqrt(real x) { return (real)1.0 / sqrt(x); }
static real f_sqrt(real x) { return sqrt(x); }
static real f_sigmoid(real x) {
  if (isnan(x)) return x;
  if (x >= 0) return (real)1.0 / ((real)1.0 + exp(-x));
  real e = exp(x);
  return e / ((real)1.0 + e);
}
static real f_tanh(real x) { return tanh(x); }
static real f_exp(real x) { return exp(x); }

static vsdk_status_t* k_unary(const vsdk_kernel_call_t* c, unary_fn f) {
  static const char* const none[] = {NULL};
  TRY(want_io(c, 1, 1));
  TRY(attr_check_names(c, none));
  view_t in[1], o;
  TRY(load_views(c, in, &o, 1));
  TRY(check_out(c, &o, in[0].dt, in[0].nd, in[0].shape));
  real* x = gather(&in[0]);
  if (!x) return OOM();
  int64_t n = numel(&in[0]);
  for (int64_t i = 0; i < n; i++) x[i] = f(x[i]);
  scatter(&o, x);
  free(x);
  return NULL;
}

/* --- binary with NumPy broadcasting --- */
static vsdk_status_t* k_binary(const vsdk_kernel_call_t* c, int op) {
  static const char* const none[] = {NULL};
  TRY(want_io(c, 2, 2));
  TRY(attr_check_names(c, none));
  view_t in[2], o;
  TRY(load_views(c, in, &o, 1));
  int r = in[0].nd > in[1].nd ? in[0].nd : in[1].nd;
  int64_t shape[MAXR];
  view_t a = in[0], b = in[1]; /* re-aligned to rank r, stride 0 on broadcast axes */
  a.nd = b.nd = r;
  for (int k = 0; k < r; k++) {
    int ka = k - (r - in[0].nd), kb = k - (r - in[1].nd);
    int64_t da = ka >= 0 ? in[0].shape[ka] : 1, db = kb >= 0 ? in[1].shape[kb] : 1;
    if (da != db && da != 1 && db != 1) return INVALID("%s: shapes do not broadcast", c->kernel);
    shape[k] = da == 1 ? db : da;
    a.shape[k] = shape[k];
    b.shape[k] = shape[k];
    a.st[k] = (ka >= 0 && da != 1) ? in[0].st[ka] : 0;
    b.st[k] = (kb >= 0 && db != 1) ? in[1].st[kb] : 0;
  }
  TRY(check_out(c, &o, in[0].dt, r, shape));
  real* x = gather(&a);
  real* y = gather(&b);
  if (!x || !y) { free(x); free(y); return OOM(); }
  int64_t n = numel(&a);
  for (int64_t i = 0; i < n; i++) {
    switch (op) {
      case 0: x[i] = x[i] + y[i]; break;
      case 1: x[i] = x[i] - y[i]; break;
      case 2: x[i] = x[i] * y[i]; break;
      default: x[i] = x[i] / y[i]; break;
    }
  }
  scatter(&o, x);
  free(x);
  free(y);
  return NULL;
}

/* --- conv2d --- */
static vsdk_status_t* k_conv2d(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"strides", "pads", "dilations", "groups", NULL};
  TRY(want_io(c, 2, 3));
  TRY(attr_check_names(c, names));
  view_t in[3], o;
  TRY(load_views(c, in, &o, 1));
  const int64_t *sp, *pp, *dp;
  int64_t sl, pl, dl, groups;
  TRY(attr_ints(c, "strides", 2, &sp, &sl));
  TRY(attr_ints(c, "pads", 4, &pp, &pl));
  TRY(attr_ints(c, "dilations", 2, &dp, &dl));
  TRY(attr_int(c, "groups", 1, NULL, &groups));
  int64_t sH = sl < 0 ? 1 : sp[0], sW = sl < 0 ? 1 : sp[1];
  int64_t pt = pl < 0 ? 0 : pp[0], pL = pl < 0 ? 0 : pp[1], pb = pl < 0 ? 0 : pp[2], pr = pl < 0 ? 0 : pp[3];
  int64_t dH = dl < 0 ? 1 : dp[0], dW = dl < 0 ? 1 : dp[1];
  if (sH < 1 || sW < 1 || dH < 1 || dW < 1 || pt < 0 || pL < 0 || pb < 0 || pr < 0 || groups < 1)
    return INVALID("vsdk.conv2d: bad strides/pads/dilations/groups");
  if (in[0].nd != 4 || in[1].nd != 4) return INVALID("vsdk.conv2d: x and w must be rank 4");
  int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
  int64_t O = in[1].shape[0], Cg = in[1].shape[1], kH = in[1].shape[2], kW = in[1].shape[3];
  if (C % groups || O % groups || Cg != C / groups) return INVALID("vsdk.conv2d: channels and groups disagree");
  if (c->num_inputs == 3 && (in[2].nd != 1 || in[2].shape[0] != O)) return INVALID("vsdk.conv2d: bias must be [O]");
  int64_t spanH = dH * (kH - 1) + 1, spanW = dW * (kW - 1) + 1;
  if (kH < 1 || kW < 1 || spanH > H + pt + pb || spanW > W + pL + pr)
    return INVALID("vsdk.conv2d: dilated kernel larger than the padded input");
  int64_t OH = (H + pt + pb - spanH) / sH + 1, OW = (W + pL + pr - spanW) / sW + 1;
  int64_t oshape[4] = {N, O, OH, OW};
  TRY(check_out(c, &o, in[0].dt, 4, oshape));
  real* x = gather(&in[0]);
  real* w = gather(&in[1]);
  real* b = c->num_inputs == 3 ? gather(&in[2]) : NULL;
  real* y = (real*)malloc((size_t)(N * O * OH * OW > 0 ? N * O * OH * OW : 1) * sizeof(real));
  if (!x || !w || !y || (c->num_inputs == 3 && !b)) { free(x); free(w); free(b); free(y); return OOM(); }
  int64_t Og = O / groups;
  for (int64_t n = 0; n < N; n++)
    for (int64_t oc = 0; oc < O; oc++) {
      int64_t g = oc / Og;
      for (int64_t oy = 0; oy < OH; oy++)
        for (int64_t ox = 0; ox < OW; ox++) {
          real acc = b ? b[oc] : (real)0.0;
          for (int64_t ci = 0; ci < Cg; ci++) {
            const real* xp = x + ((n * C + g * Cg + ci) * H) * W;
            const real* wp = w + ((oc * Cg + ci) * kH) * kW;
            for (int64_t i = 0; i < kH; i++) {
              int64_t iy = oy * sH + i * dH - pt;
              if (iy < 0 || iy >= H) continue;
              for (int64_t j = 0; j < kW; j++) {
                int64_t ix = ox * sW + j * dW - pL;
                if (ix < 0 || ix >= W) continue;
                acc += wp[i * kW + j] * xp[iy * W + ix];
              }
            }
          }
          y[((n * O + oc) * OH + oy) * OW + ox] = acc;
        }
    }
  scatter(&o, y);
  free(x); free(w); free(b); free(y);
  return NULL;
}

/* --- batch_norm --- */
static vsdk_status_t* k_batch_norm(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"eps", NULL};
  TRY(want_io(c, 5, 5));
  TRY(attr_check_names(c, names));
  view_t in[5], o;
  TRY(load_views(c, in, &o, 1));
  double eps;
  TRY(attr_float(c, "eps", 1e-5, NULL, &eps));
  if (!(eps > 0)) return INVALID("vsdk.batch_norm: eps must be > 0");
  if (in[0].nd < 2) return INVALID("vsdk.batch_norm: x rank < 2");
  int64_t N = in[0].shape[0], C = in[0].shape[1], S = 1;
  for (int k = 2; k < in[0].nd; k++) S *= in[0].shape[k];
  for (int i = 1; i < 5; i++)
    if (in[i].nd != 1 || in[i].shape[0] != C) return INVALID("vsdk.batch_norm: statistics must be [C]");
  TRY(check_out(c, &o, in[0].dt, in[0].nd, in[0].shape));
  real* x = gather(&in[0]);
  real *mu = gather(&in[1]), *var = gather(&in[2]), *wt = gather(&in[3]), *bs = gather(&in[4]);
  if (!x || !mu || !var || !wt || !bs) { free(x); free(mu); free(var); free(wt); free(bs); return OOM(); }
  for (int64_t n = 0; n < N; n++)
    for (int64_t ch = 0; ch < C; ch++) {
      real sd = sqrt(var[ch] + (real)eps);
      real* p = x + (n * C + ch) * S;
      for (int64_t s = 0; s < S; s++) p[s] = (p[s] - mu[ch]) / sd * wt[ch] + bs[ch];
    }
  scatter(&o, x);
  free(x); free(mu); free(var); free(wt); free(bs);
  return NULL;
}

/* --- pooling --- */
static vsdk_status_t* pool_len(int64_t in, int64_t p0, int64_t p1, int64_t k, int64_t d, int64_t s, int ceil_mode,
                               int64_t* out) {
  int64_t span = d * (k - 1) + 1;
  if (in + p0 + p1 < span) return INVALID("pool: window larger than the padded input");
  int64_t num = in + p0 + p1 - span;
  int64_t L = ceil_mode ? (num + s - 1) / s + 1 : num / s + 1;
  if (ceil_mode && (L - 1) * s >= in + p0) L -= 1;
  *out = L;
  return NULL;
}
static vsdk_status_t* k_max_pool2d(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"kernel", "strides", "pads", "dilations", "ceil_mode", NULL};
  TRY(want_io(c, 1, 1));
  TRY(attr_check_names(c, names));
  view_t in[1], o;
  TRY(load_views(c, in, &o, 1));
  const int64_t *kp, *sp, *pp, *dp;
  int64_t kl, sl, pl, dl, ceil_mode;
  TRY(attr_ints(c, "kernel", 2, &kp, &kl));
  if (kl < 0) return INVALID("vsdk.max_pool2d: `kernel` is required");
  TRY(attr_ints(c, "strides", 2, &sp, &sl));
  TRY(attr_ints(c, "pads", 4, &pp, &pl));
  TRY(attr_ints(c, "dilations", 2, &dp, &dl));
  TRY(attr_int(c, "ceil_mode", 0, NULL, &ceil_mode));
  int64_t kH = kp[0], kW = kp[1];
  int64_t sH = sl < 0 ? 1 : sp[0], sW = sl < 0 ? 1 : sp[1];
  int64_t pt = pl < 0 ? 0 : pp[0], pL = pl < 0 ? 0 : pp[1], pb = pl < 0 ? 0 : pp[2], pr = pl < 0 ? 0 : pp[3];
  int64_t dH = dl < 0 ? 1 : dp[0], dW = dl < 0 ? 1 : dp[1];
  if (kH < 1 || kW < 1 || sH < 1 || sW < 1 || dH < 1 || dW < 1 || pt < 0 || pL < 0 || pb < 0 || pr < 0 ||
      (ceil_mode != 0 && ceil_mode != 1))
    return INVALID("vsdk.max_pool2d: bad attributes");
  if (in[0].nd != 4) return INVALID("vsdk.max_pool2d: x must be [N, C, H, W]");
  int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
  int64_t OH, OW;
  TRY(pool_len(H, pt, pb, kH, dH, sH, (int)ceil_mode, &OH));
  TRY(pool_len(W, pL, pr, kW, dW, sW, (int)ceil_mode, &OW));
  int64_t oshape[4] = {N, C, OH, OW};
  TRY(check_out(c, &o, in[0].dt, 4, oshape));
  real* x = gather(&in[0]);
  real* y = (real*)malloc((size_t)(N * C * OH * OW > 0 ? N * C * OH * OW : 1) * sizeof(real));
  if (!x || !y) { free(x); free(y); return OOM(); }
  vsdk_status_t* err = NULL;
  for (int64_t nc = 0; nc < N * C && !err; nc++)
    for (int64_t oy = 0; oy < OH && !err; oy++)
      for (int64_t ox = 0; ox < OW; ox++) {
        real m = -INFINITY;
        int any = 0, nan = 0;
        for (int64_t i = 0; i < kH; i++) {
          int64_t iy = oy * sH - pt + i * dH;
          if (iy < 0 || iy >= H) continue;
          for (int64_t j = 0; j < kW; j++) {
            int64_t ix = ox * sW - pL + j * dW;
            if (ix < 0 || ix >= W) continue;
            real v = x[(nc * H + iy) * W + ix];
            any = 1;
            if (isnan(v)) nan = 1;
            else if (v > m) m = v;
          }
        }
        if (!any) { err = INVALID("vsdk.max_pool2d: a window has no element"); break; }
        y[(nc * OH + oy) * OW + ox] = nan ? NAN : m;
      }
  if (!err) scatter(&o, y);
  free(x); free(y);
  return err;
}
static vsdk_status_t* k_adaptive_avg_pool2d(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"output_size", NULL};
  TRY(want_io(c, 1, 1));
  TRY(attr_check_names(c, names));
  view_t in[1], o;
  TRY(load_views(c, in, &o, 1));
  const int64_t* op;
  int64_t ol;
  TRY(attr_ints(c, "output_size", 2, &op, &ol));
  if (ol < 0) return INVALID("vsdk.adaptive_avg_pool2d: `output_size` is required");
  if (in[0].nd != 4) return INVALID("vsdk.adaptive_avg_pool2d: x must be [N, C, H, W]");
  int64_t N = in[0].shape[0], C = in[0].shape[1], H = in[0].shape[2], W = in[0].shape[3];
  int64_t OH = op[0], OW = op[1];
  if (OH < 1 || OW < 1 || H < 1 || W < 1) return INVALID("vsdk.adaptive_avg_pool2d: bad sizes");
  int64_t oshape[4] = {N, C, OH, OW};
  TRY(check_out(c, &o, in[0].dt, 4, oshape));
  real* x = gather(&in[0]);
  real* y = (real*)malloc((size_t)(N * C * OH * OW > 0 ? N * C * OH * OW : 1) * sizeof(real));
  if (!x || !y) { free(x); free(y); return OOM(); }
  for (int64_t nc = 0; nc < N * C; nc++)
    for (int64_t oy = 0; oy < OH; oy++) {
      int64_t y0 = (oy * H) / OH, y1 = ((oy + 1) * H + OH - 1) / OH;
      for (int64_t ox = 0; ox < OW; ox++) {
        int64_t x0 = (ox * W) / OW, x1 = ((ox + 1) * W + OW - 1) / OW;
        real s = 0;
        for (int64_t iy = y0; iy < y1; iy++)
          for (int64_t ix = x0; ix < x1; ix++) s += x[(nc * H + iy) * W + ix];
        y[(nc * OH + oy) * OW + ox] = s / (real)((y1 - y0) * (x1 - x0));
      }
    }
  scatter(&o, y);
  free(x); free(y);
  return NULL;
}

/* --- sum / mean --- */
static vsdk_status_t* k_reduce(const vsdk_kernel_call_t* c, int is_mean) {
  static const char* const names[] = {"axes", "keepdims", NULL};
  TRY(want_io(c, 1, 1));
  TRY(attr_check_names(c, names));
  view_t in[1], o;
  TRY(load_views(c, in, &o, 1));
  const int64_t* ap;
  int64_t al, keep;
  TRY(attr_ints(c, "axes", 0, &ap, &al));
  TRY(attr_int(c, "keepdims", 0, NULL, &keep));
  if (al < 1) return INVALID("%s: `axes` is required and non-empty", c->kernel);
  if (keep != 0 && keep != 1) return INVALID("%s: keepdims must be 0 or 1", c->kernel);
  int r = in[0].nd;
  int red[MAXR] = {0};
  for (int64_t i = 0; i < al; i++) {
    int64_t a;
    if (!norm_axis(ap[i], r, &a)) return INVALID("%s: axis out of range", c->kernel);
    if (red[a]) return INVALID("%s: repeated axis", c->kernel);
    red[a] = 1;
  }
  int64_t oshape[MAXR];
  int on = 0;
  int64_t cnt = 1;
  for (int k = 0; k < r; k++) {
    if (red[k]) { cnt *= in[0].shape[k]; if (keep) oshape[on++] = 1; }
    else oshape[on++] = in[0].shape[k];
  }
  if (is_mean && cnt == 0) return INVALID("%s: mean over an empty axis", c->kernel);
  TRY(check_out(c, &o, in[0].dt, on, oshape));
  /* view with kept axes first, reduced axes last */
  view_t p = in[0];
  int j = 0;
  for (int k = 0; k < r; k++) if (!red[k]) { p.shape[j] = in[0].shape[k]; p.st[j] = in[0].st[k]; j++; }
  for (int k = 0; k < r; k++) if (red[k]) { p.shape[j] = in[0].shape[k]; p.st[j] = in[0].st[k]; j++; }
  real* x = gather(&p);
  int64_t nout = numel(&o);
  real* y = (real*)malloc((size_t)(nout > 0 ? nout : 1) * sizeof(real));
  if (!x || !y) { free(x); free(y); return OOM(); }
  for (int64_t i = 0; i < nout; i++) {
    real s = 0;
    for (int64_t t = 0; t < cnt; t++) s += x[i * cnt + t];
    y[i] = is_mean ? s / (real)cnt : s;
  }
  scatter(&o, y);
  free(x); free(y);
  return NULL;
}

/* --- linear --- */
static vsdk_status_t* k_linear(const vsdk_kernel_call_t* c) {
  static const char* const none[] = {NULL};
  TRY(want_io(c, 2, 3));
  TRY(attr_check_names(c, none));
  view_t in[3], o;
  TRY(load_views(c, in, &o, 1));
  if (in[0].nd < 1 || in[1].nd != 2) return INVALID("vsdk.linear: x [..., K], w [N, K]");
  int r = in[0].nd;
  int64_t K = in[0].shape[r - 1], Nf = in[1].shape[0];
  if (in[1].shape[1] != K) return INVALID("vsdk.linear: K differs");
  if (c->num_inputs == 3 && (in[2].nd != 1 || in[2].shape[0] != Nf)) return INVALID("vsdk.linear: b must be [N]");
  int64_t oshape[MAXR];
  for (int k = 0; k < r - 1; k++) oshape[k] = in[0].shape[k];
  oshape[r - 1] = Nf;
  TRY(check_out(c, &o, in[0].dt, r, oshape));
  int64_t M = K ? numel(&in[0]) / K : 1;
  if (K == 0) { M = 1; for (int k = 0; k < r - 1; k++) M *= in[0].shape[k]; }
  real* x = gather(&in[0]);
  real* w = gather(&in[1]);
  real* b = c->num_inputs == 3 ? gather(&in[2]) : NULL;
  real* y = (real*)malloc((size_t)(M * Nf > 0 ? M * Nf : 1) * sizeof(real));
  if (!x || !w || !y || (c->num_inputs == 3 && !b)) { free(x); free(w); free(b); free(y); return OOM(); }
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < Nf; n++) {
      real acc = b ? b[n] : (real)0.0;
      const real* xr = x + m * K;
      const real* wr = w + n * K;
      for (int64_t k = 0; k < K; k++) acc += xr[k] * wr[k];
      y[m * Nf + n] = acc;
    }
  scatter(&o, y);
  free(x); free(w); free(b); free(y);
  return NULL;
}

/* --- rotary_embedding --- */
static vsdk_status_t* k_rotary(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"interleaved", NULL};
  TRY(want_io(c, 3, 3));
  TRY(attr_check_names(c, names));
  view_t in[3], o;
  TRY(load_views(c, in, &o, 1));
  int64_t il;
  TRY(attr_int(c, "interleaved", 0, NULL, &il));
  if (il != 0 && il != 1) return INVALID("vsdk.rotary_embedding: interleaved must be 0 or 1");
  int r = in[0].nd;
  if (r < 2 || in[1].nd != 2 || in[2].nd != 2) return INVALID("vsdk.rotary_embedding: ranks");
  int64_t L = in[0].shape[r - 2], D = in[0].shape[r - 1], h = in[1].shape[1];
  if (in[1].shape[0] != L || in[2].shape[0] != L || in[2].shape[1] != h || h < 1 || 2 * h > D)
    return INVALID("vsdk.rotary_embedding: tables must be [L, R/2] with 1 <= R/2 <= D/2");
  TRY(check_out(c, &o, in[0].dt, r, in[0].shape));
  real* x = gather(&in[0]);
  real* cs = gather(&in[1]);
  real* sn = gather(&in[2]);
  if (!x || !cs || !sn) { free(x); free(cs); free(sn); return OOM(); }
  int64_t rows = (L && D) ? numel(&in[0]) / (L * D) : 0;
  for (int64_t b = 0; b < rows; b++)
    for (int64_t l = 0; l < L; l++) {
      real* p = x + (b * L + l) * D;
      for (int64_t i = 0; i < h; i++) {
        int64_t ia = il ? 2 * i : i, ib = il ? 2 * i + 1 : i + h;
        real xa = p[ia], xb = p[ib], co = cs[l * h + i], si = sn[l * h + i];
        p[ia] = xa * co - xb * si;
        p[ib] = xb * co + xa * si;
      }
    }
  scatter(&o, x);
  free(x); free(cs); free(sn);
  return NULL;
}

/* --- sdpa --- */
static vsdk_status_t* k_sdpa(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"scale", "causal_offset", NULL};
  TRY(want_io(c, 3, 4));
  TRY(attr_check_names(c, names));
  view_t in[4], o;
  TRY(load_views(c, in, &o, 1));
  int r = in[0].nd;
  if (r < 3 || in[1].nd != r || in[2].nd != r) return INVALID("vsdk.sdpa: q, k, v must share a rank >= 3");
  int ha = r - 3;
  int64_t Hq = in[0].shape[ha], Lq = in[0].shape[r - 2], D = in[0].shape[r - 1];
  int64_t Hkv = in[1].shape[ha], Lk = in[1].shape[r - 2], Dv = in[2].shape[r - 1];
  if (in[1].shape[r - 1] != D || in[2].shape[ha] != Hkv || in[2].shape[r - 2] != Lk)
    return INVALID("vsdk.sdpa: k/v shapes");
  if (Lk < 1 || Hkv < 1 || Hq % Hkv) return INVALID("vsdk.sdpa: Lk >= 1 and Hkv | Hq required");
  int64_t B = 1;
  for (int k = 0; k < ha; k++) {
    if (in[1].shape[k] != in[0].shape[k] || in[2].shape[k] != in[0].shape[k])
      return INVALID("vsdk.sdpa: batch dimensions differ");
    B *= in[0].shape[k];
  }
  double scale;
  int has_scale, has_causal;
  TRY(attr_float(c, "scale", 0, &has_scale, &scale));
  if (!has_scale) scale = 1.0 / sqrt((double)D);
  int64_t coff;
  TRY(attr_int(c, "causal_offset", 0, &has_causal, &coff));
  if (has_causal && coff < 0) return INVALID("vsdk.sdpa: causal_offset must be >= 0");
  int64_t oshape[MAXR];
  for (int k = 0; k < r - 1; k++) oshape[k] = in[0].shape[k];
  oshape[r - 1] = Dv;
  TRY(check_out(c, &o, in[0].dt, r, oshape));
  /* mask broadcast to [..., Hq, Lq, Lk] */
  view_t mv;
  int has_mask = c->num_inputs == 4;
  if (has_mask) {
    const view_t* m = &in[3];
    if (m->nd < 2 || m->nd > r) return INVALID("vsdk.sdpa: mask rank");
    mv = *m;
    mv.nd = r;
    for (int k = 0; k < r; k++) {
      int64_t target = k < r - 1 ? in[0].shape[k] : Lk;
      int km = k - (r - m->nd);
      int64_t dm = km >= 0 ? m->shape[km] : 1;
      if (dm != target && dm != 1) return INVALID("vsdk.sdpa: mask does not broadcast to the logits");
      mv.shape[k] = target;
      mv.st[k] = (km >= 0 && dm != 1) ? m->st[km] : 0;
    }
  }
  real* q = gather(&in[0]);
  real* kk = gather(&in[1]);
  real* v = gather(&in[2]);
  real* mk = has_mask ? gather(&mv) : NULL;
  int64_t nout = B * Hq * Lq * Dv;
  real* y = (real*)malloc((size_t)(nout > 0 ? nout : 1) * sizeof(real));
  real* s = (real*)malloc((size_t)Lk * sizeof(real));
  if (!q || !kk || !v || !y || !s || (has_mask && !mk)) {
    free(q); free(kk); free(v); free(mk); free(y); free(s);
    return OOM();
  }
  int64_t grp = Hq / Hkv;
  for (int64_t b = 0; b < B; b++)
    for (int64_t h = 0; h < Hq; h++) {
      int64_t hk = h / grp;
      const real* kb = kk + (b * Hkv + hk) * Lk * D;
      const real* vb = v + (b * Hkv + hk) * Lk * Dv;
      for (int64_t i = 0; i < Lq; i++) {
        const real* qi = q + ((b * Hq + h) * Lq + i) * D;
        const real* mrow = has_mask ? mk + ((b * Hq + h) * Lq + i) * Lk : NULL;
        real mx = -INFINITY;
        for (int64_t j = 0; j < Lk; j++) {
          real acc = 0;
          for (int64_t d = 0; d < D; d++) acc += qi[d] * kb[j * D + d];
          real sv = (real)scale * acc;
          if (mrow) sv += mrow[j];
          if (has_causal && j > i + coff) sv = -INFINITY;
          s[j] = sv;
          if (sv > mx) mx = sv;
        }
        real* yo = y + ((b * Hq + h) * Lq + i) * Dv;
        if (mx == -INFINITY || isnan(mx)) {
          /* every logit -inf (or NaN present): NaN row, as PyTorch */
          int all_ninf = 1;
          for (int64_t j = 0; j < Lk; j++) if (!(s[j] == -INFINITY)) all_ninf = 0;
          if (all_ninf) { for (int64_t d = 0; d < Dv; d++) yo[d] = NAN; continue; }
        }
        real sum = 0;
        for (int64_t j = 0; j < Lk; j++) { s[j] = exp(s[j] - mx); sum += s[j]; }
        for (int64_t d = 0; d < Dv; d++) yo[d] = 0;
        for (int64_t j = 0; j < Lk; j++) {
          real p = s[j] / sum;
          if (p == 0) continue;
          for (int64_t d = 0; d < Dv; d++) yo[d] += p * vb[j * Dv + d];
        }
      }
    }
  scatter(&o, y);
  free(q); free(kk); free(v); free(mk); free(y); free(s);
  return NULL;
}

/* --- data movement (any dtype) --- */
static vsdk_status_t* k_reshape(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"shape", NULL};
  TRY(want_io(c, 1, 1));
  TRY(attr_check_names(c, names));
  view_t in[1], o;
  TRY(load_views(c, in, &o, 0));
  const int64_t* sp;
  int64_t sl;
  TRY(attr_ints(c, "shape", 0, &sp, &sl));
  if (sl < 0) return INVALID("vsdk.reshape: `shape` is required");
  if (sl > MAXR) return UNSUP("vsdk.reshape: rank above %d", MAXR);
  int64_t shape[MAXR], known = 1, neg = -1;
  for (int64_t k = 0; k < sl; k++) {
    if (sp[k] == -1) { if (neg >= 0) return INVALID("vsdk.reshape: two -1"); neg = k; shape[k] = 1; }
    else if (sp[k] < 0) return INVALID("vsdk.reshape: negative entry");
    else { shape[k] = sp[k]; known *= sp[k]; }
  }
  int64_t n = numel(&in[0]);
  if (neg >= 0) {
    if (known == 0 || n % known) return INVALID("vsdk.reshape: -1 cannot be inferred");
    shape[neg] = n / known;
  } else if (known != n) return INVALID("vsdk.reshape: element count changes");
  TRY(check_out(c, &o, in[0].dt, (int)sl, shape));
  copy_elems(&in[0], &o);
  return NULL;
}
static vsdk_status_t* k_permute(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"perm", NULL};
  TRY(want_io(c, 1, 1));
  TRY(attr_check_names(c, names));
  view_t in[1], o;
  TRY(load_views(c, in, &o, 0));
  const int64_t* pp;
  int64_t pl;
  TRY(attr_ints(c, "perm", 0, &pp, &pl));
  int r = in[0].nd;
  if (pl != r) return INVALID("vsdk.permute: `perm` must list every axis");
  int seen[MAXR] = {0};
  view_t p = in[0];
  for (int d = 0; d < r; d++) {
    int64_t a;
    if (!norm_axis(pp[d], r, &a) || seen[a]) return INVALID("vsdk.permute: not a permutation");
    seen[a] = 1;
    p.shape[d] = in[0].shape[a];
    p.st[d] = in[0].st[a];
  }
  TRY(check_out(c, &o, in[0].dt, r, p.shape));
  copy_elems(&p, &o);
  return NULL;
}
static vsdk_status_t* k_concat(const vsdk_kernel_call_t* c) {
  static const char* const names[] = {"axis", NULL};
  if (c->num_inputs < 1 || c->num_inputs > 65536) return INVALID("vsdk.concat: needs inputs");
  TRY(want_io(c, 1, c->num_inputs));
  TRY(attr_check_names(c, names));
  view_t* in = (view_t*)malloc(c->num_inputs * sizeof(view_t));
  if (!in) return OOM();
  view_t o;
  vsdk_status_t* err = load_views(c, in, &o, 0);
  int64_t ax = 0, axis = 0;
  if (!err) err = attr_int(c, "axis", 0, NULL, &ax);
  int r = in[0].nd;
  if (!err && r < 1) err = INVALID("vsdk.concat: rank >= 1");
  if (!err && !norm_axis(ax, r, &axis)) err = INVALID("vsdk.concat: axis out of range");
  int64_t shape[MAXR];
  if (!err) {
    memcpy(shape, in[0].shape, sizeof(int64_t) * (size_t)r);
    shape[axis] = 0;
    for (uint64_t i = 0; i < c->num_inputs && !err; i++) {
      if (in[i].nd != r) { err = INVALID("vsdk.concat: ranks differ"); break; }
      for (int k = 0; k < r; k++)
        if (k != axis && in[i].shape[k] != in[0].shape[k]) err = INVALID("vsdk.concat: shapes differ");
      shape[axis] += in[i].shape[axis];
    }
  }
  if (!err) err = check_out(c, &o, in[0].dt, r, shape);
  if (!err) {
    int64_t at = 0;
    for (uint64_t i = 0; i < c->num_inputs; i++) {
      view_t dst = o; /* the slab of the output this input fills */
      dst.base = o.base + at * o.st[axis] * o.esz;
      dst.shape[axis] = in[i].shape[axis];
      copy_elems(&in[i], &dst);
      at += in[i].shape[axis];
    }
  }
  free(in);
  return err;
}

/* ------------------------------------------------------------------------- */
/* Kernel table                                                               */
/* ------------------------------------------------------------------------- */

enum { K_FLOAT, K_ANY };
typedef struct {
  const char* name;
  int kind;
} kdesc_t;

static const kdesc_t g_kernels[] = {
    {"vsdk.add", K_FLOAT},        {"vsdk.sub", K_FLOAT},
    {"vsdk.mul", K_FLOAT},        {"vsdk.div", K_FLOAT},
    {"vsdk.conv2d", K_FLOAT},     {"vsdk.batch_norm", K_FLOAT},
    {"vsdk.relu", K_FLOAT},       {"vsdk.max_pool2d", K_FLOAT},
    {"vsdk.adaptive_avg_pool2d", K_FLOAT},
    {"vsdk.mean", K_FLOAT},       {"vsdk.sum", K_FLOAT},
    {"vsdk.hardswish", K_FLOAT},  {"vsdk.hardsigmoid", K_FLOAT},
    {"vsdk.linear", K_FLOAT},     {"vsdk.rotary_embedding", K_FLOAT},
    {"vsdk.rsqrt", K_FLOAT},      {"vsdk.sqrt", K_FLOAT},
    {"vsdk.silu", K_FLOAT},       {"vsdk.sigmoid", K_FLOAT},
    {"vsdk.tanh", K_FLOAT},       {"vsdk.exp", K_FLOAT},
    {"vsdk.sdpa", K_FLOAT},
    {"vsdk.reshape", K_ANY},      {"vsdk.permute", K_ANY},
    {"vsdk.concat", K_ANY},
};
#define NKERNELS (sizeof g_kernels / sizeof g_kernels[0])

static const kdesc_t* find_kernel(const char* name) {
  if (!name) return NULL;
  for (size_t i = 0; i < NKERNELS; i++)
    if (strcmp(g_kernels[i].name, name) == 0) return &g_kernels[i];
  return NULL;
}

static vsdk_status_t* dispatch(const vsdk_kernel_call_t* c) {
  const char* n = c->kernel;
  if (!strcmp(n, "vsdk.add")) return k_binary(c, 0);
  if (!strcmp(n, "vsdk.sub")) return k_binary(c, 1);
  if (!strcmp(n, "vsdk.mul")) return k_binary(c, 2);
  if (!strcmp(n, "vsdk.div")) return k_binary(c, 3);
  if (!strcmp(n, "vsdk.conv2d")) return k_conv2d(c);
  if (!strcmp(n, "vsdk.batch_norm")) return k_batch_norm(c);
  if (!strcmp(n, "vsdk.relu")) return k_unary(c, f_relu);
  if (!strcmp(n, "vsdk.max_pool2d")) return k_max_pool2d(c);
  if (!strcmp(n, "vsdk.adaptive_avg_pool2d")) return k_adaptive_avg_pool2d(c);
  if (!strcmp(n, "vsdk.mean")) return k_reduce(c, 1);
  if (!strcmp(n, "vsdk.sum")) return k_reduce(c, 0);
  if (!strcmp(n, "vsdk.hardswish")) return k_unary(c, f_hardswish);
  if (!strcmp(n, "vsdk.hardsigmoid")) return k_unary(c, f_hardsigmoid);
  if (!strcmp(n, "vsdk.linear")) return k_linear(c);
  if (!strcmp(n, "vsdk.rotary_embedding")) return k_rotary(c);
  if (!strcmp(n, "vsdk.rsqrt")) return k_unary(c, f_rsqrt);
  if (!strcmp(n, "vsdk.sqrt")) return k_unary(c, f_sqrt);
  if (!strcmp(n, "vsdk.silu")) return k_unary(c, f_silu);
  if (!strcmp(n, "vsdk.sigmoid")) return k_unary(c, f_sigmoid);
  if (!strcmp(n, "vsdk.tanh")) return k_unary(c, f_tanh);
  if (!strcmp(n, "vsdk.exp")) return k_unary(c, f_exp);
  if (!strcmp(n, "vsdk.sdpa")) return k_sdpa(c);
  if (!strcmp(n, "vsdk.reshape")) return k_reshape(c);
  if (!strcmp(n, "vsdk.permute")) return k_permute(c);
  if (!strcmp(n, "vsdk.concat")) return k_concat(c);
  return UNSUP("cleanroom: kernel `%s` not implemented", n);
}

/* ------------------------------------------------------------------------- */
/* ABI entry points                                                           */
/* ------------------------------------------------------------------------- */

struct vsdk_provider {
  int unused;
};

#define FITS(out, T, field) ((out)->struct_size >= offsetof(T, field) + sizeof((out)->field))

static vsdk_status_t* api_create(const vsdk_create_options_t* options, vsdk_provider_t** out) {
  if (!out) return INVALID("create: NULL out");
  if (options && options->struct_size >= offsetof(vsdk_create_options_t, host_abi_version) + 4 &&
      options->host_abi_version != VSDK_ABI_VERSION)
    return UNSUP("create: ABI version %u not spoken", options->host_abi_version);
  vsdk_provider_t* p = (vsdk_provider_t*)calloc(1, sizeof *p);
  if (!p) return OOM();
  *out = p;
  return NULL;
}
static void api_destroy(vsdk_provider_t* p) { free(p); }

static vsdk_status_t* api_get_info(vsdk_provider_t* p, vsdk_provider_info_t* out) {
  (void)p;
  if (!out) return INVALID("get_info: NULL out");
  if (FITS(out, vsdk_provider_info_t, name)) out->name = "cleanroom";
  if (FITS(out, vsdk_provider_info_t, vendor)) out->vendor = "VIPS SDK clean-room check (issue 48)";
  if (FITS(out, vsdk_provider_info_t, version)) out->version = "0.1.0";
  if (FITS(out, vsdk_provider_info_t, description))
    out->description = "C provider written from docs/operators.md alone; float64 compute on the host CPU";
  return NULL;
}
static vsdk_status_t* api_device_count(vsdk_provider_t* p, uint32_t* out) {
  (void)p;
  if (!out) return INVALID("device_count: NULL out");
  *out = 1;
  return NULL;
}
static vsdk_status_t* api_device_info(vsdk_provider_t* p, uint32_t idx, vsdk_device_info_t* out) {
  (void)p;
  if (!out) return INVALID("device_info: NULL out");
  if (idx != 0) return INVALID("device_info: no device %u", idx);
  if (FITS(out, vsdk_device_info_t, device)) { out->device.device_type = VSDK_DEVICE_CPU; out->device.device_id = 0; }
  if (FITS(out, vsdk_device_info_t, name)) out->name = "host CPU (clean-room)";
  if (FITS(out, vsdk_device_info_t, driver_version)) out->driver_version = "none";
  if (FITS(out, vsdk_device_info_t, stable_id)) out->stable_id = "cleanroom-cpu-0";
  if (FITS(out, vsdk_device_info_t, memory_bytes)) {
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    out->memory_bytes = (pages > 0 && psz > 0) ? (uint64_t)pages * (uint64_t)psz : 0;
  }
  return NULL;
}
static vsdk_status_t* api_kernel_count(vsdk_provider_t* p, uint64_t* out) {
  (void)p;
  if (!out) return INVALID("kernel_count: NULL out");
  *out = NKERNELS;
  return NULL;
}
static vsdk_status_t* api_kernel_info(vsdk_provider_t* p, uint64_t index, vsdk_kernel_info_t* out) {
  (void)p;
  if (!out) return INVALID("kernel_info: NULL out");
  if (index >= NKERNELS) return INVALID("kernel_info: index %llu out of range", (unsigned long long)index);
  if (FITS(out, vsdk_kernel_info_t, name)) out->name = g_kernels[index].name;
  if (FITS(out, vsdk_kernel_info_t, version)) out->version = 1;
  if (FITS(out, vsdk_kernel_info_t, reserved)) out->reserved = 0;
  return NULL;
}
static vsdk_status_t* api_kernel_supports(vsdk_provider_t* p, uint32_t dev, const char* kernel, uint32_t version,
                                          vsdk_dtype_t dtype, int32_t* out) {
  (void)p;
  if (!out) return INVALID("kernel_supports: NULL out");
  const kdesc_t* k = find_kernel(kernel);
  int t = dt_of(dtype);
  int ok = dev == 0 && k && version == 1 && t != DT_BAD && (k->kind == K_ANY || (dt_is_float(t) && !(REAL_IS_FLOAT && t == DT_F64)));
  *out = ok ? 1 : 0;
  return NULL;
}
static vsdk_status_t* api_alloc(vsdk_provider_t* p, uint32_t dev, uint64_t size, uint64_t alignment, void** out) {
  (void)p;
  if (!out) return INVALID("alloc: NULL out");
  if (dev != 0) return INVALID("alloc: no device %u", dev);
  if (alignment == 0 || (alignment & (alignment - 1))) return INVALID("alloc: alignment not a power of two");
  if (alignment < sizeof(void*)) alignment = sizeof(void*);
  void* ptr = NULL;
  if (posix_memalign(&ptr, (size_t)alignment, (size_t)(size ? size : 1)) != 0 || !ptr) return OOM();
  *out = ptr;
  return NULL;
}
static void api_free(vsdk_provider_t* p, uint32_t dev, void* ptr) {
  (void)p; (void)dev;
  free(ptr);
}
static vsdk_status_t* api_copy_to_device(vsdk_provider_t* p, uint32_t dev, void* dst, uint64_t dst_offset,
                                         const void* src, uint64_t size) {
  (void)p; (void)dev;
  if (size == 0) return NULL;
  if (!dst || !src) return INVALID("copy_to_device: NULL pointer");
  memcpy((char*)dst + dst_offset, src, (size_t)size);
  return NULL;
}
static vsdk_status_t* api_copy_to_host(vsdk_provider_t* p, uint32_t dev, void* dst, const void* src,
                                       uint64_t src_offset, uint64_t size) {
  (void)p; (void)dev;
  if (size == 0) return NULL;
  if (!dst || !src) return INVALID("copy_to_host: NULL pointer");
  memcpy(dst, (const char*)src + src_offset, (size_t)size);
  return NULL;
}
static vsdk_status_t* api_copy_on_device(vsdk_provider_t* p, uint32_t dev, void* dst, uint64_t dst_offset,
                                         const void* src, uint64_t src_offset, uint64_t size) {
  (void)p; (void)dev;
  if (size == 0) return NULL;
  if (!dst || !src) return INVALID("copy_on_device: NULL pointer");
  memmove((char*)dst + dst_offset, (const char*)src + src_offset, (size_t)size);
  return NULL;
}
static vsdk_status_t* api_synchronize(vsdk_provider_t* p, uint32_t dev) {
  (void)p; (void)dev;
  return NULL;
}
static vsdk_status_t* api_execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  (void)p;
  if (!c || !c->kernel) return INVALID("execute: NULL call");
  if (c->device_index != 0) return INVALID("execute: no device %u", c->device_index);
  if (!find_kernel(c->kernel)) return UNSUP("cleanroom: kernel `%s` not implemented", c->kernel);
  if (c->version != 1) return UNSUP("cleanroom: `%s`@%u not implemented (only @1)", c->kernel, c->version);
  if (c->num_attrs && !c->attrs) return INVALID("execute: NULL attrs");
  return dispatch(c);
}

static const vsdk_provider_api_t g_api = {
    sizeof(vsdk_provider_api_t),
    VSDK_ABI_VERSION,
    VSDK_CONCURRENCY_THREAD_SAFE,
    api_status_code,
    api_status_message,
    api_status_destroy,
    api_create,
    api_destroy,
    api_get_info,
    api_device_count,
    api_device_info,
    api_kernel_count,
    api_kernel_info,
    api_kernel_supports,
    api_alloc,
    api_free,
    api_copy_to_device,
    api_copy_to_host,
    api_synchronize,
    api_execute,
    api_copy_on_device,
};

VSDK_EXPORT const vsdk_provider_api_t* vsdk_get_provider_api(uint32_t host_abi_version,
                                                             uint32_t* provider_abi_version) {
  if (provider_abi_version) *provider_abi_version = VSDK_ABI_VERSION;
  if (host_abi_version < VSDK_ABI_VERSION) return NULL;
  return &g_api;
}
