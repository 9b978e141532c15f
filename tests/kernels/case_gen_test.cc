// The gate's input generator (mla_decode/case_gen.h, gate_backend.h): the shared fp8 encoders
// agree with numformat's bit for bit, generated cases are deterministic, poisoned where nothing
// may read, bounded for their fp8 scales, and adversarial the way each pattern promises.
#include "mla_decode/case_gen.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>

#include "mla_decode/gate_backend.h"
#include "mla_decode/numformat.h"

namespace mlatune {
namespace {

uint32_t bits(float f) { return __builtin_bit_cast(uint32_t, f); }

TEST(CaseGenFormats, SharedFp8EncodersMatchNumformat) {
  std::vector<float> xs = {0.0f,   -0.0f,   INFINITY, -INFINITY, NAN,     -NAN,
                           448.0f, 449.0f,  464.0f,   240.0f,    247.0f,  248.0f,
                           1e-10f, -1e-10f, 0x1p-10f, 0x1p-11f,  0x3p-12f};
  for (uint32_t b = 0; b < 0x10000; ++b) {  // every bf16, which includes every fp8 value
    xs.push_back(__builtin_bit_cast(float, b << 16));
    xs.push_back(__builtin_bit_cast(float, (b << 16) | 0x8000u));  // a half-way point of bf16
    xs.push_back(__builtin_bit_cast(float, (b << 16) | 0x7fffu));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i)
    xs.push_back(__builtin_bit_cast(float, static_cast<uint32_t>(rng())));
  for (float x : xs) {
    ASSERT_EQ(gpu::float_to_e4m3fn(x), float_to_e4m3fn(x)) << x << " bits " << bits(x);
    ASSERT_EQ(gpu::float_to_e4m3fnuz(x), float_to_e4m3fnuz(x)) << x << " bits " << bits(x);
  }
}

TEST(CaseGenFormats, NormalIsBoundedCentredAndUnitVariance) {
  double sum = 0, sq = 0, worst = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double z = casegen::normal(casegen::hash(3, 1, static_cast<uint64_t>(i)));
    sum += z;
    sq += z * z;
    worst = std::max(worst, std::fabs(z));
  }
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sq / n, 1.0, 0.02);
  EXPECT_LT(worst, casegen::kNormalBound);
  EXPECT_GT(worst, 2.5);
}

DecodeShape shape(DType q, DType kv, int32_t qlen, int32_t page, int32_t batch, int32_t max_kv) {
  DecodeShape s;
  s.batch = batch;
  s.qlen = qlen;
  s.heads = 4;
  s.page_size = page;
  s.q_dtype = q;
  s.kv_dtype = kv;
  s.sm_scale = 1.0f / 24.0f;
  s.max_kv_len = max_kv;
  s.max_pages_per_seq = (max_kv + page - 1) / page + 1;
  return s;
}

struct Built {
  CaseSpec spec;
  HostCase host;
};

Built build(InputPattern p, DType q = DType::kBF16, DType kv = DType::kFP8E4M3FN, int32_t qlen = 3,
            int32_t page = 16, uint64_t seed = 5) {
  Built b;
  b.spec = make_case_spec(shape(q, kv, qlen, page, 3, 40), {40, qlen, 23}, seed, p);
  b.host = generate_host_case(b.spec);
  return b;
}

double q_at(const Built& b, int64_t row, int d) {
  const DecodeShape& s = b.spec.shape;
  return double{decode_element(s.q_dtype, b.host.q.data(), row * kHeadDimQK + d)} * s.q_scale;
}

// Key j of sequence seq as dequantised floats.
std::vector<double> key_at(const Built& b, int32_t seq, int32_t j) {
  const DecodeShape& s = b.spec.shape;
  const int32_t page =
      b.host.block_table[static_cast<size_t>(seq) * s.max_pages_per_seq + j / s.page_size];
  const int64_t row = int64_t{page} * s.page_size + j % s.page_size;
  std::vector<double> k(kHeadDimQK);
  for (int d = 0; d < kHeadDimQK; ++d) {
    k[d] = double{decode_element(s.kv_dtype, b.host.kv.data(), row * kHeadDimQK + d)} * s.kv_scale;
  }
  return k;
}

double score(const Built& b, int64_t row, const std::vector<double>& k) {
  double dot = 0;
  for (int d = 0; d < kHeadDimQK; ++d) dot += q_at(b, row, d) * k[d];
  return dot * b.spec.shape.sm_scale;
}

