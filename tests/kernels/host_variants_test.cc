// The host variants against the float64 reference, over dtypes, page sizes, qlen, LSE, ragged
// lengths, empty splits and poisoned memory; plus determinism, launch errors and the pool.
#include "mla_decode/host/host_variants.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "mla_decode/host/thread_pool.h"
#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"
#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {

constexpr double kAtol = 1e-3;
constexpr double kRtol = 1e-2;
constexpr double kLseAtol = 1e-4;
constexpr uint16_t kGuard = 0xdead;  // bf16 pattern written around outputs
constexpr size_t kGuardElems = 64;

std::vector<const Variant*> variants() {
  return {&host_online_softmax_variant(), &host_tiled_kv_variant(), &host_split_kv_variant(),
          &host_persistent_variant()};
}

struct Config {
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  int32_t page_size = 16;
  int32_t qlen = 1;
  int32_t heads = 8;
  bool lse = false;
  std::vector<int32_t> lens{37, 300, 1};  // 1 stands for "= qlen"
  float q_amp = 1.0f;                     // q elements uniform in [-q_amp, q_amp]
  // Key L-1 aligned with token 0 (which must not see it) so that a causal leak dominates.
  bool adversarial = false;
  uint32_t seed = 1;
};

// Inputs of one decode call with every unused byte poisoned.
struct Problem {
  DecodeShape shape;
  std::vector<uint8_t> q, kv;
  std::vector<int32_t> block_table, kv_lens;

  DecodeArgs args() const {
    DecodeArgs a;
    a.q = q.data();
    a.kv = kv.data();
    a.block_table = block_table.data();
    a.kv_lens = kv_lens.data();
    return a;
  }
};

void fill_nan(std::vector<uint8_t>& buf, DType t) {
  const uint16_t nan = nan_bits(t);
  if (dtype_bytes(t) == 1) {
    std::fill(buf.begin(), buf.end(), static_cast<uint8_t>(nan));
  } else {
    for (size_t i = 0; i + 1 < buf.size(); i += 2) std::memcpy(&buf[i], &nan, 2);
  }
}

Problem make_problem(const Config& c) {
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  Problem p;
  DecodeShape& s = p.shape;
  s.batch = static_cast<int32_t>(c.lens.size());
  s.qlen = c.qlen;
  s.heads = c.heads;
  s.page_size = c.page_size;
  s.q_dtype = c.q_dtype;
  s.kv_dtype = c.kv_dtype;
  s.q_scale = is_fp8(c.q_dtype) ? c.q_amp / dtype_max(c.q_dtype) : 1.0f;
  s.kv_scale = is_fp8(c.kv_dtype) ? 1.0f / dtype_max(c.kv_dtype) : 1.0f;
  s.sm_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));
  s.return_lse = c.lse;
  for (int32_t len : c.lens) p.kv_lens.push_back(std::max(len, c.qlen));
  s.max_kv_len = *std::max_element(p.kv_lens.begin(), p.kv_lens.end());

  std::vector<int32_t> used;
  for (int32_t len : p.kv_lens) used.push_back((len + c.page_size - 1) / c.page_size);
  const int32_t total_used = std::accumulate(used.begin(), used.end(), 0);
  s.num_pages = total_used + 3;  // three pages nobody uses
  s.max_pages_per_seq = *std::max_element(used.begin(), used.end()) + 2;
  std::vector<int32_t> ids(s.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.block_table.assign(s.block_table_elems(), std::numeric_limits<int32_t>::max());

  p.q.resize(s.q_elems() * dtype_bytes(s.q_dtype));
  for (int64_t e = 0; e < s.q_elems(); ++e) {
    encode_element(s.q_dtype, p.q.data(), e, c.q_amp * uni(rng) / s.q_scale);
  }
  p.kv.resize(s.kv_elems() * dtype_bytes(s.kv_dtype));
  fill_nan(p.kv, s.kv_dtype);
  size_t next_id = 0;
  for (int32_t b = 0; b < s.batch; ++b) {
    int32_t* slots = &p.block_table[int64_t{b} * s.max_pages_per_seq];
    for (int32_t pg = 0; pg < used[b]; ++pg) slots[pg] = ids[next_id++];
    const int64_t len = p.kv_lens[b];
    for (int64_t j = 0; j < len; ++j) {
      const int64_t row = (int64_t{slots[j / s.page_size]} * s.page_size + j % s.page_size);
      for (int d = 0; d < kHeadDimQK; ++d) {
        float x = uni(rng);
        if (c.adversarial && s.qlen > 1 && j == len - 1) {
          // Aligned with token 0, head 0, which must not see this key.
          const int64_t q0 = int64_t{b} * s.qlen * s.heads * kHeadDimQK + d;
          x = decode_element(s.q_dtype, p.q.data(), q0) >= 0 ? 1.0f : -1.0f;
        }
        encode_element(s.kv_dtype, p.kv.data(), row * kHeadDimQK + d, x / s.kv_scale);
      }
    }
  }
  EXPECT_FALSE(validate_sequences(s, p.kv_lens, p.block_table).has_value());
  return p;
}

