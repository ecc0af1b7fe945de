/*
 * The plain-C template with one deliberate bug: vsdk.sparse_conv3d numbers
 * its 27 offsets x fastest (torchsparse's order for odd kernels) while the
 * weight is the catalog's, z fastest: spconv's weight read in torchsparse's
 * order. The calls of neighbour_offset are renamed to this one; the
 * template's own definition (its name in parentheses) is left unused.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

static void mutant_neighbour_offset(int k, int32_t d[3]) {
  d[0] = k % 3 - 1;
  d[1] = k / 3 % 3 - 1;
  d[2] = k / 9 - 1;
}
#define neighbour_offset(k, d) mutant_neighbour_offset(k, d)

#include "template.c"
