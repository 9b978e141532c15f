// Supervised tuning (tuner/isolation.h): a candidate that kills its process or hangs is recorded
// (launch_error / timed_out) and the run goes on in a new worker; the database ends complete,
// with every bucket tuned by a candidate that passed, and worker errors reach the caller with
// their kind. CTest runs each test in its own process, so the fork happens before any host kernel
// started threads here.
#include "tuner/isolation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "tuner/test_variants.h"

namespace mlatune {
namespace {

using testing::ScriptedKernel;

const char* kConfig = R"(
name: isolation
backend: host
spaces:
  - heads: [4]
    qlen: [1]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [false]
    batch_edges: [2, 3]
    kv_len_edges: [40]
tolerances:
  bf16/bf16: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 0}
timing: {warmup: 1, samples: 3, cold_cache: false}
variants: [crashes, hangs, exact]
)";

class IsolationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_.add_borrowed(&crashes_);
    registry_.add_borrowed(&hangs_);
    registry_.add_borrowed(&exact_);
    path_ = std::string(MLATUNE_TEST_TMPDIR) + "/isolation-" + std::to_string(getpid()) + ".db";
    std::filesystem::remove(path_);
  }
  void TearDown() override { std::filesystem::remove(path_); }

  ScriptedKernel crashes_{"crashes", 0, ScriptedKernel::Mode::kSegfault};
  ScriptedKernel hangs_{"hangs", 0, ScriptedKernel::Mode::kHang};
  ScriptedKernel exact_{"exact", 0, ScriptedKernel::Mode::kCorrect};
  Registry registry_;
  std::string path_;
};

TEST_F(IsolationTest, CrashingAndHangingCandidatesAreRecordedAndTheRunFinishes) {
  const TuneConfig config = parse_config(kConfig, "isolation.yaml");
  const std::vector<Candidate> candidates = enumerate_candidates(config, registry_);
  IsolationSettings settings;
  settings.watchdog_s = 2;
  const TuneSummary s =
      tune_isolated(config, candidates, registry_, path_, TuningDb::Mode::kCreate, false, settings);
  EXPECT_EQ(s.buckets, 2);
  EXPECT_EQ(s.tuned, 2);
  EXPECT_EQ(s.no_valid, 0);
  EXPECT_EQ(s.skipped, 0);

  auto db = TuningDb::open_read_only(path_);
  const std::vector<BucketSummary> buckets = db->buckets();
  ASSERT_EQ(buckets.size(), 2u);
  for (const BucketSummary& b : buckets) {
    ASSERT_TRUE(b.winner);
    EXPECT_EQ(b.winner->variant, "exact");
    for (const TrialRecord& t : db->trials(b.id)) {
      if (t.variant == "crashes") {
        EXPECT_EQ(t.disposition, Disposition::kLaunchError);
        // "signal 11 (SIGSEGV)"; under AddressSanitizer, whose handler catches the signal, "exit
        // code 1".
        EXPECT_NE(t.reason.find("crashed the tuning worker: "), std::string::npos) << t.reason;
      } else if (t.variant == "hangs") {
        EXPECT_EQ(t.disposition, Disposition::kTimedOut);
        EXPECT_NE(t.reason.find("watchdog"), std::string::npos) << t.reason;
      }
    }
  }
}

TEST_F(IsolationTest, ResumesAnExistingDatabase) {
  const TuneConfig config = parse_config(kConfig, "isolation.yaml");
  // Only the exact kernel: tunes both buckets; a second run skips them.
  Registry exact_only;
  exact_only.add_borrowed(&exact_);
  TuneConfig only = config;
  only.variants = {"exact"};
  const std::vector<Candidate> candidates = enumerate_candidates(only, exact_only);
  IsolationSettings settings;
  tune_isolated(only, candidates, exact_only, path_, TuningDb::Mode::kCreate, false, settings);
  const TuneSummary again =
      tune_isolated(only, candidates, exact_only, path_, TuningDb::Mode::kResume, false, settings);
  EXPECT_EQ(again.skipped, 2);
  EXPECT_EQ(again.tuned, 0);
}

TEST_F(IsolationTest, WorkerErrorsKeepTheirKind) {
  const TuneConfig config = parse_config(kConfig, "isolation.yaml");
  const std::vector<Candidate> candidates = enumerate_candidates(config, registry_);
  IsolationSettings settings;
  // Resuming a database that does not exist is a database error, raised in the worker.
  EXPECT_THROW(
      tune_isolated(config, candidates, registry_, path_, TuningDb::Mode::kResume, false, settings),
      DbError);
  EXPECT_FALSE(std::filesystem::exists(path_));
  // A GPU config on this build: a device error (the CLI's exit code 7), from the worker too.
#if !defined(MLATUNE_WITH_HIP)
  TuneConfig gpu = config;
  gpu.backend = "hip";
  EXPECT_THROW(
      tune_isolated(gpu, candidates, registry_, path_, TuningDb::Mode::kCreate, false, settings),
      LaunchError);
#endif
}

}  // namespace
}  // namespace mlatune
