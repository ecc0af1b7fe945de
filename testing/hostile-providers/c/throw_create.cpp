/*
 * A hostile driver written in C++ whose `create` lets an exception escape:
 * it throws std::runtime_error("hostile: create threw") straight out of an
 * extern "C" function, which provider.h forbids ("nothing unwinds across the
 * boundary"). This models a C++ driver that forgot its try/catch around device
 * initialisation. A host that calls create in-process dies with it (Rust
 * aborts on a foreign exception); a host must run such a driver in a worker.
 *
 * Nothing is forwarded and nothing else is implemented: no instance is ever
 * made, so the other slots are stubs that only exist to pass table validation.
 * Build with exceptions enabled (-fexceptions) and nothing marked noexcept.
 */
#include <vips_sdk/provider.h>

#include <stdexcept>

struct vsdk_status {
  vsdk_status_code_t code;
  const char* message;
};
struct vsdk_provider {
  int unused;
};

namespace {

vsdk_status_t* unreachable() {
  return new vsdk_status{VSDK_STATUS_INTERNAL, "hostile: throw_create has no instance to call"};
}

}  // namespace

extern "C" {

static vsdk_status_code_t status_code(const vsdk_status_t* s) { return s->code; }
static const char* status_message(const vsdk_status_t* s) { return s->message; }
static void status_destroy(vsdk_status_t* s) { delete s; }

/* The bug: the exception propagates out of this extern "C" function. */
static vsdk_status_t* create(const vsdk_create_options_t*, vsdk_provider_t**) {
  throw std::runtime_error("hostile: create threw");
}

static void destroy(vsdk_provider_t*) {}
static vsdk_status_t* get_info(vsdk_provider_t*, vsdk_provider_info_t*) { return unreachable(); }
static vsdk_status_t* device_count(vsdk_provider_t*, uint32_t*) { return unreachable(); }
static vsdk_status_t* device_info(vsdk_provider_t*, uint32_t, vsdk_device_info_t*) { return unreachable(); }
static vsdk_status_t* kernel_count(vsdk_provider_t*, uint64_t*) { return unreachable(); }
static vsdk_status_t* kernel_info(vsdk_provider_t*, uint64_t, vsdk_kernel_info_t*) { return unreachable(); }
static vsdk_status_t* kernel_supports(vsdk_provider_t*, uint32_t, const char*, uint32_t, vsdk_dtype_t, int32_t*) {
  return unreachable();
}
static vsdk_status_t* mem_alloc(vsdk_provider_t*, uint32_t, uint64_t, uint64_t, void**) { return unreachable(); }
static void mem_free(vsdk_provider_t*, uint32_t, void*) {}
static vsdk_status_t* to_device(vsdk_provider_t*, uint32_t, void*, uint64_t, const void*, uint64_t) {
  return unreachable();
}
static vsdk_status_t* to_host(vsdk_provider_t*, uint32_t, void*, const void*, uint64_t, uint64_t) {
  return unreachable();
}
static vsdk_status_t* synchronize(vsdk_provider_t*, uint32_t) { return unreachable(); }
static vsdk_status_t* execute(vsdk_provider_t*, const vsdk_kernel_call_t*) { return unreachable(); }

static const vsdk_provider_api_t TABLE = {
    sizeof(vsdk_provider_api_t),
    VSDK_ABI_VERSION,
    VSDK_CONCURRENCY_SERIAL,
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
    to_device,
    to_host,
    synchronize,
    execute,
    nullptr,
};

VSDK_EXPORT const vsdk_provider_api_t* vsdk_get_provider_api(uint32_t host, uint32_t* answered) {
  *answered = VSDK_ABI_VERSION;
  return host >= VSDK_ABI_VERSION ? &TABLE : nullptr;
}

}  // extern "C"
