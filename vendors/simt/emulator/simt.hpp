// simt.hpp: what CUDA/HIP device code expects, for a C++17 host compiler.
//
// The threads of a block run as fibers on one OS thread (simt.cpp): a thread
// runs until it reaches a barrier (__syncthreads, or a warp shuffle), then the
// next one runs. Shared memory is therefore a thread_local: every fiber of a
// block sees the same array, and blocks on other OS threads see their own.
#pragma once

#include <math.h>

#include <utility>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

struct vips_simt_dim3 {
  unsigned int x, y, z;
};

// Set by the scheduler before it resumes a fiber.
extern thread_local vips_simt_dim3 threadIdx;
extern thread_local vips_simt_dim3 blockIdx;
extern thread_local vips_simt_dim3 blockDim;
extern thread_local vips_simt_dim3 gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static thread_local

void __syncthreads();
// `__shfl_xor` over the 32 lanes of the caller's warp; every lane takes part.
float vips_simt_shfl_xor(float v, int lane_mask);
// The launch's dynamic shared memory (its `shared_bytes`).
void* vips_simt_dynamic_shared();

// CUDA's 32-bit integer atomics, returning the old value. Blocks run on
// several OS threads at once, so these are real atomics; a fiber never
// switches inside one.
inline int atomicCAS(int* p, int expected, int desired) {
  __atomic_compare_exchange_n(p, &expected, desired, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  return expected;
}
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicMin(int* p, int v) {
  int old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
  while (v < old &&
         !__atomic_compare_exchange_n(p, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
  }
  return old;
}

namespace vips_simt {

// A kernel, callable with cuLaunchKernel-style parameters: params[i] points
// at the i-th argument.
struct Entry {
  void (*invoke)(void* kernel, void** params);
  void* kernel;
  std::size_t arity;
  // Each parameter's size in bytes, as the kernel declares it.
  std::vector<std::size_t> sizes;
};

std::map<std::string, Entry>& registry();

template <class... A, std::size_t... I>
void invoke_with(void (*kernel)(A...), void** params, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_reference_t<A>*>(params[I])...);
}

template <class... A>
void invoke(void* kernel, void** params) {
  invoke_with(reinterpret_cast<void (*)(A...)>(kernel), params, std::index_sequence_for<A...>{});
}

// One per exported kernel, from VIPS_REGISTER (vips_device.h).
struct Registration {
  template <class... A>
  Registration(const char* name, void (*kernel)(A...)) {
    registry()[name] = Entry{&invoke<A...>, reinterpret_cast<void*>(kernel), sizeof...(A),
                             {sizeof(std::remove_reference_t<A>)...}};
  }
};

}  // namespace vips_simt
