/*
 * The plain-C template with one deliberate bug: vsdk.relu is fmaxf(x, 0), which
 * returns 0 for NaN (PyTorch's relu keeps NaN). The template's relu_f is renamed
 * away by the function-like macro, as in mutant_silu_sigmoid.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float relu_f(float x) { return fmaxf(x, 0.0f); }
#define relu_f(x) template_relu_f(x)

#include "template.c"
