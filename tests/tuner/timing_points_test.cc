// timing.top_corner: passed candidates are timed at the bucket's midpoint and at its largest
// point, and the winner is the candidate least slower than the fastest at its worse point, so a
// launch shape that is best only at the bucket's centre does not win a bucket whose large shapes
// it serves badly (pick_winner_test holds the rule itself).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tuner/scratch_tune.h"
#include "tuner/test_variants.h"
#include "tuner/tune.h"
#include "tuner/validation_case.h"

namespace mlatune {
namespace {

using testing::ScriptedClock;
using testing::ScriptedKernel;
using testing::tune_into_scratch_db;
using testing::TunedBucket;

std::string config_text(bool top_corner) {
  return std::string(R"(
name: points
backend: host
spaces:
  - heads: [4]
    qlen: [1]
    dtypes: [bf16/bf16]
    page_size: [16]
    lse: [false]
    batch_edges: [2, 20]
    kv_len_edges: [40]
tolerances:
  bf16/bf16: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 1, repeats: 2, interior_points: 0}
timing: {warmup: 1, samples: 5, cold_cache: false, top_corner: )") +
         (top_corner ? "true" : "false") + R"(}
variants: [flat, steep]
)";
}

// The winner of bucket batch 3..20 (midpoint batch 11, top corner 20) and its trial.
TrialRecord winner_of_large_bucket(bool top_corner) {
  // flat: 120 ms + 1 ms per sequence (131 ms at the midpoint, 140 at the corner: 1.16x steep at
  // the midpoint); steep: 10.3 ms per sequence (113.3 and 206: 1.47x flat at the corner). Steep
  // wins at the midpoint only. A ScriptedClock times them: the medians are exactly these costs,
  // whatever the load of the machine.
  ScriptedClock clock;
  ScriptedKernel flat("flat", 120000, ScriptedKernel::Mode::kCorrect);
  flat.set_sleep_per_sequence_us(1000);
  flat.use_clock(&clock);
  ScriptedKernel steep("steep", 0, ScriptedKernel::Mode::kCorrect);
  steep.set_sleep_per_sequence_us(10300);
  steep.use_clock(&clock);
  TuneHooks hooks;
  hooks.make_timer = clock.timer_factory();
  Registry r;
  r.add_borrowed(&flat);
  r.add_borrowed(&steep);
  const TuneConfig config = parse_config(config_text(top_corner), "points.yaml");
  TrialRecord out;
  for (const TunedBucket& b : tune_into_scratch_db(config, r, "points", nullptr, hooks)) {
    if (b.summary.bucket.batch_lo == 3) {
      EXPECT_TRUE(b.summary.winner.has_value());
      if (b.summary.winner) out = *b.summary.winner;
    }
  }
  return out;
}

TEST(TimingPoints, MidpointOnlyPicksTheShapeBestAtTheCentre) {
  const TrialRecord w = winner_of_large_bucket(false);
  EXPECT_EQ(w.variant, "steep");
  EXPECT_EQ(w.timing_method.find("geometric mean"), std::string::npos) << w.timing_method;
}

TEST(TimingPoints, TopCornerPicksTheLeastWorstSlowdownAndSaysSo) {
  const TrialRecord w = winner_of_large_bucket(true);
  EXPECT_EQ(w.variant, "flat");
  EXPECT_NE(w.timing_method.find("geometric mean of the medians at 2 points"), std::string::npos)
      << w.timing_method;
  EXPECT_NE(w.timing_method.find("batch=20"), std::string::npos) << w.timing_method;
  ASSERT_TRUE(w.time_median_us.has_value());
  // The recorded median is the geometric mean of the two listed ("batch=11 ...: X us, batch=20
  // ...: Y us"), each exactly flat's scripted cost at its point.
  std::vector<double> listed;
  const std::string& m = w.timing_method;
  for (size_t at = m.find("points ("); at != std::string::npos; at = m.find(": ", at + 2)) {
    if (m.compare(at, 2, ": ") == 0) listed.push_back(std::strtod(m.c_str() + at + 2, nullptr));
  }
  ASSERT_EQ(listed.size(), 2u) << w.timing_method;
  EXPECT_EQ(listed[0], 131000.0) << w.timing_method;
  EXPECT_EQ(listed[1], 140000.0) << w.timing_method;
  EXPECT_NEAR(*w.time_median_us, std::sqrt(listed[0] * listed[1]), 0.1) << w.timing_method;
}

TEST(TimingPoints, TheCornerIsAddedOnlyWhenAskedAndDistinct) {
  const TuneConfig config = parse_config(config_text(true), "points.yaml");
  const BucketKey range = config.buckets().at(1);  // batch 3..20, kv 1..40
  ASSERT_EQ(range.batch_lo, 3);
  EXPECT_EQ(make_timing_cases(range, 0.1, false).size(), 1u);
  const std::vector<ValidationCase> two = make_timing_cases(range, 0.1, true);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].shape().batch, 11);
  EXPECT_EQ(two[1].shape().batch, range.batch_hi);
  EXPECT_EQ(two[1].shape().max_kv_len, range.kv_hi);
  BucketKey point = range;
  point.batch_lo = point.batch_hi;
  point.kv_lo = point.kv_hi;
  EXPECT_EQ(make_timing_cases(point, 0.1, true).size(), 1u);
}

TEST(TimingPoints, TopCornerMustBeABoolean) {
  std::string text = config_text(true);
  text.replace(text.find("top_corner: true"), 16, "top_corner: 3");
  EXPECT_THROW(parse_config(text, "points.yaml"), ConfigError);
}

}  // namespace
}  // namespace mlatune
