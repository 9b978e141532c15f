// Handles used wrongly through the C ABI are refused with a status naming the misuse, never read
// as something they are not: a lookup on a closed handle, a double close, a plan passed where a
// database handle belongs and the reverse, a destroyed plan used or destroyed again. These calls
// read only the quarantined shells (runtime/handle_quarantine.h), so they are clean under ASan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "runtime/decode_call.h"
#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

using ::testing::HasSubstr;

class HandleMisuseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path();
    write_test_db(path_, standard_spec());
    ASSERT_EQ(mlatune_open(path_.c_str(), nullptr, &db_), MLATUNE_STATUS_OK) << mlatune_last_error();
  }
  void TearDown() override {
    if (db_) mlatune_close(db_);
    remove_db_files(path_);
  }
  mlatune_status lookup(const mlatune_db* db) {
    const mlatune_decode_key key = decode_key(key_a(), 2, 100);
    mlatune_selection out;
    return mlatune_lookup(db, &key, &out);
  }
  std::string path_;
  mlatune_db* db_ = nullptr;
};

TEST_F(HandleMisuseTest, AClosedHandleIsRefusedByEveryCallAndADoubleCloseIsReported) {
  ASSERT_EQ(lookup(db_), MLATUNE_STATUS_OK);
  mlatune_db* closed = db_;
  db_ = nullptr;
  ASSERT_EQ(mlatune_close(closed), MLATUNE_STATUS_OK);

  EXPECT_EQ(lookup(closed), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("mlatune_lookup: db was closed"));
  EXPECT_STREQ(mlatune_db_info(closed), "");
  EXPECT_THAT(mlatune_last_error(), HasSubstr("mlatune_db_info: db was closed"));
  int64_t usable = 0, stale = 0, no_valid = 0;
  EXPECT_EQ(mlatune_table_stats(closed, &usable, &stale, &no_valid),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_db_retain(closed), MLATUNE_STATUS_INVALID_ARGUMENT);
  mlatune_plan* plan = nullptr;
  EXPECT_EQ(mlatune_plan_create(closed, 4, &plan), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr);
  EXPECT_EQ(mlatune_close(closed), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("mlatune_close: db was closed"));
  EXPECT_EQ(mlatune_close(nullptr), MLATUNE_STATUS_OK);
}

// With two references, the first close leaves the handle open; the second closes it.
TEST_F(HandleMisuseTest, AHandleClosesWithItsLastReference) {
  ASSERT_EQ(mlatune_db_retain(db_), MLATUNE_STATUS_OK);
  ASSERT_EQ(mlatune_close(db_), MLATUNE_STATUS_OK);
  EXPECT_EQ(lookup(db_), MLATUNE_STATUS_OK);
  ASSERT_EQ(mlatune_close(db_), MLATUNE_STATUS_OK);
  EXPECT_EQ(lookup(db_), MLATUNE_STATUS_INVALID_ARGUMENT);
  db_ = nullptr;
}

TEST_F(HandleMisuseTest, APlanWhereADatabaseBelongsAndTheReverseAreRefused) {
  mlatune_plan* plan = nullptr;
  ASSERT_EQ(mlatune_plan_create(db_, 4, &plan), MLATUNE_STATUS_OK);
  const mlatune_db* plan_as_db = reinterpret_cast<const mlatune_db*>(plan);
  EXPECT_EQ(lookup(plan_as_db), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("db does not point to a database handle"));
  EXPECT_EQ(mlatune_close(reinterpret_cast<mlatune_db*>(plan)), MLATUNE_STATUS_INVALID_ARGUMENT);

  mlatune_plan* db_as_plan = reinterpret_cast<mlatune_plan*>(db_);
  DecodeCall call(decode_key(key_a(), 2, 100), 8);
  EXPECT_EQ(mlatune_plan_decode(db_, &call.problem, call.kv_lens.data(), db_as_plan),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("does not point to a plan object"));
  EXPECT_EQ(mlatune_plan_destroy(db_as_plan), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(lookup(db_), MLATUNE_STATUS_OK);  // neither call touched the handle

  EXPECT_EQ(mlatune_plan_decode(plan_as_db, &call.problem, call.kv_lens.data(), plan),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("mlatune_plan_decode: db does not point"));
  EXPECT_EQ(mlatune_plan_destroy(plan), MLATUNE_STATUS_OK);
}

TEST_F(HandleMisuseTest, ADestroyedPlanIsRefusedAndADoubleDestroyIsReported) {
  mlatune_plan* plan = nullptr;
  ASSERT_EQ(mlatune_plan_create(db_, 4, &plan), MLATUNE_STATUS_OK);
  DecodeCall call(decode_key(key_a(), 2, 100), 8);
  ASSERT_EQ(mlatune_plan_decode(db_, &call.problem, call.kv_lens.data(), plan), MLATUNE_STATUS_OK)
      << mlatune_last_error();
  ASSERT_EQ(mlatune_plan_destroy(plan), MLATUNE_STATUS_OK);

  size_t bytes = 1;
  EXPECT_EQ(mlatune_plan_workspace_size(plan, &bytes), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("plan was destroyed"));
  EXPECT_EQ(mlatune_plan_decode(db_, &call.problem, call.kv_lens.data(), plan),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  const mlatune_decode_buffers buffers = call.buffers(0);
  EXPECT_EQ(mlatune_run(db_, plan, &buffers, nullptr), MLATUNE_STATUS_BAD_PLAN);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("mlatune_run: plan was destroyed"));
  EXPECT_EQ(mlatune_plan_destroy(plan), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("mlatune_plan_destroy: plan was destroyed"));
}

// Closed shells are kept for the last HandleQuarantine::kCapacity closes: a handle closed just
// before many others is still recognised while it is among them.
TEST_F(HandleMisuseTest, TheQuarantineKeepsRecentlyClosedHandlesRecognisable) {
  mlatune_db* first = db_;
  db_ = nullptr;
  ASSERT_EQ(mlatune_close(first), MLATUNE_STATUS_OK);
  for (int i = 0; i < 200; ++i) {
    mlatune_db* other = nullptr;
    ASSERT_EQ(mlatune_open(path_.c_str(), nullptr, &other), MLATUNE_STATUS_OK);
    ASSERT_EQ(mlatune_close(other), MLATUNE_STATUS_OK);
  }
  EXPECT_EQ(lookup(first), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("db was closed"));
}

}  // namespace
}  // namespace mlatune::test_db
