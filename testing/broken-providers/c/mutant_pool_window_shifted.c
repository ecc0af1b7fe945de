/*
 * The plain-C template with one deliberate bug: a pooling window that hangs
 * over the end of the padded input (ceil_mode) is shifted back to end there,
 * as a kernel that clamps its window start does, instead of being clipped.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static void pool_window(int64_t o, int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t dil,
                        int64_t* first, int64_t* count, int64_t* padded) {
  int64_t span = dil * (k - 1) + 1, start = o * s - p0, j, n = 0;
  if (start + span > in + p1) start = in + p1 - span;
  *first = -1;
  for (j = 0; j < k; j++) {
    int64_t i = start + j * dil;
    if (i < 0 || i >= in) continue;
    if (*first < 0) *first = i;
    n++;
  }
  *count = n;
  *padded = k;
}
#define pool_window(...) template_pool_window(__VA_ARGS__)

#include "template.c"
