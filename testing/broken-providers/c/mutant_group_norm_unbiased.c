/*
 * The plain-C template with one deliberate bug: group norm divides the sum
 * of squares by count - 1 (the unbiased variance, torch.var's default)
 * instead of count. Invisible on large groups, wrong on small ones. The
 * template's group_stats is renamed away by the function-like macro, as in
 * mutant_batch_norm_eps.c.
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>

static void group_stats(const float* x, size_t channels, size_t inner, double* mean, double* var) {
  size_t count = channels * inner, i;
  double s = 0.0, q = 0.0;
  for (i = 0; i < count; i++) s += x[i];
  s /= (double)count;
  for (i = 0; i < count; i++) q += (x[i] - s) * (x[i] - s);
  *mean = s;
  *var = count > 1 ? q / (double)(count - 1) : 0.0;
}
#define group_stats(...) template_group_stats(__VA_ARGS__)

#include "template.c"
