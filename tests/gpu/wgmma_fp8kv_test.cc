// hip_wgmma_fp8kv_v1 and hip_wgmma_fp8kv_persistent_v1 through the on-device gate, as the tuner
// runs them: qlen 1-4 (causal), 16 heads (one row group) and 128 heads (eight), pages 1 and 64,
// bf16 q (two e4m3 terms) and fp8 q; for the split grid one split, several, and more splits than
// some sequences have keys; for the persistent form (the gate plans every launch from the case's
// lengths) batches small enough that every sequence is cut into many pieces and large enough that
// workers share several sequences. Every point's rows are checked, with poisoned pages and slots,
// guards and repeated runs. Its P is f16 and its bf16 q keeps 8 significant bits, so its worst
// error must stay well inside the tolerance. No LSE output (the variants refuse it: see
// wgmma_fp8kv.hip). Then the persistent form's plan contract. Skips without a GPU (or on a GPU
// other than sm_90); the refusals run everywhere.
#include <gtest/gtest.h>

#include "gpu/gate_sweep.h"
#include "gpu/gpu_test_problem.h"
#include "mla_decode/hip/wgmma_fp8kv.h"
#include "mla_decode/memory.h"

namespace mlatune {

namespace {

using gpu_test::Config;
using gpu_test::DeviceInputs;
using gpu_test::GuardedBuffer;
using gpu_test::Problem;

const Variant& variant() { return hip_wgmma_fp8kv_variant(); }
const Variant& persistent_variant() { return hip_wgmma_fp8kv_persistent_variant(); }
const LaunchParams kPersistent{1, 64, 16, 2};

const char* kConfig = R"(
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 2, 3, 4]
    dtypes: [bf16/fp8_e4m3fn, fp8_e4m3fn/fp8_e4m3fn]
    page_size: [1, 64]
    lse: [false]
    batch_edges: [3, 40]
    kv_len_edges: [300]
  - heads: [128]
    qlen: [1, 2]
    dtypes: [bf16/fp8_e4m3fn]
    page_size: [64]
    lse: [false]
    batch_edges: [3]
    kv_len_edges: [200]
tolerances:
  bf16/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  fp8_e4m3fn/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
)";

DecodeShape small_shape() { return gpu_test::small_shape(DType::kFP8E4M3FN); }

TEST(WgmmaFp8KvTest, PassesTheGateEverywhereWithMargin) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  if (!variant().can_implement(small_shape(), {1, 64, 16, 0}).ok) {
    GTEST_SKIP() << variant().can_implement(small_shape(), {1, 64, 16, 0}).reason;
  }
  const gpu_test::GateSweep r =
      gpu_test::sweep_gate(variant(), kConfig, "wgmma_fp8kv_test.yaml",
                           {{1, 64, 16, 0}, {4, 64, 16, 0}, {64, 64, 16, 0}});
  EXPECT_EQ(r.trials, 3 * (2 * 4 * 2 * 2 + 2));
  EXPECT_LT(r.worst, 0.6);
}

const char* kPersistentConfig = R"(
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 2, 3, 4]
    dtypes: [bf16/fp8_e4m3fn, fp8_e4m3fn/fp8_e4m3fn]
    page_size: [1, 64]
    lse: [false]
    batch_edges: [3, 300]
    kv_len_edges: [300]
  - heads: [128]
    qlen: [1, 2]
    dtypes: [bf16/fp8_e4m3fn]
    page_size: [64]
    lse: [false]
    batch_edges: [3, 100]
    kv_len_edges: [200]
tolerances:
  bf16/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  fp8_e4m3fn/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
)";

TEST(WgmmaFp8KvPersistentTest, PassesTheGateEverywhereWithMargin) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  if (!variant().can_implement(small_shape(), {1, 64, 16, 0}).ok) {
    GTEST_SKIP() << variant().can_implement(small_shape(), {1, 64, 16, 0}).reason;
  }
  const gpu_test::GateSweep r = gpu_test::sweep_gate(
      persistent_variant(), kPersistentConfig, "wgmma_fp8kv_persistent_test.yaml", {kPersistent});
  EXPECT_EQ(r.trials, 2 * 4 * 2 * 2 + 2 * 2);
  EXPECT_LT(r.worst, 0.6);
}

// Runs the persistent variant on `p` with `plan` (may be null) and returns the output, or throws.
std::vector<uint16_t> run_with(MemorySpace& m, const Problem& p, const int32_t* plan,
                               size_t plan_words) {
  const DeviceInputs in(m, p);
  GuardedBuffer out(m, static_cast<size_t>(p.shape.out_elems()) * 2, 0xff);
  GuardedBuffer ws(m, persistent_variant().workspace_bytes(p.shape, kPersistent), 0xff);
  DecodeArgs a = in.args();
  a.out = reinterpret_cast<uint16_t*>(out.data());
  a.workspace = ws.data();
  a.workspace_bytes = ws.size();
  a.plan = plan;
  a.plan_words = plan_words;
  persistent_variant().run(p.shape, kPersistent, a);
  m.synchronize();
  EXPECT_TRUE(out.guards_intact() && ws.guards_intact());
  return out.read<uint16_t>();
}

