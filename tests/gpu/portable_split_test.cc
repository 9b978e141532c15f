// hip_portable_split_v1 against the float64 CPU reference on small shapes: every launch-parameter
// set the device accepts, every dtype pair, qlen 1-4, pages 1 / 16 / 64, LSE on and off, head
// counts below, at and across block_rows, splits beyond the sequence length, ragged lengths down
// to L = qlen, NaN-poisoned unused pages and rows, INT32_MAX in unused block-table slots, guard
// regions around out, lse and the workspace, two runs compared bit for bit. One large shape
// (batch 64, 16 heads, kv up to 8192) against the GPU fp32 reference. The interface checks run
// everywhere; the device tests skip where there is no GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_problem.h"
#include "mla_decode/hip/hip_variants.h"
#include "mla_decode/hip/reference_gpu.h"
#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"

namespace mlatune {
namespace {

using gpu_test::Config;
using gpu_test::GuardedBuffer;
using gpu_test::Problem;

// fp32 arithmetic on exact inputs; the bf16 output rounding (2^-9 relative) dominates.
constexpr double kAtol = 1e-3;
constexpr double kRtol = 1e-2;
constexpr double kLseAtol = 2e-4;
constexpr uint8_t kWorkspacePoison = 0xff;  // NaN floats: a partial read before written shows

const Variant& variant() { return hip_portable_split_variant(); }

struct Outputs {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

Outputs run_on_device(MemorySpace& m, const DecodeShape& s, const DecodeArgs& inputs,
                      const LaunchParams& lp) {
  const size_t ws_bytes = variant().workspace_bytes(s, lp);
  GuardedBuffer out(m, s.out_elems() * 2, 0xff);  // bf16 NaN: an unwritten element shows
  GuardedBuffer lse(m, s.rows() * 4, 0xff);
  GuardedBuffer ws(m, ws_bytes, kWorkspacePoison);
  DecodeArgs a = inputs;
  a.out = reinterpret_cast<uint16_t*>(out.data());
  a.lse = s.return_lse ? reinterpret_cast<float*>(lse.data()) : nullptr;
  a.workspace = ws_bytes ? ws.data() : nullptr;
  a.workspace_bytes = ws_bytes;
  variant().run(s, lp, a);
  m.synchronize();
  EXPECT_TRUE(out.guards_intact()) << lp.to_string() << ": out guard overwritten";
  EXPECT_TRUE(lse.guards_intact()) << lp.to_string() << ": lse guard overwritten";
  EXPECT_TRUE(ws.guards_intact()) << lp.to_string() << ": workspace guard overwritten";
  Outputs o{out.read<uint16_t>(), lse.read<float>()};
  if (!s.return_lse) {
    EXPECT_TRUE(std::all_of(o.lse.begin(), o.lse.end(),
                            [](float x) {
                              uint32_t u;
                              std::memcpy(&u, &x, 4);
                              return u == 0xffffffffu;
                            }))
        << lp.to_string() << ": lse written without return_lse";
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

// Every element of rows [0, rows) against `want_out` / `want_lse` (double or float), at most three
// failing rows reported per call; no NaN or Inf passes.
template <class Want>
void expect_matches(const DecodeShape& s, const std::vector<Want>& want_out,
                    const std::vector<Want>& want_lse, const Outputs& o, const std::string& what,
                    const std::string& stats_key) {
  ErrorStats st;
  int failures = 0;
  for (int64_t r = 0; r < s.rows(); ++r) {
    double worst = 0;
    int worst_d = 0;
    for (int d = 0; d < kHeadDimV; ++d) {
      const double got = bf16_to_float(o.out[r * kHeadDimV + d]);
      const double want = want_out[r * kHeadDimV + d];
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
                    << want_out[r * kHeadDimV + worst_d] << " error/tolerance " << worst;
    }
    if (s.return_lse) {
      const double err = std::fabs(double{o.lse[r]} - double{want_lse[r]});
      st.lse_abs = std::max(st.lse_abs, std::isfinite(err) ? err : 1e30);
      if (!(err <= kLseAtol) && ++failures <= 3) {
        ADD_FAILURE() << what << ": row " << r << " lse " << o.lse[r] << " want " << want_lse[r];
      }
    }
  }
  ErrorStats& g = stats()[stats_key];
  g.out_abs = std::max(g.out_abs, st.out_abs);
  g.out_ratio = std::max(g.out_ratio, st.out_ratio);
  g.lse_abs = std::max(g.lse_abs, st.lse_abs);
  ++g.runs;
}

std::string dtypes_key(const DecodeShape& s) {
  return std::string(dtype_name(s.q_dtype)) + "/" + std::string(dtype_name(s.kv_dtype));
}

// Runs every launch-parameter set that `keep` selects and the device accepts, twice each, against
// the float64 reference. A set may be refused only for shared memory (a device smaller than the
// H200); the count of refused sets is printed.
template <class Keep>
void check_config(MemorySpace& m, const Config& c, Keep keep) {
  SCOPED_TRACE(gpu_test::describe(c));
  const Problem p = gpu_test::make_problem(c);
  const ReferenceResult ref =
      reference_decode(p.shape, p.host_args(), gpu_test::reference_threads());
  const gpu_test::DeviceInputs in(m, p);
  int ran = 0;
  int refused = 0;
  for (const LaunchParams& lp : variant().param_space().enumerate()) {
    if (!keep(lp)) continue;
    const Support sup = variant().can_implement(p.shape, lp);
    if (!sup.ok) {
      EXPECT_NE(sup.reason.find("shared memory"), std::string::npos) << sup.reason;
      ++refused;
      continue;
    }
    const std::string what = lp.to_string();
    const Outputs first = run_on_device(m, p.shape, in.args(), lp);
    expect_matches(p.shape, ref.out, ref.lse, first, what, dtypes_key(p.shape));
    const Outputs second = run_on_device(m, p.shape, in.args(), lp);
    EXPECT_EQ(first.out, second.out) << what << ": out differs between two runs";
    EXPECT_EQ(0, std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * 4))
        << what << ": lse differs between two runs";
    ++ran;
    if (::testing::Test::HasFailure()) return;  // one broken set is enough to read
  }
  EXPECT_GT(ran, 0) << "no launch-parameter set accepted";
  if (refused > 0)
    std::cout << "[ info ] " << refused << " parameter sets refused (shared memory)\n";
}

void check_config(MemorySpace& m, const Config& c) {
  check_config(m, c, [](const LaunchParams&) { return true; });
}

std::vector<Config> sweep() {
  const std::pair<DType, DType> dtypes[] = {
      {DType::kBF16, DType::kBF16},
      {DType::kBF16, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FN, DType::kFP8E4M3FN},
      {DType::kFP8E4M3FNUZ, DType::kFP8E4M3FNUZ},
  };
  const int32_t heads[] = {8, 16, 20, 32};  // rows = heads * qlen: below, at and across 16/32/64
  std::vector<Config> out;
  uint32_t seed = 201;
  for (const auto& [qd, kd] : dtypes) {
    for (int32_t page : {1, 16, 64}) {
      for (int32_t qlen : {1, 2, 3, 4}) {
        Config c;
        c.q_dtype = qd;
        c.kv_dtype = kd;
        c.page_size = page;
        c.qlen = qlen;
        c.heads = heads[(seed + static_cast<uint32_t>(page)) % 4];
        c.lse = seed % 2 == 0;
        c.q_amp = seed % 3 == 0 ? 8.0f : 1.5f;
        c.adversarial = qlen > 1;
        // Ragged, not multiples of tiles or pages, one L = qlen, one spanning several tiles per
        // split at 4 splits; 32 splits leave most splits of the short ones empty.
        c.lens = {qlen + 1, 129, 1, 67, 300};
        c.seed = seed++;
        out.push_back(c);
      }
    }
  }
  return out;
}

class PortableSplitSweep : public ::testing::TestWithParam<Config> {};

TEST_P(PortableSplitSweep, EveryAcceptedParamSetMatchesReference) {
  MLATUNE_REQUIRE_GPU(m);
  check_config(m, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Configs, PortableSplitSweep, ::testing::ValuesIn(sweep()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return "c" + std::to_string(info.index);
                         });

TEST(PortableSplit, ManyHeadsSeveralRowGroups) {
  MLATUNE_REQUIRE_GPU(m);
  Config c;
  c.heads = 128;
  c.qlen = 2;  // 256 packed rows: 16 / 8 / 4 workgroups per split
  c.page_size = 64;
  c.lens = {300, 2, 77};
  c.q_amp = 4.0f;
  c.adversarial = true;
  c.seed = 41;
  check_config(m, c, [](const LaunchParams& lp) {
    return lp.kv_splits == 1 || lp.kv_splits == 4 || lp.kv_splits == 32;
  });
  c.heads = 3;  // odd: groups end mid-token
  c.qlen = 4;
  c.kv_dtype = DType::kFP8E4M3FNUZ;
  c.page_size = 1;
  c.lens = {4, 5, 33};
  c.seed = 42;
  check_config(m, c);
}

TEST(PortableSplit, SplitsBeyondLengthAndShortSequences) {
  MLATUNE_REQUIRE_GPU(m);
  // Lengths 1..9 with up to 32 splits: most splits are empty, early tokens see a key or two,
  // and for qlen 4 the last split of a short sequence holds only keys an early token must not see.
  Config c;
  c.qlen = 4;
  c.heads = 16;
  c.page_size = 1;
  c.lens = {4, 5, 1, 4, 9};
  c.adversarial = true;
  c.seed = 60;
  check_config(m, c);
  c.q_dtype = DType::kFP8E4M3FN;
  c.kv_dtype = DType::kFP8E4M3FN;
  c.qlen = 1;
  c.lens = {1, 2, 3};
  c.page_size = 64;
  c.lse = false;
  c.seed = 61;
  check_config(m, c);
}

TEST(PortableSplit, PeakedScores) {
  MLATUNE_REQUIRE_GPU(m);
  Config c;
  c.kv_dtype = DType::kFP8E4M3FNUZ;
  c.qlen = 2;
  c.heads = 16;
  c.q_amp = 24.0f;  // scores spread over tens of units: one key dominates each row
  c.lens = {200, 65, 2};
  c.adversarial = true;
  c.seed = 70;
  check_config(m, c, [](const LaunchParams& lp) { return lp.block_rows == 32; });
}

// batch 64, 16 heads, qlen 1, bf16, lengths up to 8192 (several exactly 8192, the others random
// down to 1), pages of 16 drawn with repetition from a pool shared by all sequences (as with
// prefix sharing), unused block-table slots INT32_MAX.
Problem make_large_problem() {
  std::mt19937 rng(90);
  Problem p;
  DecodeShape& s = p.shape;
  s.batch = 64;
  s.qlen = 1;
  s.heads = 16;
  s.page_size = 16;
  s.sm_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));
  s.return_lse = true;
  s.max_kv_len = 8192;
  s.max_pages_per_seq = 8192 / 16 + 1;
  s.num_pages = 2048;
  for (int32_t b = 0; b < s.batch; ++b) {
    p.kv_lens.push_back(b % 8 == 0 ? 8192 : static_cast<int32_t>(rng() % 8192) + 1);
  }
  p.block_table.assign(s.block_table_elems(), std::numeric_limits<int32_t>::max());
  for (int32_t b = 0; b < s.batch; ++b) {
    const int32_t used = (p.kv_lens[b] + s.page_size - 1) / s.page_size;
    for (int32_t pg = 0; pg < used; ++pg) {
      p.block_table[int64_t{b} * s.max_pages_per_seq + pg] =
          static_cast<int32_t>(rng() % static_cast<uint32_t>(s.num_pages));
    }
  }
  // Random bf16 in [-1, 1) straight from bits: sign, exponent 0x70..0x7e, random mantissa.
  auto random_bf16 = [&rng](std::vector<uint8_t>& buf) {
    for (size_t i = 0; i + 1 < buf.size(); i += 2) {
      const uint32_t r = rng();
      const auto h =
          static_cast<uint16_t>((r & 0x8000u) | ((0x70u + (r >> 16) % 15u) << 7) | (r & 0x7fu));
      std::memcpy(&buf[i], &h, 2);
    }
  };
  p.q.resize(s.q_elems() * 2);
  p.kv.resize(s.kv_elems() * 2);
  random_bf16(p.q);
  random_bf16(p.kv);
  EXPECT_EQ(validate(s).value_or(""), "");
  EXPECT_FALSE(validate_sequences(s, p.kv_lens, p.block_table).has_value());
  return p;
}

TEST(PortableSplit, LargeShapeMatchesGpuReference) {
  MLATUNE_REQUIRE_GPU(m);
  const Problem p = make_large_problem();
  const DecodeShape& s = p.shape;
  const gpu_test::DeviceInputs in(m, p);
  GuardedBuffer ref_out(m, s.out_elems() * 4, 0xff);
  GuardedBuffer ref_lse(m, s.rows() * 4, 0xff);
  gpu_reference_decode(s, in.args(), reinterpret_cast<float*>(ref_out.data()),
                       reinterpret_cast<float*>(ref_lse.data()));
  m.synchronize();
  const std::vector<float> want_out = ref_out.read<float>();
  const std::vector<float> want_lse = ref_lse.read<float>();

  // The GPU reference itself, on a sample of rows, against float64.
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < s.rows(); r += 67) rows.push_back(r);
  const ReferenceResult cpu =
      reference_decode_rows(s, p.host_args(), rows, gpu_test::reference_threads());
  for (size_t k = 0; k < rows.size(); ++k) {
    for (int d = 0; d < kHeadDimV; ++d) {
      const double want = cpu.out[k * kHeadDimV + d];
      ASSERT_NEAR(want_out[rows[k] * kHeadDimV + d], want, 1e-4 + 1e-4 * std::fabs(want))
          << "GPU reference row " << rows[k] << " dim " << d;
    }
    ASSERT_NEAR(want_lse[rows[k]], cpu.lse[k], 1e-4) << "GPU reference row " << rows[k];
  }

