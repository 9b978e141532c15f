// pick_winner: with several timing points the winner is the candidate least slower than the
// fastest at its worst point (not the best geometric mean), ties within tie_fraction go to the
// simpler launch and then to the smaller slowdown, and only passed, timed trials can win.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "tuner/test_variants.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

using testing::ScriptedKernel;

// Three variants (names sort a < b < c: where the rule's pick differs from the first name, a
// fallback to the name fails).
struct Fixture {
  ScriptedKernel a{"a", 0, ScriptedKernel::Mode::kCorrect};
  ScriptedKernel b{"b", 0, ScriptedKernel::Mode::kCorrect};
  ScriptedKernel c{"c", 0, ScriptedKernel::Mode::kCorrect};
  std::vector<Candidate> candidates;
  std::vector<TrialRecord> trials;

  // A trial of `v` and, if passed, timed at `points`; its recorded median is the first point's
  // (pick_winner uses the points when every trial has as many).
  void add(const ScriptedKernel& v, int32_t kv_splits, std::vector<double> points,
           Disposition d = Disposition::kPassed) {
    LaunchParams p;
    p.kv_splits = kv_splits;
    candidates.push_back({&v, p});
    TrialRecord t;
    t.variant = std::string(v.name());
    t.params = p;
    t.disposition = d;
    if (d == Disposition::kPassed) {
      t.time_median_us = points.front();
      t.point_medians_us = std::move(points);
    }
    trials.push_back(std::move(t));
  }
  std::optional<std::string> winner(double tie_fraction = 0.03) const {
    const std::optional<size_t> w = pick_winner(trials, candidates, tie_fraction);
    if (!w) return std::nullopt;
    return trials[*w].variant + " splits=" + std::to_string(trials[*w].params.kv_splits);
  }
};

TEST(PickWinner, TheLeastWorstSlowdownWinsNotTheBestGeometricMean) {
  // The H200 tune's bucket batch 17-64 x KV 2049-8192, fp8 q (midpoint / top corner, us): the
  // geometric means are 83.7, 84.2 and 85.9, so the mean picked the first, 1.116x the fastest at
  // the corner; its worst slowdowns are 1.116, 1.084 (at the corner) and 1.175 (at the midpoint).
  Fixture f;
  f.add(f.a, 1, {59.5, 117.7});
  f.add(f.b, 1, {61.9, 114.4});
  f.add(f.c, 4, {69.9, 105.5});
  EXPECT_EQ(f.winner(0.0), "b splits=1");
  // Within 3% of each other a and b tie; both are equally simple, so the smaller slowdown wins.
  EXPECT_EQ(f.winner(0.03), "b splits=1");
}

TEST(PickWinner, TiesGoToTheSimplerLaunchThenTheSmallerSlowdown) {
  Fixture f;
  f.add(f.a, 4, {100.0, 200.0});  // the fastest everywhere, but 4 splits
  f.add(f.b, 2, {102.0, 202.0});  // within 3%: simpler than a; 1.02x the fastest at worst
  f.add(f.c, 2, {101.0, 201.0});  // as simple as b and 1.01x: wins though b's name sorts first
  EXPECT_EQ(f.winner(0.03), "c splits=2");
  EXPECT_EQ(f.winner(0.0), "a splits=4");
}

TEST(PickWinner, OnlyPassedTimedTrialsWin) {
  Fixture f;
  f.add(f.a, 1, {}, Disposition::kIncorrect);
  f.add(f.b, 1, {}, Disposition::kPruned);
  EXPECT_EQ(f.winner(), std::nullopt);
  f.add(f.c, 8, {500.0, 900.0});
  EXPECT_EQ(f.winner(), "c splits=8");
}

TEST(PickWinner, OnePointIsTheFastestMedian) {
  Fixture f;
  f.add(f.a, 1, {130.0});
  f.add(f.b, 1, {120.0});
  f.add(f.c, 1, {125.0});
  EXPECT_EQ(f.winner(0.0), "b splits=1");
  // Trials read back from a database carry only their recorded median.
  for (TrialRecord& t : f.trials) t.point_medians_us.clear();
  EXPECT_EQ(f.winner(0.0), "b splits=1");
}

TEST(PickWinner, TrialsTimedAtDifferentPointsCompareByTheirRecordedMedians) {
  Fixture f;
  f.add(f.a, 1, {120.0, 300.0});
  f.trials[0].time_median_us = 100.0;  // slower than b at the first point, faster as recorded
  f.add(f.b, 1, {110.0});
  EXPECT_EQ(f.winner(0.0), "a splits=1");
}

}  // namespace
}  // namespace mlatune
