/*
 * The plain-C template with one deliberate bug: a causal row stops one key
 * short (j < i + offset: a query no longer sees its own position).
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>
#include <stdint.h>

static int causal_sees(size_t i, size_t j, int64_t offset) { return (int64_t)j < (int64_t)i + offset; }
#define causal_sees(...) template_causal_sees(__VA_ARGS__)

#include "template.c"
