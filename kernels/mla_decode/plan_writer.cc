#include "mla_decode/plan_writer.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <string>

#include "mla_decode/launch_plan.h"
#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {

constexpr int64_t kC = kPieceOverheadTiles;

[[noreturn]] void fail(const std::string& why) {
  throw std::invalid_argument("write_launch_plan: " + why);
}

// Tiles of kv_tile keys in a length, and keys in a number of tiles. The usual power-of-two tile
// takes a shift: a 64-bit division per sequence and pass cost about as much as the rest of a
// deal. Unsigned, so that the validation loop vectorises; a negative length is refused whatever
// its count.
struct Pow2Tiles {
  int32_t tile;
  int shift;
  int64_t operator()(int32_t len) const {
    return static_cast<int64_t>((uint64_t{static_cast<uint32_t>(len)} + tile - 1) >> shift);
  }
  int64_t keys(int64_t tiles) const { return tiles << shift; }
};
struct DivTiles {
  int32_t tile;
  int64_t operator()(int32_t len) const {
    return static_cast<int64_t>((uint64_t{static_cast<uint32_t>(len)} + tile - 1) / tile);
  }
  int64_t keys(int64_t tiles) const { return tiles * tile; }
};

// Where a deal stands, and what it produced in the units of the launch-plan header. It fits
// while w < workers.
struct Dealt {
  int64_t w = 0;     // the current worker
  int64_t used = 0;  // its cost so far
  int64_t pieces = 0;
  int64_t slots = 0;
  int64_t cut_seqs = 0;
};

// Where a writing deal puts its sections (launch_plan.h).
struct Sections {
  int32_t* worker_first = nullptr;
  int32_t* pieces = nullptr;
  int32_t* seq_first_slot = nullptr;
  int32_t* cut_seqs = nullptr;
};

// The greedy deal of sequence b under budget B: the current worker takes pieces while a piece
// with at least one tile (or a sequence without keys) still fits, then the next one. A piece
// needs at most kC + 1 <= B, so a fresh worker always takes it; a sequence is cut only when it
// runs past its worker's budget. False, with nothing more written, once the workers ran out; a
// cut sequence joins the cut list once its second piece has a worker, so that even a deal that
// runs out lists at most workers - 1.
template <bool kWrite>
bool deal_seq(Dealt& d, size_t b, int32_t len, int64_t tiles, int32_t kv_tile, int32_t workers,
              int64_t budget, const Sections& out) {
  auto piece = [&](int64_t begin, int64_t end, int64_t slot) {
    if constexpr (kWrite) {
      int32_t* p = out.pieces + 4 * d.pieces;
      p[0] = static_cast<int32_t>(b);
      p[1] = static_cast<int32_t>(begin);
      p[2] = static_cast<int32_t>(end);
      p[3] = static_cast<int32_t>(slot);
    }
    ++d.pieces;
  };
  auto next_worker = [&] {
    if (++d.w >= workers) return false;
    d.used = 0;
    if constexpr (kWrite) out.worker_first[d.w] = static_cast<int32_t>(d.pieces);
    return true;
  };
  if constexpr (kWrite) out.seq_first_slot[b] = static_cast<int32_t>(d.slots);
  if (d.used + kC + std::min<int64_t>(tiles, 1) > budget && !next_worker()) return false;
  int64_t take = std::min(tiles, budget - d.used - kC);
  if (take == tiles) {  // whole
    piece(0, len, -1);
    d.used += take + kC;
    return true;
  }
  // Cut: one slot per piece, consecutive in key order.
  piece(0, take * kv_tile, d.slots++);
  int64_t done = take;
  if (!next_worker()) return false;
  if constexpr (kWrite) out.cut_seqs[d.cut_seqs] = static_cast<int32_t>(b);
  ++d.cut_seqs;
  for (;;) {
    take = std::min(tiles - done, budget - kC);
    piece(done * kv_tile, std::min<int64_t>(len, (done + take) * kv_tile), d.slots++);
    d.used = take + kC;
    done += take;
    if (done == tiles) return true;
    if (!next_worker()) return false;
  }
}

// The loops below take a sequence that fits its worker whole inline, with the state in locals (a
// Dealt kept across the loop would go through memory at every step), and the rest, about one
// sequence per worker, through deal_seq; count_deal takes the plain cut inline too (faster there,
// no faster in write_deal). A branchless version of both loops, cuts included, was slower on this
// machine: more instructions per sequence than the mispredicted branch at each boundary costs.

