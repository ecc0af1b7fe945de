/*
 * The plain-C template with one deliberate bug: bilinear resizing reads the
 * other corner convention than the call's (align_corners flipped), the most
 * common port mistake of F.interpolate. Sizes and the kept-axis copy are
 * right; every interior sample moves. The template's bilinear_source is
 * renamed away by the function-like macro, as in mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static double bilinear_source(int64_t i, int64_t in, int64_t out, double scale, int align_corners) {
  double src;
  if (out == in) return (double)i;
  if (!align_corners) return out > 1 ? (double)(in - 1) / (double)(out - 1) * (double)i : 0.0;
  src = scale * ((double)i + 0.5) - 0.5;
  return src < 0.0 ? 0.0 : src;
}
#define bilinear_source(...) template_bilinear_source(__VA_ARGS__)

#include "template.c"
