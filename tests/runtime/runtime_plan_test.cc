// Plan and run through libmlatune's C ABI and its C++ wrapper on the CPU backend: every winner
// kind (split KV, a persistent kernel with a host plan and a workspace, LSE, causal qlen > 1)
// computes the float64 reference's answer, and every refusal path returns its documented status
// and message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mlatune/mlatune.hpp"
#include "runtime/decode_call.h"
#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

using client::Database;
using client::Error;
using client::Plan;
using ::testing::HasSubstr;

const DecodeKey kKey = make_key(2, 1, DType::kBF16, DType::kBF16, 16, false);
const DecodeKey kLseKey = make_key(2, 2, DType::kBF16, DType::kBF16, 16, true);

mlatune_decode_key c_key(const DecodeKey& k, int32_t batch, int32_t max_kv_len) {
  return decode_key(k, batch, max_kv_len);
}

TestDbSpec plan_spec() {
  TestDbSpec spec;
  spec.buckets.push_back(
      {kKey, 1, 4, 1, 128, false, "host_split_kv_v1", LaunchParams{3, 64, 0, 2}, 10.0});
  spec.buckets.push_back(
      {kKey, 5, 16, 1, 128, false, "host_persistent_v1", LaunchParams{1, 64, 0, 4}, 20.0});
  spec.buckets.push_back({kKey, 1, 16, 129, 256, true, "", std::nullopt, 0.0});
  spec.buckets.push_back(
      {kLseKey, 1, 8, 2, 200, false, "host_online_softmax_v1", LaunchParams{1, 0, 0, 2}, 30.0});
  // A winner whose variant this build no longer has: stale.
  spec.buckets.push_back({kKey, 17, 32, 1, 128, false, "host_retired_v0", std::nullopt, 5.0});
  spec.extra_variants.push_back({"host_retired_v0", "host", "0123abcd", "retired"});
  return spec;
}

class PlanRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path();
    write_test_db(path_, plan_spec());
    db_ = Database::open(path_);
  }
  void TearDown() override { remove_db_files(path_); }

  // Plans and runs `call` through the C++ wrapper; returns the winner's name.
  std::string plan_and_run(DecodeCall& call) {
    Plan plan(db_, call.problem.key.batch);
    plan.plan(db_, call.problem, call.kv_lens.data());
    plan.run(db_, call.buffers(plan.workspace_bytes()));
    return plan.selection().variant;
  }

  std::string path_;
  Database db_{nullptr};
};

TEST_F(PlanRunTest, EveryWinnerKindComputesTheReference) {
  struct Case {
    DecodeKey key;
    int32_t batch, max_kv;
    const char* winner;
  };
  const Case cases[] = {{kKey, 3, 100, "host_split_kv_v1"},
                        {kKey, 1, 1, "host_split_kv_v1"},
                        {kKey, 11, 128, "host_persistent_v1"},
                        {kKey, 16, 70, "host_persistent_v1"},
                        {kLseKey, 5, 200, "host_online_softmax_v1"}};
  uint32_t seed = 1;
  for (const Case& c : cases) {
    DecodeCall call(c_key(c.key, c.batch, c.max_kv), seed++);
    EXPECT_EQ(plan_and_run(call), c.winner) << c.batch << "x" << c.max_kv;
    // bf16 output of values in [-1, 1]: half an ulp is 2^-9.
    EXPECT_LT(call.max_error(), 4e-3) << c.winner << " batch " << c.batch << " kv " << c.max_kv;
  }
}

TEST_F(PlanRunTest, PersistentWinnerPlansOnTheHostAndNeedsItsWorkspace) {
  DecodeCall call(c_key(kKey, 12, 128), 7);
  Plan plan(db_, 16);
  plan.plan(db_, call.problem, call.kv_lens.data());
  EXPECT_STREQ(plan.selection().variant, "host_persistent_v1");
  EXPECT_EQ(plan.selection().workers, 4);
  const size_t need = plan.workspace_bytes();
  ASSERT_GT(need, 0u);
  mlatune_decode_buffers b = call.buffers(need - 1);
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("bytes of workspace"));
  b = call.buffers(need);
  b.workspace = nullptr;
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  b = call.buffers(need);
  ASSERT_EQ(mlatune_run(db_.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_OK)
      << mlatune_last_error();
  EXPECT_LT(call.max_error(), 4e-3);
}