// Counts the deal under `budget` without writing it; stops early (w = workers) once it cannot fit.
//
// Early stop: place the deal on one line, worker w covering [w B, (w + 1) B). A sequence covers at
// least its tiles + kC of it, and more by its cuts (kC each) and the room it leaves at a worker's
// end; the deal fits if and only if it ends by workers * B. So once that excess exceeds
// `slack` = workers * B - total, the deal cannot fit. At the smallest budget the slack is at most
// one overhead per worker boundary, so a count that does not fit usually stops before the end.
template <class Tiles>
Dealt count_deal(std::span<const int32_t> lens, Tiles tiles_of, int32_t workers, int64_t budget,
                 int64_t slack) {
  Dealt d;
  int64_t used = 0;
  int64_t whole_seqs = 0;  // counted in d.pieces at the end
  for (size_t b = 0; b < lens.size(); ++b) {
    const int64_t tiles = tiles_of(lens[b]);
    const int64_t spill = used + tiles + kC - budget;
    if (spill <= 0) {
      used += tiles + kC;
      ++whole_seqs;
      continue;
    }
    // Cut once, with a tile of room and the rest fitting the next worker: the commonest worker
    // boundary, inline (its excess is the second piece's kC).
    if (used < budget - kC && spill <= budget - kC && d.w + 1 < workers) {
      if ((slack -= kC) < 0) {
        d.w = workers;
        return d;
      }
      used = spill + kC;
      ++d.w;
      d.pieces += 2;
      d.slots += 2;
      ++d.cut_seqs;
      continue;
    }
    d.used = used;
    const int64_t before = d.w * budget + d.used;
    if (!deal_seq<false>(d, b, lens[b], tiles, tiles_of.tile, workers, budget, {})) return d;
    slack -= d.w * budget + d.used - before - (tiles + kC);
    if (slack < 0) {
      d.w = workers;
      return d;
    }
    used = d.used;
  }
  d.used = used;
  d.pieces += whole_seqs;
  return d;
}

// Writes the deal under `budget` into `out` and returns what it wrote, or stops as soon as the
// workers ran out (result w >= workers) with nothing written past the sections.
template <class Tiles>
Dealt write_deal(std::span<const int32_t> lens, Tiles tiles_of, int32_t workers, int64_t budget,
                 const Sections& out) {
  int32_t* const pieces = out.pieces;
  int32_t* const seq_first_slot = out.seq_first_slot;
  Dealt d;
  int64_t used = 0, piece = 0, slot = 0;
  out.worker_first[0] = 0;
  for (size_t b = 0; b < lens.size(); ++b) {
    const int32_t len = lens[b];
    const int64_t tiles = tiles_of(len);
    if (used + tiles + kC <= budget) {
      seq_first_slot[b] = static_cast<int32_t>(slot);
      int32_t* p = pieces + 4 * piece;
      p[0] = static_cast<int32_t>(b);
      p[1] = 0;
      p[2] = len;
      p[3] = -1;
      used += tiles + kC;
      ++piece;
      continue;
    }
    d.used = used, d.pieces = piece, d.slots = slot;
    if (!deal_seq<true>(d, b, len, tiles, tiles_of.tile, workers, budget, out)) return d;
    used = d.used, piece = d.pieces, slot = d.slots;
  }
  d.used = used, d.pieces = piece, d.slots = slot;
  std::fill(out.worker_first + d.w + 1, out.worker_first + workers + 1,
            static_cast<int32_t>(piece));
  seq_first_slot[lens.size()] = static_cast<int32_t>(slot);
  return d;
}

