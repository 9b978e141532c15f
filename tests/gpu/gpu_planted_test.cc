// The seed failure on the GPU backend: a planted GPU variant (the tensor-core split-KV kernel with
// a fault) that is wrong exactly when heads = 16, qlen in {3, 4} and kv_splits > 1 must be
// rejected by the on-device gate there, accepted elsewhere, and never win where it is wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "gpu/gpu_test_problem.h"
#include "mla_decode/hip/mma_split.h"
#include "mla_decode/memory.h"
#include "runtime/winner_table.h"
#include "tuner/gate.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

// hip_mma_split_v1 whose output, in the seed-failure shapes, has every token's heads rotated by
// one: plausible values, uncorrelated with the answer (cosine far from 1).
class PlantedGpuVariant final : public Variant {
 public:
  std::string_view name() const override { return "planted_gpu_seed_bug_v1"; }
  std::string_view description() const override { return "test: planted seed failure"; }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override { return "planted-gpu"; }
  ParamSpace param_space() const override { return base().param_space(); }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    return base().can_implement(s, p);
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    return base().workspace_bytes(s, p);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override {
    base().run(s, p, a);
    if (!(s.heads == 16 && (s.qlen == 3 || s.qlen == 4) && p.kv_splits > 1)) return;
    MemorySpace& m = memory_space(Backend::kHip);
    std::vector<uint16_t> out(static_cast<size_t>(s.out_elems()));
    m.copy_to_host(out.data(), a.out, out.size() * sizeof(uint16_t));
    std::vector<uint16_t> rotated(out.size());
    const size_t row = kHeadDimV;
    for (int64_t t = 0; t < s.tokens(); ++t) {
      for (int32_t h = 0; h < s.heads; ++h) {
        std::memcpy(&rotated[(t * s.heads + h) * row],
                    &out[(t * s.heads + (h + 1) % s.heads) * row], row * sizeof(uint16_t));
      }
    }
    m.copy_to_device(a.out, rotated.data(), rotated.size() * sizeof(uint16_t));
  }

 private:
  static const Variant& base() { return hip_mma_split_variant(); }
};

const char* kConfig = R"(
name: gpu-planted
backend: hip
spaces:
  - heads: [16]
    qlen: [1, 3]
    dtypes: [fp8_e4m3fn/fp8_e4m3fn]
    page_size: [64]
    lse: [false]
    batch_edges: [4]
    kv_len_edges: [600]
tolerances:
  fp8_e4m3fn/fp8_e4m3fn: {atol: 3.0e-3, rtol: 4.0e-2, min_cosine: 0.9995, lse_atol: 5.0e-4}
validation: {seeds: 1, repeats: 3, interior_points: 1}
timing: {warmup: 1, samples: 3, cold_cache: false}
variants: [hip_mma_split_v1, planted_gpu_seed_bug_v1]
params:
  hip_mma_split_v1: {kv_splits: [1, 4], kv_tile: [32], block_rows: [16]}
  planted_gpu_seed_bug_v1: {kv_splits: [1, 4], kv_tile: [32], block_rows: [16]}
)";

TEST(GpuPlantedTest, SeedFailureIsRejectedOnTheDeviceAndNeverWins) {
  MLATUNE_REQUIRE_GPU(m);
  (void)m;
  PlantedGpuVariant planted;
  Registry registry = builtin_registry();
  registry.add_borrowed(&planted);
  TuneConfig config = parse_config(kConfig, "gpu-planted.yaml");

  // The gate alone: wrong only with splits > 1 at qlen 3.
  for (const BucketKey& b : config.buckets()) {
    BucketValidator validator(b, config, 4);
    for (int32_t splits : {1, 4}) {
      TrialRecord t = validator.validate(planted, LaunchParams{splits, 32, 16, 0});
      bool wrong = b.key.qlen == 3 && splits > 1;
      SCOPED_TRACE(b.to_string() + " splits=" + std::to_string(splits));
      EXPECT_EQ(t.disposition, wrong ? Disposition::kIncorrect : Disposition::kPassed)
          << t.reason << " at " << t.worst_row;
      if (wrong) {
        EXPECT_GT(t.max_rel_err.value_or(0), 10.0);
      }
    }
  }

  // The tuner and the runtime: the planted variant never serves a seed-failure shape with splits.
  std::string path =
      (std::filesystem::temp_directory_path() / ("gpu-planted-" + std::to_string(getpid()) + ".db"))
          .string();
  std::filesystem::remove(path);
  std::vector<Candidate> candidates = enumerate_candidates(config, registry);
  {
    auto db =
        TuningDb::open_for_tuning(path, TuningDb::Mode::kCreate, make_provenance(config, registry),
                                  variant_records(candidates));
    Progress quiet(stderr, false, static_cast<int64_t>(config.buckets().size()));
    TuneSummary s = tune(config, candidates, *db, quiet);
    EXPECT_EQ(s.tuned, 2);
    db->finalize();
  }
  OpenOptions options;
  options.registry = &registry;
  auto table = WinnerTable::open(path, options);
  for (int32_t batch = 1; batch <= 4; ++batch) {
    for (int32_t kv : {3, 100, 599, 600}) {
      mlatune_decode_key k{16, 3, 1, 1, 64, 0, batch, kv};
      mlatune_selection sel{};
      ASSERT_EQ(table->lookup(k, &sel), MLATUNE_STATUS_OK);
      if (std::string(sel.variant) == "planted_gpu_seed_bug_v1") {
        EXPECT_EQ(sel.kv_splits, 1);
      }
    }
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace mlatune
