/* selftest.cu: kernels that exercise the emulation itself, for
 * tests/emulator.rs; compiled into the emulator only (never into a GPU
 * provider's module), named vips_selftest_*. */

/* out[block] = Σ threadIdx.x over the block, through vips_block_sum
 * (shuffles, shared memory, barriers); every thread checks the total. */
VIPS_KERNEL vips_selftest_block_sum(float* out, int* mismatches) {
  __shared__ float scratch[VIPS_BLOCK / 32];
  const float total = vips_block_sum(static_cast<float>(threadIdx.x), scratch);
  const float want = 0.5f * static_cast<float>(blockDim.x) * static_cast<float>(blockDim.x - 1);
  if (total != want) mismatches[blockIdx.x] += 1;
  if (threadIdx.x == 0) out[blockIdx.x] = total;
}
VIPS_REGISTER(vips_selftest_block_sum)

/* Thread t writes t to shared memory; after the barrier, reads its
 * neighbour's slot (written by another fiber). */
VIPS_KERNEL vips_selftest_neighbour(int* out) {
  __shared__ int slot[VIPS_BLOCK];
  slot[threadIdx.x] = static_cast<int>(threadIdx.x) * 3 + static_cast<int>(blockIdx.x);
  __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = slot[(threadIdx.x + 1) % blockDim.x];
}
VIPS_REGISTER(vips_selftest_neighbour)

/* The first warp reduces by shuffles while the rest of the block returns:
 * legal, warps are independent. */
VIPS_KERNEL vips_selftest_first_warp_only(float* out) {
  if (threadIdx.x >= 32) return;
  const float s = vips_lanes_sum(static_cast<float>(threadIdx.x));
  if (threadIdx.x == 0) out[blockIdx.x] = s;
}
VIPS_REGISTER(vips_selftest_first_warp_only)

/* A barrier some threads never reach: undefined on a GPU, an error here. */
VIPS_KERNEL vips_selftest_divergent_barrier(int* out) {
  if (threadIdx.x % 7 == 3) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}
VIPS_REGISTER(vips_selftest_divergent_barrier)

/* The block's last thread needs more than its 64 KiB fiber stack (the
 * others have returned: it overwrites only their finished stacks). */
VIPS_KERNEL vips_selftest_stack_overflow(int* out) {
  if (threadIdx.x + 1 != blockDim.x) return;
  volatile unsigned char big[80 * 1024];
  for (unsigned i = 0; i < sizeof big; ++i) big[i] = static_cast<unsigned char>(i);
  out[0] = big[threadIdx.x];
}
VIPS_REGISTER(vips_selftest_stack_overflow)
