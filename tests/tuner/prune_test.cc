// Pruning (timing.prune_factor): every candidate is pre-timed, validated fastest first, and the
// ones far behind the fastest that passed are recorded as pruned without running the gate; a fast
// but wrong candidate is still rejected, and pruning never leaves a bucket without a winner that
// a full run would find. The candidates' times are scripted (a ScriptedClock times them), so the
// verdicts do not depend on the load of the machine.
#include <gtest/gtest.h>

#include "tuner/scratch_tune.h"
#include "tuner/test_variants.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

using testing::ScriptedClock;
using testing::ScriptedKernel;

std::string config_text(const std::string& prune) {
  return R"(
name: prune
backend: host
spaces:
  - heads: [4]
    qlen: [2]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [false]
    batch_edges: [2]
    kv_len_edges: [40]
tolerances:
  bf16/bf16: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 0}
timing: {warmup: 1, samples: 3, cold_cache: false)" +
         prune + R"(}
variants: [fast_wrong, mid_ok, slow_ok, slower_ok]
)";
}

struct BucketRun {
  std::vector<TrialRecord> trials;  // by variant name order of the registry
  std::optional<TrialRecord> winner;
};

BucketRun tune_with(const std::string& prune,
                    ScriptedKernel::Mode mid_mode = ScriptedKernel::Mode::kCorrect) {
  ScriptedKernel fast("fast_wrong", 1000, ScriptedKernel::Mode::kOneRowWrong);
  ScriptedKernel mid("mid_ok", 5000, mid_mode);
  ScriptedKernel slow("slow_ok", 30000, ScriptedKernel::Mode::kCorrect);
  ScriptedKernel slower("slower_ok", 45000, ScriptedKernel::Mode::kCorrect);
  ScriptedClock clock;
  Registry r;
  for (ScriptedKernel* v : {&fast, &mid, &slow, &slower}) {
    v->use_clock(&clock);
    r.add_borrowed(v);
  }
  const TuneConfig config = parse_config(config_text(prune), "prune.yaml");
  TuneHooks hooks;
  hooks.make_timer = clock.timer_factory();
  const std::vector<testing::TunedBucket> buckets =
      testing::tune_into_scratch_db(config, r, "prune", nullptr, hooks);
  BucketRun out;
  EXPECT_EQ(buckets.size(), 1u);
  out.winner = buckets.at(0).summary.winner;
  for (const char* name : {"fast_wrong", "mid_ok", "slow_ok", "slower_ok"}) {
    for (const TrialRecord& t : buckets.at(0).trials) {
      if (t.variant == name) out.trials.push_back(t);
    }
  }
  EXPECT_EQ(out.trials.size(), 4u);
  return out;
}

TEST(PruneTest, WithoutPruningEveryCandidateIsValidated) {
  const BucketRun r = tune_with("");
  EXPECT_EQ(r.trials[0].disposition, Disposition::kIncorrect);
  for (int i = 1; i < 4; ++i) EXPECT_EQ(r.trials[i].disposition, Disposition::kPassed);
  ASSERT_TRUE(r.winner);
  EXPECT_EQ(r.winner->variant, "mid_ok");
}

TEST(PruneTest, SlowCandidatesArePrunedFastWrongOnesStillRejected) {
  const BucketRun r = tune_with(", prune_factor: 2.0, prune_samples: 2");
  EXPECT_EQ(r.trials[0].disposition, Disposition::kIncorrect) << r.trials[0].reason;
  EXPECT_EQ(r.trials[1].disposition, Disposition::kPassed) << r.trials[1].reason;
  for (int i = 2; i < 4; ++i) {
    EXPECT_EQ(r.trials[i].disposition, Disposition::kPruned) << r.trials[i].variant;
    EXPECT_NE(r.trials[i].reason.find("not validated"), std::string::npos) << r.trials[i].reason;
    EXPECT_EQ(r.trials[i].validation_runs, 0);
  }
  ASSERT_TRUE(r.winner);
  EXPECT_EQ(r.winner->variant, "mid_ok");
}

TEST(PruneTest, PruningComparesTheScriptedPreTimingsExactly) {
  // The scripted clock makes pre-timing and timing medians exactly the scripted costs: 30 ms is
  // 6x and 45 ms 9x the 5 ms of the fastest that passed, however loaded the machine is.
  const BucketRun r = tune_with(", prune_factor: 2.0, prune_samples: 2");
  EXPECT_NE(r.trials[2].reason.find("pre-timing median 30000.0 us is 6.00x the 5000.0 us"),
            std::string::npos)
      << r.trials[2].reason;
  EXPECT_NE(r.trials[3].reason.find("pre-timing median 45000.0 us is 9.00x the 5000.0 us"),
            std::string::npos)
      << r.trials[3].reason;
  ASSERT_TRUE(r.winner && r.winner->time_median_us);
  EXPECT_NEAR(*r.winner->time_median_us, 5000.0, 1e-6);  // exact up to seconds-to-us rounding
  EXPECT_NEAR(*r.winner->time_spread_us, 0.0, 1e-6);
}

TEST(PruneTest, PruningGoesOnUntilSomethingPasses) {
  // The two fastest are wrong: the slow one must still be validated and win.
  const BucketRun r = tune_with(", prune_factor: 2.0", ScriptedKernel::Mode::kOneRowWrong);
  EXPECT_EQ(r.trials[0].disposition, Disposition::kIncorrect);
  EXPECT_EQ(r.trials[1].disposition, Disposition::kIncorrect);
  EXPECT_EQ(r.trials[2].disposition, Disposition::kPassed) << r.trials[2].reason;
  EXPECT_EQ(r.trials[3].disposition, Disposition::kPassed) << r.trials[3].reason;  // 1.5x
  ASSERT_TRUE(r.winner);
  EXPECT_EQ(r.winner->variant, "slow_ok");
}

TEST(PruneTest, ConfigRefusesAPruneFactorBelowOne) {
  EXPECT_THROW(parse_config(config_text(", prune_factor: 0.5"), "prune.yaml"), ConfigError);
  EXPECT_THROW(parse_config(config_text(", prune_samples: 0"), "prune.yaml"), ConfigError);
}

}  // namespace
}  // namespace mlatune
