// hip_mfma_split_v1 through the on-device gate, as a tuner on an AMD CDNA GPU runs it: qlen 1-4
// (causal), 16 and 128 heads, pages 1 and 64, LSE on and off, bf16 KV and both fp8 encodings,
// one split, several, and more splits than some sequences have keys; every point's rows checked,
// with poisoned pages and slots, guards and repeated runs. The variant exists in AMD builds only:
// elsewhere (every machine this project has run on) the test skips. It has never run.
#include <gtest/gtest.h>

#include "gpu/gate_sweep.h"
#include "gpu/gpu_test_problem.h"
#include "mla_decode/memory.h"
#include "mla_decode/registry.h"
#include "tuner/gate.h"

namespace mlatune {
namespace {

#if defined(MLATUNE_WITH_MFMA)
const char* kConfig = R"(
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 2, 3, 4]
    dtypes: [bf16/bf16, bf16/fp8_e4m3fn, fp8_e4m3fnuz/fp8_e4m3fnuz]
    page_size: [1, 64]
    lse: [false, true]
    batch_edges: [3, 40]
    kv_len_edges: [300]
  - heads: [128]
    qlen: [1, 2]
    dtypes: [bf16/bf16]
    page_size: [64]
    lse: [true]
    batch_edges: [3]
    kv_len_edges: [200]
tolerances:
  bf16/bf16: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  bf16/fp8_e4m3fn: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
  fp8_e4m3fnuz/fp8_e4m3fnuz: {atol: 6.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 1}
)";
#endif

TEST(MfmaSplitTest, PassesTheGateEverywhere) {
#if !defined(MLATUNE_WITH_MFMA)
  GTEST_SKIP() << "hip_mfma_split_v1 exists in AMD builds (MLATUNE_GPU=amd) only";
#else
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  const Registry registry = builtin_registry();
  const Variant* v = registry.find("hip_mfma_split_v1");
  ASSERT_NE(v, nullptr);
  const gpu_test::GateSweep r = gpu_test::sweep_gate(
      *v, kConfig, "mfma_split_test.yaml", {{1, 32, 16, 0}, {4, 32, 16, 0}, {64, 32, 16, 0}});
  EXPECT_EQ(r.trials, (3 * 4 * 2 * 2 * 2 + 2) * 3);
#endif
}

TEST(MfmaSplitTest, IsInTheCatalogOfAmdBuildsOnly) {
  const Registry registry = builtin_registry();
#if defined(MLATUNE_WITH_MFMA)
  EXPECT_NE(registry.find("hip_mfma_split_v1"), nullptr);
#else
  EXPECT_EQ(registry.find("hip_mfma_split_v1"), nullptr);
#endif
}

}  // namespace
}  // namespace mlatune
