/*
 * The plain-C template with one deliberate bug: vsdk.sin and vsdk.cos reduce
 * their argument with a one-word float32 2π, x − round(x/2π)·2π, as a fast
 * kernel might. Each turn is off by |2π − fl(2π)| = 1.7e-7: about 3e-5 at
 * x = 1000, the range of TRELLIS's embeddings. (The renaming trick is
 * mutant_silu_sigmoid.c's.)
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float reduced(float x) {
  const float two_pi = 6.2831855f;
  return x - nearbyintf(x / two_pi) * two_pi;
}
static float sin_f(float x) { return sinf(reduced(x)); }
static float cos_f(float x) { return cosf(reduced(x)); }
#define sin_f(x) template_sin_f(x)
#define cos_f(x) template_cos_f(x)

#include "template.c"
