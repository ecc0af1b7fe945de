/*
 * The plain-C template with one deliberate bug: vsdk.gather_rows copies the
 * row after the indexed one (an upsample to the wrong parent; the last row
 * wraps to the first, so every read stays in bounds). The calls of
 * gather_row are renamed to this one.
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>
#include <stdint.h>

#define gather_row(index, r) (((size_t)(index)[r] + 1) % (size_t)c->inputs[0].shape[0])

#include "template.c"
