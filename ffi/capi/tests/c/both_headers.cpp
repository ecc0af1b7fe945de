// Both headers in one C++ translation unit, with every warning an error:
// the engine API and the provider ABI must compile as C++ together.
#include <cstdio>
#include <cstring>

#include "vips_sdk/provider.h"
#include "vips_sdk/vips_sdk.h"

int main() {
  vsdk_host_provider_info_t info{};
  info.struct_size = sizeof info;
  vsdk_tensor_t tensor{};  // provider.h's DLPack-compatible descriptor
  tensor.device.device_type = VSDK_DEVICE_CPU;
  vsdk_check_args_t args{};
  args.struct_size = sizeof args;
  args.outputs = &tensor;
  std::printf("libvips_sdk %s, header %s, provider ABI v%u\n", vsdk_sdk_version(),
              VSDK_SDK_VERSION_STRING, VSDK_ABI_VERSION);
  return std::strcmp(vsdk_sdk_version(), VSDK_SDK_VERSION_STRING) == 0 ? 0 : 1;
}
