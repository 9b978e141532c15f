#include "mla_decode/numformat.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <vector>

namespace mlatune {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Reference decoders written from the format definitions, independent of numformat.cc.
double ref_e4m3(uint8_t c, int bias) {
  const int sign = c >> 7;
  const int exp = (c >> 3) & 15;
  const int man = c & 7;
  const double mag = exp == 0 ? (man / 8.0) * std::pow(2.0, 1 - bias)
                              : (1.0 + man / 8.0) * std::pow(2.0, exp - bias);
  return sign ? -mag : mag;
}
bool fn_is_nan(int c) { return (c & 0x7f) == 0x7f; }
bool fnuz_is_nan(int c) { return c == 0x80; }

struct Fp8Case {
  const char* name;
  int bias;
  float max;
  uint8_t max_code;
  bool (*is_nan)(int);
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};
void PrintTo(const Fp8Case& c, std::ostream* os) { *os << c.name; }

const Fp8Case kFn{"e4m3fn", 7, 448.0f, 0x7e, fn_is_nan, float_to_e4m3fn, e4m3fn_to_float};
const Fp8Case kFnuz{"e4m3fnuz", 8, 240.0f, 0x7f, fnuz_is_nan, float_to_e4m3fnuz, e4m3fnuz_to_float};

// Non-negative finite codes in increasing value order (code order for these formats).
std::vector<uint8_t> positive_codes(const Fp8Case& f) {
  std::vector<uint8_t> codes;
  for (int c = 0; c <= f.max_code; ++c) codes.push_back(static_cast<uint8_t>(c));
  return codes;
}

// Brute-force nearest code: the positive code with the smallest distance, ties to the even code.
uint8_t ref_encode(const Fp8Case& f, float x) {
  if (std::isnan(x)) return f.bias == 7 ? (std::signbit(x) ? 0xff : 0x7f) : 0x80;
  const double a = std::fabs(static_cast<double>(x));
  uint8_t best = 0;
  double best_d = std::numeric_limits<double>::infinity();
  for (uint8_t c : positive_codes(f)) {
    const double d = std::fabs(ref_e4m3(c, f.bias) - a);
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  if (a > f.max) best = f.max_code;
  if (!std::signbit(x)) return best;
  if (f.bias == 8 && best == 0) return 0x00;
  return best | 0x80;
}

class Fp8Test : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8Test, DecodesAllCodesLikeTheFormula) {
  const Fp8Case& f = GetParam();
  int nans = 0;
  for (int c = 0; c < 256; ++c) {
    const float got = f.decode(static_cast<uint8_t>(c));
    if (f.is_nan(c)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
      ++nans;
      continue;
    }
    EXPECT_EQ(static_cast<double>(got), ref_e4m3(static_cast<uint8_t>(c), f.bias)) << "code " << c;
    EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "code " << c;
  }
  EXPECT_EQ(nans, f.bias == 7 ? 2 : 1);
  EXPECT_EQ(f.decode(f.max_code), f.max);
  EXPECT_EQ(f.decode(0x01), std::ldexp(1.0f, -2 - f.bias));  // smallest subnormal
}

TEST_P(Fp8Test, EncodeInvertsDecodeForEveryFiniteCode) {
  const Fp8Case& f = GetParam();
  for (int c = 0; c < 256; ++c) {
    if (f.is_nan(c)) continue;
    EXPECT_EQ(f.encode(f.decode(static_cast<uint8_t>(c))), c) << "code " << c;
  }
}

TEST_P(Fp8Test, MidpointsRoundToEvenAndNeighboursRoundAway) {
  const Fp8Case& f = GetParam();
  const std::vector<uint8_t> codes = positive_codes(f);
  for (size_t k = 0; k + 1 < codes.size(); ++k) {
    const uint8_t lo = codes[k];
    const uint8_t hi = codes[k + 1];
    const float mid = (f.decode(lo) + f.decode(hi)) / 2;  // exact: 4 significant bits
    ASSERT_EQ(static_cast<double>(mid), (ref_e4m3(lo, f.bias) + ref_e4m3(hi, f.bias)) / 2);
    const uint8_t even = (lo & 1) ? hi : lo;
    EXPECT_EQ(f.encode(mid), even) << "between " << int{lo} << " and " << int{hi};
    EXPECT_EQ(f.encode(std::nextafter(mid, 0.0f)), lo) << "below mid " << int{lo};
    EXPECT_EQ(f.encode(std::nextafter(mid, kInf)), hi) << "above mid " << int{lo};
    const uint8_t neg_even = (f.bias == 8 && even == 0) ? 0x00 : (even | 0x80);
    EXPECT_EQ(f.encode(-mid), neg_even) << "negative between " << int{lo} << " and " << int{hi};
    EXPECT_EQ(f.encode(-std::nextafter(mid, kInf)), hi | 0x80);
  }
}

TEST_P(Fp8Test, MatchesBruteForceNearestOnRandomFloats) {
  const Fp8Case& f = GetParam();
  std::mt19937 rng(1234);
  // Exponents from far below the subnormals to beyond the max, both signs.
  std::uniform_real_distribution<float> mant(1.0f, 2.0f);
  std::uniform_int_distribution<int> exp(-20, 12);
  for (int i = 0; i < 200000; ++i) {
    float x = std::ldexp(mant(rng), exp(rng));
    if (i & 1) x = -x;
    ASSERT_EQ(f.encode(x), ref_encode(f, x)) << "x=" << x;
  }
}

TEST_P(Fp8Test, SaturatesInsteadOfOverflowing) {
  const Fp8Case& f = GetParam();
  const uint8_t pos = f.max_code;
  const uint8_t neg = f.max_code | 0x80;
  const float next_would_be = f.max + std::ldexp(1.0f, f.bias == 7 ? 5 : 4);  // 480 / 256
  for (float x : {std::nextafter(f.max, kInf), f.max + 1, (f.max + next_would_be) / 2,
                  std::nextafter((f.max + next_would_be) / 2, kInf), next_would_be, 1e9f,
                  std::numeric_limits<float>::max(), kInf}) {
    EXPECT_EQ(f.encode(x), pos) << "x=" << x;
    EXPECT_EQ(f.encode(-x), neg) << "x=" << -x;
  }
  EXPECT_EQ(f.encode(f.max), pos);
  EXPECT_EQ(f.encode(std::nextafter(f.max, 0.0f)), pos);
}

TEST_P(Fp8Test, TinyValuesAndZeros) {
  const Fp8Case& f = GetParam();
  const float min_sub = std::ldexp(1.0f, -2 - f.bias);
  EXPECT_EQ(f.encode(min_sub), 0x01);
  EXPECT_EQ(f.encode(min_sub / 2), 0x00);  // tie to even -> 0
  EXPECT_EQ(f.encode(std::nextafter(min_sub / 2, 1.0f)), 0x01);
  EXPECT_EQ(f.encode(min_sub * 1.5f), 0x02);  // tie between 1 and 2 -> 2
  EXPECT_EQ(f.encode(min_sub * 2.5f), 0x02);  // tie between 2 and 3 -> 2
  EXPECT_EQ(f.encode(std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(f.encode(0.0f), 0x00);
  EXPECT_EQ(f.encode(std::ldexp(1.0f, 1 - f.bias)), 0x08);  // smallest normal
  EXPECT_EQ(f.encode(1.0f), f.bias << 3);
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Test, ::testing::Values(kFn, kFnuz),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(E4M3FN, NegativeZeroAndNaN) {
  EXPECT_EQ(float_to_e4m3fn(-0.0f), 0x80);
  EXPECT_EQ(float_to_e4m3fn(-std::ldexp(1.0f, -11)), 0x80);  // rounds to -0
  EXPECT_EQ(float_to_e4m3fn(kNaN), 0x7f);
  EXPECT_EQ(float_to_e4m3fn(-kNaN), 0xff);
  EXPECT_EQ(float_to_e4m3fn(std::bit_cast<float>(0x7f800001u)), 0x7f);  // signalling NaN
  EXPECT_EQ(float_to_e4m3fn(std::bit_cast<float>(0xffc12345u)), 0xff);
  EXPECT_TRUE(std::signbit(e4m3fn_to_float(0x80)));
  EXPECT_EQ(e4m3fn_to_float(0x80), 0.0f);
}

TEST(E4M3FNUZ, NoNegativeZeroAndSingleNaN) {
  EXPECT_EQ(float_to_e4m3fnuz(-0.0f), 0x00);
  EXPECT_EQ(float_to_e4m3fnuz(-std::ldexp(1.0f, -11)), 0x00);  // half the min subnormal
  EXPECT_EQ(float_to_e4m3fnuz(-std::ldexp(1.0f, -10)), 0x81);
  EXPECT_EQ(float_to_e4m3fnuz(kNaN), 0x80);
  EXPECT_EQ(float_to_e4m3fnuz(-kNaN), 0x80);
  EXPECT_EQ(float_to_e4m3fnuz(std::bit_cast<float>(0x7f800001u)), 0x80);
  EXPECT_EQ(float_to_e4m3fnuz(241.0f), 0x7f);
  EXPECT_EQ(float_to_e4m3fnuz(-241.0f), 0xff);
}

// Reference bf16 rounding: pick the nearer of the two bracketing codes in double precision.
uint16_t ref_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((bits >> 16 & 0x8000) | 0x7fc0);
  if (std::isinf(f)) return static_cast<uint16_t>(bits >> 16);
  const uint16_t lo = static_cast<uint16_t>(bits >> 16);  // truncation, toward zero
  const uint16_t hi = static_cast<uint16_t>(lo + 1);      // next code away from zero
  const auto value = [](uint16_t c) {
    // The code past the largest finite value is inf; it counts as 2^128 for rounding.
    if ((c & 0x7fff) == 0x7f80) return std::copysign(std::ldexp(1.0, 128), (c & 0x8000) ? -1 : 1);
    return static_cast<double>(std::bit_cast<float>(static_cast<uint32_t>(c) << 16));
  };
  const double dlo = std::fabs(f - value(lo));
  const double dhi = std::fabs(f - value(hi));
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

TEST(BF16, RoundTripsEveryNonNaNCode) {
  int checked = 0;
  for (uint32_t c = 0; c < 0x10000; ++c) {
    const uint16_t code = static_cast<uint16_t>(c);
    const float f = bf16_to_float(code);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), c << 16);
    if (std::isnan(f)) {
      EXPECT_EQ(float_to_bf16(f), (code & 0x8000) | 0x7fc0) << "code " << c;
      continue;
    }
    ASSERT_EQ(float_to_bf16(f), code) << "code " << c;
    ++checked;
  }
  EXPECT_EQ(checked, 65536 - 2 * 127);
}

TEST(BF16, MidpointsTieToEven) {
  // 1 + 2^-8 is halfway between bf16 1.0 (0x3f80, even) and 1 + 2^-7 (0x3f81).
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808000u)), 0x3f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f818000u)), 0x3f82);  // odd below -> up
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f808001u)), 0x3f81);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x3f817fffu)), 0x3f81);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0xbf808000u)), 0xbf80);
  // Half an ulp above the largest finite bf16 rounds to inf (0x7f7f is odd).
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f8000u)), 0x7f80);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f7f7fffu)), 0x7f7f);
}

