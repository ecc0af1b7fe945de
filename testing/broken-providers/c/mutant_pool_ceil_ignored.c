/*
 * The plain-C template with one deliberate bug: pooling ignores ceil_mode (the
 * floor-mode output size always), so a call with ceil_mode = 1 whose last
 * window hangs over the edge gets the wrong number of outputs. The template's
 * pool_out_len is renamed away by the function-like macro, as in
 * mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static int64_t pool_out_len(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, int64_t dil, int ceil_mode) {
  int64_t span = dil * (k - 1) + 1, padded = in + p0 + p1;
  (void)ceil_mode;
  return in < 1 || padded < span ? -1 : (padded - span) / s + 1;
}
#define pool_out_len(...) template_pool_out_len(__VA_ARGS__)

#include "template.c"