// Outputs of one run, with guard elements after out and lse.
struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
  std::vector<uint8_t> ws;
};

Outputs run_variant(const Variant& v, const Problem& p, const LaunchParams& lp) {
  const DecodeShape& s = p.shape;
  Outputs o;
  o.out.assign(s.out_elems() + kGuardElems, kGuard);
  o.lse.assign(s.rows() + kGuardElems, -12345.0f);
  const size_t ws = v.workspace_bytes(s, lp);
  o.ws.assign(ws + kGuardElems, 0xff);  // NaN floats: unwritten partials must not be read
  DecodeArgs a = p.args();
  a.out = o.out.data();
  a.lse = s.return_lse ? o.lse.data() : nullptr;
  a.workspace = ws ? o.ws.data() : nullptr;
  a.workspace_bytes = ws;
  const std::vector<int32_t> plan = plan_launch(v, s, lp, p.kv_lens);
  a.plan = plan.data();
  a.plan_words = plan.size();
  v.run(s, lp, a);
  for (size_t i = 0; i < kGuardElems; ++i) {
    EXPECT_EQ(o.out[s.out_elems() + i], kGuard) << "out guard overwritten";
    EXPECT_EQ(o.lse[s.rows() + i], -12345.0f) << "lse guard overwritten";
    EXPECT_EQ(o.ws[ws + i], 0xff) << "workspace guard overwritten";
  }
  if (!s.return_lse) {
    EXPECT_EQ(o.lse[0], -12345.0f);
  }
  return o;
}

struct ErrorStats {
  double out_abs = 0;    // max |out - ref|
  double out_ratio = 0;  // max |out - ref| / (atol + rtol |ref|): 1 is the limit
  double lse_abs = 0;
  int64_t runs = 0;
};

std::mutex g_stats_mu;
std::map<std::string, ErrorStats>& stats() {
  static std::map<std::string, ErrorStats> m;
  return m;
}