TEST(BF16, SpecialValues) {
  EXPECT_EQ(float_to_bf16(kInf), 0x7f80);
  EXPECT_EQ(float_to_bf16(-kInf), 0xff80);
  EXPECT_EQ(float_to_bf16(kNaN), 0x7fc0);
  EXPECT_EQ(float_to_bf16(-kNaN), 0xffc0);
  // A NaN whose payload lies only in the dropped bits must stay NaN, not become inf.
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x7f800001u)), 0x7fc0);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0xff80ffffu)), 0xffc0);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00018000u)), 0x0002);  // subnormal tie -> even
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00008000u)), 0x0000);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x00008001u)), 0x0001);
  EXPECT_EQ(float_to_bf16(std::bit_cast<float>(0x007fffffu)), 0x0080);  // carries into normal
}

TEST(BF16, MatchesReferenceOnRandomBitPatterns) {
  std::mt19937 rng(42);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 2000000; ++i) {
    uint32_t b = bits(rng);
    if (i % 4 == 0) b = (b & 0xffff0000u) | 0x8000u;  // plenty of exact ties
    const float f = std::bit_cast<float>(b);
    ASSERT_EQ(float_to_bf16(f), ref_bf16(f)) << std::hex << "bits 0x" << b;
  }
}

TEST(Elements, EncodeDecodeThroughBuffers) {
  uint16_t bf[3] = {};
  encode_element(DType::kBF16, bf, 2, 1.5f);
  EXPECT_EQ(bf[2], 0x3fc0);
  EXPECT_EQ(bf[0], 0);
  EXPECT_EQ(decode_element(DType::kBF16, bf, 2), 1.5f);

  uint8_t fp8[4] = {};
  encode_element(DType::kFP8E4M3FN, fp8, 1, -448.0f);
  encode_element(DType::kFP8E4M3FNUZ, fp8, 3, 1000.0f);
  EXPECT_EQ(fp8[1], 0xfe);
  EXPECT_EQ(fp8[3], 0x7f);
  EXPECT_EQ(fp8[0], 0);
  EXPECT_EQ(decode_element(DType::kFP8E4M3FN, fp8, 1), -448.0f);
  EXPECT_EQ(decode_element(DType::kFP8E4M3FNUZ, fp8, 3), 240.0f);
  EXPECT_EQ(decode_element(DType::kFP8E4M3FNUZ, fp8, 1), ref_e4m3(0xfe, 8));  // -224
}

TEST(Elements, NaNBitsDecodeAsNaNAndMaxIsLargestFinite) {
  const uint16_t bf = nan_bits(DType::kBF16);
  EXPECT_TRUE(std::isnan(decode_element(DType::kBF16, &bf, 0)));
  for (DType t : {DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ}) {
    const uint8_t b = static_cast<uint8_t>(nan_bits(t));
    EXPECT_TRUE(std::isnan(decode_element(t, &b, 0))) << dtype_name(t);
  }
  EXPECT_EQ(dtype_max(DType::kFP8E4M3FN), 448.0f);
  EXPECT_EQ(dtype_max(DType::kFP8E4M3FNUZ), 240.0f);
  const float bmax = dtype_max(DType::kBF16);
  EXPECT_EQ(float_to_bf16(bmax), 0x7f7f);
  EXPECT_TRUE(std::isinf(bf16_to_float(float_to_bf16(bmax) + 1)));
}

}  // namespace
}  // namespace mlatune
