// The GPU's exact format conversions (gpu_formats.h) against numformat.h, everywhere; and the fp32
// GPU reference against the float64 CPU reference on small shapes (every dtype pair, qlen 1-4,
// pages 1 / 16 / 64, lengths down to L = qlen, poisoned memory, guard regions), plus one sequence
// long enough for many probability chunks. The device tests skip where there is no GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_problem.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/reference_gpu.h"
#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"

namespace mlatune {
namespace {

using gpu_test::Config;
using gpu_test::GuardedBuffer;
using gpu_test::Problem;

constexpr double kAtol = 1e-4;
constexpr double kRtol = 1e-4;
constexpr double kLseAtol = 1e-4;

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

TEST(GpuFormats, Fp8DecodersMatchHostOnEveryCode) {
  for (int code = 0; code < 256; ++code) {
    const auto b = static_cast<uint8_t>(code);
    EXPECT_EQ(bits(gpu::e4m3fn_to_float(b)), bits(e4m3fn_to_float(b))) << "e4m3fn " << code;
    EXPECT_EQ(bits(gpu::e4m3fnuz_to_float(b)), bits(e4m3fnuz_to_float(b))) << "fnuz " << code;
    // Staging as bf16 is exact: the bf16 bits are the float's upper half, the lower half is 0.
    const float fn = e4m3fn_to_float(b);
    const float fnuz = e4m3fnuz_to_float(b);
    EXPECT_EQ(uint32_t{gpu::e4m3fn_to_bf16(b)} << 16, bits(fn)) << "e4m3fn " << code;
    EXPECT_EQ(uint32_t{gpu::e4m3fnuz_to_bf16(b)} << 16, bits(fnuz)) << "fnuz " << code;
    uint8_t buf[1] = {b};
    EXPECT_EQ(bits(gpu::load_as_float(DType::kFP8E4M3FN, buf, 0)), bits(fn));
    EXPECT_EQ(bits(gpu::load_as_float(DType::kFP8E4M3FNUZ, buf, 0)), bits(fnuz));
  }
}

TEST(GpuFormats, Bf16MatchesHost) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto b = static_cast<uint16_t>(h);
    ASSERT_EQ(bits(gpu::bf16_to_float(b)), bits(bf16_to_float(b))) << h;
    ASSERT_EQ(gpu::load_as_bf16(DType::kBF16, &b, 0), b);
  }
  EXPECT_EQ(bits(gpu::bf16_lo(0x3f80c000u)), bits(-2.0f));  // low half is element 0
  EXPECT_EQ(bits(gpu::bf16_hi(0x3f80c000u)), bits(1.0f));
  std::mt19937 rng(3);
  std::vector<uint32_t> inputs = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                  0xffc00001u, 0x7f800001u, 0x7f7fffffu, 0x3f808000u, 0x3f818000u,
                                  0x3f80ffffu, 0x00008000u, 0x00018000u, 0x807fffffu};
  for (int i = 0; i < 1 << 20; ++i) inputs.push_back(rng());
  for (uint32_t u : inputs) {
    float f;
    std::memcpy(&f, &u, 4);
    ASSERT_EQ(gpu::float_to_bf16(f), float_to_bf16(f)) << std::hex << u;
  }
}

struct RefOutputs {
  std::vector<float> out, lse;
};

RefOutputs run_gpu_reference(MemorySpace& m, const Problem& p) {
  const DecodeShape& s = p.shape;
  const gpu_test::DeviceInputs in(m, p);
  GuardedBuffer out(m, s.out_elems() * 4, 0xff);  // NaN: an unwritten element shows
  GuardedBuffer lse(m, s.rows() * 4, 0xff);
  gpu_reference_decode(s, in.args(), reinterpret_cast<float*>(out.data()),
                       reinterpret_cast<float*>(lse.data()));
  m.synchronize();
  EXPECT_TRUE(out.guards_intact()) << "out guard overwritten";
  EXPECT_TRUE(lse.guards_intact()) << "lse guard overwritten";
  return {out.read<float>(), lse.read<float>()};
}