Problem small_problem(std::vector<int32_t> lens) {
  Config c;
  c.q_dtype = DType::kBF16;
  c.kv_dtype = DType::kFP8E4M3FN;
  c.heads = 16;
  c.page_size = 64;
  c.lens = std::move(lens);
  return gpu_test::make_problem(c);
}

TEST(WgmmaFp8KvPersistentTest, RunsOnlyItsOwnWellFormedPlan) {
  MLATUNE_REQUIRE_GPU(m);
  const Problem p = small_problem({700, 33, 2000});
  const Support sup = persistent_variant().can_implement(p.shape, kPersistent);
  if (!sup.ok) GTEST_SKIP() << sup.reason;
  std::vector<int32_t> plan = plan_launch(persistent_variant(), p.shape, kPersistent, p.kv_lens);
  ASSERT_FALSE(plan.empty());
  const std::vector<uint16_t> good = run_with(m, p, plan.data(), plan.size());
  EXPECT_EQ(run_with(m, p, plan.data(), plan.size()), good) << "deterministic";
  EXPECT_THROW(run_with(m, p, nullptr, 0), LaunchError);
  EXPECT_THROW(run_with(m, p, plan.data(), plan.size() - 1), LaunchError);  // truncated
  std::vector<int32_t> damaged = plan;
  damaged[8] = 1;  // worker 0 starts past piece 0: the worker ranges no longer span the pieces
  EXPECT_THROW(run_with(m, p, damaged.data(), damaged.size()), LaunchError);
  const Problem two = small_problem({700, 33});  // another batch's plan
  const std::vector<int32_t> other =
      plan_launch(persistent_variant(), two.shape, kPersistent, two.kv_lens);
  EXPECT_THROW(run_with(m, p, other.data(), other.size()), LaunchError);
}

TEST(WgmmaFp8KvPersistentTest, RefusesWhatItDoesNotImplement) {
  const DecodeShape s = small_shape();
  EXPECT_FALSE(persistent_variant().can_implement(s, {2, 64, 16, 2}).ok);  // the plan cuts
  EXPECT_FALSE(persistent_variant().can_implement(s, {1, 64, 16, 1}).ok);
  EXPECT_FALSE(persistent_variant().can_implement(s, {1, 32, 16, 2}).ok);
  DecodeShape with_lse = s;
  with_lse.return_lse = true;
  const Support no_lse = persistent_variant().can_implement(with_lse, kPersistent);
  EXPECT_FALSE(no_lse.ok);
  EXPECT_NE(no_lse.reason.find("no LSE output"), std::string::npos) << no_lse.reason;
  DecodeShape bf16_kv = s;
  bf16_kv.kv_dtype = DType::kBF16;
  EXPECT_FALSE(persistent_variant().can_implement(bf16_kv, kPersistent).ok);
  EXPECT_EQ(persistent_variant().plan_words(bf16_kv, kPersistent), 0u);
  EXPECT_EQ(persistent_variant().workspace_bytes(bf16_kv, kPersistent), 0u);
}

TEST(WgmmaFp8KvTest, RefusesWhatItDoesNotImplement) {
  const DecodeShape s = small_shape();
  const Support sup = variant().can_implement(s, {4, 64, 16, 0});
  if (!sup.ok) {
    // Not an sm_90a build on an sm_90 device: every shape is refused, with the reason.
    EXPECT_NE(sup.reason.find("90"), std::string::npos) << sup.reason;
  }
  EXPECT_FALSE(variant().can_implement(s, {4, 32, 16, 0}).ok);  // 64-key tiles only
  EXPECT_FALSE(variant().can_implement(s, {4, 64, 64, 0}).ok);  // 16 rows per workgroup only
  EXPECT_FALSE(variant().can_implement(s, {3, 64, 16, 0}).ok);  // not a declared split count
  DecodeShape bf16_kv = s;
  bf16_kv.kv_dtype = DType::kBF16;
  const Support no_bf16 = variant().can_implement(bf16_kv, {4, 64, 16, 0});
  EXPECT_FALSE(no_bf16.ok);
  EXPECT_NE(no_bf16.reason.find("KV must be fp8_e4m3fn"), std::string::npos) << no_bf16.reason;
  DecodeShape with_lse = s;
  with_lse.return_lse = true;
  const Support no_lse = variant().can_implement(with_lse, {4, 64, 16, 0});
  EXPECT_FALSE(no_lse.ok);
  EXPECT_NE(no_lse.reason.find("no LSE output"), std::string::npos) << no_lse.reason;
  DecodeShape fnuz_q = s;
  fnuz_q.q_dtype = DType::kFP8E4M3FNUZ;
  EXPECT_FALSE(variant().can_implement(fnuz_q, {4, 64, 16, 0}).ok);
  DecodeShape broken = s;
  broken.heads = 0;
  EXPECT_FALSE(variant().can_implement(broken, {1, 64, 16, 0}).ok);
  EXPECT_EQ(variant().workspace_bytes(s, {1, 64, 16, 0}), 0u);
  EXPECT_EQ(variant().workspace_bytes(s, {4, 64, 16, 0}), size_t{2} * 4 * 16 * 513 * 4);
}

}  // namespace
}  // namespace mlatune
