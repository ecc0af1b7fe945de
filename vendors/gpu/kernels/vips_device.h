/* vips_device.h: the few places where CUDA, HIP and the CPU SIMT emulation
 * differ, so that vips_kernels.cu is written once.
 *
 * Compiled by NVRTC (__CUDACC_RTC__), nvcc (__CUDACC__), hiprtc
 * (__HIPCC_RTC__), hipcc (__HIP__), or a C++17 host compiler with
 * VIPS_SIMT_EMULATION defined (vendors/simt), which supplies threadIdx,
 * __syncthreads and the rest from its own header.
 *
 * 16-bit floats travel as their bits (vips_f16, vips_bf16) and are converted
 * here in software, round to nearest even: one definition, bit-identical on
 * every target, and no dependency on cuda_fp16.h / hip_fp16.h. A vendor
 * tuning for speed swaps these for the hardware conversions (cvt.rn.f16.f32),
 * which round the same way. */
#pragma once

#if defined(VIPS_SIMT_EMULATION)
#include "simt.hpp"
#define VIPS_SHFL_XOR(v, lane_mask) vips_simt_shfl_xor((v), (lane_mask))
#define VIPS_DYNAMIC_SHARED(type, name) type* name = static_cast<type*>(vips_simt_dynamic_shared())
#define VIPS_REGISTER(name) static const vips_simt::Registration vips_registration_##name(#name, &name);
#elif defined(__HIPCC_RTC__) || defined(__HIP__)
#if !defined(__HIPCC_RTC__)
#include <hip/hip_runtime.h>
#endif
/* Width 32 on wave64 hardware too: reductions are written for 32 lanes. */
#define VIPS_SHFL_XOR(v, lane_mask) __shfl_xor((v), (lane_mask), 32)
#define VIPS_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define VIPS_REGISTER(name)
#elif defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define VIPS_SHFL_XOR(v, lane_mask) __shfl_xor_sync(0xffffffffu, (v), (lane_mask), 32)
#define VIPS_DYNAMIC_SHARED(type, name) extern __shared__ type name[]
#define VIPS_REGISTER(name)
#else
#error "vips_device.h: compile with NVRTC, nvcc, hiprtc, hipcc, or define VIPS_SIMT_EMULATION"
#endif

/* Every kernel is launched with at most this many threads per block. */
#define VIPS_BLOCK 256

/* An exported kernel. At least one resident block per multiprocessor lets
 * ptxas use up to 255 registers: with the block size alone it capped one
 * resize pass at 32 and spilled on sm_90. */
#define VIPS_KERNEL extern "C" __global__ void __launch_bounds__(VIPS_BLOCK, 1)

typedef long long vips_i64;

/* The bits of a float16 or bfloat16: distinct types so templates tell them apart. */
struct vips_f16 {
  unsigned short bits;
};
struct vips_bf16 {
  unsigned short bits;
};

__device__ __forceinline__ unsigned int vips_float_bits(float f) {
  union {
    float f;
    unsigned int u;
  } c;
  c.f = f;
  return c.u;
}

__device__ __forceinline__ float vips_bits_float(unsigned int u) {
  union {
    float f;
    unsigned int u;
  } c;
  c.u = u;
  return c.f;
}

/* NVRTC has no INFINITY. */
__device__ __forceinline__ float vips_inf() { return vips_bits_float(0x7f800000u); }

__device__ __forceinline__ float vips_load(const float* p) { return *p; }
__device__ __forceinline__ void vips_store(float* p, float v) { *p = v; }

__device__ __forceinline__ float vips_load(const vips_bf16* p) {
  return vips_bits_float(static_cast<unsigned int>(p->bits) << 16);
}

__device__ __forceinline__ void vips_store(vips_bf16* p, float v) {
  unsigned int u = vips_float_bits(v);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    p->bits = static_cast<unsigned short>((u >> 16) | 0x0040u); /* quiet NaN, sign kept */
    return;
  }
  u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even; overflow carries to Inf */
  p->bits = static_cast<unsigned short>(u >> 16);
}

__device__ __forceinline__ float vips_load(const vips_f16* p) {
  unsigned int h = p->bits;
  unsigned int sign = (h & 0x8000u) << 16;
  unsigned int exp = (h >> 10) & 0x1fu;
  unsigned int man = h & 0x3ffu;
  if (exp == 0x1fu) return vips_bits_float(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return vips_bits_float(sign | ((exp + 112u) << 23) | (man << 13));
  /* zero or subnormal: man · 2^-24, exact in float */
  float v = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -v : v;
}

__device__ __forceinline__ void vips_store(vips_f16* p, float v) {
  unsigned int u = vips_float_bits(v);
  unsigned int sign = (u >> 16) & 0x8000u;
  unsigned int a = u & 0x7fffffffu;
  unsigned short h;
  if (a > 0x7f800000u) {
    h = static_cast<unsigned short>(sign | 0x7e00u | ((a >> 13) & 0x3ffu)); /* quiet NaN */
  } else if (a >= 0x477ff000u) {
    h = static_cast<unsigned short>(sign | 0x7c00u); /* rounds past 65504: Inf */
  } else if (a >= 0x38800000u) {
    /* normal: rebias the exponent, round the 13 dropped bits to nearest even */
    unsigned int r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    h = static_cast<unsigned short>(sign | (r >> 13));
  } else if (a > 0x33000000u) {
    /* subnormal result: shift the implicit-one mantissa, round to nearest even */
    unsigned int e = a >> 23;
    unsigned int m = (a & 0x7fffffu) | 0x800000u;
    unsigned int shift = 126u - e; /* 14 .. 24 */
    unsigned int q = m >> shift;
    unsigned int rem = m & ((1u << shift) - 1u);
    unsigned int half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q += 1u;
    h = static_cast<unsigned short>(sign | q);
  } else {
    h = static_cast<unsigned short>(sign); /* at most half the smallest subnormal: zero (a tie rounds to even 0) */
  }
  p->bits = h;
}

__device__ __forceinline__ float vips_load(const unsigned char* p) { return static_cast<float>(*p); }

/* Exact below 2^24 (every sparse coordinate of a suite); rounded to nearest above. */
__device__ __forceinline__ float vips_load(const int* p) { return static_cast<float>(*p); }

/* Float to uint8 (vsdk.cast): NaN is 0, round half to even, saturate. */
__device__ __forceinline__ void vips_store(unsigned char* p, float v) {
  if (!(v == v)) {
    *p = 0;
    return;
  }
  float r = rintf(v);
  r = r < 0.0f ? 0.0f : (r > 255.0f ? 255.0f : r);
  *p = static_cast<unsigned char>(r);
}
