/*
 * The plain-C template with one deliberate bug: vsdk.segment_mean returns the
 * segment's sum (a downsample by sum instead of the mean). The calls of
 * segment_mean_of are renamed to this one.
 */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>

static float mutant_segment_mean_of(double sum, size_t count) {
  (void)count;
  return (float)sum;
}
#define segment_mean_of(sum, count) mutant_segment_mean_of(sum, count)

#include "template.c"
