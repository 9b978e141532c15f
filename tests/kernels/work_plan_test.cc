#include "mla_decode/work_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace mlatune {
namespace {

int64_t tiles(int64_t keys, int32_t tile) { return (keys + tile - 1) / tile; }

// Every invariant a kernel relies on: each sequence's keys covered exactly once, in order, by
// tile-aligned pieces; slots only for cut sequences, consecutive and in key order; no worker
// over the budget, and the budget within the documented bound of the ideal share.
void expect_valid(const WorkPlan& plan, const std::vector<int32_t>& lens, int32_t tile,
                  int32_t workers) {
  SCOPED_TRACE("tile " + std::to_string(tile) + " workers " + std::to_string(workers));
  ASSERT_EQ(plan.workers, workers);
  ASSERT_EQ(plan.worker_first.size(), static_cast<size_t>(workers) + 1);
  EXPECT_EQ(plan.worker_first.front(), 0);
  EXPECT_EQ(plan.worker_first.back(), static_cast<int32_t>(plan.pieces.size()));
  EXPECT_TRUE(std::is_sorted(plan.worker_first.begin(), plan.worker_first.end()));

  std::vector<int64_t> covered(lens.size(), 0);
  std::vector<int32_t> count(lens.size(), 0);
  int32_t prev_seq = -1;
  for (const WorkPiece& p : plan.pieces) {
    ASSERT_GE(p.seq, 0);
    ASSERT_LT(p.seq, static_cast<int32_t>(lens.size()));
    EXPECT_GE(p.seq, prev_seq) << "pieces follow sequence order";
    prev_seq = p.seq;
    EXPECT_EQ(p.key_begin, covered[p.seq]) << "sequence " << p.seq << " continues where it left";
    EXPECT_EQ(p.key_begin % tile, 0);
    EXPECT_LE(p.key_end, lens[p.seq]);
    EXPECT_TRUE(p.key_end > p.key_begin || lens[p.seq] == 0);
    covered[p.seq] = p.key_end;
    ++count[p.seq];
  }
  int64_t total = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    EXPECT_EQ(covered[b], lens[b]) << "sequence " << b;
    EXPECT_GE(count[b], 1) << "sequence " << b << " has a piece (its output must be written)";
    const int32_t slots = plan.seq_first_slot[b + 1] - plan.seq_first_slot[b];
    EXPECT_EQ(slots, count[b] > 1 ? count[b] : 0) << "sequence " << b;
    total += tiles(lens[b], tile) + kPieceOverheadTiles;
  }
  EXPECT_LE(plan.slots(), max_plan_slots(static_cast<int32_t>(lens.size()), workers));
  std::vector<int32_t> next(plan.seq_first_slot.begin(), plan.seq_first_slot.end() - 1);
  for (const WorkPiece& p : plan.pieces) {
    if (count[p.seq] > 1) {
      EXPECT_EQ(p.slot, next[p.seq]++);
    } else {
      EXPECT_EQ(p.slot, -1);
    }
  }
  const int64_t ideal = (total + workers - 1) / workers;
  EXPECT_LE(plan.budget_tiles,
            std::max<int64_t>(ideal, kPieceOverheadTiles + 1) + 2 * kPieceOverheadTiles);
  for (int32_t w = 0; w < workers; ++w) EXPECT_LE(plan.worker_cost(w), plan.budget_tiles);
}

TEST(WorkPlan, OneLongSequenceIsCutIntoEqualShares) {
  const std::vector<int32_t> lens{64 * 1000};
  const WorkPlan plan = plan_work(lens, 64, 10, 1 << 20);
  expect_valid(plan, lens, 64, 10);
  ASSERT_EQ(plan.pieces.size(), 10u);
  EXPECT_EQ(plan.slots(), 10);
  for (int32_t w = 0; w < 10; ++w) {
    EXPECT_GE(plan.worker_cost(w), 100) << w;
    EXPECT_LE(plan.worker_cost(w), 102) << w;
  }
}

