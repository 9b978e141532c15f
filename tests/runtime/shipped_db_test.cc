// The databases kept in db/: each opens cleanly where it belongs and is refused, with the
// documented status, where it does not; and each holds the config file it was tuned from.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "db/digest.h"
#include "db/snapshot.h"
#include "db/tuning_db.h"
#include "runtime/runtime_fixture.h"
#include "runtime/winner_table.h"

namespace mlatune {
namespace {

const std::string kSource = MLATUNE_SOURCE_DIR;

// configs/deepseek-v3-tp8.yaml tuned on each GPU we were lent (db/README.md).
struct Shipped {
  std::string path;
  std::string device;  // provenance device name
};
const std::vector<Shipped> kDeepseek = {
    {kSource + "/db/h200-deepseek-v3-tp8.db", "NVIDIA H200"},
};

TEST(ShippedDbTest, DeepseekHoldsItsConfigAndAWinnerForEveryBucket) {
  for (const Shipped& shipped : kDeepseek) {
    SCOPED_TRACE(shipped.path);
    auto db = TuningDb::open_read_only(shipped.path);
    const Provenance p = db->provenance();
    EXPECT_EQ(p.config_name, "deepseek-v3-tp8");
    EXPECT_EQ(p.config_text, test_db::read_file(kSource + "/configs/deepseek-v3-tp8.yaml"))
        << "tuned from another version of its config";
    EXPECT_EQ(p.device.name, shipped.device);
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
}

// Every database kept in the repository carries a current dispatch snapshot (`mlatune snapshot`,
// db/README.md), identical to what its rows say, and its rows still hash to the digest the tuner
// recorded: the migration changed neither the provenance nor a row.
TEST(ShippedDbTest, EveryKeptDatabaseHasACurrentSnapshotIdenticalToItsRows) {
  std::vector<std::string> kept{kSource + "/fuzz/corpus/db_open/tiny.db"};
  for (const Shipped& shipped : kDeepseek) kept.push_back(shipped.path);
  for (const std::string& path : kept) {
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
  for (const Shipped& shipped : kDeepseek) {
    SCOPED_TRACE(shipped.path);
    OpenOptions options;
    options.allow_foreign_device = true;
    auto fast = WinnerTable::open(shipped.path, options);
    options.use_snapshot = false;
    auto rows = WinnerTable::open(shipped.path, options);
    EXPECT_TRUE(fast->from_snapshot());
    EXPECT_FALSE(rows->from_snapshot());
    EXPECT_EQ(fast->stats().usable, rows->stats().usable);
    EXPECT_EQ(fast->stats().stale, rows->stats().stale);
    EXPECT_EQ(fast->stats().no_valid, rows->stats().no_valid);
    auto buckets = TuningDb::open_read_only(shipped.path)->buckets();
    ASSERT_EQ(buckets.size(), 480u);
    for (const BucketSummary& b : buckets) {
      for (int32_t batch : {b.bucket.batch_lo, b.bucket.batch_hi}) {
        for (int32_t kv : {b.bucket.kv_lo, b.bucket.kv_hi}) {
          const mlatune_decode_key key =
              test_db::decode_key(b.bucket.key, batch, std::max(kv, b.bucket.key.qlen));
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
}

TEST(ShippedDbTest, DeepseekIsForeignOnThisMachine) {
#if defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "GPU builds may run on the GPU it was tuned on";
#else
  for (const Shipped& shipped : kDeepseek) {
    try {
      WinnerTable::open(shipped.path, OpenOptions{});
      ADD_FAILURE() << shipped.path << ": a database tuned on a GPU opened on a CPU-only build";
    } catch (const RuntimeError& e) {
      EXPECT_EQ(e.status(), MLATUNE_STATUS_FOREIGN_DEVICE) << e.what();
      EXPECT_NE(std::string(e.what()).find(shipped.device), std::string::npos) << e.what();
    }
  }
#endif
}

TEST(ShippedDbTest, DeepseekWinnersAreCurrentInAnNvidiaBuild) {
#if !defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "needs the GPU kernels the database was tuned with";
#else
  // A kernel edit (or other GPU compile flags) makes winners stale: retune, then ship again.
  for (const Shipped& shipped : kDeepseek) {
    SCOPED_TRACE(shipped.path);
    OpenOptions options;
    options.allow_foreign_device = true;  // this test checks the code, not the device
    auto table = WinnerTable::open(shipped.path, options);
    EXPECT_EQ(table->stats().stale, 0);
    EXPECT_EQ(table->stats().usable, 480);
  }
#endif
}

TEST(ShippedDbTest, DeepseekWinnersAreStaleWithoutTheGpuKernels) {
#if defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "GPU builds link the GPU kernels";
#else
  for (const Shipped& shipped : kDeepseek) {
    SCOPED_TRACE(shipped.path);
    OpenOptions options;
    options.allow_foreign_device = true;  // to inspect it; its winners still must not be served
    auto table = WinnerTable::open(shipped.path, options);
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
  }
#endif
}

}  // namespace
}  // namespace mlatune
