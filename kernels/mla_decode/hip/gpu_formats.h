// Exact conversions between the storage formats of q and the KV cache (bf16, fp8 e4m3fn,
// fp8 e4m3fnuz) and float, callable from device and host code alike.
//
// They are written with integer bit manipulation only, so that one source gives the same bits with
// nvcc and with clang for AMD, and needs no vendor bf16 / fp8 type. Decoding is exact and agrees
// bit for bit with numformat.h (NaN included); tests/gpu/gpu_reference_test.cc checks every fp8
// code and a sweep of floats. This header includes no GPU runtime: plain C++ (the tests) can use
// it too.
//
// Every e4m3 value (either encoding) is exactly representable in bf16 (8 exponent bits cover
// 2^-10 .. 448, 7 mantissa bits cover 3), which lets kernels stage fp8 data as bf16 losslessly.
#pragma once

#include <cstdint>

#include "mla_decode/problem.h"

#if defined(__CUDACC__) || defined(__HIP__)
#define MLATUNE_FORMAT_FN __host__ __device__ inline
#else
#define MLATUNE_FORMAT_FN inline
#endif

namespace mlatune::gpu {

MLATUNE_FORMAT_FN uint32_t float_as_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
MLATUNE_FORMAT_FN float bits_as_float(uint32_t u) { return __builtin_bit_cast(float, u); }

// bf16 -> float: the bf16 bits are the float's upper half.
MLATUNE_FORMAT_FN float bf16_to_float(uint16_t b) { return bits_as_float(uint32_t{b} << 16); }
// The two bf16 of a 32-bit word read from memory (little endian): element 2k is the low half.
MLATUNE_FORMAT_FN float bf16_lo(uint32_t w) { return bits_as_float(w << 16); }
MLATUNE_FORMAT_FN float bf16_hi(uint32_t w) { return bits_as_float(w & 0xffff0000u); }

// float -> bf16, round to nearest even; NaN -> quiet NaN 0x7fc0 with the sign kept; overflow
// rounds to inf. Same bits as numformat.h's float_to_bf16.
MLATUNE_FORMAT_FN uint16_t float_to_bf16(float f) {
  const uint32_t bits = float_as_bits(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7fc0u);
  }
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

// An e4m3 code with exponent bias `bias`, ignoring NaN codes (the callers handle them): subnormals
// are man * 2^(1 - bias - 3), computed as an exact float product; normals are assembled directly.
MLATUNE_FORMAT_FN float e4m3_finite_to_float(uint8_t b, uint32_t bias) {
  const uint32_t sign = uint32_t{b & 0x80u} << 24;
  const uint32_t exp = (b >> 3) & 0xfu;
  const uint32_t man = b & 0x7u;
  if (exp == 0) {
    // 2^(-2 - bias): 2^-9 for bias 7, 2^-10 for bias 8.
    const float quantum = bits_as_float((127u - 2u - bias) << 23);
    return bits_as_float(sign | float_as_bits(static_cast<float>(man) * quantum));
  }
  return bits_as_float(sign | ((exp + 127u - bias) << 23) | (man << 20));
}

// OCP e4m3fn: bias 7, 0x7f / 0xff are NaN (sign kept), no infinities, -0 exists.
MLATUNE_FORMAT_FN float e4m3fn_to_float(uint8_t b) {
  if ((b & 0x7fu) == 0x7fu) return bits_as_float((uint32_t{b & 0x80u} << 24) | 0x7fc00000u);
  return e4m3_finite_to_float(b, 7);
}

// e4m3fnuz: bias 8, 0x80 is the only NaN, no infinities, no -0.
MLATUNE_FORMAT_FN float e4m3fnuz_to_float(uint8_t b) {
  if (b == 0x80u) return bits_as_float(0x7fc00000u);
  return e4m3_finite_to_float(b, 8);
}

// fp8 -> bf16 bits, exact (see the header comment): the float's low 16 bits are zero.
MLATUNE_FORMAT_FN uint16_t e4m3fn_to_bf16(uint8_t b) {
  return static_cast<uint16_t>(float_as_bits(e4m3fn_to_float(b)) >> 16);
}
MLATUNE_FORMAT_FN uint16_t e4m3fnuz_to_bf16(uint8_t b) {
  return static_cast<uint16_t>(float_as_bits(e4m3fnuz_to_float(b)) >> 16);
}

// Magnitude code (7 bits) of a finite, non-negative float for an e4m3 format with exponent bias
// `bias` and largest finite magnitude code `max_code`: round to nearest even on the float's
// integer significand (subnormal targets and the carry into the next exponent fall out of the
// same rounding), saturating at max_code. Same bits as numformat.h's encoders.
MLATUNE_FORMAT_FN uint32_t e4m3_magnitude_code(float a, int32_t bias, uint32_t max_code) {
  const uint32_t bits = float_as_bits(a);
  int32_t exp = static_cast<int32_t>(bits >> 23);
  uint32_t sig = bits & 0x7fffffu;
  if (exp == 0) {
    exp = 1;  // float subnormal: the scale of exponent 1, no implicit bit
  } else {
    sig |= 0x800000u;
  }
  const int32_t target_exp = exp - 127 + bias;
  uint32_t base;
  int32_t shift;
  if (target_exp >= 1) {
    shift = 20;
    base = (static_cast<uint32_t>(target_exp) << 3) + ((sig >> shift) & 7u);
  } else {
    shift = 21 - target_exp;
    if (shift > 25) return 0;  // below half the smallest subnormal
    base = sig >> shift;
  }
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (base & 1u))) ++base;
  return base > max_code ? max_code : base;
}