TEST(CaseGen, DeterministicAndSeeded) {
  const Built a = build(InputPattern::kRandom);
  const Built again = build(InputPattern::kRandom);
  const Built other = build(InputPattern::kRandom, DType::kBF16, DType::kFP8E4M3FN, 3, 16, 6);
  EXPECT_EQ(a.host.q, again.host.q);
  EXPECT_EQ(a.host.kv, again.host.kv);
  EXPECT_EQ(a.host.block_table, again.host.block_table);
  EXPECT_NE(a.host.q, other.host.q);
  EXPECT_NE(a.host.block_table, other.host.block_table);  // another page permutation
}

TEST(CaseGen, UnusedMemoryIsPoisonedAndPagesArePermuted) {
  for (int32_t page : {1, 16, 64}) {
    const Built b = build(InputPattern::kPeaked, DType::kBF16, DType::kBF16, 3, page);
    const DecodeShape& s = b.spec.shape;
    SCOPED_TRACE("page " + std::to_string(page));
    EXPECT_FALSE(validate_sequences(s, b.spec.kv_lens, b.host.block_table).has_value());
    std::set<int32_t> used;
    int64_t poisoned_slots = 0, used_slots = 0;
    for (int32_t q = 0; q < s.batch; ++q) {
      const int32_t pages = (b.spec.kv_lens[q] + page - 1) / page;
      for (int32_t p = 0; p < s.max_pages_per_seq; ++p) {
        const int32_t id = b.host.block_table[static_cast<size_t>(q) * s.max_pages_per_seq + p];
        if (p < pages) {
          EXPECT_TRUE(used.insert(id).second) << "page " << id << " used twice";
          ++used_slots;
        } else {
          EXPECT_TRUE(id < 0 || id >= s.num_pages) << "unused slot holds a pool page " << id;
          ++poisoned_slots;
        }
      }
    }
    EXPECT_EQ(s.num_pages, used_slots + kPoisonPages);
    EXPECT_GE(poisoned_slots, s.batch);  // at least the spare slot of every sequence
    int64_t nan_rows = 0;
    for (int64_t r = 0; r < s.num_pages * s.page_size; ++r) {
      nan_rows += std::isnan(decode_element(s.kv_dtype, b.host.kv.data(), r * kHeadDimQK));
    }
    const int64_t keys = std::accumulate(b.spec.kv_lens.begin(), b.spec.kv_lens.end(), int64_t{0});
    EXPECT_EQ(nan_rows, s.num_pages * s.page_size - keys);
  }
}

TEST(CaseGen, Fp8ScalesArePowersOfTwoThatNeverSaturate) {
  for (InputPattern p : {InputPattern::kRandom, InputPattern::kPeaked, InputPattern::kWideRange,
                         InputPattern::kCausalTrap}) {
    for (DType t : {DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ}) {
      const Built b = build(p, t, t);
      const DecodeShape& s = b.spec.shape;
      int exp = 0;
      EXPECT_EQ(std::frexp(s.q_scale, &exp), 0.5f);
      EXPECT_EQ(std::frexp(s.kv_scale, &exp), 0.5f);
      EXPECT_LE(casegen::q_bound(p) / s.q_scale, dtype_max(t));
      EXPECT_LE(casegen::kv_bound(p) / s.kv_scale, dtype_max(t));
      EXPECT_GT(casegen::kv_bound(p) / s.kv_scale, dtype_max(t) / 2);  // the range is used
      for (size_t i = 0; i < b.host.q.size(); ++i) {
        ASSERT_FALSE(std::isnan(decode_element(t, b.host.q.data(), static_cast<int64_t>(i))));
      }
    }
  }
}

TEST(CaseGen, PeakedKeyDominatesEveryRowOfItsSequence) {
  const Built b = build(InputPattern::kPeaked, DType::kFP8E4M3FN, DType::kFP8E4M3FN);
  const DecodeShape& s = b.spec.shape;
  for (int32_t seq = 0; seq < s.batch; ++seq) {
    const int32_t len = b.spec.kv_lens[seq];
    int32_t peak = -1;
    for (int32_t j = 0; j < len; ++j) {
      if (casegen::dominant(b.spec.gen, seq, j, len)) {
        EXPECT_EQ(peak, -1) << "two dominant keys";
        peak = j;
      }
    }
    ASSERT_GE(peak, 0);
    ASSERT_LE(peak, len - s.qlen);  // visible to every token
    for (int64_t r = 0; r < int64_t{s.qlen} * s.heads; ++r) {
      const int64_t row = int64_t{seq} * s.qlen * s.heads + r;
      const double top = score(b, row, key_at(b, seq, peak));
      for (int32_t j = 0; j < len; ++j) {
        if (j == peak) continue;
        EXPECT_GT(top, score(b, row, key_at(b, seq, j)) + 8.0) << "row " << row;
      }
    }
  }
}

