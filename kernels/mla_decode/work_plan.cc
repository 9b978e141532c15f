#include "mla_decode/work_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mlatune {
namespace {

constexpr int64_t kC = kPieceOverheadTiles;

int64_t tiles_of(int32_t len, int32_t kv_tile) { return (int64_t{len} + kv_tile - 1) / kv_tile; }

// The greedy deal under budget B: every worker takes pieces while a piece with at least one tile
// (or a sequence without keys) still fits. Fills plan's pieces and worker_first (from empty);
// returns whether everything fitted in `workers` workers.
bool deal(std::span<const int32_t> lens, int32_t kv_tile, int32_t workers, int64_t budget,
          WorkPlan& plan) {
  plan.pieces.clear();
  plan.pieces.reserve(lens.size() + static_cast<size_t>(workers) - 1);
  plan.worker_first.reserve(static_cast<size_t>(workers) + 1);
  plan.worker_first.assign(1, 0);
  int32_t w = 0;
  int64_t used = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t tiles = tiles_of(lens[b], kv_tile);
    int64_t done = 0;
    do {
      const int64_t need = kC + std::min<int64_t>(tiles - done, 1);
      if (used + need > budget) {
        if (++w == workers || need > budget) return false;
        used = 0;
        plan.worker_first.push_back(static_cast<int32_t>(plan.pieces.size()));
      }
      const int64_t take = std::min(tiles - done, budget - used - kC);
      const int64_t end = std::min<int64_t>(lens[b], (done + take) * kv_tile);
      plan.pieces.push_back(WorkPiece{static_cast<int32_t>(b), static_cast<int32_t>(done * kv_tile),
                                      static_cast<int32_t>(end), -1});
      used += take + kC;
      done += take;
    } while (done < tiles);
  }
  plan.worker_first.resize(static_cast<size_t>(workers) + 1,
                           static_cast<int32_t>(plan.pieces.size()));
  return true;
}

}  // namespace

int64_t WorkPlan::worker_cost(int32_t w) const {
  int64_t cost = 0;
  for (int32_t i = worker_first[w]; i < worker_first[w + 1]; ++i) {
    cost += kC + tiles_of(pieces[i].key_end - pieces[i].key_begin, kv_tile);
  }
  return cost;
}

int64_t max_plan_slots(int32_t batch, int32_t workers) {
  // Slots belong to cut sequences only: k pieces from k - 1 cuts, k <= 2 (k - 1).
  const int64_t cuts = std::max<int64_t>(workers - 1, 0);
  return std::min<int64_t>(int64_t{batch} + cuts, 2 * cuts);
}

WorkPlan plan_work(std::span<const int32_t> kv_lens, int32_t kv_tile, int32_t workers,
                   int32_t max_len) {
  auto fail = [](const std::string& why) { throw std::invalid_argument("plan_work: " + why); };
  if (kv_lens.empty()) fail("empty batch");
  if (kv_lens.size() > static_cast<size_t>(INT32_MAX)) fail("batch too large");
  if (kv_tile < 1 || kv_tile > kMaxPlanKvTile) {
    fail("kv_tile " + std::to_string(kv_tile) + " outside [1, " + std::to_string(kMaxPlanKvTile) +
         "]");
  }
  if (workers < 1 || workers > kMaxPlanWorkers) {
    fail("workers " + std::to_string(workers) + " outside [1, " + std::to_string(kMaxPlanWorkers) +
         "]");
  }
  int64_t total = 0;
  for (size_t b = 0; b < kv_lens.size(); ++b) {
    if (kv_lens[b] < 0 || kv_lens[b] > max_len) {
      fail("sequence " + std::to_string(b) + ": kv_len " + std::to_string(kv_lens[b]) +
           " outside [0, " + std::to_string(max_len) + "]");
    }
    total += tiles_of(kv_lens[b], kv_tile) + kC;
  }
  // The smallest feasible budget of [lo, lo + 2 kC] (lo + 2 kC always is, work_plan.h), tried in
  // increasing order: usually the first or second try fits, and the try that fits is the plan.
  const int64_t lo = std::max<int64_t>((total + workers - 1) / workers, kC + 1);
  WorkPlan plan;
  plan.kv_tile = kv_tile;
  plan.workers = workers;
  for (plan.budget_tiles = lo;; ++plan.budget_tiles) {
    if (deal(kv_lens, kv_tile, workers, plan.budget_tiles, plan)) break;
    if (plan.budget_tiles >= lo + 2 * kC) fail("internal: no budget fits");  // unreachable
  }

  // A sequence's pieces are neighbours (sequence order): number the slots of each run of two or
  // more in one pass.
  plan.seq_first_slot.assign(kv_lens.size() + 1, 0);
  int32_t slots = 0;
  for (size_t i = 0; i < plan.pieces.size();) {
    const int32_t seq = plan.pieces[i].seq;
    size_t end = i + 1;
    while (end < plan.pieces.size() && plan.pieces[end].seq == seq) ++end;
    plan.seq_first_slot[seq] = slots;
    if (end - i > 1) {
      for (size_t k = i; k < end; ++k) plan.pieces[k].slot = slots++;
    }
    plan.seq_first_slot[seq + 1] = slots;
    i = end;
  }
  return plan;
}

}  // namespace mlatune
