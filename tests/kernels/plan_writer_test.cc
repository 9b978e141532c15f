// write_launch_plan (plan_writer.h) against the planner it replaces on the decode path: the same
// words as encode_plan(plan_work(...)) (work_plan.h, launch_plan.h) over thousands of launches of
// varied length distributions and at hand-picked corners, into a buffer of max_plan_words (with
// nothing written past it) and into one of exactly the plan's size; the same inputs refused, by
// name, before anything is written. The plan's properties themselves are work_plan_test.cc's.
#include "mla_decode/plan_writer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "mla_decode/launch_plan.h"
#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {

int64_t tiles(int64_t keys, int32_t tile) { return (keys + tile - 1) / tile; }

std::string first_difference(const std::vector<int32_t>& want, const std::vector<int32_t>& got) {
  for (size_t i = 0; i < want.size(); ++i) {
    if (i >= got.size() || got[i] != want[i]) {
      return "word " + std::to_string(i) + ": want " + std::to_string(want[i]) + ", got " +
             (i < got.size() ? std::to_string(got[i]) : std::string("nothing"));
    }
  }
  return "no difference";
}

// write_launch_plan writes exactly the words of encode_plan(plan_work(...)) into a buffer of
// max_plan_words, and nothing past it (a guard follows), and into one of exactly the plan's words
// (the path that counts before it writes); one word less is refused untouched.
// Returns how far the chosen budget is above the smallest candidate, max(ceil(total / workers),
// kPieceOverheadTiles + 1), or -1 if the words differ.
int64_t expect_same_as_plan_work(const std::vector<int32_t>& lens, int32_t tile, int32_t workers,
                                 int32_t max_len) {
  const int32_t batch = static_cast<int32_t>(lens.size());
  const size_t room = static_cast<size_t>(max_plan_words(batch, workers));
  std::vector<int32_t> want(room, -7);
  const WorkPlan plan = plan_work(lens, tile, workers, max_len);
  const int64_t want_used = encode_plan(plan, want);
  want.resize(static_cast<size_t>(want_used));
  constexpr size_t kGuard = 64;
  std::vector<int32_t> got(room + kGuard, -7);
  if (write_launch_plan(lens, tile, workers, max_len, std::span<int32_t>(got.data(), room)) !=
          want_used ||
      !std::equal(want.begin(), want.end(), got.begin())) {
    ADD_FAILURE() << first_difference(want, got);
    return -1;
  }
  EXPECT_TRUE(std::all_of(got.end() - kGuard, got.end(), [](int32_t x) { return x == -7; }));

  std::vector<int32_t> exact(static_cast<size_t>(want_used), 5);
  EXPECT_EQ(write_launch_plan(lens, tile, workers, max_len, exact), want_used);
  EXPECT_EQ(exact, want) << first_difference(want, exact);
  std::vector<int32_t> short_by_one(static_cast<size_t>(want_used) - 1, 5);
  EXPECT_THROW(write_launch_plan(lens, tile, workers, max_len, short_by_one),
               std::invalid_argument);
  EXPECT_TRUE(std::all_of(short_by_one.begin(), short_by_one.end(), [](int32_t x) {
    return x == 5;
  })) << "a refused plan writes nothing";
  int64_t total = 0;
  for (int32_t len : lens) total += tiles(len, tile) + kPieceOverheadTiles;
  return plan.budget_tiles -
         std::max<int64_t>((total + workers - 1) / workers, kPieceOverheadTiles + 1);
}

// Padding and every section are written, whatever the buffer held before.
TEST(PlanWriter, PlanDependsOnlyOnItsInputs) {
  const std::vector<int32_t> lens{5000, 3, 77, 1024};
  std::vector<int32_t> a(static_cast<size_t>(max_plan_words(4, 13)), 0);
  std::vector<int32_t> b(a.size(), -1);
  const int64_t used = write_launch_plan(lens, 64, 13, 1 << 20, a);
  ASSERT_EQ(write_launch_plan(lens, 64, 13, 1 << 20, b), used);
  EXPECT_TRUE(std::equal(a.begin(), a.begin() + used, b.begin()));
}

