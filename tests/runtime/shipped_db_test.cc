// The databases kept in db/: each opens cleanly where it belongs and is refused, with the
// documented status, where it does not; and each holds the config file it was tuned from.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

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
