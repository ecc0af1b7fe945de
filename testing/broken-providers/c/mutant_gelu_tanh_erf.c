/*
 * The plain-C template with one deliberate bug: vsdk.gelu_tanh computed as
 * the exact GELU (erf), the other operator. (The renaming trick is
 * mutant_silu_sigmoid.c's.)
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float gelu_tanh_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
#define gelu_tanh_f(x) template_gelu_tanh_f(x)

#include "template.c"
