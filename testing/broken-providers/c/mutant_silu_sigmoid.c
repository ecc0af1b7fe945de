/*
 * The plain-C template with one deliberate bug: vsdk.silu returns σ(x), the
 * x of x·σ(x) forgotten. The template's own silu_f is renamed away by the
 * function-like macro (its definition has a parenthesis after the name; the
 * dispatch's `silu_f`, a function pointer, has none and gets this one).
 */
#define _POSIX_C_SOURCE 200112L
#include <math.h>

static float silu_f(float x) { return 1.0f / (1.0f + expf(-x)); }
#define silu_f(x) template_silu_f(x)

#include "template.c"
