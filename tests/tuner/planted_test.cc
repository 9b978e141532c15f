// The seed failure of design.md §1, reproduced: a variant that is wrong exactly when heads = 16,
// qlen in {3, 4} and kv_splits > 1, plus one wrong in a single row and one wrong in 1 of 5 calls.
// The tuner must record their failures with reasons, pick passing candidates, and never let them
// win where they are wrong.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "runtime/winner_table.h"
#include "tuner/test_variants.h"
#include "tuner/tune.h"

namespace mlatune {
namespace {

const char* kConfig = R"(
name: planted
backend: host
spaces:
  - heads: [16]
    qlen: [1, 3, 4]
    dtypes: [fp8_e4m3fn/fp8_e4m3fn]
    page_size: [16]
    lse: [false]
    batch_edges: [2]
    kv_len_edges: [70]
  - heads: [8]
    qlen: [3]
    dtypes: [fp8_e4m3fn/fp8_e4m3fn]
    page_size: [16]
    lse: [false]
    batch_edges: [2]
    kv_len_edges: [70]
tolerances:
  fp8_e4m3fn/fp8_e4m3fn: {atol: 2.0e-3, rtol: 2.0e-2, min_cosine: 0.9999, lse_atol: 2.0e-4}
validation: {seeds: 2, repeats: 3, interior_points: 1}
timing: {warmup: 1, samples: 3, cold_cache: false}
variants: [host_split_kv_v1, planted_seed_bug_v1, planted_one_row_v1, planted_one_in_five_v1]
params:
  host_split_kv_v1: {kv_splits: [1, 2], workers: [1]}
  planted_seed_bug_v1: {workers: [1]}
  planted_one_row_v1: {kv_splits: [1], workers: [1]}
  planted_one_in_five_v1: {kv_splits: [1], workers: [1]}
)";

class PlantedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    planted_ = new testing::PlantedVariants();
    registry_ = new Registry(planted_->registry());
    config_ = new TuneConfig(parse_config(kConfig, "planted.yaml"));
    // CTest runs every test in its own process, possibly in parallel: one file per process.
    path_ = std::string(MLATUNE_TEST_TMPDIR) + "/planted-" + std::to_string(getpid()) + ".db";
    std::filesystem::remove(path_);
    auto candidates = enumerate_candidates(*config_, *registry_);
    auto db = TuningDb::open_for_tuning(path_, TuningDb::Mode::kCreate,
                                        make_provenance(*config_, *registry_),
                                        variant_records(candidates));
    Progress quiet(stderr, false, static_cast<int64_t>(config_->buckets().size()));
    summary_ = tune(*config_, candidates, *db, quiet);
    db->finalize();
  }
  static void TearDownTestSuite() {
    std::filesystem::remove(path_);
    delete config_;
    delete registry_;
    delete planted_;
  }

  static testing::PlantedVariants* planted_;
  static Registry* registry_;
  static TuneConfig* config_;
  static std::string path_;
  static TuneSummary summary_;
};

testing::PlantedVariants* PlantedTest::planted_ = nullptr;
Registry* PlantedTest::registry_ = nullptr;
TuneConfig* PlantedTest::config_ = nullptr;
std::string PlantedTest::path_;
TuneSummary PlantedTest::summary_;

bool seed_bug_applies(const DecodeKey& k) { return k.heads == 16 && (k.qlen == 3 || k.qlen == 4); }

TEST_F(PlantedTest, EveryBucketGetsAPassingWinner) {
  EXPECT_EQ(summary_.buckets, 4);
  EXPECT_EQ(summary_.tuned, 4);
  EXPECT_EQ(summary_.no_valid, 0);
  auto db = TuningDb::open_read_only(path_);
  for (const BucketSummary& b : db->buckets()) {
    ASSERT_TRUE(b.winner.has_value()) << b.bucket.to_string();
    EXPECT_EQ(b.winner->disposition, Disposition::kPassed);
    EXPECT_NE(b.winner->variant, "planted_one_row_v1");
    EXPECT_NE(b.winner->variant, "planted_one_in_five_v1");
    if (seed_bug_applies(b.bucket.key) && b.winner->variant == "planted_seed_bug_v1") {
      EXPECT_EQ(b.winner->params.kv_splits, 1) << b.bucket.to_string();
    }
  }
}

