// hip_mma_split_v1 against the float64 CPU reference on small shapes: heads 16 / 32 / 128, qlen
// 1-4, pages 1 / 16 / 64, LSE on and off, bf16 and fp8 q / KV, every launch-parameter set the
// variant accepts (splits beyond the sequence length included), ragged lengths down to L = qlen,
// NaN-poisoned unused pages and rows, INT32_MAX in unused block-table slots, guard regions around
// every output and the workspace, and two runs compared bit for bit. Skips the device tests where
// there is no GPU; the argument and size checks run everywhere.
#include "mla_decode/hip/mma_split.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu/gpu_test_problem.h"
#include "mla_decode/memory.h"
#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"

namespace mlatune {
namespace {

// bf16 P in the P V product costs up to 2^-9 relative per probability, bf16 output rounding
// another 2^-9 of |ref|; the budget below leaves room for both (measured maxima are printed).
constexpr double kAtol = 2e-3;
constexpr double kRtol = 2e-2;
constexpr double kLseAtol = 5e-4;
constexpr size_t kGuardBytes = 256;
constexpr uint8_t kGuardByte = 0xa5;
constexpr uint8_t kWorkspacePoison = 0xff;  // NaN floats: a partial read before written shows

const Variant& variant() { return hip_mma_split_variant(); }

// Inputs: the generator shared with the other GPU tests.
using gpu_test::Config;
using gpu_test::describe;
using gpu_test::DeviceInputs;
using gpu_test::make_problem;
using gpu_test::Problem;

struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// A device buffer of `bytes` plus a guard region, all set to `fill` except the guard.
DeviceBuffer guarded(MemorySpace& m, size_t bytes, uint8_t fill) {
  DeviceBuffer buf(m, bytes + kGuardBytes);
  m.fill(buf.data(), fill, bytes);
  m.fill(static_cast<uint8_t*>(buf.data()) + bytes, kGuardByte, kGuardBytes);
  return buf;
}

void expect_guard(MemorySpace& m, const DeviceBuffer& buf, size_t bytes, const char* what) {
  std::vector<uint8_t> guard(kGuardBytes);
  m.copy_to_host(guard.data(), static_cast<const uint8_t*>(buf.data()) + bytes, kGuardBytes);
  EXPECT_TRUE(std::all_of(guard.begin(), guard.end(), [](uint8_t x) { return x == kGuardByte; }))
      << what << " guard overwritten";
}

Outputs run_on_device(MemorySpace& m, const Problem& p, const DeviceInputs& in,
                      const LaunchParams& lp) {
  const DecodeShape& s = p.shape;
  const size_t out_bytes = s.out_elems() * 2;
  const size_t lse_bytes = s.rows() * 4;
  const size_t ws_bytes = variant().workspace_bytes(s, lp);
  DeviceBuffer out = guarded(m, out_bytes, 0xff);
  DeviceBuffer lse = guarded(m, lse_bytes, 0xff);
  DeviceBuffer ws = guarded(m, ws_bytes, kWorkspacePoison);
  DecodeArgs a;
  a.q = in.q.data();
  a.kv = in.kv.data();
  a.block_table = static_cast<const int32_t*>(in.block_table.data());
  a.kv_lens = static_cast<const int32_t*>(in.kv_lens.data());
  a.out = static_cast<uint16_t*>(out.data());
  a.lse = s.return_lse ? static_cast<float*>(lse.data()) : nullptr;
  a.workspace = ws_bytes ? ws.data() : nullptr;
  a.workspace_bytes = ws_bytes;
  variant().run(s, lp, a);
  m.synchronize();
  Outputs o;
  o.out.resize(s.out_elems());
  o.lse.resize(s.rows());
  m.copy_to_host(o.out.data(), out.data(), out_bytes);
  m.copy_to_host(o.lse.data(), lse.data(), lse_bytes);
  expect_guard(m, out, out_bytes, "out");
  expect_guard(m, lse, lse_bytes, "lse");
  expect_guard(m, ws, ws_bytes, "workspace");
  if (!s.return_lse) {
    // lse was not passed: it must be untouched (still the 0xff fill).
    uint32_t bits;
    std::memcpy(&bits, &o.lse[0], 4);
    EXPECT_EQ(bits, 0xffffffffu) << "lse written without return_lse";
  }
  return o;
}

struct ErrorStats {
  double out_abs = 0;    // max |out - ref|
  double out_ratio = 0;  // max |out - ref| / (atol + rtol |ref|); 1 is the limit
  double lse_abs = 0;
  int64_t runs = 0;
};

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

// Every element of every row against the reference; at most 3 failing rows reported per run.
void expect_matches(const Problem& p, const ReferenceResult& ref, const Outputs& o,
                    const std::string& what) {
  const DecodeShape& s = p.shape;
  ErrorStats st;
  int failures = 0;
  for (int64_t r = 0; r < s.rows(); ++r) {
    double worst = 0;
    int worst_d = 0;
    for (int d = 0; d < kHeadDimV; ++d) {
      const double got = bf16_to_float(o.out[r * kHeadDimV + d]);
      const double want = ref.out[r * kHeadDimV + d];
      const double err = std::fabs(got - want);
      const double ratio = std::isfinite(got) ? err / (kAtol + kRtol * std::fabs(want)) : 1e30;
      if (std::isfinite(got)) st.out_abs = std::max(st.out_abs, err);
      if (ratio > worst) {
        worst = ratio;
        worst_d = d;
      }
    }
    st.out_ratio = std::max(st.out_ratio, worst);
    if (worst > 1.0 && ++failures <= 3) {
      ADD_FAILURE() << what << ": row " << r << " (token " << r / s.heads << ", head "
                    << r % s.heads << ") dim " << worst_d << " got "
                    << bf16_to_float(o.out[r * kHeadDimV + worst_d]) << " want "
                    << ref.out[r * kHeadDimV + worst_d] << " error/tolerance " << worst;
    }
    if (s.return_lse) {
      const double err = std::fabs(o.lse[r] - ref.lse[r]);
      st.lse_abs = std::max(st.lse_abs, std::isfinite(err) ? err : 1e30);
      if (!(err <= kLseAtol) && ++failures <= 3) {
        ADD_FAILURE() << what << ": row " << r << " lse " << o.lse[r] << " want " << ref.lse[r];
      }
    }
  }
  ErrorStats& g =
      stats()[std::string(dtype_name(s.q_dtype)) + "/" + std::string(dtype_name(s.kv_dtype))];
  g.out_abs = std::max(g.out_abs, st.out_abs);
  g.out_ratio = std::max(g.out_ratio, st.out_ratio);
  g.lse_abs = std::max(g.lse_abs, st.lse_abs);
  ++g.runs;
}

// The HIP memory space, or null (test skipped) where there is no usable GPU.
MemorySpace* gpu_or_null() {
  try {
    MemorySpace& m = memory_space(Backend::kHip);
    DeviceBuffer probe(m, 256);  // the first use is what reaches the device
    return &m;
  } catch (const LaunchError&) {
    return nullptr;
  }
}

// Runs every launch-parameter set the variant accepts for `c` (or only those `keep` selects),
// twice each, against one reference.
template <class Keep>
void check_config(const Config& c, Keep keep) {
  MemorySpace* m = gpu_or_null();
  if (!m) GTEST_SKIP() << "no HIP device";
  SCOPED_TRACE(describe(c));
  const Problem p = make_problem(c);
  const ReferenceResult ref = reference_decode(p.shape, p.host_args(), 2);
  const DeviceInputs in(*m, p);
  int ran = 0;
  for (const LaunchParams& lp : variant().param_space().enumerate()) {
    if (!keep(lp) || !variant().can_implement(p.shape, lp).ok) continue;
    const std::string what = lp.to_string();
    const Outputs first = run_on_device(*m, p, in, lp);
    expect_matches(p, ref, first, what);
    const Outputs second = run_on_device(*m, p, in, lp);
    EXPECT_EQ(first.out, second.out) << what << ": out differs between two runs";
    EXPECT_EQ(0, std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * 4))
        << what << ": lse differs between two runs";
    ++ran;
    if (::testing::Test::HasFailure()) return;  // one broken set is enough to read
  }
  EXPECT_GT(ran, 0) << "no launch-parameter set accepted";
}

void check_config(const Config& c) {
  check_config(c, [](const LaunchParams&) { return true; });
}

std::vector<Config> sweep() {
  const std::pair<DType, DType> dtypes[] = {
      {DType::kBF16, DType::kBF16},
      {DType::kBF16, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FN, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FNUZ, DType::kFP8E4M3FNUZ},
  };
  std::vector<Config> out;
  uint32_t seed = 11;
  for (const auto& [qd, kd] : dtypes) {
    for (int32_t qlen : {1, 2, 3, 4}) {
      Config c;
      c.q_dtype = qd;
      c.kv_dtype = kd;
      c.qlen = qlen;
      c.heads = qlen % 2 == 0 ? 32 : 16;
      c.page_size = (qlen == 1 || qlen == 4) ? 16 : (qlen == 2 ? 1 : 64);
      c.lse = seed % 2 == 0;
      c.q_amp = seed % 3 == 0 ? 8.0f : 1.5f;
      c.adversarial = qlen > 1;
      // Ragged; not multiples of tiles or pages; one sequence with L = qlen; one long enough
      // for several tiles in every split at kv_splits 4.
      c.lens = {qlen + 1, 129, 1, 67, 520};
      c.seed = seed++;
      out.push_back(c);
    }
  }
  return out;
}

class MmaSplitSweep : public ::testing::TestWithParam<Config> {};

TEST_P(MmaSplitSweep, EveryAcceptedParamSetMatchesReference) { check_config(GetParam()); }

INSTANTIATE_TEST_SUITE_P(Configs, MmaSplitSweep, ::testing::ValuesIn(sweep()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return "c" + std::to_string(info.index);
                         });

TEST(MmaSplit, Heads128SeveralRowGroups) {
  for (int32_t qlen : {1, 2}) {
    Config c;
    c.heads = 128;
    c.qlen = qlen;
    c.page_size = 64;
    c.lens = {300, qlen, 77};
    c.q_amp = 4.0f;
    c.adversarial = true;
    c.seed = 40 + qlen;
    // Every tile / row combination, a few split counts (the sweep covers all of them).
    check_config(c, [](const LaunchParams& lp) {
      return lp.kv_splits == 1 || lp.kv_splits == 4 || lp.kv_splits == 64;
    });
  }
}

TEST(MmaSplit, Fp8KvHeads128) {
  Config c;
  c.heads = 128;
  c.qlen = 3;
  c.kv_dtype = DType::kFP8E4M3FN;
  c.page_size = 1;
  c.lens = {150, 3};
  c.lse = true;
  c.adversarial = true;
  c.seed = 50;
  check_config(c, [](const LaunchParams& lp) { return lp.kv_splits <= 2 || lp.kv_splits == 32; });
}

TEST(MmaSplit, SplitsBeyondLengthAndShortSequences) {
  // Lengths 1..5 with up to 64 splits: most splits are empty, early tokens see only a key or two.
  Config c;
  c.qlen = 4;
  c.heads = 16;
  c.page_size = 1;
  c.lens = {4, 5, 1, 4, 9};
  c.adversarial = true;
  c.seed = 60;
  check_config(c);
  c.q_dtype = DType::kFP8E4M3FN;
  c.kv_dtype = DType::kFP8E4M3FN;
  c.qlen = 1;
  c.lens = {1, 2, 3};
  c.page_size = 64;
  c.lse = false;
  c.seed = 61;
  check_config(c);
}

TEST(MmaSplit, PeakedScoresAndFnuzWithBf16Q) {
  Config c;
  c.kv_dtype = DType::kFP8E4M3FNUZ;
  c.qlen = 2;
  c.heads = 16;
  c.q_amp = 24.0f;  // scores spread over tens of units: one key dominates each row
  c.lens = {1000, 2, 65};
  c.seed = 70;
  check_config(c, [](const LaunchParams& lp) { return lp.kv_splits != 16 && lp.kv_splits != 32; });
}

// ---- Checks that need no device ----------------------------------------------------------------

Problem small_problem() {
  Config c;
  c.lens = {40, 2};
  return make_problem(c);
}

TEST(MmaSplit, NameSpaceAndIdentity) {
  EXPECT_EQ(variant().name(), "hip_mma_split_v1");
  EXPECT_EQ(variant().backend(), Backend::kHip);
  EXPECT_FALSE(variant().description().empty());
  EXPECT_FALSE(variant().code_identity().empty());
  const ParamSpace ps = variant().param_space();
  EXPECT_EQ(ps.kv_splits, (std::vector<int32_t>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(ps.kv_tile, (std::vector<int32_t>{32, 64}));
  EXPECT_EQ(ps.block_rows, (std::vector<int32_t>{16, 32, 64}));
  EXPECT_EQ(ps.workers, (std::vector<int32_t>{0}));
}

TEST(MmaSplit, CanImplementRefusesWithReasons) {
  const Problem p = small_problem();
  EXPECT_TRUE(variant().can_implement(p.shape, {4, 32, 16, 0}).ok);  // fits everywhere
  const LaunchParams bad[] = {
      {3, 64, 16, 0},  // splits outside the space
      {4, 48, 16, 0},  // tile outside the space
      {4, 64, 24, 0},  // rows outside the space (and not a multiple of 16)
      {4, 64, 16, 2},  // workers
      {4, 64, 64, 0},  // shared memory: 252 KB on NVIDIA, far more than AMD's 64 KB
  };
  for (const LaunchParams& lp : bad) {
    const Support sup = variant().can_implement(p.shape, lp);
    EXPECT_FALSE(sup.ok) << lp.to_string();
    EXPECT_FALSE(sup.reason.empty()) << lp.to_string();
  }
  DecodeShape broken = p.shape;
  broken.heads = 0;
  EXPECT_FALSE(variant().can_implement(broken, {1, 32, 16, 0}).ok);
}

TEST(MmaSplit, WorkspaceIsExact) {
  const Problem p = small_problem();
  const DecodeShape& s = p.shape;
  EXPECT_EQ(variant().workspace_bytes(s, {1, 64, 16, 0}), 0u);
  for (int32_t splits : {2, 4, 64}) {
    EXPECT_EQ(variant().workspace_bytes(s, {splits, 32, 16, 0}),
              size_t(s.batch) * splits * s.qlen * s.heads * (512 + 1) * 4);
  }
}

TEST(MmaSplit, BadArgumentsThrowBeforeLaunching) {
  // Fake but aligned device pointers: every check below fails before anything is launched.
  const Problem p = small_problem();
  const DecodeShape& s = p.shape;
  alignas(256) static uint8_t fake[256];
  DecodeArgs good;
  good.q = fake;
  good.kv = fake;
  good.block_table = reinterpret_cast<const int32_t*>(fake);
  good.kv_lens = reinterpret_cast<const int32_t*>(fake);
  good.out = reinterpret_cast<uint16_t*>(fake);
  good.lse = reinterpret_cast<float*>(fake);
  const LaunchParams lp{4, 32, 16, 0};
  const size_t ws = variant().workspace_bytes(s, lp);
  good.workspace = fake;
  good.workspace_bytes = ws;
  for (int which = 0; which < 9; ++which) {
    DecodeArgs a = good;
    if (which == 0) a.q = nullptr;
    if (which == 1) a.kv = nullptr;
    if (which == 2) a.block_table = nullptr;
    if (which == 3) a.kv_lens = nullptr;
    if (which == 4) a.out = nullptr;
    if (which == 5) a.lse = nullptr;  // return_lse is set
    if (which == 6) a.workspace_bytes = ws - 1;
    if (which == 7) a.workspace = nullptr;
    if (which == 8) a.q = fake + 8;  // not 16-byte aligned
    EXPECT_THROW(variant().run(s, lp, a), LaunchError) << "case " << which;
  }
  EXPECT_THROW(variant().run(s, {4, 64, 64, 0}, good), LaunchError);  // refused params
  EXPECT_THROW(variant().run(s, {5, 32, 16, 0}, good), LaunchError);  // outside the space
}

}  // namespace
}  // namespace mlatune