TEST(WorkPlan, ShortSequencesShareAWorkerAndAreNeverCut) {
  const std::vector<int32_t> lens(64, 10);  // one tile each
  const WorkPlan plan = plan_work(lens, 64, 8, 1 << 20);
  expect_valid(plan, lens, 64, 8);
  EXPECT_EQ(plan.slots(), 0);
  for (int32_t w = 0; w < 8; ++w) EXPECT_EQ(plan.worker_first[w + 1] - plan.worker_first[w], 8);
}

TEST(WorkPlan, MoreWorkersThanWorkLeavesSomeIdle) {
  const std::vector<int32_t> lens{1, 1};
  const WorkPlan plan = plan_work(lens, 64, 16, 64);
  expect_valid(plan, lens, 64, 16);
  EXPECT_EQ(plan.slots(), 0);
}

TEST(WorkPlan, ZeroLengthSequencesStillGetAPiece) {
  const std::vector<int32_t> lens{0, 130, 0};
  expect_valid(plan_work(lens, 64, 2, 1 << 20), lens, 64, 2);
}

TEST(WorkPlan, RandomBatchesKeepEveryInvariant) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int32_t batch = 1 + static_cast<int32_t>(rng() % 300);
    const int32_t tile = std::vector<int32_t>{1, 16, 32, 64, 128}[rng() % 5];
    const int32_t workers = 1 + static_cast<int32_t>(rng() % 300);
    std::vector<int32_t> lens(batch);
    for (int32_t& l : lens) {
      l = rng() % 4 == 0 ? static_cast<int32_t>(rng() % 131073) : static_cast<int32_t>(rng() % 300);
    }
    expect_valid(plan_work(lens, tile, workers, 131072), lens, tile, workers);
    if (HasFailure()) return;
  }
}

TEST(WorkPlan, PlanDependsOnlyOnItsInputs) {
  const std::vector<int32_t> lens{5000, 3, 77, 1024};
  const WorkPlan a = plan_work(lens, 64, 13, 1 << 20);
  const WorkPlan b = plan_work(lens, 64, 13, 1 << 20);
  ASSERT_EQ(a.pieces.size(), b.pieces.size());
  for (size_t i = 0; i < a.pieces.size(); ++i) {
    EXPECT_EQ(a.pieces[i].seq, b.pieces[i].seq);
    EXPECT_EQ(a.pieces[i].key_begin, b.pieces[i].key_begin);
    EXPECT_EQ(a.pieces[i].key_end, b.pieces[i].key_end);
    EXPECT_EQ(a.pieces[i].slot, b.pieces[i].slot);
  }
  EXPECT_EQ(a.worker_first, b.worker_first);
}

TEST(WorkPlan, BadInputsAreRefusedByName) {
  auto message = [](const std::vector<int32_t>& lens, int32_t tile, int32_t workers) {
    try {
      plan_work(lens, tile, workers, 1000);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message({}, 64, 4).find("empty batch"), std::string::npos);
  EXPECT_NE(message({10}, 0, 4).find("kv_tile 0"), std::string::npos);
  EXPECT_NE(message({10}, 64, 0).find("workers 0"), std::string::npos);
  EXPECT_NE(message({10}, 64, kMaxPlanWorkers + 1).find("workers"), std::string::npos);
  EXPECT_NE(message({10, -1}, 64, 4).find("sequence 1: kv_len -1"), std::string::npos);
  EXPECT_NE(message({1001}, 64, 4).find("kv_len 1001 outside [0, 1000]"), std::string::npos);
}

TEST(WorkPlan, SlotBoundCoversTheWorstCase) {
  EXPECT_EQ(max_plan_slots(5, 1), 0);
  EXPECT_EQ(max_plan_slots(1, 8), 8);    // one sequence cut 7 times
  EXPECT_EQ(max_plan_slots(3, 64), 66);  // at most batch + cuts pieces
}

}  // namespace
}  // namespace mlatune
