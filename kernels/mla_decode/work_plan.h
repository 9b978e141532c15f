// Persistent scheduling, host side: cuts one decode launch into the work lists of a fixed number
// of workers (threads on the host, resident workgroups on a GPU). The batch's KV tiles, taken in
// sequence order, are dealt out as contiguous runs of about equal cost, however unequal the
// sequences are: a long sequence is cut between workers, several short ones share a worker.
//
// A sequence one worker covers whole is computed in one piece that writes its output rows
// directly. A sequence cut into k > 1 pieces owns k consecutive partial slots; each piece writes
// the split-KV partial of its key range (output normalised by its own sum of p, and its LSE) into
// its slot, and a combine step merges the slots in slot order (= key order).
//
// Cost model: a piece costs its tiles plus kPieceOverheadTiles (loading the query rows, writing
// the output or partial). The planner finds the smallest per-worker budget B for which the greedy
// deal fits `workers` workers; B is at most ceil(total / workers) + 2 * kPieceOverheadTiles, where
// total = tiles + one overhead per sequence, so no worker is loaded more than that.
//
// Pure host code, no allocation beyond the returned plan; thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mlatune {

inline constexpr int64_t kPieceOverheadTiles = 1;
inline constexpr int32_t kMaxPlanWorkers = 1 << 16;
inline constexpr int32_t kMaxPlanKvTile = 1 << 16;

struct WorkPiece {
  int32_t seq;        // sequence b of the batch
  int32_t key_begin;  // keys [key_begin, key_end) of that sequence (tile-aligned begin)
  int32_t key_end;
  int32_t slot;  // partial slot written, or -1: the piece is its whole sequence and writes out
};

struct WorkPlan {
  int32_t kv_tile = 0;
  int32_t workers = 0;
  int64_t budget_tiles = 0;           // B: the largest cost any worker was allowed
  std::vector<int32_t> worker_first;  // [workers + 1]: worker w runs pieces [first[w], first[w+1])
  std::vector<WorkPiece> pieces;      // in worker order, each worker's pieces in key order
  std::vector<int32_t> seq_first_slot;  // [batch + 1]: slots of b are [first[b], first[b + 1])

  int32_t slots() const { return seq_first_slot.empty() ? 0 : seq_first_slot.back(); }
  // The cost (tiles + overheads) of worker w's pieces.
  int64_t worker_cost(int32_t w) const;
};

// The most partial slots a plan for `batch` sequences and `workers` workers can use: every cut
// adds one piece, and there are at most workers - 1 cuts (each ends a worker), so a workspace
// sized by this bound fits every plan of that shape whatever the lengths.
int64_t max_plan_slots(int32_t batch, int32_t workers);

// Plans `kv_lens` (keys per sequence, each in [0, max_len]) in tiles of kv_tile keys over
// `workers` workers. Throws std::invalid_argument naming the bad input: an empty batch, kv_tile
// or workers out of range ([1, 65536] for both), or a length that is negative or above max_len.
WorkPlan plan_work(std::span<const int32_t> kv_lens, int32_t kv_tile, int32_t workers,
                   int32_t max_len);

}  // namespace mlatune
