/*
 * The plain-C template with one deliberate bug: GELU computed with the tanh
 * approximation instead of erf. Everything else is template.c, unchanged, so
 * a conformance run must fail exactly the stages that use GELU and drill-down
 * must name vsdk.gelu.
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

/* erf(z) as the tanh approximation sees it, with z = x / sqrt(2). */
static float tanh_form_erf(float z) {
  float x = z * 1.41421356237f;
  return tanhf(0.7978845608f * (x + 0.044715f * x * x * x));
}
#define erff(z) tanh_form_erf(z)

#include "template.c"
