/*
 * The plain-C template with one deliberate bug: rotary embedding pairs the
 * features the other way round from the call (GPT-J's interleaved (2i, 2i + 1)
 * where Llama's rotate-half (i, i + half) is asked for, and the reverse).
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>

static void rotary_pair(size_t i, size_t half, int interleaved, size_t* a, size_t* b) {
  *a = interleaved ? i : 2 * i;
  *b = interleaved ? i + half : 2 * i + 1;
}
#define rotary_pair(...) template_rotary_pair(__VA_ARGS__)

#include "template.c"
