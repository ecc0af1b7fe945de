/*
 * The plain-C template with one deliberate bug: a crop ignores its steps and
 * reads a contiguous window (a port that knows only unit-step slices). The
 * shape is right and a step of 1 is unaffected; every stepped slice reads the
 * wrong elements. The template's crop_source is renamed away by the
 * function-like macro, as in mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static int64_t crop_source(int64_t off, int64_t i, int64_t step) {
  (void)step;
  return off + i;
}
#define crop_source(...) template_crop_source(__VA_ARGS__)

#include "template.c"