TEST_F(PlanRunTest, OnePlanObjectServesManyCallsAndBatchesAboveItsSize) {
  Plan plan(db_, 2);  // smaller than the calls below: planning grows it
  for (uint32_t seed = 0; seed < 6; ++seed) {
    DecodeCall call(c_key(kKey, 1 + int32_t(seed) * 3, 40 + int32_t(seed) * 15), seed);
    plan.plan(db_, call.problem, call.kv_lens.data());
    plan.run(db_, call.buffers(plan.workspace_bytes()));
    EXPECT_LT(call.max_error(), 4e-3) << "seed " << seed;
  }
}

TEST_F(PlanRunTest, LookupRefusalsComeBackFromPlan) {
  Plan plan(db_, 64);
  auto status_of = [&](const mlatune_decode_key& key) {
    DecodeCall call(key, 3);
    return mlatune_plan_decode(db_.get(), &call.problem, call.kv_lens.data(), plan.get());
  };
  mlatune_decode_key untuned = c_key(kKey, 2, 50);
  untuned.heads = 4;
  EXPECT_EQ(status_of(untuned), MLATUNE_STATUS_UNTUNED);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("nearest"));
  EXPECT_EQ(status_of(c_key(kKey, 2, 200)), MLATUNE_STATUS_NO_VALID_KERNEL);
  EXPECT_EQ(status_of(c_key(kKey, 20, 100)), MLATUNE_STATUS_STALE);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("host_retired_v0"));
  EXPECT_EQ(status_of(c_key(kKey, 40, 100)), MLATUNE_STATUS_UNTUNED);
  DecodeCall absurd(c_key(kKey, 2, 50), 3);
  absurd.problem.key.heads = 1 << 30;
  EXPECT_EQ(mlatune_plan_decode(db_.get(), &absurd.problem, absurd.kv_lens.data(), plan.get()),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("heads=1073741824"));
  // Every refused plan leaves nothing to run.
  DecodeCall call(c_key(kKey, 2, 50), 4);
  mlatune_decode_buffers b = call.buffers(0);
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_BAD_PLAN);
}

TEST_F(PlanRunTest, ProblemsInconsistentWithTheKeyAreRefused) {
  Plan plan(db_, 8);
  DecodeCall call(c_key(kKey, 3, 100), 5);
  auto plan_status = [&](const DecodeCall& c) {
    return mlatune_plan_decode(db_.get(), &c.problem, c.kv_lens.data(), plan.get());
  };
  ASSERT_EQ(plan_status(call), MLATUNE_STATUS_OK);

  DecodeCall shorter = call;
  shorter.kv_lens[0] = 99;  // the longest is no longer key.max_kv_len
  EXPECT_EQ(plan_status(shorter), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("longest of kv_lens is 99"));
  DecodeCall negative = call;
  negative.kv_lens[1] = -5;
  EXPECT_EQ(plan_status(negative), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("kv_lens[1]=-5"));
  negative.kv_lens[0] = 1 << 20;  // past the pool's pages too: the first bad length is named
  EXPECT_EQ(plan_status(negative), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("kv_lens[0]=1048576"));
  DecodeCall no_scale = call;
  no_scale.problem.sm_scale = 0.0f;
  EXPECT_EQ(plan_status(no_scale), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("sm_scale"));
  DecodeCall bf16_scaled = call;
  bf16_scaled.problem.q_scale = 2.0f;
  EXPECT_EQ(plan_status(bf16_scaled), MLATUNE_STATUS_INVALID_ARGUMENT);
  DecodeCall narrow = call;
  narrow.problem.max_pages_per_seq = 2;  // 32 keys, fewer than the longest sequence
  EXPECT_EQ(plan_status(narrow), MLATUNE_STATUS_INVALID_ARGUMENT);
  DecodeCall overflow = call;
  overflow.problem.num_pages = int64_t{1} << 40;
  EXPECT_EQ(plan_status(overflow), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("num_pages"));
}

