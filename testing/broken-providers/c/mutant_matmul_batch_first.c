/*
 * The plain-C template with one deliberate bug: batched matmul reads an
 * operand's first matrix for every batch whenever its batch axes differ
 * from the output's (a port that knows only equal batch shapes and
 * broadcasts by reading index 0). Equal batch shapes are unaffected. The
 * template's matmul_batch is renamed away by the function-like macro, as in
 * mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>
#include <stdint.h>

static int64_t matmul_batch_dim(const int64_t* shape, int32_t ndim, int32_t r, int32_t d);

static size_t matmul_batch(const int64_t* shape, int32_t ndim, int32_t r, const int64_t* idx) {
  size_t flat = 0;
  int32_t d;
  for (d = r - ndim; d < r - 2; d++) {
    int64_t len = matmul_batch_dim(shape, ndim, r, d);
    if (ndim != r || len == 1) return 0;
    flat = flat * (size_t)len + (size_t)idx[d];
  }
  return flat;
}
#define matmul_batch(...) template_matmul_batch(__VA_ARGS__)

#include "template.c"
