/*
 * The plain-C template with one deliberate bug: vsdk.sparse_conv3d reads its
 * [27, Cin, Cout] weight as [27, Cout, Cin] (Cin and Cout swapped: silent
 * where they are equal). The calls of conv_weight are renamed to this one.
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>

static float mutant_conv_weight(const float* w, int k, size_t c, size_t o, size_t cin, size_t cout) {
  return w[((size_t)k * cout + o) * cin + c];
}
#define conv_weight(w, k, c, o, cin, cout) mutant_conv_weight(w, k, c, o, cin, cout)

#include "template.c"