TEST_F(PlanRunTest, RunRefusesAPlanItCannotTrust) {
  DecodeCall call(c_key(kKey, 3, 100), 6);
  Plan plan(db_, 8);
  mlatune_decode_buffers b = call.buffers(1 << 20);
  // Never planned.
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_BAD_PLAN);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("holds no launch"));
  EXPECT_EQ(mlatune_run(db_.get(), nullptr, &b, nullptr), MLATUNE_STATUS_BAD_PLAN);
  // Not a plan at all.
  std::vector<uint64_t> garbage(64, 0x5a5a5a5a5a5a5a5aULL);
  EXPECT_EQ(mlatune_run(db_.get(), reinterpret_cast<mlatune_plan*>(garbage.data()), &b, nullptr),
            MLATUNE_STATUS_BAD_PLAN);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("does not point to a plan object"));

  plan.plan(db_, call.problem, call.kv_lens.data());
  // Another handle, even of the same file.
  const Database other = Database::open(path_);
  EXPECT_EQ(mlatune_run(other.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_BAD_PLAN);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("plan again with the handle you run with"));
  // Lengths other than the planned ones.
  DecodeCall changed = call;
  changed.kv_lens[2] = changed.kv_lens[2] == 1 ? 2 : 1;
  mlatune_decode_buffers cb = changed.buffers(plan.workspace_bytes());
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &cb, nullptr), MLATUNE_STATUS_BAD_PLAN);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("kv_lens[2]"));
  // A block table pointing outside the pool.
  DecodeCall wild = call;
  wild.block_table[0] = static_cast<int32_t>(wild.problem.num_pages);
  mlatune_decode_buffers wb = wild.buffers(plan.workspace_bytes());
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &wb, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  // Missing buffers, an LSE the key did not ask for, a stream on the host backend.
  mlatune_decode_buffers nb = b;
  nb.q = nullptr;
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &nb, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("buffers->q is NULL"));
  nb = b;
  float lse[64];
  nb.lse = lse;
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &nb, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  int stream_object = 0;
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &b, &stream_object),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("stream must be NULL"));
  EXPECT_EQ(mlatune_run(nullptr, plan.get(), &b, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), nullptr, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  // None of the refusals consumed the plan: it still runs, and right.
  EXPECT_EQ(mlatune_run(db_.get(), plan.get(), &b, nullptr), MLATUNE_STATUS_OK);
  EXPECT_LT(call.max_error(), 4e-3);
}

TEST_F(PlanRunTest, NullAndAbsurdArgumentsOfThePlanFunctions) {
  mlatune_plan* p = reinterpret_cast<mlatune_plan*>(uintptr_t{1});
  EXPECT_EQ(mlatune_plan_create(nullptr, 4, &p), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(p, nullptr);
  EXPECT_EQ(mlatune_plan_create(db_.get(), 0, &p), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_plan_create(db_.get(), 1 << 20, &p), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_THAT(mlatune_last_error(), HasSubstr("max_batch=1048576"));
  EXPECT_EQ(mlatune_plan_create(db_.get(), 4, nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  mlatune_plan_destroy(nullptr);

  Plan plan(db_, 4);
  DecodeCall call(c_key(kKey, 3, 100), 8);
  EXPECT_EQ(mlatune_plan_decode(nullptr, &call.problem, call.kv_lens.data(), plan.get()),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_plan_decode(db_.get(), nullptr, call.kv_lens.data(), plan.get()),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_plan_decode(db_.get(), &call.problem, nullptr, plan.get()),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_plan_decode(db_.get(), &call.problem, call.kv_lens.data(), nullptr),
            MLATUNE_STATUS_INVALID_ARGUMENT);
  size_t bytes = 1;
  EXPECT_EQ(mlatune_plan_workspace_size(plan.get(), &bytes), MLATUNE_STATUS_BAD_PLAN);
  EXPECT_EQ(bytes, 0u);
  EXPECT_EQ(mlatune_plan_workspace_size(nullptr, &bytes), MLATUNE_STATUS_INVALID_ARGUMENT);
  EXPECT_EQ(mlatune_plan_workspace_size(plan.get(), nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
  mlatune_selection sel;
  std::memset(&sel, 0x7f, sizeof sel);
  EXPECT_EQ(mlatune_plan_selection(plan.get(), &sel), MLATUNE_STATUS_BAD_PLAN);
  EXPECT_EQ(sel.variant[0], '\0');  // zero-filled, never launchable-looking
  EXPECT_EQ(mlatune_plan_selection(plan.get(), nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
}

TEST_F(PlanRunTest, WrapperThrowsTheStatusAndKeepsHandlesAliveByReference) {
  mlatune_decode_key untuned = c_key(kKey, 2, 50);
  untuned.qlen = 3;
  try {
    db_.lookup_or_throw(untuned);
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), MLATUNE_STATUS_UNTUNED);
    EXPECT_THAT(e.what(), HasSubstr("untuned: "));
  }
  EXPECT_THROW(Database::open(path_ + ".missing"), Error);
  // A copy is a reference of its own: the original's release does not free the handle.
  Database copy = db_;
  db_ = Database(nullptr);
  DecodeCall call(c_key(kKey, 2, 60), 9);
  Plan plan(copy, 2);
  plan.plan(copy, call.problem, call.kv_lens.data());
  plan.run(copy, call.buffers(plan.workspace_bytes()));
  EXPECT_LT(call.max_error(), 4e-3);
  EXPECT_EQ(mlatune_db_retain(nullptr), MLATUNE_STATUS_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace mlatune::test_db
