/*
 * A minimal provider that the loader tests break in one way each, chosen by a
 * -D flag at build time (see build.rs):
 *   FIXTURE_NO_ENTRY        exports no entry symbol
 *   FIXTURE_ABI=<n>         answers ABI version n and refuses the host
 *   FIXTURE_NULL_EXECUTE    leaves the required `execute` slot NULL
 *   FIXTURE_SHORT_TABLE     declares a struct_size that ends before `alloc`
 *   FIXTURE_KERNEL_FAILS    `execute` returns a DEVICE_ERROR status
 *   FIXTURE_CREATE_FAILS    `create` returns an OUT_OF_MEMORY status
 *   FIXTURE_BAD_VERSION     reports version "1.0", which is not semver
 * With no flag it is a working provider of vsdk.gelu on float32, which it
 * also offers as a fused stage kernel, test.fused_gelu@1.
 */
#include <vips_sdk/provider.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct vsdk_status {
  vsdk_status_code_t code;
  const char* message;
};
struct vsdk_provider {
  int unused;
};

#if defined(__GNUC__)
__attribute__((unused))
#endif
static vsdk_status_t* fail(vsdk_status_code_t code, const char* message) {
  vsdk_status_t* s = (vsdk_status_t*)malloc(sizeof *s);
  if (s == NULL) abort();
  s->code = code;
  s->message = message;
  return s;
}
static vsdk_status_code_t status_code(const vsdk_status_t* s) { return s->code; }
static const char* status_message(const vsdk_status_t* s) { return s->message; }
static void status_destroy(vsdk_status_t* s) { free(s); }

static vsdk_status_t* create(const vsdk_create_options_t* o, vsdk_provider_t** out) {
  (void)o;
#ifdef FIXTURE_CREATE_FAILS
  (void)out;
  return fail(VSDK_STATUS_OUT_OF_MEMORY, "fixture: no memory for the device context");
#else
  *out = (vsdk_provider_t*)calloc(1, sizeof(vsdk_provider_t));
  return NULL;
#endif
}
static void destroy(vsdk_provider_t* p) { free(p); }
static vsdk_status_t* get_info(vsdk_provider_t* p, vsdk_provider_info_t* out) {
  (void)p;
  out->name = "fixture";
  out->vendor = "tests";
#ifdef FIXTURE_BAD_VERSION
  out->version = "1.0";
#else
  out->version = "0.0.1";
#endif
  out->description = "";
  return NULL;
}
static vsdk_status_t* device_count(vsdk_provider_t* p, uint32_t* out) {
  (void)p;
  *out = 1;
  return NULL;
}
static vsdk_status_t* device_info(vsdk_provider_t* p, uint32_t i, vsdk_device_info_t* out) {
  (void)p;
  (void)i;
  out->device.device_type = VSDK_DEVICE_CPU;
  out->device.device_id = 0;
  out->name = "fixture device";
  out->driver_version = "0";
  out->stable_id = "fixture:0";
  out->memory_bytes = 0;
  return NULL;
}
static vsdk_status_t* kernel_count(vsdk_provider_t* p, uint64_t* out) {
  (void)p;
  *out = 1;
  return NULL;
}
static vsdk_status_t* kernel_info(vsdk_provider_t* p, uint64_t i, vsdk_kernel_info_t* out) {
  (void)p;
  (void)i;
  out->name = "vsdk.gelu";
  out->version = 1;
  return NULL;
}
static vsdk_status_t* kernel_supports(vsdk_provider_t* p, uint32_t d, const char* k, uint32_t v, vsdk_dtype_t t,
                                      int32_t* out) {
  (void)p;
  (void)d;
  *out = (strcmp(k, "vsdk.gelu") == 0 || strcmp(k, "test.fused_gelu") == 0) && v == 1 &&
         t.code == VSDK_DTYPE_FLOAT && t.bits == 32;
  return NULL;
}
static vsdk_status_t* mem_alloc(vsdk_provider_t* p, uint32_t d, uint64_t n, uint64_t a, void** out) {
  (void)p;
  (void)d;
  (void)a;
  *out = malloc(n ? n : 1);
  return NULL;
}
static void mem_free(vsdk_provider_t* p, uint32_t d, void* ptr) {
  (void)p;
  (void)d;
  free(ptr);
}
static vsdk_status_t* to_device(vsdk_provider_t* p, uint32_t d, void* dst, uint64_t off, const void* src, uint64_t n) {
  (void)p;
  (void)d;
  memcpy((char*)dst + off, src, n);
  return NULL;
}
static vsdk_status_t* to_host(vsdk_provider_t* p, uint32_t d, void* dst, const void* src, uint64_t off, uint64_t n) {
  (void)p;
  (void)d;
  memcpy(dst, (const char*)src + off, n);
  return NULL;
}
static vsdk_status_t* synchronize(vsdk_provider_t* p, uint32_t d) {
  (void)p;
  (void)d;
  return NULL;
}
static vsdk_status_t* execute(vsdk_provider_t* p, const vsdk_kernel_call_t* c) {
  (void)p;
#ifdef FIXTURE_KERNEL_FAILS
  (void)c;
  return fail(VSDK_STATUS_DEVICE_ERROR, "fixture: the device lost its queue");
#else
  {
    const float* x = (const float*)((const char*)c->inputs[0].data + c->inputs[0].byte_offset);
    float* y = (float*)((char*)c->outputs[0].data + c->outputs[0].byte_offset);
    int64_t i, n = 1;
    int32_t d;
    for (d = 0; d < c->inputs[0].ndim; d++) n *= c->inputs[0].shape[d];
    for (i = 0; i < n; i++) y[i] = 0.5f * x[i] * (1.0f + erff(x[i] * 0.70710678f));
    return NULL;
  }
#endif
}

static const vsdk_provider_api_t TABLE = {
#ifdef FIXTURE_SHORT_TABLE
    offsetof(vsdk_provider_api_t, alloc),
#else
    sizeof(vsdk_provider_api_t),
#endif
    VSDK_ABI_VERSION, VSDK_CONCURRENCY_SERIAL,
    status_code, status_message, status_destroy, create, destroy, get_info, device_count, device_info,
    kernel_count, kernel_info, kernel_supports, mem_alloc, mem_free, to_device, to_host, synchronize,
#ifdef FIXTURE_NULL_EXECUTE
    NULL,
#else
    execute,
#endif
    NULL,
};

#ifndef FIXTURE_NO_ENTRY
VSDK_EXPORT const vsdk_provider_api_t* vsdk_get_provider_api(uint32_t host, uint32_t* answered) {
#ifdef FIXTURE_ABI
  *answered = FIXTURE_ABI;
  return host == 0 ? &TABLE : NULL; /* never 0: refuses every real host */
#else
  *answered = VSDK_ABI_VERSION;
  return host >= VSDK_ABI_VERSION ? &TABLE : NULL;
#endif
}
#else
VSDK_EXPORT int not_a_provider(void) { return TABLE.abi_version == 0; }
#endif
