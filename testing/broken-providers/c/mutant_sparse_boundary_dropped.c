/*
 * The plain-C template with one deliberate bug: vsdk.sparse_conv3d misses
 * every neighbour with a coordinate 0 (a lookup that treats 0 as "no
 * voxel", as a port clamping x - 1 to 0 and then refusing the clamp does):
 * voxels on the grid's low faces lose neighbours. The calls of
 * neighbour_row are renamed to this one.
 */
#define _POSIX_C_SOURCE 200112L
#include <stdint.h>

#define neighbour_row(h, v) ((v)[1] == 0 || (v)[2] == 0 || (v)[3] == 0 ? (int64_t)-1 : voxel_find(h, v))

#include "template.c"