  const LaunchParams sets[] = {{1, 64, 16, 0}, {1, 32, 32, 0},  {4, 64, 16, 0},
                               {8, 32, 64, 0}, {16, 64, 32, 0}, {32, 32, 16, 0}};
  for (const LaunchParams& lp : sets) {
    const Support sup = variant().can_implement(s, lp);
    if (!sup.ok) {
      EXPECT_NE(sup.reason.find("shared memory"), std::string::npos) << sup.reason;
      continue;
    }
    const Outputs first = run_on_device(m, s, in.args(), lp);
    expect_matches(s, want_out, want_lse, first, "large " + lp.to_string(), "large bf16/bf16");
    const Outputs second = run_on_device(m, s, in.args(), lp);
    EXPECT_EQ(first.out, second.out) << lp.to_string() << ": out differs between two runs";
    EXPECT_EQ(0, std::memcmp(first.lse.data(), second.lse.data(), first.lse.size() * 4))
        << lp.to_string() << ": lse differs between two runs";
  }
}

TEST(PortableSplit, Interface) {
  const Variant& v = variant();
  EXPECT_EQ(v.name(), "hip_portable_split_v1");
  EXPECT_EQ(v.backend(), Backend::kHip);
  EXPECT_FALSE(v.description().empty());
  EXPECT_EQ(v.description().find('\n'), std::string_view::npos);
  EXPECT_EQ(v.code_identity().size(), 32u);
  const ParamSpace space = v.param_space();
  EXPECT_EQ(space.kv_splits, (std::vector<int32_t>{1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(space.kv_tile, (std::vector<int32_t>{32, 64}));
  EXPECT_EQ(space.block_rows, (std::vector<int32_t>{16, 32, 64}));
  EXPECT_EQ(space.workers, (std::vector<int32_t>{0}));
}

TEST(PortableSplit, CanImplementAndWorkspace) {
  Config c;
  c.lse = true;
  const Problem p = gpu_test::make_problem(c);
  const DecodeShape& s = p.shape;
  // kv_tile 32 needs under 48 KiB of shared memory: accepted without asking any device.
  for (int32_t rows : {16, 32, 64}) {
    const Support sup = variant().can_implement(s, {4, 32, rows, 0});
    EXPECT_TRUE(sup.ok) << sup.reason;
  }
  const LaunchParams bad[] = {{3, 32, 16, 0},  {64, 32, 16, 0}, {0, 32, 16, 0},  {4, 16, 16, 0},
                              {4, 128, 16, 0}, {4, 32, 8, 0},   {4, 32, 128, 0}, {4, 32, 16, 1}};
  for (const LaunchParams& lp : bad) {
    const Support sup = variant().can_implement(s, lp);
    EXPECT_FALSE(sup.ok) << lp.to_string();
    EXPECT_FALSE(sup.reason.empty());
  }
  DecodeShape broken = s;
  broken.qlen = 17;
  EXPECT_FALSE(variant().can_implement(broken, {4, 32, 16, 0}).ok);
  // Partials: batch * qlen * heads * splits * (512 + 1) floats; one split writes out directly.
  EXPECT_EQ(variant().workspace_bytes(s, {4, 32, 16, 0}), size_t(s.rows()) * 4 * (512 + 1) * 4);
  EXPECT_EQ(variant().workspace_bytes(s, {32, 64, 64, 0}), size_t(s.rows()) * 32 * (512 + 1) * 4);
  EXPECT_EQ(variant().workspace_bytes(s, {1, 32, 16, 0}), 0u);
}

TEST(PortableSplit, BadArgumentsThrowBeforeLaunching) {
  Config c;
  c.lse = true;
  const Problem p = gpu_test::make_problem(c);
  const DecodeShape& s = p.shape;
  const LaunchParams lp{4, 32, 16, 0};
  const size_t ws = variant().workspace_bytes(s, lp);
  // Host pointers stand in for device ones: every call below is refused before any launch.
  alignas(16) static uint8_t fake[64];
  DecodeArgs good = p.host_args();
  good.out = reinterpret_cast<uint16_t*>(fake);
  good.lse = reinterpret_cast<float*>(fake);
  good.workspace = fake;
  good.workspace_bytes = ws;
  for (int which = 0; which < 9; ++which) {
    DecodeArgs a = good;
    if (which == 0) a.q = nullptr;
    if (which == 1) a.kv = nullptr;
    if (which == 2) a.block_table = nullptr;
    if (which == 3) a.kv_lens = nullptr;
    if (which == 4) a.out = nullptr;
    if (which == 5) a.lse = nullptr;
    if (which == 6) a.workspace = nullptr;
    if (which == 7) a.workspace_bytes = ws - 1;
    if (which == 8) a.out = reinterpret_cast<uint16_t*>(fake + 2);  // not 16-byte aligned
    EXPECT_THROW(variant().run(s, lp, a), LaunchError) << "case " << which;
  }
  EXPECT_THROW(variant().run(s, {3, 32, 16, 0}, good), LaunchError);  // params outside the space
  DecodeShape broken = s;
  broken.heads = 0;
  EXPECT_THROW(variant().run(broken, lp, good), LaunchError);
}

}  // namespace
}  // namespace mlatune
