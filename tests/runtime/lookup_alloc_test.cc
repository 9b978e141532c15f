// mlatune_lookup allocates nothing: not on a hit, not on a miss or refusal (whose message goes to
// a per-thread fixed buffer); neither does mlatune_plan_decode on a plan object sized for the call,
// with or without a host work partition (persistent winners). Counted by replacing the global
// allocation functions of this test program, which the shared library's C++ code uses too.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "mla_decode/memory.h"
#include "mla_decode/registry.h"
#include "runtime/decode_call.h"
#include "runtime/runtime_fixture.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace

void* operator new(size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
// Not inlined: GCC would see free() of a pointer from operator new and warn, not knowing that
// this program's operator new is malloc.
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, size_t) noexcept { std::free(p); }

namespace mlatune::test_db {
namespace {

TEST(LookupAllocationTest, HitsMissesAndRefusalsAllocateNothing) {
  std::string path = temp_path();
  TestDbSpec spec = standard_spec();
  write_test_db(path, spec);
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();

  const TestBucket& b = spec.buckets.front();
  const mlatune_decode_key hit = decode_key(b.key, b.batch_lo, b.kv_hi);
  const mlatune_decode_key miss = decode_key(b.key, 65536, b.kv_hi);
  mlatune_decode_key untuned_key = hit;
  untuned_key.heads = 7;
  mlatune_decode_key invalid = hit;
  invalid.qlen = 0;
  mlatune_selection sel{};
  // Warm up once, so that lazily initialised per-thread state is not counted as a lookup's.
  ASSERT_EQ(mlatune_lookup(db.get(), &hit, &sel), MLATUNE_STATUS_OK);
  ASSERT_EQ(mlatune_lookup(db.get(), &miss, &sel), MLATUNE_STATUS_UNTUNED);

  // The counter itself must work, or this test proves nothing.
  g_counting = true;
  ::operator delete(::operator new(16));  // an explicit call: cannot be elided like new-expressions
  g_counting = false;
  ASSERT_EQ(g_allocations.exchange(0), 1);
  // ... and must see the library's own allocations: opening a database certainly allocates.
  g_counting = true;
  DbHandle second;
  ASSERT_EQ(open_db(path, &second), MLATUNE_STATUS_OK);
  g_counting = false;
  ASSERT_GT(g_allocations.exchange(0), 10);

  g_counting = true;
  int ok = 0, untuned = 0, invalid_count = 0;
  for (int i = 0; i < 1000; ++i) {
    ok += mlatune_lookup(db.get(), &hit, &sel) == MLATUNE_STATUS_OK;
    untuned += mlatune_lookup(db.get(), &miss, &sel) == MLATUNE_STATUS_UNTUNED;
    untuned += mlatune_lookup(db.get(), &untuned_key, &sel) == MLATUNE_STATUS_UNTUNED;
    invalid_count += mlatune_lookup(db.get(), &invalid, &sel) == MLATUNE_STATUS_INVALID_ARGUMENT;
  }
  g_counting = false;
  EXPECT_EQ(ok, 1000);
  EXPECT_EQ(untuned, 2000);
  EXPECT_EQ(invalid_count, 1000);
  EXPECT_EQ(g_allocations.load(), 0);
  remove_db_files(path);
}

// Plans batch-256 calls of several length distributions (one sequence at the bucket's longest)
// with `variant` (at `params`) as the winner, into a plan object sized once, and refusals too.
// A GPU variant needs `kv` and `device` of its kind.
void expect_planning_allocates_nothing(const std::string& variant,
                                       std::optional<LaunchParams> params, DType kv = DType::kBF16,
                                       std::optional<DeviceInfo> device = std::nullopt) {
  SCOPED_TRACE(variant);
  std::string path = temp_path();
  const DecodeKey key = make_key(16, 1, DType::kBF16, kv, 64, false);
  TestDbSpec spec;
  spec.device = device;
  spec.buckets.push_back({key, 1, 256, 1, 4096, false, variant, params, 1.0});
  write_test_db(path, spec);
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  mlatune_plan* plan = nullptr;
  ASSERT_EQ(mlatune_plan_create(db.get(), 256, &plan), MLATUNE_STATUS_OK);
  mlatune_decode_problem problem{};
  problem.key = decode_key(key, 256, 4096);
  problem.q_scale = problem.kv_scale = 1.0f;
  problem.sm_scale = 0.04f;
  problem.max_pages_per_seq = 64;
  problem.num_pages = 256 * 64;
  std::mt19937 rng(3);
  std::vector<std::vector<int32_t>> lens_sets{std::vector<int32_t>(256, 1000),
                                              std::vector<int32_t>(256, 4096),
                                              std::vector<int32_t>(256, 1)};
  for (int i = 0; i < 8; ++i) {
    std::vector<int32_t> lens(256);
    for (int32_t& l : lens) l = 1 + static_cast<int32_t>(rng() % 4096);
    lens_sets.push_back(lens);
  }
  for (std::vector<int32_t>& lens : lens_sets) lens[rng() % 256] = 4096;
  mlatune_decode_problem untuned = problem;
  untuned.key.heads = 8;
  ASSERT_EQ(mlatune_plan_decode(db.get(), &problem, lens_sets[0].data(), plan), MLATUNE_STATUS_OK)
      << mlatune_last_error();
  mlatune_selection sel{};
  ASSERT_EQ(mlatune_plan_selection(plan, &sel), MLATUNE_STATUS_OK);
  ASSERT_STREQ(sel.variant, variant.c_str());
  ASSERT_EQ(mlatune_plan_decode(db.get(), &untuned, lens_sets[0].data(), plan),
            MLATUNE_STATUS_UNTUNED);

  g_counting = true;
  int ok = 0, refused = 0;
  for (int i = 0; i < 200; ++i) {
    const int32_t* lens = lens_sets[static_cast<size_t>(i) % lens_sets.size()].data();
    ok += mlatune_plan_decode(db.get(), &problem, lens, plan) == MLATUNE_STATUS_OK;
    refused += mlatune_plan_decode(db.get(), &untuned, lens, plan) == MLATUNE_STATUS_UNTUNED;
  }
  g_counting = false;
  EXPECT_EQ(ok, 200);
  EXPECT_EQ(refused, 200);
  EXPECT_EQ(g_allocations.exchange(0), 0);
  mlatune_plan_destroy(plan);
  remove_db_files(path);
}

TEST(LookupAllocationTest, PlanningASizedPlanAllocatesNothing) {
  expect_planning_allocates_nothing("host_split_kv_v1", std::nullopt);
}

// The host work partition is made into the plan object's words: one worker (nothing cut), and
// 64 (long sequences cut, short ones shared).
TEST(LookupAllocationTest, PlanningAPersistentWinnerAllocatesNothing) {
  expect_planning_allocates_nothing("host_persistent_v1", LaunchParams{1, 64, 0, 1});
  expect_planning_allocates_nothing("host_persistent_v1", LaunchParams{1, 64, 0, 64});
}

// So are every GPU variant's, persistent or split (all of them can be winners of a shipped
// database; can_implement, which planning calls, once built a parameter space per call): in GPU
// builds on a device they run on, each with the first launch parameters of its space that can run
// a batch-256 call of its KV dtype; skipped elsewhere.
TEST(LookupAllocationTest, PlanningAnyGpuWinnerAllocatesNothing) {
  int ran = 0;
  std::string why = "a CPU-only build";
  const Registry registry = builtin_registry();
  for (const Variant* v : registry.all()) {
    if (v->backend() != Backend::kHip) continue;
    for (const DType kv : {DType::kBF16, DType::kFP8E4M3FN}) {
      DecodeShape s;
      s.batch = 256;
      s.qlen = 1;
      s.heads = 16;
      s.page_size = 64;
      s.kv_dtype = kv;
      s.max_kv_len = 4096;
      s.max_pages_per_seq = 64;
      s.num_pages = 256 * 64;
      s.sm_scale = 0.04f;
      std::optional<LaunchParams> runnable;
      for (const LaunchParams& p : v->param_space().enumerate()) {
        const Support sup = v->can_implement(s, p);
        if (sup.ok) {
          runnable = p;
          break;
        }
        why = std::string(v->name()) + ": " + sup.reason;
      }
      if (!runnable) continue;
      std::optional<DeviceInfo> device;
      try {
        device = current_device_info(backend_name(v->backend()));
      } catch (const LaunchError& e) {  // a GPU build on a machine without a usable GPU
        why = e.what();
        continue;
      }
      std::printf("[ planned  ] %s %s %s\n", std::string(v->name()).c_str(),
                  runnable->to_string().c_str(), std::string(dtype_name(kv)).c_str());
      expect_planning_allocates_nothing(std::string(v->name()), runnable, kv, *device);
      ++ran;
    }
  }
  if (ran == 0) GTEST_SKIP() << why;
}

}  // namespace
}  // namespace mlatune::test_db
