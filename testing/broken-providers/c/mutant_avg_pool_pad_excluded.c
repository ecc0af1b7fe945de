/*
 * The plain-C template with one deliberate bug: average pooling ignores
 * count_include_pad and always divides by the input elements of the window
 * (ONNX's default), where the call says to count the padding (PyTorch's).
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static double pool_divisor(int64_t count, int64_t padded, int include_pad) {
  (void)padded;
  (void)include_pad;
  return (double)count;
}
#define pool_divisor(...) template_pool_divisor(__VA_ARGS__)

#include "template.c"
