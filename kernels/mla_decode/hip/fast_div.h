// Division of non-negative 32-bit integers by a divisor fixed at launch (the KV page size), with a
// multiply-high, an add and a shift instead of the ~20 instructions of a run-time division.
// Kernels split every key index into (page slot, offset in page) in their load loops, where those
// instructions showed up as a third of the issue slots in a profile of hip_mma_fp8kv_v1.
//
// Round-up reciprocal (Granlund & Montgomery 1994): with l = ceil(log2 d) and
// m = floor(2^32 (2^l - d) / d) + 1, n / d = (mulhi(n, m) + n) >> l for 0 <= n < 2^31 (the sum
// cannot overflow 32 bits there). Plain C++ as well, so that tests check it on the host.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIP__)
#define MLATUNE_FAST_DIV_FN __host__ __device__ inline
#else
#define MLATUNE_FAST_DIV_FN inline
#endif

namespace mlatune::gpu {

struct FastDiv {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  FastDiv() = default;
  // d in [1, 2^31). Built on the host; passed to kernels by value.
  explicit FastDiv(uint32_t d) : divisor(d) {
    while ((uint64_t{1} << shift) < d) ++shift;
    magic = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << shift) - d)) / d + 1);
  }

  // n / divisor for 0 <= n < 2^31.
  MLATUNE_FAST_DIV_FN uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__) || defined(__HIP_DEVICE_COMPILE__)
    const uint32_t hi = __umulhi(n, magic);
#else
    const uint32_t hi = static_cast<uint32_t>((uint64_t{n} * magic) >> 32);
#endif
    return (hi + n) >> shift;
  }
  MLATUNE_FAST_DIV_FN uint32_t mod(uint32_t n) const { return n - div(n) * divisor; }
};

}  // namespace mlatune::gpu