TEST_F(PlantedTest, SeedBugFailsExactlyWhereItIsWrong) {
  auto db = TuningDb::open_read_only(path_);
  int failed = 0, passed_with_splits = 0;
  for (const BucketSummary& b : db->buckets()) {
    for (const TrialRecord& t : db->trials(b.id)) {
      if (t.variant != "planted_seed_bug_v1") continue;
      bool wrong = seed_bug_applies(b.bucket.key) && t.params.kv_splits > 1;
      if (wrong) {
        ++failed;
        EXPECT_EQ(t.disposition, Disposition::kIncorrect) << b.bucket.to_string();
        EXPECT_NE(t.reason.find("exceeds tolerance"), std::string::npos) << t.reason;
        EXPECT_FALSE(t.worst_row.empty());
        // Uncorrelated output fails by orders of magnitude, not by a hair.
        EXPECT_GT(t.max_rel_err.value_or(0), 100.0) << t.reason;
      } else {
        EXPECT_EQ(t.disposition, Disposition::kPassed)
            << b.bucket.to_string() << " " << t.params.to_string() << ": " << t.reason;
        passed_with_splits += t.params.kv_splits > 1;
      }
    }
  }
  EXPECT_EQ(failed, 2 * 2);              // buckets qlen 3 and 4 x splits {2, 4}
  EXPECT_EQ(passed_with_splits, 2 * 2);  // buckets heads 16 qlen 1 and heads 8 qlen 3
}

TEST_F(PlantedTest, SingleRowAndOneInFiveAreRejectedEverywhere) {
  auto db = TuningDb::open_read_only(path_);
  for (const BucketSummary& b : db->buckets()) {
    for (const TrialRecord& t : db->trials(b.id)) {
      if (t.variant == "planted_one_row_v1") {
        EXPECT_EQ(t.disposition, Disposition::kIncorrect) << b.bucket.to_string();
        // The last row of a point: the last query token's last head.
        EXPECT_NE(t.worst_row.find("head " + std::to_string(b.bucket.key.heads - 1)),
                  std::string::npos)
            << t.worst_row;
      } else if (t.variant == "planted_one_in_five_v1") {
        EXPECT_EQ(t.disposition, Disposition::kIncorrect) << b.bucket.to_string();
        EXPECT_FALSE(t.reason.empty());
      }
    }
  }
}

TEST_F(PlantedTest, RuntimeNeverReturnsAPlantedFaultWhereItIsWrong) {
  OpenOptions options;
  options.registry = registry_;  // the runtime knows the planted variants' code, as the tuner did
  auto table = WinnerTable::open(path_, options);
  EXPECT_EQ(table->stats().usable, 4);
  int lookups = 0;
  for (const BucketKey& b : config_->buckets()) {
    for (int32_t batch = b.batch_lo; batch <= b.batch_hi; ++batch) {
      for (int32_t kv = std::max(b.kv_lo, b.key.qlen); kv <= b.kv_hi; ++kv) {
        mlatune_decode_key k{b.key.heads,
                             b.key.qlen,
                             static_cast<int32_t>(b.key.q_dtype),
                             static_cast<int32_t>(b.key.kv_dtype),
                             b.key.page_size,
                             b.key.lse ? 1 : 0,
                             batch,
                             kv};
        mlatune_selection sel{};
        ASSERT_EQ(table->lookup(k, &sel), MLATUNE_STATUS_OK) << b.to_string();
        ++lookups;
        std::string variant = sel.variant;
        EXPECT_NE(variant, "planted_one_row_v1");
        EXPECT_NE(variant, "planted_one_in_five_v1");
        if (seed_bug_applies(b.key) && variant == "planted_seed_bug_v1") {
          EXPECT_EQ(sel.kv_splits, 1);
        }
      }
    }
  }
  EXPECT_GT(lookups, 400);
  // Just outside the tuned space: refused, never guessed.
  mlatune_decode_key outside{16, 2, 1, 1, 16, 0, 1, 50};
  mlatune_selection sel{};
  EXPECT_EQ(table->lookup(outside, &sel), MLATUNE_STATUS_UNTUNED);
}

TEST_F(PlantedTest, DatabaseRefusesAWinnerThatDidNotPass) {
  SqliteDb db(path_, SQLITE_OPEN_READWRITE);
  Statement failed(db, "SELECT id, bucket_id FROM trials WHERE disposition <> 'passed' LIMIT 1");
  ASSERT_TRUE(failed.step());
  int64_t trial = failed.column_int(0), bucket = failed.column_int(1);
  Statement upd(db, "UPDATE winners SET trial_id = ?1 WHERE bucket_id = ?2");
  upd.bind(1, trial).bind(2, bucket);
  EXPECT_THROW(upd.run(), DbError);
  Statement del(db, "DELETE FROM winners WHERE bucket_id = ?1");
  del.bind(1, bucket);
  del.run();
  Statement ins(db, "INSERT INTO winners (bucket_id, trial_id) VALUES (?1, ?2)");
  ins.bind(1, bucket).bind(2, trial);
  EXPECT_THROW(ins.run(), DbError);
}

}  // namespace
}  // namespace mlatune
