// The shipped H200 database's winners are what pick_winner picks from its own records: every
// bucket's passed trials, with the per-point medians their timing_method lists, replayed through
// the rule with the tie_fraction of the config the database was tuned from. A database tuned under
// another rule (or edited by hand) fails here.
#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/tuning_db.h"
#include "tuner/config.h"
#include "tuner/test_variants.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

// The medians listed after "points (": "label: 59.512 us, label: 117.700 us)".
std::vector<double> listed_point_medians(const std::string& timing_method) {
  std::vector<double> medians;
  size_t at = timing_method.find(" points (");
  if (at == std::string::npos) return medians;
  while ((at = timing_method.find(": ", at)) != std::string::npos) {
    at += 2;
    medians.push_back(std::stod(timing_method.substr(at)));
  }
  return medians;
}

std::string launch(const TrialRecord& t) {
  return t.variant + " splits=" + std::to_string(t.params.kv_splits) +
         " tile=" + std::to_string(t.params.kv_tile) +
         " rows=" + std::to_string(t.params.block_rows) +
         " workers=" + std::to_string(t.params.workers);
}

TEST(ShippedDbWinners, ListedMediansParse) {
  EXPECT_EQ(
      listed_point_medians("x; geometric mean of the medians at 2 points (batch=2 max_kv=1024 "
                           "seed 1 random: 14.925 us, batch=4 max_kv=2048 seed 1 random: "
                           "20.100 us)"),
      (std::vector<double>{14.925, 20.1}));
  EXPECT_TRUE(listed_point_medians("device events, one point").empty());
}

TEST(ShippedDbWinners, EveryWinnerIsWhatTheRulePicksFromTheRecords) {
  const std::string path = std::string(MLATUNE_SOURCE_DIR) + "/db/h200-deepseek-v3-tp8.db";
  auto db = TuningDb::open_read_only(path);
  const TuneConfig config = parse_config(db->provenance().config_text, path + " provenance");
  int checked = 0;
  for (const BucketSummary& b : db->buckets()) {
    SCOPED_TRACE(b.bucket.to_string());
    ASSERT_TRUE(b.winner.has_value());
    // Stand-ins by variant name: pick_winner needs only the name and Variant::complexity, which
    // no GPU variant overrides (a CPU build has no GPU variants to look up).
    std::deque<testing::ScriptedKernel> stand_ins;
    std::map<std::string, const Variant*> by_name;
    std::vector<TrialRecord> trials = db->trials(b.id);
    std::vector<Candidate> candidates;
    for (TrialRecord& t : trials) {
      if (!by_name.count(t.variant)) {
        by_name[t.variant] =
            &stand_ins.emplace_back(t.variant, 0, testing::ScriptedKernel::Mode::kCorrect);
      }
      candidates.push_back({by_name[t.variant], t.params});
      if (t.disposition != Disposition::kPassed) continue;
      t.point_medians_us = listed_point_medians(t.timing_method);
      ASSERT_EQ(t.point_medians_us.size(), 2u) << t.timing_method;
    }
    const std::optional<size_t> pick = pick_winner(trials, candidates, config.timing.tie_fraction);
    ASSERT_TRUE(pick.has_value());
    EXPECT_EQ(launch(trials[*pick]), launch(*b.winner));
    ++checked;
  }
  EXPECT_EQ(checked, 480);
}

}  // namespace
}  // namespace mlatune
