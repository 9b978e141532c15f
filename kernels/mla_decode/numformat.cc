#include "mla_decode/numformat.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace mlatune {
namespace {

// Parameters of an fp8 format with 4 exponent bits and 3 mantissa bits.
struct Fp8Format {
  int bias;
  float max;
  uint8_t max_code;  // magnitude bits of the largest finite value
};

constexpr Fp8Format kFn{7, kE4M3FNMax, 0x7e};
constexpr Fp8Format kFnuz{8, kE4M3FNUZMax, 0x7f};

// Magnitude code (7 bits) of the finite, non-negative `a` <= fmt.max, rounded to nearest even.
// Works on the float's integer significand so that subnormal targets and the carry into the next
// exponent fall out of the same integer rounding.
uint8_t encode_magnitude(float a, const Fp8Format& fmt) {
  const uint32_t bits = std::bit_cast<uint32_t>(a);
  int32_t exp = static_cast<int32_t>(bits >> 23);
  uint32_t sig = bits & 0x7fffffu;
  if (exp == 0) {
    exp = 1;  // float subnormal: same scale as exponent 1, no implicit bit
  } else {
    sig |= 0x800000u;
  }
  // The code counts units of the target's quantum at this exponent. Target exponent field
  // e_t = exp - 127 + bias; below 1 the target is subnormal with quantum 2^(1 - bias - 3).
  const int32_t target_exp = exp - 127 + fmt.bias;
  uint32_t base;  // code before rounding
  int32_t shift;  // float significand bits dropped
  if (target_exp >= 1) {
    shift = 20;
    base = (static_cast<uint32_t>(target_exp) << 3) + ((sig >> shift) & 7u);
  } else {
    shift = 21 - target_exp;   // one more bit per step below the smallest normal exponent
    if (shift > 25) return 0;  // below half the smallest subnormal (sig < 2^24)
    base = sig >> shift;
  }
  const uint32_t rem = sig & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1);
  if (rem > half || (rem == half && (base & 1u))) ++base;  // a carry moves into the exponent
  return static_cast<uint8_t>(base > fmt.max_code ? fmt.max_code : base);
}

float decode_fp8(uint8_t b, const Fp8Format& fmt) {
  const int exp = (b >> 3) & 0xf;
  const int man = b & 7;
  const float mag = exp == 0 ? std::ldexp(static_cast<float>(man), 1 - fmt.bias - 3)
                             : std::ldexp(static_cast<float>(8 + man), exp - fmt.bias - 3);
  return (b & 0x80) ? -mag : mag;
}

[[noreturn]] void bad_dtype(DType t) {
  throw std::invalid_argument("unknown dtype " + std::to_string(static_cast<int>(t)));
}

}  // namespace

uint16_t float_to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>(((bits >> 16) & 0x8000u) | 0x7fc0u);
  // Round to nearest even on the dropped 16 bits; overflow correctly carries into inf.
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint8_t float_to_e4m3fn(float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  if (std::isnan(f)) return sign | 0x7f;
  const float a = std::fabs(f);
  if (a > kFn.max) return sign | kFn.max_code;  // saturate, including inf
  return sign | encode_magnitude(a, kFn);
}

float e4m3fn_to_float(uint8_t b) {
  if ((b & 0x7f) == 0x7f) {
    return std::copysign(std::numeric_limits<float>::quiet_NaN(), (b & 0x80) ? -1.0f : 1.0f);
  }
  return decode_fp8(b, kFn);
}

uint8_t float_to_e4m3fnuz(float f) {
  if (std::isnan(f)) return 0x80;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float a = std::fabs(f);
  if (a > kFnuz.max) return sign | kFnuz.max_code;
  const uint8_t mag = encode_magnitude(a, kFnuz);
  return mag == 0 ? 0x00 : (sign | mag);  // 0x80 is NaN, so zero is always +0
}

float e4m3fnuz_to_float(uint8_t b) {
  if (b == 0x80) return std::numeric_limits<float>::quiet_NaN();
  return decode_fp8(b, kFnuz);
}

float decode_element(DType t, const void* data, int64_t i) {
  switch (t) {
    case DType::kBF16: {
      uint16_t v;
      std::memcpy(&v, static_cast<const uint8_t*>(data) + i * 2, sizeof(v));
      return bf16_to_float(v);
    }
    case DType::kFP8E4M3FN:
      return e4m3fn_to_float(static_cast<const uint8_t*>(data)[i]);
    case DType::kFP8E4M3FNUZ:
      return e4m3fnuz_to_float(static_cast<const uint8_t*>(data)[i]);
  }
  bad_dtype(t);
}

void encode_element(DType t, void* data, int64_t i, float f) {
  switch (t) {
    case DType::kBF16: {
      const uint16_t v = float_to_bf16(f);
      std::memcpy(static_cast<uint8_t*>(data) + i * 2, &v, sizeof(v));
      return;
    }
    case DType::kFP8E4M3FN:
      static_cast<uint8_t*>(data)[i] = float_to_e4m3fn(f);
      return;
    case DType::kFP8E4M3FNUZ:
      static_cast<uint8_t*>(data)[i] = float_to_e4m3fnuz(f);
      return;
  }
  bad_dtype(t);
}

uint16_t nan_bits(DType t) {
  switch (t) {
    case DType::kBF16:
      return 0x7fc0;
    case DType::kFP8E4M3FN:
      return 0x7f;
    case DType::kFP8E4M3FNUZ:
      return 0x80;
  }
  bad_dtype(t);
}

float dtype_max(DType t) {
  switch (t) {
    case DType::kBF16:
      return bf16_to_float(0x7f7f);
    case DType::kFP8E4M3FN:
      return kFn.max;
    case DType::kFP8E4M3FNUZ:
      return kFnuz.max;
  }
  bad_dtype(t);
}

}  // namespace mlatune
