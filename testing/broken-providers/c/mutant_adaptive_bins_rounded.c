/*
 * The plain-C template with one deliberate bug: adaptive pooling's bins are
 * [round(o·in/out), round((o+1)·in/out)): the same where `out` divides `in`,
 * but neighbouring bins no longer overlap (PyTorch floors the start and ceils
 * the end).
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (2 * o * in + out) / (2 * out); }
static int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return (2 * (o + 1) * in + out) / (2 * out); }
#define adaptive_start(...) template_adaptive_start(__VA_ARGS__)
#define adaptive_end(...) template_adaptive_end(__VA_ARGS__)

#include "template.c"