// float -> OCP e4m3fn: NaN -> 0x7f (0xff when negative), beyond 448 saturates, -0 -> 0x80.
MLATUNE_FORMAT_FN uint8_t float_to_e4m3fn(float f) {
  const uint32_t bits = float_as_bits(f);
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag_bits = bits & 0x7fffffffu;
  if (mag_bits > 0x7f800000u) return static_cast<uint8_t>(sign | 0x7fu);
  if (mag_bits >= 0x43e00000u) return static_cast<uint8_t>(sign | 0x7eu);  // >= 448 (and inf)
  return static_cast<uint8_t>(sign | e4m3_magnitude_code(bits_as_float(mag_bits), 7, 0x7e));
}

// float -> e4m3fnuz: NaN -> 0x80, beyond 240 saturates, zero is always +0 (0x80 is NaN).
MLATUNE_FORMAT_FN uint8_t float_to_e4m3fnuz(float f) {
  const uint32_t bits = float_as_bits(f);
  const uint32_t mag_bits = bits & 0x7fffffffu;
  if (mag_bits > 0x7f800000u) return 0x80u;
  const uint32_t sign = (bits >> 24) & 0x80u;
  const uint32_t mag = mag_bits >= 0x43700000u  // >= 240 (and inf)
                           ? 0x7fu
                           : e4m3_magnitude_code(bits_as_float(mag_bits), 8, 0x7f);
  return static_cast<uint8_t>(mag == 0 ? 0u : (sign | mag));
}

// Element i of a buffer of type T as float / as exact bf16 bits. Offsets are 64-bit.
template <DType T>
MLATUNE_FORMAT_FN float load_as_float(const void* base, int64_t i) {
  if constexpr (T == DType::kBF16) {
    return bf16_to_float(static_cast<const uint16_t*>(base)[i]);
  } else if constexpr (T == DType::kFP8E4M3FN) {
    return e4m3fn_to_float(static_cast<const uint8_t*>(base)[i]);
  } else {
    return e4m3fnuz_to_float(static_cast<const uint8_t*>(base)[i]);
  }
}

template <DType T>
MLATUNE_FORMAT_FN uint16_t load_as_bf16(const void* base, int64_t i) {
  if constexpr (T == DType::kBF16) {
    return static_cast<const uint16_t*>(base)[i];
  } else if constexpr (T == DType::kFP8E4M3FN) {
    return e4m3fn_to_bf16(static_cast<const uint8_t*>(base)[i]);
  } else {
    return e4m3fnuz_to_bf16(static_cast<const uint8_t*>(base)[i]);
  }
}

// Runtime-typed variants, for data read once per row (q) where a branch costs nothing.
MLATUNE_FORMAT_FN float load_as_float(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kBF16:
      return load_as_float<DType::kBF16>(base, i);
    case DType::kFP8E4M3FN:
      return load_as_float<DType::kFP8E4M3FN>(base, i);
    default:
      return load_as_float<DType::kFP8E4M3FNUZ>(base, i);
  }
}

MLATUNE_FORMAT_FN uint16_t load_as_bf16(DType t, const void* base, int64_t i) {
  switch (t) {
    case DType::kBF16:
      return load_as_bf16<DType::kBF16>(base, i);
    case DType::kFP8E4M3FN:
      return load_as_bf16<DType::kFP8E4M3FN>(base, i);
    default:
      return load_as_bf16<DType::kFP8E4M3FNUZ>(base, i);
  }
}

}  // namespace mlatune::gpu
