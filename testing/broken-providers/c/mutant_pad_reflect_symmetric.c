/*
 * The plain-C template with one deliberate bug: a `reflect` pad mirrors about
 * the edge rather than the edge element, repeating it (NumPy's `symmetric`:
 * `c b a | a b c d | d c b`). The shape is right and the other modes are
 * unaffected; every reflected element is its neighbour's. The template's
 * pad_source is renamed away by the function-like macro, as in
 * mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static int64_t pad_source(int mode, int64_t i, int64_t before, int64_t n) {
  int64_t j = i - before;
  if (j >= 0 && j < n) return j;
  switch (mode) {
    case 1: return j < 0 ? -j - 1 : 2 * n - 1 - j;
    case 2: return j < 0 ? 0 : n - 1;
    case 3: return j < 0 ? j + n : j - n;
    default: return -1;
  }
}
#define pad_source(...) template_pad_source(__VA_ARGS__)

#include "template.c"