class StatsPrinter : public ::testing::Environment {
 public:
  void TearDown() override {
    for (const auto& [combo, st] : stats()) {
      std::cout << "[ stats ] " << combo << ": runs=" << st.runs << " max|out-ref|=" << st.out_abs
                << " max err/tol=" << st.out_ratio << " max|lse-ref|=" << st.lse_abs << "\n";
    }
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new StatsPrinter);

// Checks every element of every row; returns the number of failing rows (reported once each).
void expect_matches(const Problem& p, const ReferenceResult& ref, const Outputs& o,
                    const std::string& what) {
  const DecodeShape& s = p.shape;
  ErrorStats st;
  int failures = 0;
  for (int64_t r = 0; r < s.rows(); ++r) {
    double worst = 0;
    for (int d = 0; d < kHeadDimV; ++d) {
      const double got = bf16_to_float(o.out[r * kHeadDimV + d]);
      const double want = ref.out[r * kHeadDimV + d];
      const double err = std::fabs(got - want);
      const double ratio = std::isfinite(got) ? err / (kAtol + kRtol * std::fabs(want)) : 1e30;
      st.out_abs = std::max(st.out_abs, err);
      worst = std::max(worst, ratio);
    }
    st.out_ratio = std::max(st.out_ratio, worst);
    if (worst > 1.0 && ++failures <= 3) {
      ADD_FAILURE() << what << ": row " << r << " error/tolerance " << worst;
    }
    if (s.return_lse) {
      const double err = std::fabs(o.lse[r] - ref.lse[r]);
      st.lse_abs = std::max(st.lse_abs, std::isfinite(err) ? err : 1e30);
      if (!(err <= kLseAtol) && ++failures <= 3) {
        ADD_FAILURE() << what << ": row " << r << " lse " << o.lse[r] << " want " << ref.lse[r];
      }
    }
  }
  std::lock_guard<std::mutex> lk(g_stats_mu);
  ErrorStats& g =
      stats()[std::string(dtype_name(s.q_dtype)) + "/" + std::string(dtype_name(s.kv_dtype))];
  g.out_abs = std::max(g.out_abs, st.out_abs);
  g.out_ratio = std::max(g.out_ratio, st.out_ratio);
  g.lse_abs = std::max(g.lse_abs, st.lse_abs);
  ++g.runs;
}

std::string describe(const Config& c) {
  std::string s = std::string(dtype_name(c.q_dtype)) + "/" + std::string(dtype_name(c.kv_dtype)) +
                  " page=" + std::to_string(c.page_size) + " qlen=" + std::to_string(c.qlen) +
                  " heads=" + std::to_string(c.heads) + " lse=" + std::to_string(c.lse) +
                  " amp=" + std::to_string(c.q_amp) + " adv=" + std::to_string(c.adversarial) +
                  " lens=";
  for (int32_t l : c.lens) s += std::to_string(l) + ",";
  return s;
}

void PrintTo(const Config& c, std::ostream* os) { *os << describe(c); }

std::vector<Config> sweep_configs() {
  const std::pair<DType, DType> combos[] = {
      {DType::kBF16, DType::kBF16},
      {DType::kBF16, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FN, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FNUZ, DType::kFP8E4M3FNUZ},
  };
  const int32_t pages[] = {1, 16, 64};
  std::vector<Config> out;
  uint32_t seed = 7;
  for (const auto& [qd, kd] : combos) {
    for (int32_t pg : pages) {
      for (int32_t qlen : {1, 2, 3, 4}) {
        Config c;
        c.q_dtype = qd;
        c.kv_dtype = kd;
        c.page_size = pg;
        c.qlen = qlen;
        c.lse = (seed % 2) == 0;
        c.q_amp = (seed % 3) == 0 ? 6.0f : 1.0f;
        c.adversarial = qlen > 1;
        c.lens = {qlen + 1, 129, 1, 67};  // ragged, = qlen, not multiples of tiles or pages
        c.seed = seed++;
        out.push_back(c);
      }
    }
  }
  // 16 heads, 4 sequences, tiny lengths below the split count (empty splits).
  Config c;
  c.heads = 16;
  c.qlen = 4;
  c.lse = true;
  c.lens = {4, 5, 7, 300};
  c.page_size = 16;
  c.adversarial = true;
  c.seed = 99;
  out.push_back(c);
  c.q_dtype = c.kv_dtype = DType::kFP8E4M3FNUZ;
  c.heads = 3;
  c.qlen = 2;
  c.lens = {2, 3, 17};
  c.page_size = 1;
  c.seed = 100;
  out.push_back(c);
  return out;
}

class HostVariantSweep : public ::testing::TestWithParam<Config> {};

TEST_P(HostVariantSweep, EveryParamSetMatchesReference) {
  SCOPED_TRACE(describe(GetParam()));
  const Problem p = make_problem(GetParam());
  const ReferenceResult ref = reference_decode(p.shape, p.args(), 2);
  for (const Variant* v : variants()) {
    for (LaunchParams lp : v->param_space().enumerate()) {
      if (lp.workers != 2) continue;  // worker counts are covered by the determinism test
      ASSERT_TRUE(v->can_implement(p.shape, lp).ok) << v->can_implement(p.shape, lp).reason;
      const Outputs o = run_variant(*v, p, lp);
      expect_matches(p, ref, o, std::string(v->name()) + " " + lp.to_string());
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, HostVariantSweep, ::testing::ValuesIn(sweep_configs()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return "c" + std::to_string(info.index);
                         });

TEST(HostVariants, DeterministicAcrossRunsAndWorkerCounts) {
  Config c;
  c.q_dtype = c.kv_dtype = DType::kFP8E4M3FN;
  c.qlen = 3;
  c.lse = true;
  c.lens = {3, 250, 97};
  c.seed = 5;
  const Problem p = make_problem(c);
  for (const Variant* v : variants()) {
    for (LaunchParams lp : v->param_space().enumerate()) {
      if (lp.workers != 1 || lp.kv_tile == 32 || lp.kv_tile == 128) continue;
      // host_persistent_v1's plan, and so where it cuts sequences, depends on the worker count:
      // it is deterministic per count, and matches the reference at every count (the sweep).
      const bool plan_follows_workers = v == &host_persistent_variant();
      const Outputs first = run_variant(*v, p, lp);
      for (int32_t w : {1, 2, 4, 64}) {
        lp.workers = w;
        const Outputs base = plan_follows_workers ? run_variant(*v, p, lp) : first;
        const Outputs again = run_variant(*v, p, lp);
        EXPECT_EQ(base.out, again.out) << v->name() << " " << lp.to_string();
        EXPECT_EQ(0, std::memcmp(base.lse.data(), again.lse.data(), base.lse.size() * 4))
            << v->name() << " " << lp.to_string();
      }
    }
  }
}

// Unequal lengths over many workers: the plan cuts the long sequence into several pieces (and a
// short one may share a worker with others); every worker count still matches the reference,
// causal tails in late pieces included.
TEST(HostVariants, PersistentMatchesReferenceOnUnequalLengths) {
  Config c;
  c.qlen = 4;
  c.lse = true;
  c.lens = {1, 2000, 5, 64, 65, 130};
  c.adversarial = true;
  c.seed = 11;
  const Problem p = make_problem(c);
  const ReferenceResult ref = reference_decode(p.shape, p.args(), 2);
  const std::vector<int32_t> lens(p.kv_lens.begin(), p.kv_lens.end());
  for (int32_t w : {1, 2, 8, 64}) {
    const LaunchParams lp{1, 64, 0, w};
    const WorkPlan plan = plan_work(lens, 64, w, 1 << 20);
    if (w >= 8) {
      EXPECT_GT(plan.slots(), 2) << "the long sequence is cut at " << w << " workers";
    }
    expect_matches(p, ref, run_variant(host_persistent_variant(), p, lp),
                   "host_persistent_v1 " + lp.to_string());
  }
}

TEST(HostVariants, NamesAndIdentities) {
  EXPECT_EQ(host_online_softmax_variant().name(), "host_online_softmax_v1");
  EXPECT_EQ(host_tiled_kv_variant().name(), "host_tiled_kv_v1");
  EXPECT_EQ(host_split_kv_variant().name(), "host_split_kv_v1");
  EXPECT_EQ(host_persistent_variant().name(), "host_persistent_v1");
  std::vector<std::string_view> ids;
  for (const Variant* v : variants()) {
    EXPECT_EQ(v->backend(), Backend::kHost);
    EXPECT_FALSE(v->description().empty());
    EXPECT_EQ(v->code_identity().size(), 32u);
    ids.push_back(v->code_identity());
  }
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(std::unique(ids.begin(), ids.end()), ids.end());
}

TEST(HostVariants, CanImplementRefusesParamsOutsideSpaceAndBadShapes) {
  Config c;
  const Problem p = make_problem(c);
  const LaunchParams online{1, 0, 0, 4}, tiled{1, 64, 0, 4}, split{4, 64, 0, 4};
  EXPECT_TRUE(host_online_softmax_variant().can_implement(p.shape, online).ok);
  EXPECT_TRUE(host_tiled_kv_variant().can_implement(p.shape, tiled).ok);
  EXPECT_TRUE(host_split_kv_variant().can_implement(p.shape, split).ok);
  const std::pair<const Variant*, LaunchParams> bad[] = {
      {&host_online_softmax_variant(), {1, 0, 0, 3}},
      {&host_online_softmax_variant(), {1, 0, 0, 0}},
      {&host_online_softmax_variant(), {2, 0, 0, 4}},
      {&host_tiled_kv_variant(), {1, 48, 0, 4}},
      {&host_tiled_kv_variant(), {1, 0, 0, 4}},
      {&host_tiled_kv_variant(), {1, 64, 16, 4}},
      {&host_split_kv_variant(), {5, 64, 0, 4}},
      {&host_split_kv_variant(), {0, 64, 0, 4}},
      {&host_split_kv_variant(), {4, 32, 0, 4}},
      {&host_split_kv_variant(), {4, 64, 0, 128}},
  };
  for (const auto& [v, lp] : bad) {
    const Support sup = v->can_implement(p.shape, lp);
    EXPECT_FALSE(sup.ok) << v->name() << " " << lp.to_string();
    EXPECT_FALSE(sup.reason.empty());
  }
  DecodeShape broken = p.shape;
  broken.qlen = 17;
  EXPECT_FALSE(host_online_softmax_variant().can_implement(broken, online).ok);
  EXPECT_FALSE(host_tiled_kv_variant().can_implement(broken, tiled).ok);
  EXPECT_FALSE(host_split_kv_variant().can_implement(broken, split).ok);
}

TEST(HostVariants, SplitWorkspaceSizeAndTooSmallThrows) {
  Config c;
  c.lse = true;
  const Problem p = make_problem(c);
  const Variant& v = host_split_kv_variant();
  const LaunchParams lp{4, 64, 0, 2};
  EXPECT_EQ(v.workspace_bytes(p.shape, lp), size_t(p.shape.rows()) * 4 * (512 + 1) * 4);
  EXPECT_EQ(host_online_softmax_variant().workspace_bytes(p.shape, {1, 0, 0, 2}), 0u);
  EXPECT_EQ(host_tiled_kv_variant().workspace_bytes(p.shape, {1, 64, 0, 2}), 0u);
  std::vector<uint16_t> out(p.shape.out_elems());
  std::vector<float> lse(p.shape.rows());
  std::vector<float> ws(v.workspace_bytes(p.shape, lp) / 4);
  DecodeArgs a = p.args();
  a.out = out.data();
  a.lse = lse.data();
  a.workspace = ws.data();
  a.workspace_bytes = ws.size() * 4 - 1;
  EXPECT_THROW(v.run(p.shape, lp, a), LaunchError);
  a.workspace_bytes = ws.size() * 4;
  a.workspace = nullptr;
  EXPECT_THROW(v.run(p.shape, lp, a), LaunchError);
  a.workspace = ws.data();
  EXPECT_NO_THROW(v.run(p.shape, lp, a));
}

TEST(HostVariants, NullPointersAndBadSequencesThrow) {
  Config c;
  c.lse = true;
  const Problem p = make_problem(c);
  std::vector<uint16_t> out(p.shape.out_elems());
  std::vector<float> lse(p.shape.rows());
  for (const Variant* v : variants()) {
    const LaunchParams lp = v->param_space().enumerate().front();
    std::vector<uint8_t> ws(v->workspace_bytes(p.shape, lp) + 4);
    DecodeArgs good = p.args();
    good.out = out.data();
    good.lse = lse.data();
    good.workspace = ws.data();
    good.workspace_bytes = ws.size();
    const std::vector<int32_t> plan = plan_launch(*v, p.shape, lp, p.kv_lens);
    good.plan = plan.data();
    good.plan_words = plan.size();
    EXPECT_NO_THROW(v->run(p.shape, lp, good));
    if (!plan.empty()) {
      DecodeArgs a = good;
      a.plan = nullptr;
      EXPECT_THROW(v->run(p.shape, lp, a), LaunchError) << v->name() << " without its plan";
    }
    for (int which = 0; which < 6; ++which) {
      DecodeArgs a = good;
      if (which == 0) a.q = nullptr;
      if (which == 1) a.kv = nullptr;
      if (which == 2) a.block_table = nullptr;
      if (which == 3) a.kv_lens = nullptr;
      if (which == 4) a.out = nullptr;
      if (which == 5) a.lse = nullptr;
      EXPECT_THROW(v->run(p.shape, lp, a), LaunchError) << v->name() << " pointer " << which;
    }
    std::vector<int32_t> lens = p.kv_lens;
    lens[0] = p.shape.max_pages_per_seq * p.shape.page_size + 1;
    DecodeArgs a = good;
    a.kv_lens = lens.data();
    EXPECT_THROW(v->run(p.shape, lp, a), LaunchError) << v->name();
    std::vector<int32_t> table = p.block_table;
    table[0] = static_cast<int32_t>(p.shape.num_pages);
    a = good;
    a.block_table = table.data();
    EXPECT_THROW(v->run(p.shape, lp, a), LaunchError) << v->name();
  }
}

TEST(ThreadPool, RunsEveryIndexOnceAndRethrows) {
  for (int workers : {1, 2, 3, 8, 64}) {
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(1000, workers, [&](int64_t i) { hits[i].fetch_add(1); });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
  EXPECT_THROW(parallel_for(100, 4,
                            [](int64_t i) {
                              if (i % 7 == 3) throw std::runtime_error("task failed");
                            }),
               std::runtime_error);
  std::atomic<int> after{0};
  parallel_for(10, 4, [&](int64_t) { after.fetch_add(1); });  // the pool survives a failure
  EXPECT_EQ(after.load(), 10);
  parallel_for(0, 4, [](int64_t) { FAIL(); });
  EXPECT_GE(hardware_workers(), 1);
}

TEST(ThreadPool, ConcurrentAndNestedCallers) {
  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep) {
        parallel_for(50, 3, [&](int64_t i) {
          parallel_for(2, 2, [&](int64_t) { total.fetch_add(i); });  // nested: runs inline
        });
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 20 * 2 * (49 * 50 / 2));
}

}  // namespace
}  // namespace mlatune
