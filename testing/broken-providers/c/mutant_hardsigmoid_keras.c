/*
 * The plain-C template with one deliberate bug: vsdk.hardsigmoid is Keras's
 * hard_sigmoid, clip(0.2·x + 0.5, 0, 1), where PyTorch's is relu6(x + 3)/6
 * (slope 1/6, corners at ±3).
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float hardsigmoid_f(float x) { return fminf(fmaxf(0.2f * x + 0.5f, 0.0f), 1.0f); }
#define hardsigmoid_f(x) template_hardsigmoid_f(x)

#include "template.c"
