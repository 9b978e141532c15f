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

// The buckets where no candidate passed (db/README.md: the GPU reference's fp32 LSE, not the
// kernels, was off at 131072 keys): qlen 1 with the LSE at the largest batch and KV buckets.
bool known_without_winner(const BucketKey& b) {
  return b.key.qlen == 1 && b.key.lse && b.batch_lo == 65 && b.kv_lo == 32769;
}
constexpr int64_t kWithoutWinner = 6;

TEST(ShippedDbTest, DeepseekHoldsItsConfigAndWinnersWhereDocumented) {
  auto db = TuningDb::open_read_only(kDeepseek);
  const Provenance p = db->provenance();
  EXPECT_EQ(p.config_name, "deepseek-v3-tp8");
  EXPECT_EQ(p.config_text, file_text(kSource + "/configs/deepseek-v3-tp8.yaml"))
      << "db/h200-deepseek-v3-tp8.db was tuned from another version of its config";
  EXPECT_EQ(p.device.name, "NVIDIA H200");
  EXPECT_EQ(p.device.arch, "sm_90");
  const std::vector<BucketSummary> buckets = db->buckets();
  EXPECT_EQ(buckets.size(), 480u);
  int64_t without = 0;
  for (const BucketSummary& b : buckets) {
    EXPECT_EQ(b.winner.has_value(), !known_without_winner(b.bucket)) << b.bucket.to_string();
    without += !b.winner.has_value();
  }
  EXPECT_EQ(without, kWithoutWinner);
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
  EXPECT_EQ(table->stats().usable, 480 - kWithoutWinner);
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
  EXPECT_EQ(table->stats().stale, 480 - kWithoutWinner);
  EXPECT_EQ(table->stats().no_valid, kWithoutWinner);
  mlatune_decode_key k{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 64, 0, 64, 8192};
  mlatune_selection sel{};
  EXPECT_EQ(table->lookup(k, &sel), MLATUNE_STATUS_STALE);
  mlatune_decode_key none{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 64, 1, 128, 100000};
  EXPECT_EQ(table->lookup(none, &sel), MLATUNE_STATUS_NO_VALID_KERNEL);
#endif
}

}  // namespace
}  // namespace mlatune
