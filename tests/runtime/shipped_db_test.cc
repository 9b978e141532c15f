// The databases kept in db/: each opens cleanly where it belongs and is refused, with the
// documented status, where it does not.
#include <gtest/gtest.h>

#include <string>

#include "runtime/winner_table.h"

namespace mlatune {
namespace {

const std::string kH200Smoke = std::string(MLATUNE_SOURCE_DIR) + "/db/h200-gpu-smoke.db";

TEST(ShippedDbTest, H200SmokeIsForeignOnThisMachine) {
#if defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "GPU builds may run on the H200 it was tuned on";
#else
  try {
    WinnerTable::open(kH200Smoke, OpenOptions{});
    FAIL() << "a database tuned on an H200 opened on a CPU-only build";
  } catch (const RuntimeError& e) {
    EXPECT_EQ(e.status(), MLATUNE_STATUS_FOREIGN_DEVICE) << e.what();
    EXPECT_NE(std::string(e.what()).find("NVIDIA H200"), std::string::npos) << e.what();
  }
#endif
}

TEST(ShippedDbTest, H200SmokeWinnersAreStaleWithoutTheGpuKernels) {
#if defined(MLATUNE_WITH_HIP)
  GTEST_SKIP() << "GPU builds link the GPU kernels";
#else
  OpenOptions options;
  options.allow_foreign_device = true;  // to inspect it; its winners still must not be served
  auto table = WinnerTable::open(kH200Smoke, options);
  EXPECT_EQ(table->stats().usable, 0);
  EXPECT_EQ(table->stats().stale, 28);
  mlatune_decode_key k{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 64, 0, 8, 2000};
  mlatune_selection sel{};
  EXPECT_EQ(table->lookup(k, &sel), MLATUNE_STATUS_STALE);
#endif
}

}  // namespace
}  // namespace mlatune