// Every element of every row, and every LSE (the GPU reference always writes it).
void expect_close(const Problem& p, const ReferenceResult& ref, const RefOutputs& got,
                  double* worst_ratio) {
  const DecodeShape& s = p.shape;
  int failures = 0;
  for (int64_t r = 0; r < s.rows(); ++r) {
    for (int d = 0; d < kHeadDimV; ++d) {
      const double g = got.out[r * kHeadDimV + d];
      const double want = ref.out[r * kHeadDimV + d];
      const double ratio =
          std::isfinite(g) ? std::fabs(g - want) / (kAtol + kRtol * std::fabs(want)) : 1e30;
      *worst_ratio = std::max(*worst_ratio, ratio);
      if (ratio > 1.0 && ++failures <= 3) {
        ADD_FAILURE() << "row " << r << " (token " << r / s.heads << ", head " << r % s.heads
                      << ") dim " << d << ": got " << g << " want " << want;
      }
    }
    const double lse_err = std::fabs(double{got.lse[r]} - ref.lse[r]);
    if (!(lse_err <= kLseAtol) && ++failures <= 3) {
      ADD_FAILURE() << "row " << r << ": lse " << got.lse[r] << " want " << ref.lse[r];
    }
  }
}

std::vector<Config> sweep() {
  const std::pair<DType, DType> dtypes[] = {
      {DType::kBF16, DType::kBF16},           {DType::kBF16, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FN, DType::kFP8E4M3FN}, {DType::kFP8E4M3FNUZ, DType::kFP8E4M3FNUZ},
      {DType::kBF16, DType::kFP8E4M3FNUZ},
  };
  std::vector<Config> out;
  uint32_t seed = 101;
  for (const auto& [qd, kd] : dtypes) {
    for (int32_t qlen : {1, 2, 3, 4}) {
      Config c;
      c.q_dtype = qd;
      c.kv_dtype = kd;
      c.qlen = qlen;
      c.heads = qlen == 3 ? 5 : 8;
      c.page_size = qlen == 1 ? 16 : (qlen == 2 ? 1 : 64);
      c.q_amp = seed % 3 == 0 ? 8.0f : 1.5f;
      c.adversarial = qlen > 1;
      c.lens = {qlen + 1, 129, 1, 67, 300};  // ragged, L = qlen, not multiples of pages
      c.seed = seed++;
      out.push_back(c);
    }
  }
  return out;
}

class GpuReferenceSweep : public ::testing::TestWithParam<Config> {};

TEST_P(GpuReferenceSweep, MatchesFloat64Reference) {
  MLATUNE_REQUIRE_GPU(m);
  SCOPED_TRACE(gpu_test::describe(GetParam()));
  const Problem p = gpu_test::make_problem(GetParam());
  const ReferenceResult ref =
      reference_decode(p.shape, p.host_args(), gpu_test::reference_threads());
  double worst = 0;
  expect_close(p, ref, run_gpu_reference(m, p), &worst);
  std::cout << "[ stats ] " << gpu_test::describe(GetParam()) << ": max err/tol " << worst << "\n";
}

INSTANTIATE_TEST_SUITE_P(Configs, GpuReferenceSweep, ::testing::ValuesIn(sweep()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return "c" + std::to_string(info.index);
                         });

TEST(GpuReference, LongSequencesManyChunks) {
  MLATUNE_REQUIRE_GPU(m);
  Config c;
  c.heads = 4;
  c.qlen = 3;
  c.page_size = 16;
  c.lens = {3000, 257, 3};  // chunks of 256 probabilities: many, one plus one key, one partial
  c.q_amp = 4.0f;
  c.adversarial = true;
  c.seed = 7;
  const Problem p = gpu_test::make_problem(c);
  const ReferenceResult ref =
      reference_decode(p.shape, p.host_args(), gpu_test::reference_threads());
  double worst = 0;
  expect_close(p, ref, run_gpu_reference(m, p), &worst);
  std::cout << "[ stats ] long sequences: max err/tol " << worst << "\n";
}

TEST(GpuReference, NullPointersThrowBeforeLaunching) {
  Config c;
  c.lens = {5};
  const Problem p = gpu_test::make_problem(c);
  float dummy[1];
  DecodeArgs a = p.host_args();  // never dereferenced: every call below is refused first
  a.q = nullptr;
  EXPECT_THROW(gpu_reference_decode(p.shape, a, dummy, dummy), LaunchError);
  a = p.host_args();
  EXPECT_THROW(gpu_reference_decode(p.shape, a, nullptr, dummy), LaunchError);
  EXPECT_THROW(gpu_reference_decode(p.shape, a, dummy, nullptr), LaunchError);
  DecodeShape bad = p.shape;
  bad.heads = 0;
  EXPECT_THROW(gpu_reference_decode(bad, a, dummy, dummy), LaunchError);
}

}  // namespace
}  // namespace mlatune
