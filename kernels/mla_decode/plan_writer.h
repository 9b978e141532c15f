// The persistent-scheduling plan of work_plan.h written straight into the caller's launch-plan
// words (launch_plan.h), allocating nothing: what a decode call's planning path uses.
//
// write_launch_plan(kv_lens, kv_tile, workers, max_len, out) writes exactly the words that
// encode_plan(plan_work(kv_lens, kv_tile, workers, max_len), out) writes (the same greedy deal
// under the same smallest budget; tests/kernels/plan_writer_test.cc holds it to that, word for
// word), without building the WorkPlan's vectors and dealing once per budget tried. That plan's
// budget is at most max(ceil(total / workers), kPieceOverheadTiles + 1) + kPieceOverheadTiles,
// total = tiles + one overhead per sequence: each of the workers - 1 boundaries between workers
// wastes at most one overhead (a cut's second piece, or the room left before a piece that does
// not fit).
//
// Why two implementations of one plan: plan_work and encode_plan are part of the code identity of
// every GPU variant (kernels/CMakeLists.txt), so rewriting them would make every winner of the
// shipped H200 database stale until it is retuned there. Every persistent variant plans through
// this writer (and hashes it into its identity); plan_work stays the readable specification.
//
// Pure host code; thread-compatible (no shared state).
#pragma once

#include <cstdint>
#include <span>

namespace mlatune {

// Plans `kv_lens` (keys per sequence, each in [0, max_len]) in tiles of kv_tile keys over
// `workers` workers and writes the plan into `out` in the launch-plan format; returns the words
// used. max_plan_words() words always suffice, and with at least that many the words of `out`
// past the plan's serve as scratch (their contents after are unspecified); a smaller `out` needs
// only the plan's words and costs a second count of the deal. Throws std::invalid_argument naming
// the bad input, before writing anything: an empty batch, a batch whose pieces could outnumber
// 32-bit indices, kv_tile or workers out of range ([1, 65536] for both), a length that is
// negative or above max_len, or `out` shorter than the plan.
int64_t write_launch_plan(std::span<const int32_t> kv_lens, int32_t kv_tile, int32_t workers,
                          int32_t max_len, std::span<int32_t> out);

}  // namespace mlatune
