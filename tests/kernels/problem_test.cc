#include "mla_decode/problem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "mla_decode/variant.h"

namespace mlatune {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

DecodeShape valid_shape() {
  DecodeShape s;
  s.batch = 4;
  s.qlen = 1;
  s.heads = 16;
  s.page_size = 16;
  s.sm_scale = 0.0416f;
  s.num_pages = 64;
  s.max_pages_per_seq = 8;
  s.max_kv_len = 100;
  return s;
}

DType garbage_dtype(int v) { return static_cast<DType>(v); }

TEST(DType, NamesParseBytes) {
  const std::tuple<DType, const char*, size_t, bool> cases[] = {
      {DType::kBF16, "bf16", 2, false},
      {DType::kFP8E4M3FN, "fp8_e4m3fn", 1, true},
      {DType::kFP8E4M3FNUZ, "fp8_e4m3fnuz", 1, true},
  };
  for (const auto& [t, name, bytes, fp8] : cases) {
    EXPECT_EQ(dtype_name(t), name);
    EXPECT_EQ(parse_dtype(name), t);
    EXPECT_EQ(dtype_bytes(t), bytes);
    EXPECT_EQ(is_fp8(t), fp8);
  }
  EXPECT_EQ(parse_dtype("BF16"), std::nullopt);
  EXPECT_EQ(parse_dtype("fp8"), std::nullopt);
  EXPECT_EQ(parse_dtype(""), std::nullopt);
  EXPECT_EQ(parse_dtype("bf16 "), std::nullopt);
  EXPECT_FALSE(is_fp8(garbage_dtype(9)));
  EXPECT_EQ(parse_dtype(dtype_name(garbage_dtype(9))), std::nullopt);
  EXPECT_THROW(dtype_bytes(garbage_dtype(9)), std::invalid_argument);
}

TEST(DecodeKey, ToStringAndKeyOfShape) {
  DecodeShape s = valid_shape();
  EXPECT_EQ(s.key().to_string(), "heads=16 qlen=1 q=bf16 kv=bf16 page=16 lse=0");
  s.qlen = 2;
  s.heads = 128;
  s.page_size = 64;
  s.kv_dtype = DType::kFP8E4M3FNUZ;
  s.q_dtype = DType::kFP8E4M3FN;
  s.return_lse = true;
  s.batch = 99;  // not part of the key
  const DecodeKey k = s.key();
  EXPECT_EQ(k.to_string(), "heads=128 qlen=2 q=fp8_e4m3fn kv=fp8_e4m3fnuz page=64 lse=1");
  EXPECT_EQ(k, (DecodeKey{128, 2, DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ, 64, true}));
  DecodeShape other = s;
  other.batch = 1;
  other.max_kv_len = 7;
  EXPECT_EQ(other.key(), k);
  other.page_size = 32;
  EXPECT_NE(other.key(), k);
}

TEST(Validate, AcceptsValidShapes) {
  EXPECT_EQ(validate(valid_shape()), std::nullopt);
  DecodeShape fp8 = valid_shape();
  fp8.q_dtype = DType::kFP8E4M3FN;
  fp8.kv_dtype = DType::kFP8E4M3FNUZ;
  fp8.q_scale = 0.5f;
  fp8.kv_scale = 3.0f;
  fp8.qlen = 16;
  fp8.max_kv_len = 16;  // == qlen is allowed
  EXPECT_EQ(validate(fp8), std::nullopt);
  DecodeShape full = valid_shape();
  full.max_kv_len = 128;  // == max_pages_per_seq * page_size
  EXPECT_EQ(validate(full), std::nullopt);
  DecodeShape widest = valid_shape();
  widest.page_size = kMaxPageSize;
  widest.max_pages_per_seq = kMaxKvLen / kMaxPageSize;
  widest.max_kv_len = kMaxKvLen;
  EXPECT_EQ(validate(widest), std::nullopt);
}

TEST(Validate, AcceptsTheLargestShapesAndSizesThemWithoutOverflow) {
  DecodeShape s = valid_shape();
  s.batch = kMaxBatch;
  s.heads = kMaxHeads;
  s.qlen = kMaxQlen;
  s.max_kv_len = 100;
  ASSERT_EQ(validate(s), std::nullopt);
  EXPECT_EQ(s.q_elems(), (int64_t{1} << 30) * 576);
  EXPECT_EQ(s.out_elems(), (int64_t{1} << 30) * 512);

  DecodeShape pool = valid_shape();
  pool.num_pages = kMaxPoolPages;
  pool.kv_dtype = DType::kFP8E4M3FN;
  ASSERT_EQ(validate(pool), std::nullopt);
  EXPECT_EQ(pool.kv_elems(), (int64_t{1} << 35) * 576);
}

struct Refusal {
  const char* what;
  std::function<void(DecodeShape&)> mutate;
  std::vector<std::string> expect;  // substrings the message must contain
};

TEST(Validate, RefusesEachBadFieldNamingIt) {
  const std::vector<Refusal> cases = {
      {"batch 0", [](DecodeShape& s) { s.batch = 0; }, {"batch=0"}},
      {"batch big", [](DecodeShape& s) { s.batch = kMaxBatch + 1; }, {"batch=65537"}},
      {"batch neg", [](DecodeShape& s) { s.batch = -3; }, {"batch=-3"}},
      {"qlen 0", [](DecodeShape& s) { s.qlen = 0; }, {"qlen=0"}},
      {"qlen big", [](DecodeShape& s) { s.qlen = 17; }, {"qlen=17"}},
      {"heads 0", [](DecodeShape& s) { s.heads = 0; }, {"heads=0"}},
      {"heads big", [](DecodeShape& s) { s.heads = 1025; }, {"heads=1025"}},
      {"page 0", [](DecodeShape& s) { s.page_size = 0; }, {"page_size=0"}},
      {"page big", [](DecodeShape& s) { s.page_size = 4097; }, {"page_size=4097"}},
      {"pages/seq 0", [](DecodeShape& s) { s.max_pages_per_seq = 0; }, {"max_pages_per_seq=0"}},
      {"capacity",
       [](DecodeShape& s) {
         s.page_size = 4096;
         s.max_pages_per_seq = 4097;
       },
       {"max_pages_per_seq=4097"}},
      {"pool 0", [](DecodeShape& s) { s.num_pages = 0; }, {"num_pages=0"}},
      {"pool big",
       [](DecodeShape& s) { s.num_pages = kMaxPoolPages + 1; },
       {"num_pages=2147483649"}},
      {"kv below qlen",
       [](DecodeShape& s) {
         s.qlen = 4;
         s.max_kv_len = 3;
       },
       {"max_kv_len=3"}},
      {"kv above capacity", [](DecodeShape& s) { s.max_kv_len = 129; }, {"max_kv_len=129"}},
      {"sm_scale 0", [](DecodeShape& s) { s.sm_scale = 0; }, {"sm_scale="}},
      {"sm_scale neg", [](DecodeShape& s) { s.sm_scale = -1; }, {"sm_scale=-1"}},
      {"sm_scale nan", [](DecodeShape& s) { s.sm_scale = kNaN; }, {"sm_scale=", "nan"}},
      {"sm_scale inf", [](DecodeShape& s) { s.sm_scale = kInf; }, {"sm_scale=inf"}},
      {"q_scale bf16", [](DecodeShape& s) { s.q_scale = 2; }, {"q_scale=2", "bf16"}},
      {"kv_scale bf16", [](DecodeShape& s) { s.kv_scale = 0.5f; }, {"kv_scale=0.5", "bf16"}},
      {"q_scale fp8 0",
       [](DecodeShape& s) {
         s.q_dtype = DType::kFP8E4M3FN;
         s.q_scale = 0;
       },
       {"q_scale="}},
      {"q_scale fp8 nan",
       [](DecodeShape& s) {
         s.q_dtype = DType::kFP8E4M3FNUZ;
         s.q_scale = kNaN;
       },
       {"q_scale=", "nan"}},
      {"kv_scale fp8 inf",
       [](DecodeShape& s) {
         s.kv_dtype = DType::kFP8E4M3FN;
         s.kv_scale = -kInf;
       },
       {"kv_scale=-inf"}},
      {"q dtype", [](DecodeShape& s) { s.q_dtype = garbage_dtype(7); }, {"q_dtype=7"}},
      {"kv dtype", [](DecodeShape& s) { s.kv_dtype = garbage_dtype(255); }, {"kv_dtype=255"}},
      // Each field within its limits, but the KV pool would be 2^43 rows of 1152 bytes.
      {"kv bytes",
       [](DecodeShape& s) {
         s.num_pages = kMaxPoolPages;
         s.page_size = kMaxPageSize;
         s.max_pages_per_seq = 1;
       },
       {"kv buffer", "num_pages=2147483648", "2^50"}},
      // 2^30 (token, head) rows times 2^24 keys of fp32 scores.
      {"scores bytes",
       [](DecodeShape& s) {
         s.batch = kMaxBatch;
         s.heads = kMaxHeads;
         s.qlen = kMaxQlen;
         s.page_size = kMaxPageSize;
         s.max_pages_per_seq = kMaxKvLen / kMaxPageSize;
         s.max_kv_len = kMaxKvLen;
       },
       {"scores buffer", "batch=65536", "2^50"}},
  };
  for (const Refusal& c : cases) {
    DecodeShape s = valid_shape();
    c.mutate(s);
    const std::optional<std::string> err = validate(s);
    ASSERT_TRUE(err.has_value()) << c.what;
    for (const std::string& part : c.expect) {
      EXPECT_NE(err->find(part), std::string::npos)
          << c.what << ": '" << *err << "' lacks '" << part << "'";
    }
  }
}

// 3 sequences, page 16, 4 pages per row; unused slots hold poison.
struct Sequences {
  DecodeShape shape = [] {
    DecodeShape s = valid_shape();
    s.batch = 3;
    s.qlen = 2;
    s.max_pages_per_seq = 4;
    s.num_pages = 10;
    s.max_kv_len = 64;
    return s;
  }();
  std::vector<int32_t> kv_lens{17, 64, 2};
  static constexpr int32_t kPoison = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> block_table{3, 9,       kPoison, kPoison,  // 17 keys: 2 pages
                                   0, 1,       2,       9,        // 64 keys: 4 pages
                                   5, kPoison, -1,      77};      // 2 keys: 1 page
  std::optional<std::string> check() const {
    return validate_sequences(shape, kv_lens, block_table);
  }
};

TEST(ValidateSequences, AcceptsValidDataIgnoringUnusedSlots) {
  Sequences q;
  EXPECT_EQ(q.check(), std::nullopt);
}

TEST(ValidateSequences, RefusesBadData) {
  const std::vector<std::pair<std::function<void(Sequences&)>, std::string>> cases = {
      {[](Sequences& q) { q.kv_lens.pop_back(); }, "kv_lens"},
      {[](Sequences& q) { q.kv_lens.push_back(5); }, "kv_lens"},
      {[](Sequences& q) { q.block_table.pop_back(); }, "block_table"},
      {[](Sequences& q) { q.kv_lens[2] = 1; }, "kv_lens[2]=1"},  // below qlen
      {[](Sequences& q) { q.kv_lens[1] = 65; }, "kv_lens[1]=65"},
      {[](Sequences& q) { q.kv_lens[1] = 63; }, "max_kv_len=64"},  // max no longer matches
      {[](Sequences& q) { q.block_table[1] = -1; }, "block_table[0][1]=-1"},
      {[](Sequences& q) { q.block_table[7] = 10; }, "block_table[1][3]=10"},
      {[](Sequences& q) { q.block_table[8] = Sequences::kPoison; }, "block_table[2][0]="},
      // Growing a sequence by one key brings a poisoned slot into use.
      {[](Sequences& q) { q.kv_lens[0] = 33; }, "block_table[0][2]="},
      {[](Sequences& q) { q.shape.batch = 0; }, "batch=0"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    Sequences q;
    cases[i].first(q);
    const std::optional<std::string> err = q.check();
    ASSERT_TRUE(err.has_value()) << "case " << i;
    EXPECT_NE(err->find(cases[i].second), std::string::npos)
        << "case " << i << ": '" << *err << "' lacks '" << cases[i].second << "'";
  }
}

TEST(ValidateSequences, LastUsedSlotBoundary) {
  Sequences q;
  q.kv_lens[0] = 32;  // exactly 2 pages: slot 2 stays unused
  EXPECT_EQ(q.check(), std::nullopt);
}

TEST(Backend, Names) {
  EXPECT_EQ(backend_name(Backend::kHost), "host");
  EXPECT_EQ(backend_name(Backend::kHip), "hip");
}

TEST(LaunchParams, ToString) {
  EXPECT_EQ(LaunchParams{}.to_string(), "splits=1 tile=0 rows=0 workers=0");
  EXPECT_EQ((LaunchParams{4, 64, 0, 2}.to_string()), "splits=4 tile=64 rows=0 workers=2");
  EXPECT_EQ((LaunchParams{16, 128, 32, 0}.to_string()), "splits=16 tile=128 rows=32 workers=0");
}

TEST(ParamSpace, EnumeratesCrossProductWorkersInnermost) {
  ParamSpace ps;
  ps.kv_splits = {1, 2};
  ps.kv_tile = {32, 64};
  ps.block_rows = {0};
  ps.workers = {1, 2, 4};
  const std::vector<LaunchParams> all = ps.enumerate();
  ASSERT_EQ(all.size(), 12u);
  EXPECT_EQ(all[0], (LaunchParams{1, 32, 0, 1}));
  EXPECT_EQ(all[1], (LaunchParams{1, 32, 0, 2}));
  EXPECT_EQ(all[3], (LaunchParams{1, 64, 0, 1}));
  EXPECT_EQ(all[6], (LaunchParams{2, 32, 0, 1}));
  EXPECT_EQ(all[11], (LaunchParams{2, 64, 0, 4}));
  std::set<std::string> distinct;
  for (const LaunchParams& p : all) {
    distinct.insert(p.to_string());
    EXPECT_TRUE(ps.contains(p)) << p.to_string();
  }
  EXPECT_EQ(distinct.size(), all.size());
}

TEST(ParamSpace, ContainsChecksEveryField) {
  ParamSpace ps;
  ps.kv_splits = {1, 4};
  ps.kv_tile = {64};
  ps.workers = {2};
  EXPECT_TRUE(ps.contains({4, 64, 0, 2}));
  EXPECT_FALSE(ps.contains({2, 64, 0, 2}));
  EXPECT_FALSE(ps.contains({4, 32, 0, 2}));
  EXPECT_FALSE(ps.contains({4, 64, 8, 2}));
  EXPECT_FALSE(ps.contains({4, 64, 0, 1}));
}

TEST(ParamSpace, DefaultHasOnlyDefaultParamsAndEmptyHasNone) {
  const std::vector<LaunchParams> def = ParamSpace{}.enumerate();
  ASSERT_EQ(def.size(), 1u);
  EXPECT_EQ(def[0], LaunchParams{});
  ParamSpace empty;
  empty.kv_tile.clear();
  EXPECT_TRUE(empty.enumerate().empty());
  EXPECT_FALSE(empty.contains(LaunchParams{}));
}

}  // namespace
}  // namespace mlatune
