// A database's variant is current, absent from this build, or built with other code: show,
// explain and verify tell the last two apart.
#include "tuner/staleness.h"

#include <gtest/gtest.h>

#include "tuner/test_variants.h"

namespace mlatune {
namespace {

using testing::ScriptedKernel;

TEST(StalenessTest, CurrentAbsentAndChangedAreTold) {
  ScriptedKernel exact("exact", 0, ScriptedKernel::Mode::kCorrect, "exact-v1");
  Registry registry;
  registry.add_borrowed(&exact);
  EXPECT_EQ(staleness_of(registry, "exact", "exact-v1"), Staleness::kCurrent);
  EXPECT_EQ(staleness_of(registry, "exact", "exact-v0"), Staleness::kCodeChanged);
  EXPECT_EQ(staleness_of(registry, "from_another_build", "exact-v1"), Staleness::kNotInBuild);
  EXPECT_EQ(staleness_reason(Staleness::kCodeChanged), "variant code changed");
  EXPECT_EQ(staleness_reason(Staleness::kNotInBuild), "variant not in this build");
  EXPECT_EQ(staleness_reason(Staleness::kCurrent), "");
}

}  // namespace
}  // namespace mlatune
