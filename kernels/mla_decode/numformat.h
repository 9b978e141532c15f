// Exact host conversions between float and the storage formats of q and the KV cache.
//
// Encoding (float -> format) rounds to nearest, ties to even. Values beyond the largest finite
// value saturate to it (the convention of fp8 KV-cache quantisation, where the per-tensor scale is
// chosen so that saturation is rare); NaN encodes as the format's NaN. Decoding is exact.
#pragma once

#include <cstdint>

#include "mla_decode/problem.h"

namespace mlatune {

uint16_t float_to_bf16(float f);  // NaN -> quiet NaN 0x7fc0 (sign kept); inf stays inf
float bf16_to_float(uint16_t b);

uint8_t float_to_e4m3fn(float f);  // max 448; NaN -> 0x7f (0xff for negative NaN); -0 -> 0x80
float e4m3fn_to_float(uint8_t b);  // 0x7f and 0xff are NaN; no infinities

uint8_t float_to_e4m3fnuz(float f);  // max 240; NaN -> 0x80; -0 -> 0x00 (no negative zero)
float e4m3fnuz_to_float(uint8_t b);  // 0x80 is NaN; no infinities; bias 8

inline constexpr float kE4M3FNMax = 448.0f;
inline constexpr float kE4M3FNUZMax = 240.0f;

// Decodes element `i` of a buffer of type `t` (2-byte elements for bf16, 1-byte for fp8).
float decode_element(DType t, const void* data, int64_t i);
// Encodes `f` as element `i` of a buffer of type `t`.
void encode_element(DType t, void* data, int64_t i, float f);
// Bit pattern of a NaN in format `t` (used to poison unused memory).
uint16_t nan_bits(DType t);
float dtype_max(DType t);  // largest finite value

}  // namespace mlatune
