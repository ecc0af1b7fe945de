/*
 * The plain-C template with one deliberate bug: vsdk.tanh is
 * (exp(2x) − 1)/(exp(2x) + 1), which is Inf/Inf = NaN once exp(2x) overflows
 * (x > 44.4).
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float tanh_f(float x) { return (expf(2.0f * x) - 1.0f) / (expf(2.0f * x) + 1.0f); }
#define tanh_f(x) template_tanh_f(x)

#include "template.c"