TEST(CaseGen, CausalTrapHidesDominantKeysFromTheFirstToken) {
  const Built b = build(InputPattern::kCausalTrap);  // qlen 3: the last 2 keys are the trap
  const DecodeShape& s = b.spec.shape;
  const int32_t seq = 0, len = b.spec.kv_lens[seq];  // 40
  for (int32_t h = 0; h < s.heads; ++h) {
    const int64_t row = h;  // token 0 of sequence 0 sees keys [0, len - 3]
    double visible = -1e30;
    for (int32_t j = 0; j <= len - s.qlen; ++j) {
      visible = std::max(visible, score(b, row, key_at(b, seq, j)));
    }
    for (int32_t j = len - 2; j < len; ++j) {
      EXPECT_TRUE(casegen::dominant(b.spec.gen, seq, j, len));
      EXPECT_GT(score(b, row, key_at(b, seq, j)), visible + 8.0);
    }
  }
}

TEST(CaseGen, WideRangeSpreadsScores) {
  const Built b = build(InputPattern::kWideRange, DType::kBF16, DType::kBF16);
  double sum = 0, sq = 0;
  int n = 0;
  for (int32_t j = 0; j < b.spec.kv_lens[0]; ++j) {
    const double x = score(b, 0, key_at(b, 0, j));
    sum += x;
    sq += x * x;
    ++n;
  }
  EXPECT_GT(std::sqrt(sq / n - (sum / n) * (sum / n)), 6.0);
}

TEST(CaseGen, RefusesInconsistentSpecs) {
  EXPECT_THROW(make_case_spec(shape(DType::kBF16, DType::kBF16, 1, 16, 3, 40), {40, 1}, 1,
                              InputPattern::kRandom),
               std::invalid_argument);
  DecodeShape bad = shape(DType::kBF16, DType::kBF16, 1, 16, 3, 40);
  bad.heads = 0;
  EXPECT_THROW(make_case_spec(bad, {40, 1, 2}, 1, InputPattern::kRandom), std::invalid_argument);
}

TEST(CompareHost, ReportsFirstNonFiniteAndPerRowMetrics) {
  const Built b = build(InputPattern::kRandom, DType::kBF16, DType::kBF16, 1, 16);
  const DecodeShape& s = b.spec.shape;
  std::vector<int64_t> rows = {0, 5};
  std::vector<double> ref(2 * kHeadDimV, 0.5), ref_lse = {1.0, 2.0};
  std::vector<uint16_t> out(static_cast<size_t>(s.out_elems()), float_to_bf16(0.5f));
  std::vector<float> lse(static_cast<size_t>(s.rows()), 1.0f);
  lse[5] = 2.25f;
  out[5 * kHeadDimV + 9] = float_to_bf16(0.75f);  // error 0.25 at dim 9 of row 5
  OutputCheck c =
      compare_host(s, rows, ref.data(), ref_lse.data(), out.data(), lse.data(), 0.01, 0.0);
  EXPECT_EQ(c.bad_out, -1);
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].worst_ratio, 0.0);
  EXPECT_DOUBLE_EQ(c.rows[1].max_abs, 0.25);
  EXPECT_DOUBLE_EQ(c.rows[1].worst_ratio, 25.0);
  EXPECT_EQ(c.rows[1].worst_dim, 9);
  EXPECT_LT(c.rows[1].cosine, 1.0);
  EXPECT_DOUBLE_EQ(c.rows[1].lse_err, 0.25);
  out[7 * kHeadDimV + 3] = 0x7fc0;
  out[9 * kHeadDimV] = 0x7f80;
  lse[2] = INFINITY;
  c = compare_host(s, rows, ref.data(), ref_lse.data(), out.data(), lse.data(), 0.01, 0.0);
  EXPECT_EQ(c.bad_out, 7 * kHeadDimV + 3);
  EXPECT_TRUE(std::isnan(c.bad_out_value));
  EXPECT_EQ(c.bad_lse, 2);
}

}  // namespace
}  // namespace mlatune
