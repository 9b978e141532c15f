// hip_wgmma_fp8kv_v1 through the on-device gate, as the tuner runs it: qlen 1-4 (causal), 16 heads
// (one row group) and 128 heads (eight), pages 1 and 64, bf16 q (two e4m3 terms) and fp8 q, one
// split, several, and more splits than some sequences have keys; every point's rows are checked,
// with poisoned pages and slots, guards and repeated runs. Its P is f16 and its bf16 q keeps 8
// significant bits, so its worst error must stay well inside the tolerance. No LSE output (the
// variant refuses it: see wgmma_fp8kv.hip). Skips without a GPU (or on a GPU other than sm_90);
// the refusals run everywhere.
#include <gtest/gtest.h>

#include "gpu/gate_sweep.h"
#include "gpu/gpu_test_problem.h"

namespace mlatune {

// mla_decode/hip/wgmma_fp8kv.hip (declared in registry.cc too: see there why not in a header).
const Variant& hip_wgmma_fp8kv_variant();

namespace {

const Variant& variant() { return hip_wgmma_fp8kv_variant(); }

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
