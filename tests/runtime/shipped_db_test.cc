// The databases kept in db/: each opens cleanly where it belongs and is refused, with the
// documented status, where it does not; and each holds the config file it was tuned from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "db/digest.h"
#include "db/snapshot.h"
#include "db/tuning_db.h"
#include "runtime/winner_table.h"

namespace mlatune {
namespace {

const std::string kSource = MLATUNE_SOURCE_DIR;
const std::string kDeepseek = kSource + "/db/h200-deepseek-v3-tp8.db";

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(ShippedDbTest, DeepseekHoldsItsConfigAndAWinnerForEveryBucket) {
  auto db = TuningDb::open_read_only(kDeepseek);
  const Provenance p = db->provenance();
  EXPECT_EQ(p.config_name, "deepseek-v3-tp8");
  EXPECT_EQ(p.config_text, file_text(kSource + "/configs/deepseek-v3-tp8.yaml"))
      << "db/h200-deepseek-v3-tp8.db was tuned from another version of its config";
  EXPECT_EQ(p.device.name, "NVIDIA H200");
  EXPECT_EQ(p.device.arch, "sm_90");
  const std::vector<BucketSummary> buckets = db->buckets();
  EXPECT_EQ(buckets.size(), 480u);
  for (const BucketSummary& b : buckets) {
    ASSERT_TRUE(b.winner.has_value()) << b.bucket.to_string();
    // timing.top_corner: every bucket is a range, so every winner was timed at two points.
    EXPECT_NE(b.winner->timing_method.find("geometric mean of the medians at 2 points"),
              std::string::npos)
        << b.bucket.to_string() << ": " << b.winner->timing_method;
  }
}

// Every database kept in the repository carries a current dispatch snapshot (`mlatune snapshot`,
// db/README.md), identical to what its rows say, and its rows still hash to the digest the tuner
// recorded: the migration changed neither the provenance nor a row.
TEST(ShippedDbTest, EveryKeptDatabaseHasACurrentSnapshotIdenticalToItsRows) {
  for (const std::string& path : {kDeepseek, kSource + "/fuzz/corpus/db_open/tiny.db"}) {
    SCOPED_TRACE(path);
    SqliteDb db(path, SQLITE_OPEN_READONLY);
    const SnapshotReport r = inspect_snapshot(db, /*compare_with_rows=*/true);
    EXPECT_TRUE(r.usable) << r.detail;
    Statement st(db, "SELECT winners_digest FROM provenance");
    ASSERT_TRUE(st.step());
    EXPECT_EQ(st.column_text(0), compute_winners_digest(db));
  }
}

// The snapshot and the rows give the same table (its winners are stale in a CPU-only build, and
// the stale explanations must match too).
TEST(ShippedDbTest, DeepseekOpensFromItsSnapshotAsFromItsRows) {
  OpenOptions options;
  options.allow_foreign_device = true;
  auto fast = WinnerTable::open(kDeepseek, options);
  options.use_snapshot = false;
  auto rows = WinnerTable::open(kDeepseek, options);
  EXPECT_TRUE(fast->from_snapshot());
  EXPECT_FALSE(rows->from_snapshot());
  EXPECT_EQ(fast->stats().usable, rows->stats().usable);
  EXPECT_EQ(fast->stats().stale, rows->stats().stale);
  EXPECT_EQ(fast->stats().no_valid, rows->stats().no_valid);
  auto buckets = TuningDb::open_read_only(kDeepseek)->buckets();
  ASSERT_EQ(buckets.size(), 480u);
  for (const BucketSummary& b : buckets) {
    for (int32_t batch : {b.bucket.batch_lo, b.bucket.batch_hi}) {
      for (int32_t kv : {b.bucket.kv_lo, b.bucket.kv_hi}) {
        const DecodeKey& k = b.bucket.key;
        const mlatune_decode_key key{k.heads,
                                     k.qlen,
                                     static_cast<int32_t>(k.q_dtype),
                                     static_cast<int32_t>(k.kv_dtype),
                                     k.page_size,
                                     k.lse ? 1 : 0,
                                     batch,
                                     std::max(kv, k.qlen)};
        mlatune_selection a{}, c{};
        ASSERT_EQ(fast->lookup(key, &a), rows->lookup(key, &c));
        EXPECT_EQ(std::memcmp(&a, &c, sizeof a), 0);
        char why_a[512], why_c[512];
        fast->explain(key, why_a, sizeof why_a);
        rows->explain(key, why_c, sizeof why_c);
        EXPECT_STREQ(why_a, why_c);
      }
    }
  }
}

TEST(ShippedDbTest, DeepseekIsForeignOnThisMachine) {
#if defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "GPU builds may run on the H200 it was tuned on";
#else
  try {
    WinnerTable::open(kDeepseek, OpenOptions{});
    FAIL() << "a database tuned on an H200 opened on a CPU-only build";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.status(), MLATUNE_STATUS_FOREIGN_DEVICE) << e.what();
    EXPECT_NE(std::string(e.what()).find("NVIDIA H200"), std::string::npos) << e.what();
  }
#endif
}

TEST(ShippedDbTest, DeepseekWinnersAreCurrentInAnNvidiaBuild) {
#if !defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "needs the GPU kernels the database was tuned with";
#else
  // A kernel edit (or other GPU compile flags) makes winners stale: retune, then ship again.
  OpenOptions options;
  options.allow_foreign_device = true;  // this test checks the code, not the device
  auto table = WinnerTable::open(kDeepseek, options);
  EXPECT_EQ(table->stats().stale, 0);
  EXPECT_EQ(table->stats().usable, 480);
#endif
}

TEST(ShippedDbTest, DeepseekWinnersAreStaleWithoutTheGpuKernels) {
#if defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "GPU builds link the GPU kernels";
#else
  OpenOptions options;
  options.allow_foreign_device = true;  // to inspect it; its winners still must not be served
  auto table = WinnerTable::open(kDeepseek, options);
  EXPECT_EQ(table->stats().usable, 0);
  EXPECT_EQ(table->stats().stale, 480);
  EXPECT_EQ(table->stats().no_valid, 0);
  mlatune_decode_key k{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 64, 0, 64, 8192};
  mlatune_selection sel{};
  EXPECT_EQ(table->lookup(k, &sel), MLATUNE_STATUS_STALE);
  mlatune_decode_key largest{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 64, 1, 256, 131072};
  EXPECT_EQ(table->lookup(largest, &sel), MLATUNE_STATUS_STALE);
  mlatune_decode_key outside{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 64, 1, 257, 8192};
  EXPECT_EQ(table->lookup(outside, &sel), MLATUNE_STATUS_UNTUNED);
#endif
}

}  // namespace
}  // namespace mlatune
