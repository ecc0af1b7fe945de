/*
 * The plain-C template with one deliberate bug: nearest resizing samples
 * pixel centres where the call asks for corners and the other way round
 * (`nearest` and `nearest-exact` swapped). The template's nearest_source is
 * renamed away by the function-like macro, as in mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>

static int64_t nearest_source(int64_t i, int64_t in, int64_t out, float scale, int exact) {
  float src;
  int64_t j;
  exact = !exact;
  if (!exact && out == in) return i;
  if (!exact && out == 2 * in) return i / 2;
  if (exact) src = (float)(((double)i + 0.5) * (double)scale);
  else src = (float)i * scale;
  j = (int64_t)floorf(src);
  return j < in - 1 ? j : in - 1;
}
#define nearest_source(...) template_nearest_source(__VA_ARGS__)

#include "template.c"
