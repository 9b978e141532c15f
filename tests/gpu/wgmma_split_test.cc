// hip_wgmma_split_v1 through the on-device gate, as the tuner runs it: qlen 1-4 (causal), 16 heads
// (one row group, 16-64 of its 64 rows used), 128 heads (two and four row groups), pages 1, 16 and
// 64, LSE on and off, bf16 and fp8 q, one split, several, and more splits than some sequences have
// keys; every point's rows are checked, with poisoned pages and slots, guards and repeated runs.
// Skips without a GPU (or on a GPU other than sm_90); the refusals run everywhere.
#include "mla_decode/hip/wgmma_split.h"

#include <gtest/gtest.h>

#include "gpu/gate_sweep.h"
#include "gpu/gpu_test_problem.h"

namespace mlatune {
namespace {

const Variant& variant() { return hip_wgmma_split_variant(); }

const char* kConfig = R"(
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 2, 3, 4]
    dtypes: [bf16/bf16, fp8_e4m3fn/bf16]
    page_size: [1, 64]
    lse: [false, true]
    batch_edges: [3, 40]
    kv_len_edges: [300]
  - heads: [128]
    qlen: [1, 2]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [true]
    batch_edges: [3]
    kv_len_edges: [200]
# The shipped config's tolerances (configs/deepseek-v3-tp8.yaml): bf16 P costs the same as in
# hip_mma_split_v1, whose calibration they are.
tolerances:
  bf16/bf16: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  fp8_e4m3fn/bf16: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
)";

DecodeShape small_shape() { return gpu_test::small_shape(DType::kBF16); }

TEST(WgmmaSplitTest, PassesTheGateEverywhere) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  if (!variant().can_implement(small_shape(), {1, 64, 64, 0}).ok) {
    GTEST_SKIP() << variant().can_implement(small_shape(), {1, 64, 64, 0}).reason;
  }
  const gpu_test::GateSweep r =
      gpu_test::sweep_gate(variant(), kConfig, "wgmma_split_test.yaml",
                           {{1, 64, 64, 0}, {4, 64, 64, 0}, {64, 64, 64, 0}});
  EXPECT_EQ(r.trials, 3 * (4 * 2 * 2 * 2 * 2 + 2));
  EXPECT_LT(r.worst, 0.8);
}

TEST(WgmmaSplitTest, RefusesWhatItDoesNotImplement) {
  const DecodeShape s = small_shape();
  const Support sup = variant().can_implement(s, {4, 64, 64, 0});
  if (!sup.ok) {
    // Not an sm_90a build on an sm_90 device: every shape is refused, with the reason.
    EXPECT_NE(sup.reason.find("90"), std::string::npos) << sup.reason;
  }
  EXPECT_FALSE(variant().can_implement(s, {4, 32, 64, 0}).ok);  // 64-key tiles only
  EXPECT_FALSE(variant().can_implement(s, {4, 64, 16, 0}).ok);  // 64 rows per workgroup only
  EXPECT_FALSE(variant().can_implement(s, {3, 64, 64, 0}).ok);  // not a declared split count
  DecodeShape fp8 = s;
  fp8.kv_dtype = DType::kFP8E4M3FN;
  const Support no_fp8 = variant().can_implement(fp8, {4, 64, 64, 0});
  EXPECT_FALSE(no_fp8.ok);
  EXPECT_NE(no_fp8.reason.find("KV must be bf16"), std::string::npos) << no_fp8.reason;
  DecodeShape broken = s;
  broken.heads = 0;
  EXPECT_FALSE(variant().can_implement(broken, {1, 64, 64, 0}).ok);
  EXPECT_EQ(variant().workspace_bytes(s, {1, 64, 64, 0}), 0u);
  EXPECT_EQ(variant().workspace_bytes(s, {4, 64, 64, 0}), size_t{2} * 4 * 16 * 513 * 4);
}

}  // namespace
}  // namespace mlatune
