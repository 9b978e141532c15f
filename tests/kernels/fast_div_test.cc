// FastDiv (mla_decode/hip/fast_div.h), the kernels' page-slot division, against the / operator.
#include "mla_decode/hip/fast_div.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>

namespace mlatune::gpu {
namespace {

void expect_exact(const FastDiv& f, uint32_t d, uint32_t n) {
  ASSERT_EQ(f.div(n), n / d) << "n=" << n << " d=" << d;
  ASSERT_EQ(f.mod(n), n % d) << "n=" << n << " d=" << d;
}

TEST(FastDiv, EveryPageSizeUpTo4096OnKeyIndicesAndBlockEdges) {
  for (uint32_t d = 1; d <= 4096; ++d) {
    const FastDiv f(d);
    for (uint32_t n = 0; n < 20000; ++n) expect_exact(f, d, n);
    // Both sides of every multiple of d up to the largest KV length, sparsely, and the top.
    for (uint64_t k = 1; k * d < (uint64_t{1} << 31); k = k * 3 + 1) {
      const uint32_t edge = static_cast<uint32_t>(k * d);
      expect_exact(f, d, edge - 1);
      expect_exact(f, d, edge);
      if (edge + 1 < (uint32_t{1} << 31)) expect_exact(f, d, edge + 1);
    }
    expect_exact(f, d, 0x7fffffffu);
  }
}

TEST(FastDiv, RandomDivisorsAndNumeratorsOverTheWholeDomain) {
  std::mt19937 rng(11);
  for (int i = 0; i < 2000; ++i) {
    const uint32_t d = 1 + static_cast<uint32_t>(rng() % 0x7ffffffeu);
    const FastDiv f(d);
    for (int j = 0; j < 500; ++j) expect_exact(f, d, static_cast<uint32_t>(rng() & 0x7fffffffu));
    expect_exact(f, d, d - 1);
    expect_exact(f, d, d);
    expect_exact(f, d, 0x7fffffffu);
  }
}

TEST(FastDiv, PowersOfTwoAreAShift) {
  for (uint32_t s = 0; s < 31; ++s) {
    const FastDiv f(uint32_t{1} << s);
    EXPECT_EQ(f.shift, s);
    EXPECT_EQ(f.magic, 1u);
  }
}

}  // namespace
}  // namespace mlatune::gpu
