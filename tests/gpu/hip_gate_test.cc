// The GPU gate backend against the host one: cases generated on the device are the host's bytes
// exactly, the device comparison reports what the host comparison reports, and first_difference
// finds the same byte.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <vector>

#include "gpu/gpu_test_problem.h"
#include "mla_decode/gate_backend.h"
#include "mla_decode/memory.h"
#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"
#include "tuner/validation_case.h"

namespace mlatune {
namespace {

ValidationCase small_case(DType q, DType kv, int32_t qlen, int32_t page, InputPattern pattern,
                          int32_t batch = 3, int32_t max_kv = 300) {
  BucketKey b;
  b.key = {16, qlen, q, kv, page, true};
  b.batch_lo = 1;
  b.batch_hi = batch;
  b.kv_lo = 1;
  b.kv_hi = max_kv;
  ValidationSettings v;
  return make_validation_case(b, {batch, max_kv}, 7, pattern, 1.0 / 24.0, v);
}

template <typename T>
std::vector<T> fetch(MemorySpace& m, const void* src, size_t n) {
  std::vector<T> out(n);
  m.copy_to_host(out.data(), src, n * sizeof(T));
  return out;
}

TEST(HipGateTest, DeviceCasesAreTheHostBytes) {
  MLATUNE_REQUIRE_GPU(m);
  int checked = 0;
  for (DType q : {DType::kBF16, DType::kFP8E4M3FN}) {
    for (DType kv : {DType::kBF16, DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ}) {
      for (int32_t page : {1, 16, 64}) {
        for (InputPattern pat : {InputPattern::kRandom, InputPattern::kPeaked,
                                 InputPattern::kWideRange, InputPattern::kCausalTrap}) {
          const int32_t qlen = page == 16 ? 3 : 1;
          const ValidationCase c = small_case(q, kv, qlen, page, pat);
          SCOPED_TRACE(c.label + " q=" + std::string(dtype_name(q)) +
                       " kv=" + std::string(dtype_name(kv)) + " page=" + std::to_string(page));
          const HostCase host = generate_host_case(c.spec);
          auto dev = gate_backend(Backend::kHip).prepare(c.spec, {}, 1);
          const DecodeArgs a = dev->args();
          EXPECT_EQ(fetch<uint8_t>(m, a.q, host.q.size()), host.q);
          EXPECT_EQ(fetch<uint8_t>(m, a.kv, host.kv.size()), host.kv);
          EXPECT_EQ(fetch<int32_t>(m, a.block_table, host.block_table.size()), host.block_table);
          EXPECT_EQ(fetch<int32_t>(m, a.kv_lens, host.kv_lens.size()), host.kv_lens);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 72);
}

// Output rows: the float64 reference rounded to bf16, with planted faults.
std::vector<uint16_t> rounded_reference(const ValidationCase& c) {
  const HostCase h = generate_host_case(c.spec);
  const ReferenceResult r = reference_decode(c.shape(), h.args(), 2);
  std::vector<uint16_t> out(r.out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = float_to_bf16(static_cast<float>(r.out[i]));
  return out;
}

TEST(HipGateTest, DeviceComparisonMatchesTheHost) {
  MLATUNE_REQUIRE_GPU(m);
  for (InputPattern pat : {InputPattern::kRandom, InputPattern::kWideRange}) {
    const ValidationCase c =
        small_case(DType::kBF16, DType::kFP8E4M3FN, 2, 16, pat, /*batch=*/4, /*max_kv=*/200);
    SCOPED_TRACE(c.label);
    const DecodeShape& s = c.shape();
    std::vector<uint16_t> out = rounded_reference(c);
    std::vector<float> lse(static_cast<size_t>(s.rows()), 1.0f);
    // Row 5: a large error at dim 77; row 9: every dim scaled (cosine stays 1, ratio grows).
    out[5 * kHeadDimV + 77] = float_to_bf16(bf16_to_float(out[5 * kHeadDimV + 77]) + 3.0f);
    for (int d = 0; d < kHeadDimV; ++d) {
      out[9 * kHeadDimV + d] = float_to_bf16(bf16_to_float(out[9 * kHeadDimV + d]) * 1.5f);
    }
    auto host = gate_backend(Backend::kHost).prepare(c.spec, c.checked_rows, 2);
    auto dev = gate_backend(Backend::kHip).prepare(c.spec, c.checked_rows, 1);
    DeviceBuffer d_out(m, out.size() * 2), d_lse(m, lse.size() * 4);
    m.copy_to_device(d_out.data(), out.data(), out.size() * 2);
    m.copy_to_device(d_lse.data(), lse.data(), lse.size() * 4);
    const OutputCheck h = host->check(out.data(), lse.data(), 3e-3, 4e-2);
    const OutputCheck g = dev->check(static_cast<uint16_t*>(d_out.data()),
                                     static_cast<float*>(d_lse.data()), 3e-3, 4e-2);
    EXPECT_EQ(g.bad_out, -1);
    EXPECT_EQ(g.bad_lse, -1);
    ASSERT_EQ(g.rows.size(), h.rows.size());
    ASSERT_EQ(g.rows.size(), c.checked_rows.size());
    for (size_t k = 0; k < g.rows.size(); ++k) {
      SCOPED_TRACE("checked row " + std::to_string(k));
      // The GPU reference is fp32, the host one float64: metrics agree to rounding.
      EXPECT_NEAR(g.rows[k].max_abs, h.rows[k].max_abs, 2e-3 + 1e-3 * h.rows[k].max_abs);
      EXPECT_NEAR(g.rows[k].worst_ratio, h.rows[k].worst_ratio,
                  0.02 + 0.01 * h.rows[k].worst_ratio);
      EXPECT_NEAR(g.rows[k].cosine, h.rows[k].cosine, 1e-5);
      EXPECT_NEAR(g.rows[k].lse_err, h.rows[k].lse_err, 1e-3);
      if (h.rows[k].worst_ratio > 10) {
        EXPECT_EQ(g.rows[k].worst_dim, h.rows[k].worst_dim);
      }
    }
    EXPECT_GT(g.rows[5].worst_ratio, 10);
    EXPECT_EQ(g.rows[5].worst_dim, 77);
    EXPECT_GT(g.rows[9].worst_ratio, 1.5);
    EXPECT_LT(g.rows[0].worst_ratio, 0.5);

    // A NaN and an Inf: the first of each is reported, as on the host.
    out[3 * kHeadDimV + 11] = 0x7fc0;
    out[7 * kHeadDimV] = 0x7f80;
    lse[6] = -INFINITY;
    m.copy_to_device(d_out.data(), out.data(), out.size() * 2);
    m.copy_to_device(d_lse.data(), lse.data(), lse.size() * 4);
    const OutputCheck h2 = host->check(out.data(), lse.data(), 3e-3, 4e-2);
    const OutputCheck g2 = dev->check(static_cast<uint16_t*>(d_out.data()),
                                      static_cast<float*>(d_lse.data()), 3e-3, 4e-2);
    EXPECT_EQ(h2.bad_out, 3 * kHeadDimV + 11);
    EXPECT_EQ(g2.bad_out, h2.bad_out);
    EXPECT_TRUE(std::isnan(g2.bad_out_value));
    EXPECT_EQ(g2.bad_lse, 6);
    EXPECT_EQ(g2.bad_lse_value, -INFINITY);
  }
}

TEST(HipGateTest, FirstDifferenceFindsTheFirstDifferingByte) {
  MLATUNE_REQUIRE_GPU(m);
  const size_t n = 1 << 20 | 3;  // not a multiple of 4: the tail is checked too
  std::vector<uint8_t> a(n);
  for (size_t i = 0; i < n; ++i) a[i] = static_cast<uint8_t>(i * 131 + 7);
  DeviceBuffer da(m, n), db(m, n);
  m.copy_to_device(da.data(), a.data(), n);
  for (int64_t where :
       {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{4097}, int64_t{n - 4}, int64_t{n - 1}}) {
    std::vector<uint8_t> b = a;
    if (where >= 0) b[static_cast<size_t>(where)] ^= 0x10;
    if (where >= 0 && where + 100 < static_cast<int64_t>(n)) b[where + 100] ^= 1;  // a later one
    m.copy_to_device(db.data(), b.data(), n);
    EXPECT_EQ(gate_backend(Backend::kHip).first_difference(da.data(), db.data(), n), where);
    EXPECT_EQ(gate_backend(Backend::kHost).first_difference(a.data(), b.data(), n), where);
  }
}

TEST(HipGateTest, LargeCaseIsGeneratedInPlaceQuickly) {
  MLATUNE_REQUIRE_GPU(m);
  BucketKey b;
  b.key = {16, 4, DType::kBF16, DType::kBF16, 64, false};
  b.batch_lo = 65;
  b.batch_hi = 256;
  b.kv_lo = 32769;
  b.kv_hi = 131072;
  ValidationSettings v;
  v.full_check_rows = 4096;
  v.sampled_sequences = 2;
  v.sampled_rows = 128;
  const ValidationCase c =
      make_validation_case(b, {256, 131072}, 1, InputPattern::kCausalTrap, 1.0 / 24.0, v);
  const auto t0 = std::chrono::steady_clock::now();
  auto dev = gate_backend(Backend::kHip).prepare(c.spec, c.checked_rows, 1);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double gb = static_cast<double>(c.shape().kv_elems()) * 2 / 1e9;
  std::printf("large case: %.1f GB of KV, %zu checked rows, generated with reference in %.3f s\n",
              gb, c.checked_rows.size(), secs);
  EXPECT_GT(gb, 5.0);
  EXPECT_GE(c.checked_rows.size(), 2 * 64u);  // two whole sequences of 64 rows at least
  // The block table holds only pool pages for used slots, poison beyond.
  const DecodeShape& s = c.shape();
  std::vector<int32_t> table =
      fetch<int32_t>(m, dev->args().block_table, static_cast<size_t>(s.block_table_elems()));
  EXPECT_FALSE(validate_sequences(s, c.spec.kv_lens, table).has_value());
}

}  // namespace
}  // namespace mlatune
