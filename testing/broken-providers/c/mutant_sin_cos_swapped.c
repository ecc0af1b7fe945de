/*
 * The plain-C template with one deliberate bug: vsdk.sin computes cos and
 * vsdk.cos computes sin (the order of a sinusoidal embedding's halves
 * swapped). (The renaming trick is mutant_silu_sigmoid.c's.)
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float sin_f(float x) { return cosf(x); }
static float cos_f(float x) { return sinf(x); }
#define sin_f(x) template_sin_f(x)
#define cos_f(x) template_cos_f(x)

#include "template.c"