template <class Tiles>
int64_t plan_into(std::span<const int32_t> kv_lens, Tiles tiles_of, int32_t workers,
                  int32_t max_len, std::span<int32_t> out) {
  // One pass without branches (it vectorises); the first bad length is looked for only if any.
  // Unsigned: a negative length is out of range too (max_len < 0 admits none).
  const auto limit = static_cast<uint32_t>(max_len);
  uint64_t tiles = 0;
  uint32_t bad = max_len < 0;
  for (const int32_t len : kv_lens) {
    bad |= static_cast<uint32_t>(len) > limit;
    tiles += static_cast<uint64_t>(tiles_of(len));
  }
  if (bad) {
    for (size_t b = 0;; ++b) {
      if (kv_lens[b] < 0 || kv_lens[b] > max_len) {
        fail("sequence " + std::to_string(b) + ": kv_len " + std::to_string(kv_lens[b]) +
             " outside [0, " + std::to_string(max_len) + "]");
      }
    }
  }
  const auto batch = static_cast<int32_t>(kv_lens.size());
  const int64_t total = static_cast<int64_t>(tiles) + kC * batch;
  int32_t* const words = out.data();

  // The plan is that of the smallest budget from lo up whose deal fits (by increasing budget: the
  // definition; greedy feasibility need not be monotone in B, so no bisection). lo + kC always
  // fits (plan_writer.h), and lo only when the boundaries' excess stays within its slack
  // (count_deal), which random lengths rarely allow: lo is counted first, without writing, and
  // what is written is the deal of the next budget that fits. A buffer that holds the plan of any
  // lengths takes that deal directly, seq_first_slot and the cut list placed where the largest
  // plan has them and moved down after; a smaller one gets each budget counted first.
  const int64_t lo = std::max<int64_t>((total + workers - 1) / workers, kC + 1);
  const PlanLayout largest =
      plan_layout(batch, workers, batch + workers - 1, std::min(batch, workers - 1));
  int64_t budget = lo;
  Dealt dealt = count_deal(kv_lens, tiles_of, workers, budget, workers * budget - total);
  bool written = false;
  if (dealt.w >= workers && static_cast<int64_t>(out.size()) >= largest.words) {
    const Sections at{words + largest.worker_first, words + largest.pieces,
                      words + largest.seq_first_slot, words + largest.cut_seqs};
    do {
      dealt = write_deal(kv_lens, tiles_of, workers, ++budget, at);
    } while (dealt.w >= workers);
    written = true;
  }
  while (dealt.w >= workers) {
    ++budget;
    dealt = count_deal(kv_lens, tiles_of, workers, budget, workers * budget - total);
  }

  const PlanLayout l = plan_layout(batch, workers, static_cast<int32_t>(dealt.pieces),
                                   static_cast<int32_t>(dealt.cut_seqs));
  if (static_cast<int64_t>(out.size()) < l.words) {
    fail("buffer of " + std::to_string(out.size()) + " words, " + std::to_string(l.words) +
         " needed");
  }
  if (written) {  // down, sections in order: a move never overwrites what is still to move
    std::memmove(words + l.seq_first_slot, words + largest.seq_first_slot,
                 sizeof(int32_t) * (static_cast<size_t>(batch) + 1));
    std::memmove(words + l.cut_seqs, words + largest.cut_seqs,
                 sizeof(int32_t) * static_cast<size_t>(dealt.cut_seqs));
  } else {
    write_deal(kv_lens, tiles_of, workers, budget,
               Sections{words + l.worker_first, words + l.pieces, words + l.seq_first_slot,
                        words + l.cut_seqs});
  }
  const int32_t header[kPlanHeaderWords] = {kPlanMagic,
                                            kPlanVersion,
                                            batch,
                                            workers,
                                            tiles_of.tile,
                                            static_cast<int32_t>(dealt.pieces),
                                            static_cast<int32_t>(dealt.slots),
                                            static_cast<int32_t>(dealt.cut_seqs)};
  std::copy(std::begin(header), std::end(header), words);
  // Each section is padded with zeros to its 16-byte boundary.
  std::fill(words + l.worker_first + workers + 1, words + l.pieces, 0);
  std::fill(words + l.seq_first_slot + batch + 1, words + l.cut_seqs, 0);
  std::fill(words + l.cut_seqs + dealt.cut_seqs, words + l.words, 0);
  return l.words;
}

}  // namespace

int64_t write_launch_plan(std::span<const int32_t> kv_lens, int32_t kv_tile, int32_t workers,
                          int32_t max_len, std::span<int32_t> out) {
  if (kv_lens.empty()) fail("empty batch");
  if (kv_tile < 1 || kv_tile > kMaxPlanKvTile) {
    fail("kv_tile " + std::to_string(kv_tile) + " outside [1, " + std::to_string(kMaxPlanKvTile) +
         "]");
  }
  if (workers < 1 || workers > kMaxPlanWorkers) {
    fail("workers " + std::to_string(workers) + " outside [1, " + std::to_string(kMaxPlanWorkers) +
         "]");
  }
  // Pieces (at most batch + workers - 1) are numbered in 32-bit words.
  if (kv_lens.size() > static_cast<size_t>(INT32_MAX) - static_cast<size_t>(workers - 1)) {
    fail("batch of " + std::to_string(kv_lens.size()) + " with " + std::to_string(workers) +
         " workers is too large");
  }
  if ((kv_tile & (kv_tile - 1)) == 0) {
    return plan_into(kv_lens, Pow2Tiles{kv_tile, std::countr_zero(static_cast<uint32_t>(kv_tile))},
                     workers, max_len, out);
  }
  return plan_into(kv_lens, DivTiles{kv_tile}, workers, max_len, out);
}

}  // namespace mlatune
