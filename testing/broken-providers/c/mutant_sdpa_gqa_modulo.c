/*
 * The plain-C template with one deliberate bug: with grouped key/value heads,
 * query head h reads key/value head h % hkv (heads interleaved) instead of
 * h / (hq / hkv) (consecutive query heads share one, as in PyTorch's enable_gqa
 * and transformers' repeat_kv).
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>

static size_t kv_head(size_t h, size_t hq, size_t hkv) {
  (void)hq;
  return h % hkv;
}
#define kv_head(...) template_kv_head(__VA_ARGS__)

#include "template.c"
