// hip_mma_fp8kv_v1 through the on-device gate, as the tuner runs it: qlen 1-4 (causal), 16 and 128
// heads (one and eight row groups), pages 1 and 64, LSE on and off, bf16 and fp8 q, one split,
// several, and more splits than some sequences have keys; every point's rows are checked, with
// poisoned pages and slots, guards and repeated runs. Its P is f16, so its worst error must stay
// well inside the tolerance the bf16-P variant needs. Skips without a GPU; the refusals run
// everywhere.
#include "mla_decode/hip/mma_fp8kv.h"

#include <gtest/gtest.h>

#include <vector>

#include "gpu/gate_sweep.h"
#include "gpu/gpu_test_problem.h"

namespace mlatune {
namespace {

const Variant& variant() { return hip_mma_fp8kv_variant(); }

const char* kConfig = R"(
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 2, 3, 4]
    dtypes: [bf16/fp8_e4m3fn, fp8_e4m3fn/fp8_e4m3fn]
    page_size: [1, 64]
    lse: [false, true]
    batch_edges: [3, 40]
    kv_len_edges: [300]
  - heads: [128]
    qlen: [1, 2]
    dtypes: [bf16/fp8_e4m3fn]
    page_size: [64]
    lse: [true]
    batch_edges: [3]
    kv_len_edges: [200]
tolerances:
  bf16/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  fp8_e4m3fn/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
)";

TEST(MmaFp8KvTest, PassesTheGateEverywhereWithMargin) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  std::vector<LaunchParams> launches;
  for (int32_t splits : {1, 4, 64}) {
    for (int32_t tile : {32, 64}) launches.push_back({splits, tile, 16, 0});
  }
  const gpu_test::GateSweep r =
      gpu_test::sweep_gate(variant(), kConfig, "mma_fp8kv_test.yaml", launches);
  EXPECT_EQ(r.trials, 2 * 4 * 2 * 2 * 2 * 6 + 2 * 6);
  EXPECT_LT(r.worst, 0.6);
}

TEST(MmaFp8KvTest, RefusesWhatItDoesNotImplement) {
  DecodeShape s = gpu_test::small_shape(DType::kFP8E4M3FN);
  EXPECT_TRUE(variant().can_implement(s, {4, 32, 16, 0}).ok);
  EXPECT_FALSE(variant().can_implement(s, {4, 32, 32, 0}).ok);  // 16 rows per workgroup only
  EXPECT_FALSE(variant().can_implement(s, {3, 32, 16, 0}).ok);  // not a declared split count
  DecodeShape bf16 = s;
  bf16.kv_dtype = DType::kBF16;
  EXPECT_FALSE(variant().can_implement(bf16, {4, 32, 16, 0}).ok);
  DecodeShape fnuz = s;
  fnuz.kv_dtype = DType::kFP8E4M3FNUZ;
  EXPECT_FALSE(variant().can_implement(fnuz, {4, 32, 16, 0}).ok);
  EXPECT_EQ(variant().workspace_bytes(s, {1, 32, 16, 0}), 0u);
  EXPECT_EQ(variant().workspace_bytes(s, {4, 32, 16, 0}), size_t{2} * 4 * 16 * 513 * 4);
}

}  // namespace
}  // namespace mlatune
