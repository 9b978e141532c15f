// Live update: 16 threads keep acquiring the current database and looking up while the main
// thread switches between two databases (and tries a damaged one) hundreds of times. Every answer
// must come whole from one of the two files (no torn reads), a handle stays valid until released,
// a refused update leaves the current database in place, and plans follow their handle. Run under
// ThreadSanitizer by scripts/tsan.sh.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "mlatune/mlatune.hpp"
#include "runtime/decode_call.h"
#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

using client::Database;
using client::Error;
using client::LiveDatabase;
using client::Plan;
using ::testing::HasSubstr;

const DecodeKey kKey = make_key(2, 1, DType::kBF16, DType::kBF16, 16, false);

// Two databases covering the same shapes with different winners, told apart by winner and time.
void write_versions(const std::string& a, const std::string& b) {
  TestDbSpec spec;
  spec.buckets.push_back({kKey, 1, 64, 1, 512, false, "host_split_kv_v1", std::nullopt, 10.0});
  write_test_db(a, spec);
  spec.buckets[0].variant = "host_online_softmax_v1";
  spec.buckets[0].time_us = 40.0;
  write_test_db(b, spec);
}

class LiveUpdateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    a_ = temp_path(".a.db");
    b_ = temp_path(".b.db");
    bad_ = temp_path(".bad.db");
    write_versions(a_, b_);
    const std::string bytes = read_file(a_);
    write_file(bad_, bytes.substr(0, bytes.size() / 2));  // truncated: refused at open
  }
  void TearDown() override {
    for (const std::string& p : {a_, b_, bad_}) remove_db_files(p);
  }
  std::string a_, b_, bad_;
};

TEST_F(LiveUpdateTest, SixteenReadersSeeWholeAnswersWhileTheDatabaseSwitches) {
  LiveDatabase live = LiveDatabase::open(a_);
  constexpr int kReaders = 16;
  constexpr int kSwitches = 200;
  std::atomic<bool> stop{false};
  std::atomic<int64_t> from_a{0}, from_b{0}, torn{0}, failed{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&, t] {
      const mlatune_decode_key key = decode_key(kKey, 1 + t, 100 + t);
      while (!stop.load(std::memory_order_relaxed)) {
        const Database db = live.acquire();
        for (int i = 0; i < 50; ++i) {
          mlatune_selection sel;
          if (db.lookup(key, &sel) != MLATUNE_STATUS_OK) {
            ++failed;
            continue;
          }
          if (std::strcmp(sel.variant, "host_split_kv_v1") == 0 && sel.time_median_us == 10.0) {
            ++from_a;
          } else if (std::strcmp(sel.variant, "host_online_softmax_v1") == 0 &&
                     sel.time_median_us == 40.0) {
            ++from_b;
          } else {
            ++torn;
          }
        }
      }
    });
  }
  int refused = 0;
  for (int i = 0; i < kSwitches; ++i) {
    live.update(i % 2 ? a_ : b_);
    try {
      live.update(bad_);
    } catch (const Error& e) {
      refused += e.status() == MLATUNE_STATUS_CORRUPT || e.status() == MLATUNE_STATUS_IO_ERROR;
    }
  }
  stop = true;
  for (std::thread& r : readers) r.join();
  EXPECT_EQ(refused, kSwitches);
  EXPECT_EQ(live.generation(), kSwitches);  // refused updates do not switch
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(failed.load(), 0);
  EXPECT_GT(from_a.load(), 0);
  EXPECT_GT(from_b.load(), 0);
}

TEST_F(LiveUpdateTest, AReplacedHandleStaysValidAndItsPlansStayWithIt) {
  LiveDatabase live = LiveDatabase::open(a_);
  const Database old_db = live.acquire();
  DecodeCall call(decode_key(kKey, 3, 200), 11);
  Plan plan(old_db, 8);
  plan.plan(old_db, call.problem, call.kv_lens.data());
  live.update(b_);
  const Database new_db = live.acquire();
  // The old handle answers from the old file; the new one from the new file.
  const mlatune_decode_key key = decode_key(kKey, 3, 200);
  EXPECT_STREQ(old_db.lookup_or_throw(key).variant, "host_split_kv_v1");
  EXPECT_STREQ(new_db.lookup_or_throw(key).variant, "host_online_softmax_v1");
  // A plan runs with its own handle only.
  mlatune_decode_buffers b = call.buffers(plan.workspace_bytes());
  EXPECT_EQ(mlatune_run(new_db.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_BAD_PLAN);
  plan.run(old_db, b);
  EXPECT_LT(call.max_error(), 4e-3);
  // A refused update names the file and keeps the current database.
  try {
    live.update(bad_);
    FAIL() << "the truncated file was accepted";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(bad_));
  }
  EXPECT_STREQ(live.acquire().lookup_or_throw(key).variant, "host_online_softmax_v1");
  EXPECT_EQ(live.generation(), 1);
}

TEST_F(LiveUpdateTest, NullArgumentsAreRefused) {
  mlatune_live* live = reinterpret_cast<mlatune_live*>(uintptr_t{1});
  EXPECT_EQ(mlatune_live_open(nullptr, nullptr, &live), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(live, nullptr);
  EXPECT_EQ(mlatune_live_open(a_.c_str(), nullptr, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_live_update(nullptr, a_.c_str(), nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  mlatune_db* db = reinterpret_cast<mlatune_db*>(uintptr_t{1});
  EXPECT_EQ(mlatune_live_acquire(nullptr, &db), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(db, nullptr);
  int64_t g = -1;
  EXPECT_EQ(mlatune_live_generation(nullptr, &g), MLATUNE_STATUS_INVALID_ARGUMENT);
  mlatune_live_close(nullptr);
  ASSERT_EQ(mlatune_live_open(a_.c_str(), nullptr, &live), MLATUNE_STATUS_OK);
  EXPECT_EQ(mlatune_live_update(live, nullptr, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_live_acquire(live, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  mlatune_live_close(live);
}

}  // namespace
}  // namespace mlatune::test_db
