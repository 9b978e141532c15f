// The float64 reference against hand-computable cases.
#include "mla_decode/reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "mla_decode/numformat.h"

namespace mlatune {
namespace {

// A decode problem whose q and KV are zero unless set; unused pages and KV rows hold NaN and
// unused block-table slots INT32_MAX, so any read outside the contract shows up as NaN or a crash.
struct Case {
  DecodeShape s;
  std::vector<uint8_t> q, kv;
  std::vector<int32_t> table, lens;

  Case(int32_t qlen, int32_t heads, int32_t page_size, std::vector<int32_t> kv_lens,
       DType qd = DType::kBF16, DType kd = DType::kBF16, uint32_t shuffle_seed = 0)
      : lens(std::move(kv_lens)) {
    s.batch = static_cast<int32_t>(lens.size());
    s.qlen = qlen;
    s.heads = heads;
    s.page_size = page_size;
    s.q_dtype = qd;
    s.kv_dtype = kd;
    s.sm_scale = 1.0f;
    s.max_kv_len = *std::max_element(lens.begin(), lens.end());
    std::vector<int32_t> used;
    for (int32_t l : lens) used.push_back((l + page_size - 1) / page_size);
    s.num_pages = std::accumulate(used.begin(), used.end(), 0) + 2;
    s.max_pages_per_seq = *std::max_element(used.begin(), used.end()) + 1;
    std::vector<int32_t> ids(s.num_pages);
    std::iota(ids.begin(), ids.end(), 0);
    if (shuffle_seed) std::shuffle(ids.begin(), ids.end(), std::mt19937(shuffle_seed));
    table.assign(s.block_table_elems(), std::numeric_limits<int32_t>::max());
    size_t next = 0;
    for (int32_t b = 0; b < s.batch; ++b) {
      for (int32_t p = 0; p < used[b]; ++p) table[b * s.max_pages_per_seq + p] = ids[next++];
    }
    q.assign(s.q_elems() * dtype_bytes(qd), 0);
    kv.resize(s.kv_elems() * dtype_bytes(kd));
    for (int64_t e = 0; e < s.kv_elems(); ++e) encode_element(kd, kv.data(), e, NAN);
    for (int32_t b = 0; b < s.batch; ++b) {
      for (int32_t j = 0; j < lens[b]; ++j) {
        for (int d = 0; d < kHeadDimQK; ++d) set_kv(b, j, d, 0.0f);
      }
    }
  }
  // Stored (pre-scale) values.
  void set_q(int64_t token, int32_t h, int d, float x) {
    encode_element(s.q_dtype, q.data(), (token * s.heads + h) * kHeadDimQK + d, x);
  }
  void set_kv(int32_t b, int64_t j, int d, float x) {
    const int64_t page = table[b * s.max_pages_per_seq + j / s.page_size];
    encode_element(s.kv_dtype, kv.data(), (page * s.page_size + j % s.page_size) * kHeadDimQK + d,
                   x);
  }
  DecodeArgs args() const {
    DecodeArgs a;
    a.q = q.data();
    a.kv = kv.data();
    a.block_table = table.data();
    a.kv_lens = lens.data();
    return a;
  }
};

// Fills q and the used KV rows with values exact in bf16, identically whatever the page order.
void fill_random(Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-16, 16);
  for (int64_t t = 0; t < c.s.tokens(); ++t) {
    for (int32_t h = 0; h < c.s.heads; ++h) {
      for (int d = 0; d < kHeadDimQK; ++d) c.set_q(t, h, d, small(rng) / 64.0f);
    }
  }
  for (int32_t b = 0; b < c.s.batch; ++b) {
    for (int32_t j = 0; j < c.lens[b]; ++j) {
      for (int d = 0; d < kHeadDimQK; ++d) c.set_kv(b, j, d, small(rng) / 16.0f);
    }
  }
}

TEST(Reference, OneKeyGivesItsValueRow) {
  Case c(1, 2, 16, {1});
  fill_random(c, 3);
  const ReferenceResult r = reference_decode(c.s, c.args());
  ASSERT_EQ(r.out.size(), 2u * kHeadDimV);
  ASSERT_EQ(r.lse.size(), 2u);
  for (int32_t h = 0; h < 2; ++h) {
    double dot = 0;
    for (int d = 0; d < kHeadDimQK; ++d) {
      const int64_t row = h * kHeadDimQK + d;
      dot += double{decode_element(DType::kBF16, c.q.data(), row)} *
             decode_element(DType::kBF16, c.kv.data(), d);
    }
    EXPECT_DOUBLE_EQ(r.lse[h], dot);
    for (int d = 0; d < kHeadDimV; ++d) {
      ASSERT_EQ(r.out[h * kHeadDimV + d], decode_element(DType::kBF16, c.kv.data(), d));
    }
  }
}

TEST(Reference, TwoKeysWithKnownScores) {
  Case c(1, 1, 16, {2});
  c.s.sm_scale = 0.5f;
  c.set_q(0, 0, 512, 1.0f);  // score only through a rope dim, so V does not affect it
  c.set_kv(0, 0, 512, 3.0f);
  c.set_kv(0, 1, 512, -1.0f);
  c.set_kv(0, 0, 0, 1.0f);
  c.set_kv(0, 1, 1, 1.0f);
  c.set_kv(0, 1, 2, -4.0f);
  const ReferenceResult r = reference_decode(c.s, c.args());
  const double p0 = std::exp(1.5) / (std::exp(1.5) + std::exp(-0.5));
  EXPECT_NEAR(r.out[0], p0, 1e-15);
  EXPECT_NEAR(r.out[1], 1 - p0, 1e-15);
  EXPECT_NEAR(r.out[2], -4 * (1 - p0), 1e-15);
  for (int d = 3; d < kHeadDimV; ++d) ASSERT_EQ(r.out[d], 0.0);
  EXPECT_NEAR(r.lse[0], std::log(std::exp(1.5) + std::exp(-0.5)), 1e-15);
}

TEST(Reference, UniformScoresGiveLogLengthAndMean) {
  Case c(1, 3, 4, {7, 2});
  for (int32_t b = 0; b < 2; ++b) {
    for (int32_t j = 0; j < c.lens[b]; ++j) c.set_kv(b, j, 5, static_cast<float>(j));
  }
  const ReferenceResult r = reference_decode(c.s, c.args());
  for (int32_t h = 0; h < 3; ++h) {
    EXPECT_NEAR(r.lse[h], std::log(7.0), 1e-15);
    EXPECT_NEAR(r.out[h * kHeadDimV + 5], 3.0, 1e-15);  // mean of 0..6
    EXPECT_NEAR(r.lse[3 + h], std::log(2.0), 1e-15);
    EXPECT_NEAR(r.out[(3 + h) * kHeadDimV + 5], 0.5, 1e-15);
  }
}

// Token i of a sequence with L keys sees keys [0, L - qlen + i]: with equal scores its output is
// the mean of exactly those V rows, and a key outside the window never leaks, however large its
// score.
TEST(Reference, CausalRightAligned) {
  const int32_t qlen = 3, len = 6;
  Case c(qlen, 2, 4, {qlen, len});  // windows are per sequence: check the second one
  for (int32_t j = 0; j < len; ++j) c.set_kv(1, j, j, 1.0f);  // V row j = one-hot at dim j
  const ReferenceResult flat = reference_decode(c.s, c.args());
  for (int32_t i = 0; i < qlen; ++i) {
    const int32_t visible = len - qlen + i + 1;
    for (int32_t h = 0; h < 2; ++h) {
      const int64_t row = (qlen + i) * 2 + h;
      EXPECT_NEAR(flat.lse[row], std::log(static_cast<double>(visible)), 1e-15);
      for (int32_t j = 0; j < len; ++j) {
        EXPECT_NEAR(flat.out[row * kHeadDimV + j], j < visible ? 1.0 / visible : 0.0, 1e-15)
            << "token " << i << " key " << j;
      }
    }
  }
  // Now the last key dominates every score it enters.
  for (int64_t t = qlen; t < 2 * qlen; ++t) {
    for (int32_t h = 0; h < 2; ++h) c.set_q(t, h, 570, 1.0f);
  }
  c.set_kv(1, len - 1, 570, 200.0f);
  const ReferenceResult peak = reference_decode(c.s, c.args());
  for (int32_t i = 0; i < qlen; ++i) {
    for (int32_t h = 0; h < 2; ++h) {
      const int64_t row = (qlen + i) * 2 + h;
      for (int32_t j = 0; j < len; ++j) {
        const double want =
            i == qlen - 1 ? (j == len - 1 ? 1.0 : 0.0) : flat.out[row * kHeadDimV + j];
        EXPECT_NEAR(peak.out[row * kHeadDimV + j], want, 1e-15) << "token " << i << " key " << j;
      }
    }
  }
  EXPECT_NEAR(peak.lse[(2 * qlen - 1) * 2], 200.0, 1e-12);
}

TEST(Reference, ShuffledPagesGiveTheSameResult) {
  Case plain(2, 3, 4, {13, 6, 2});
  Case shuffled(2, 3, 4, {13, 6, 2}, DType::kBF16, DType::kBF16, 12345);
  ASSERT_NE(plain.table, shuffled.table);
  fill_random(plain, 9);
  fill_random(shuffled, 9);
  const ReferenceResult a = reference_decode(plain.s, plain.args());
  const ReferenceResult b = reference_decode(shuffled.s, shuffled.args());
  EXPECT_EQ(a.out, b.out);
  EXPECT_EQ(a.lse, b.lse);
  for (double x : a.out) ASSERT_TRUE(std::isfinite(x));  // poisoned rows and slots never read
}

TEST(Reference, Fp8DequantisesWithScales) {
  Case c(1, 1, 16, {2}, DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ);
  c.s.q_scale = 0.5f;
  c.s.kv_scale = 0.25f;
  c.set_q(0, 0, 512, 2.0f);    // 1.0 after scaling
  c.set_kv(0, 0, 512, 8.0f);   // 2.0
  c.set_kv(0, 1, 512, -8.0f);  // -2.0
  c.set_kv(0, 0, 0, 4.0f);     // V0[0] = 1.0
  c.set_kv(0, 1, 1, 12.0f);    // V1[1] = 3.0
  const ReferenceResult r = reference_decode(c.s, c.args());
  const double p0 = std::exp(2.0) / (std::exp(2.0) + std::exp(-2.0));
  EXPECT_NEAR(r.out[0], p0, 1e-15);
  EXPECT_NEAR(r.out[1], 3 * (1 - p0), 1e-15);
  EXPECT_NEAR(r.lse[0], std::log(std::exp(2.0) + std::exp(-2.0)), 1e-15);
}

TEST(Reference, RowSubsetAndThreadsMatchFullResult) {
  Case c(2, 3, 5, {9, 40, 2});
  fill_random(c, 21);
  const ReferenceResult full = reference_decode(c.s, c.args(), 1);
  const ReferenceResult threaded = reference_decode(c.s, c.args(), 4);
  EXPECT_EQ(full.out, threaded.out);
  EXPECT_EQ(full.lse, threaded.lse);
  const std::vector<int64_t> rows{17, 0, 5, 5, 12, 3};
  const ReferenceResult sub = reference_decode_rows(c.s, c.args(), rows, 3);
  ASSERT_EQ(sub.out.size(), rows.size() * kHeadDimV);
  ASSERT_EQ(sub.lse.size(), rows.size());
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(sub.lse[k], full.lse[rows[k]]);
    for (int d = 0; d < kHeadDimV; ++d) {
      ASSERT_EQ(sub.out[k * kHeadDimV + d], full.out[rows[k] * kHeadDimV + d]) << k << " " << d;
    }
  }
  EXPECT_TRUE(reference_decode_rows(c.s, c.args(), {}).out.empty());
}

TEST(Reference, RejectsInvalidInput) {
  Case c(1, 2, 4, {5});
  EXPECT_THROW(reference_decode_rows(c.s, c.args(), {c.s.rows()}), std::invalid_argument);
  EXPECT_THROW(reference_decode_rows(c.s, c.args(), {-1}), std::invalid_argument);
  DecodeArgs a = c.args();
  a.kv = nullptr;
  EXPECT_THROW(reference_decode(c.s, a), std::invalid_argument);
  std::vector<int32_t> long_len{13};  // beyond max_pages_per_seq * page_size = 12
  a = c.args();
  a.kv_lens = long_len.data();
  EXPECT_THROW(reference_decode(c.s, a), std::invalid_argument);
  DecodeShape bad = c.s;
  bad.heads = 0;
  EXPECT_THROW(reference_decode(bad, c.args()), std::invalid_argument);
}

}  // namespace
}  // namespace mlatune
