// hip_mma_fp8kv_persistent_v1 through the on-device gate, as the tuner runs it (the gate plans
// every launch from the case's lengths): qlen 1-4 (causal), 16 heads (one row group, 2 x SMs plan
// workers) and 128 heads (eight groups, a few dozen workers); batches small enough that every
// sequence is cut into many pieces and large enough that workers share several sequences, with the
// validation's mixed lengths in between. Then the plan contract: no plan, a truncated or damaged
// plan, another launch's plan. Skips without a GPU.
#include <gtest/gtest.h>

#include "gpu/gate_sweep.h"
#include "gpu/gpu_test_problem.h"
#include "mla_decode/hip/mma_fp8kv.h"
#include "mla_decode/memory.h"
#include "tuner/gate.h"

namespace mlatune {
namespace {

using gpu_test::Config;
using gpu_test::DeviceInputs;
using gpu_test::GuardedBuffer;
using gpu_test::Problem;

const Variant& variant() { return hip_mma_fp8kv_persistent_variant(); }
const LaunchParams kParams{1, 64, 16, 2};

const char* kConfig = R"(
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 2, 3, 4]
    dtypes: [bf16/fp8_e4m3fn, fp8_e4m3fn/fp8_e4m3fn]
    page_size: [1, 64]
    lse: [false, true]
    batch_edges: [3, 300]
    kv_len_edges: [300]
  - heads: [128]
    qlen: [1, 2]
    dtypes: [bf16/fp8_e4m3fn]
    page_size: [64]
    lse: [true]
    batch_edges: [3, 100]
    kv_len_edges: [200]
tolerances:
  bf16/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  fp8_e4m3fn/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
)";

TEST(MmaFp8KvPersistentTest, PassesTheGateEverywhereWithMargin) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  const gpu_test::GateSweep r =
      gpu_test::sweep_gate(variant(), kConfig, "mma_fp8kv_persistent_test.yaml", {kParams});
  EXPECT_EQ(r.trials, 2 * 4 * 2 * 2 * 2 + 2 * 2);
  EXPECT_LT(r.worst, 0.6);
}

Problem small_problem(std::vector<int32_t> lens) {
  Config c;
  c.q_dtype = DType::kBF16;
  c.kv_dtype = DType::kFP8E4M3FN;
  c.heads = 16;
  c.page_size = 64;
  c.lse = true;
  c.lens = std::move(lens);
  return gpu_test::make_problem(c);
}

// Runs the variant on `p` with `plan` (may be null) and returns the output, or throws.
std::vector<uint16_t> run_with(MemorySpace& m, const Problem& p, const int32_t* plan,
                               size_t plan_words) {
  const DeviceInputs in(m, p);
  GuardedBuffer out(m, static_cast<size_t>(p.shape.out_elems()) * 2, 0xff);
  GuardedBuffer lse(m, static_cast<size_t>(p.shape.rows()) * 4, 0xff);
  GuardedBuffer ws(m, variant().workspace_bytes(p.shape, kParams), 0xff);
  DecodeArgs a = in.args();
  a.out = reinterpret_cast<uint16_t*>(out.data());
  a.lse = reinterpret_cast<float*>(lse.data());
  a.workspace = ws.data();
  a.workspace_bytes = ws.size();
  a.plan = plan;
  a.plan_words = plan_words;
  variant().run(p.shape, kParams, a);
  m.synchronize();
  EXPECT_TRUE(out.guards_intact() && lse.guards_intact() && ws.guards_intact());
  return out.read<uint16_t>();
}

TEST(MmaFp8KvPersistentTest, RunsOnlyItsOwnWellFormedPlan) {
  MLATUNE_REQUIRE_GPU(m);
  const Problem p = small_problem({700, 33, 2000});
  std::vector<int32_t> plan = plan_launch(variant(), p.shape, kParams, p.kv_lens);
  ASSERT_FALSE(plan.empty());
  const std::vector<uint16_t> good = run_with(m, p, plan.data(), plan.size());
  EXPECT_EQ(run_with(m, p, plan.data(), plan.size()), good) << "deterministic";

  EXPECT_THROW(run_with(m, p, nullptr, 0), LaunchError);
  EXPECT_THROW(run_with(m, p, plan.data(), plan.size() - 1), LaunchError);  // truncated
  std::vector<int32_t> damaged = plan;
  damaged[8] = 1;  // worker 0 starts past piece 0: the worker ranges no longer span the pieces
  EXPECT_THROW(run_with(m, p, damaged.data(), damaged.size()), LaunchError);
  // The plan of a batch of 2 does not fit a batch of 3, whatever the lengths.
  const Problem two = small_problem({700, 33});
  const std::vector<int32_t> other = plan_launch(variant(), two.shape, kParams, two.kv_lens);
  EXPECT_THROW(run_with(m, p, other.data(), other.size()), LaunchError);
  // Lengths outside the shape are refused at planning time.
  std::vector<int32_t> too_long = p.kv_lens;
  too_long[0] = p.shape.max_pages_per_seq * p.shape.page_size + 1;
  EXPECT_THROW(plan_launch(variant(), p.shape, kParams, too_long), LaunchError);
}

TEST(MmaFp8KvPersistentTest, DeclaresItsSpace) {
  const Problem p = small_problem({700, 33, 2000});
  EXPECT_FALSE(variant().can_implement(p.shape, {2, 64, 16, 2}).ok);  // the plan cuts, not splits
  EXPECT_FALSE(variant().can_implement(p.shape, {1, 32, 16, 2}).ok);
  EXPECT_FALSE(variant().can_implement(p.shape, {1, 64, 16, 1}).ok);
  DecodeShape bf16 = p.shape;
  bf16.kv_dtype = DType::kBF16;
  EXPECT_FALSE(variant().can_implement(bf16, kParams).ok);
  EXPECT_EQ(variant().plan_words(bf16, kParams), 0u);
}

// Its plan's worker count is the device's SM count: without a device it refuses everything.
TEST(MmaFp8KvPersistentTest, ImplementsItsShapesOnAGpu) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  const Problem p = small_problem({700, 33, 2000});
  EXPECT_TRUE(variant().can_implement(p.shape, kParams).ok);
  EXPECT_GT(variant().plan_words(p.shape, kParams), 0u);
}

}  // namespace
}  // namespace mlatune