// The randomized equivalence: length distributions that stress different parts of the deal
// (budget edges, long runs of cuts, idle workers, empty sequences, 32-bit extremes).
TEST(PlanWriter, WordsMatchPlanWorkOverManyDistributions) {
  std::mt19937 rng(2024);
  auto pick = [&](int64_t lo, int64_t hi) {  // uniform in [lo, hi]
    return static_cast<int32_t>(lo +
                                static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)));
  };
  const std::vector<int32_t> kTiles{1, 7, 16, 32, 64, 100, 128, 4096, kMaxPlanKvTile};
  struct Case {
    const char* name;
    std::function<void(std::vector<int32_t>&, int32_t max_len)> lens;
  };
  const std::vector<Case> cases{
      {"uniform",
       [&](std::vector<int32_t>& l, int32_t m) {
         for (auto& x : l) x = pick(0, m);
       }},
      {"one huge, many tiny",
       [&](std::vector<int32_t>& l, int32_t m) {
         for (auto& x : l) x = pick(0, std::min(m, 200));
         l[rng() % l.size()] = m;
       }},
      {"all empty but one",
       [&](std::vector<int32_t>& l, int32_t m) {
         std::fill(l.begin(), l.end(), 0);
         l[rng() % l.size()] = pick(0, m);
       }},
      {"all empty", [&](std::vector<int32_t>& l, int32_t) { std::fill(l.begin(), l.end(), 0); }},
      {"equal",
       [&](std::vector<int32_t>& l, int32_t m) { std::fill(l.begin(), l.end(), pick(0, m)); }},
      {"log-uniform",
       [&](std::vector<int32_t>& l, int32_t m) {
         std::uniform_real_distribution<double> e(0.0, std::log(static_cast<double>(m) + 1));
         for (auto& x : l)
           x = static_cast<int32_t>(std::min(static_cast<double>(m), std::exp(e(rng)) - 1));
       }},
      {"max",
       [&](std::vector<int32_t>& l, int32_t m) {
         for (auto& x : l) x = m - pick(0, 3);
       }},
  };
  std::vector<int> above_smallest(kPieceOverheadTiles + 1, 0);  // plans by how far above
  for (const Case& c : cases) {
    for (int i = 0; i < 300; ++i) {
      const int32_t tile = kTiles[rng() % kTiles.size()];
      // Batch 1 often; workers sometimes far more than there are tiles.
      const int32_t batch = rng() % 5 == 0 ? 1 : pick(1, 600);
      const int32_t workers = rng() % 6 == 0 ? pick(1, kMaxPlanWorkers) : pick(1, 300);
      const int32_t max_len =
          std::string(c.name) == "max" || rng() % 20 == 0 ? INT32_MAX : pick(4, 1 << 18);
      std::vector<int32_t> lens(static_cast<size_t>(batch));
      c.lens(lens, max_len);
      SCOPED_TRACE(std::string(c.name) + ": batch " + std::to_string(batch) + " tile " +
                   std::to_string(tile) + " workers " + std::to_string(workers) + " max_len " +
                   std::to_string(max_len));
      const int64_t above = expect_same_as_plan_work(lens, tile, workers, max_len);
      if (HasFailure()) return;
      ASSERT_LT(above, kPieceOverheadTiles + 1) << "the budget bound of plan_writer.h";
      ++above_smallest[above];
    }
  }
  // Both outcomes of the writer's first count are exercised: the smallest candidate fits, or it
  // does not and the next one is written directly.
  EXPECT_GT(above_smallest[0], 100);
  EXPECT_GT(above_smallest[1], 100);
}

// Corners picked by hand: exact fits at the budget's edges, the largest launch dimensions.
TEST(PlanWriter, WordsMatchPlanWorkAtTheCorners) {
  const std::vector<std::vector<int32_t>> lens_sets{{0},
                                                    {1},
                                                    {64},
                                                    {65},
                                                    {INT32_MAX},
                                                    {0, 0, 0},
                                                    {64, 64, 64, 64},
                                                    {128, 0, 128, 0, 128},
                                                    {INT32_MAX, 0, INT32_MAX},
                                                    std::vector<int32_t>(257, 64 * 3)};
  for (const std::vector<int32_t>& lens : lens_sets) {
    for (int32_t tile : {1, 64, kMaxPlanKvTile}) {
      for (int32_t workers : {1, 2, 3, 4, 5, 63, 64, 65, kMaxPlanWorkers}) {
        SCOPED_TRACE("batch " + std::to_string(lens.size()) + " first " + std::to_string(lens[0]) +
                     " tile " + std::to_string(tile) + " workers " + std::to_string(workers));
        expect_same_as_plan_work(lens, tile, workers, INT32_MAX);
        if (HasFailure()) return;
      }
    }
  }
}

TEST(PlanWriter, BadInputsAreRefusedByNameBeforeAnythingIsWritten) {
  auto message = [](const std::vector<int32_t>& lens, int32_t tile, int32_t workers,
                    size_t room = 4096) {
    std::vector<int32_t> out(room, 5);
    std::string what = "no error";
    try {
      write_launch_plan(lens, tile, workers, 1000, out);
    } catch (const std::invalid_argument& e) {
      what = e.what();
    }
    if (what != "no error") {
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](int32_t x) { return x == 5; })) << what;
    }
    // plan_work refuses exactly the same inputs (its own room check aside).
    if (room == 4096) {
      EXPECT_EQ(what == "no error", [&] {
        try {
          plan_work(lens, tile, workers, 1000);
        } catch (const std::invalid_argument&) {
          return false;
        }
        return true;
      }());
    }
    return what;
  };
  EXPECT_EQ(message({}, 64, 4), "write_launch_plan: empty batch");
  EXPECT_EQ(message({10}, 0, 4), "write_launch_plan: kv_tile 0 outside [1, 65536]");
  EXPECT_NE(message({10}, -64, 4).find("kv_tile -64"), std::string::npos);
  EXPECT_NE(message({10}, kMaxPlanKvTile + 1, 4).find("kv_tile 65537"), std::string::npos);
  EXPECT_EQ(message({10}, 64, 0), "write_launch_plan: workers 0 outside [1, 65536]");
  EXPECT_NE(message({10}, 64, kMaxPlanWorkers + 1).find("workers 65537"), std::string::npos);
  EXPECT_EQ(message({10, -1}, 64, 4), "write_launch_plan: sequence 1: kv_len -1 outside [0, 1000]");
  EXPECT_EQ(message({0, 1, 1001}, 64, 4),
            "write_launch_plan: sequence 2: kv_len 1001 outside [0, 1000]");
  EXPECT_EQ(message({INT32_MIN}, 64, 4),
            "write_launch_plan: sequence 0: kv_len -2147483648 outside [0, 1000]");
  EXPECT_EQ(message({100, 200}, 64, 4, 8), "write_launch_plan: buffer of 8 words, 36 needed");
  EXPECT_EQ(message({100, 200}, 64, 4, 0), "write_launch_plan: buffer of 0 words, 36 needed");
  EXPECT_EQ(message({10}, 64, 4), "no error");
  // A negative bound admits no length at all.
  std::vector<int32_t> out(64);
  EXPECT_THROW(write_launch_plan(std::vector<int32_t>{0}, 64, 4, -1, out), std::invalid_argument);
}

}  // namespace
}  // namespace mlatune
