/*
 * The plain-C template with one deliberate bug: vsdk.sigmoid is exp(x)/(1 + exp(x))
 * everywhere, which is Inf/Inf = NaN once exp overflows (x > 88.7).
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float sigmoid_f(float x) { return expf(x) / (1.0f + expf(x)); }
#define sigmoid_f(x) template_sigmoid_f(x)

#include "template.c"
