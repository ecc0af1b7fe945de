// Lists a suite's stages and the CPU provider's devices through the C API,
// from C++ (RAII around the C handles).
#include <cstdio>
#include <memory>

#include <vips_sdk/vips_sdk.h>

template <typename T, void (*Free)(T*)>
using Owned = std::unique_ptr<T, std::integral_constant<decltype(Free), Free>>;

static bool ok(vsdk_error_t* e) {
  Owned<vsdk_error_t, vsdk_error_free> error(e);
  if (error) std::fprintf(stderr, "error: %s\n", vsdk_error_message(error.get()));
  return !error;
}

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "demo-mlp";
  vsdk_suite_t* raw = nullptr;
  if (!ok(vsdk_suite_open(name, &raw))) return 1;
  Owned<vsdk_suite_t, vsdk_suite_free> suite(raw);
  vsdk_suite_info_t info{};
  info.struct_size = sizeof info;
  if (!ok(vsdk_suite_info(suite.get(), &info))) return 1;
  std::printf("%s %s: %zu stages\n", info.component, info.version, info.stage_count);
  for (size_t i = 0; i < info.stage_count; i++) {
    vsdk_stage_info_t stage{};
    stage.struct_size = sizeof stage;
    if (!ok(vsdk_suite_stage(suite.get(), i, &stage))) return 1;
    std::printf("  %s: %s\n", stage.name, stage.algorithm);
  }
  vsdk_host_provider_t* p = nullptr;
  if (!ok(vsdk_provider_open("cpu", &p))) return 1;
  Owned<vsdk_host_provider_t, vsdk_provider_free> provider(p);
  vsdk_device_info_t device{};
  device.struct_size = sizeof device;
  if (!ok(vsdk_provider_device_info(provider.get(), 0, &device))) return 1;
  std::printf("cpu device 0: %s\n", device.name);
  return 0;
}
