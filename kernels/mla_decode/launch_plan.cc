#include "mla_decode/launch_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace mlatune {
namespace {

int64_t round4(int64_t words) { return (words + 3) / 4 * 4; }

[[noreturn]] void bad(const std::string& why) {
  throw std::invalid_argument("launch plan: " + why);
}

std::string str(int64_t v) { return std::to_string(v); }

}  // namespace

PlanLayout plan_layout(int32_t batch, int32_t workers, int32_t pieces, int32_t cut_seqs) {
  PlanLayout l;
  l.worker_first = kPlanHeaderWords;
  l.pieces = l.worker_first + round4(int64_t{workers} + 1);
  l.seq_first_slot = l.pieces + 4 * int64_t{pieces};
  l.cut_seqs = l.seq_first_slot + round4(int64_t{batch} + 1);
  l.words = l.cut_seqs + round4(cut_seqs);
  return l;
}

int64_t max_plan_words(int32_t batch, int32_t workers) {
  // Every cut adds a piece and ends a worker: at most workers - 1 cuts, each sequence at least one
  // piece; a cut sequence holds at least one cut.
  const int64_t cuts = workers > 1 ? workers - 1 : 0;
  const int64_t pieces = int64_t{batch} + cuts;
  const int64_t cut_seqs = cuts < batch ? cuts : batch;
  if (pieces > INT32_MAX) bad("batch " + str(batch) + " with " + str(workers) + " workers");
  return plan_layout(batch, workers, static_cast<int32_t>(pieces), static_cast<int32_t>(cut_seqs))
      .words;
}

int64_t encode_plan(const WorkPlan& plan, std::span<int32_t> out) {
  const int32_t batch = static_cast<int32_t>(plan.seq_first_slot.size()) - 1;
  const int32_t pieces = static_cast<int32_t>(plan.pieces.size());
  int32_t cut = 0;
  for (int32_t b = 0; b < batch; ++b) cut += plan.seq_first_slot[b + 1] > plan.seq_first_slot[b];
  const PlanLayout l = plan_layout(batch, plan.workers, pieces, cut);
  if (batch < 1 || plan.worker_first.size() != static_cast<size_t>(plan.workers) + 1) {
    bad("not a plan of plan_work()");
  }
  if (static_cast<int64_t>(out.size()) < l.words) {
    bad("buffer of " + str(static_cast<int64_t>(out.size())) + " words, " + str(l.words) +
        " needed");
  }
  std::fill(out.begin(), out.begin() + l.words, 0);
  const int32_t header[kPlanHeaderWords] = {kPlanMagic,   kPlanVersion, batch,        plan.workers,
                                            plan.kv_tile, pieces,       plan.slots(), cut};
  std::copy(std::begin(header), std::end(header), out.begin());
  std::copy(plan.worker_first.begin(), plan.worker_first.end(), out.begin() + l.worker_first);
  for (int32_t i = 0; i < pieces; ++i) {
    const WorkPiece& p = plan.pieces[i];
    int32_t* w = out.data() + l.pieces + 4 * int64_t{i};
    w[0] = p.seq, w[1] = p.key_begin, w[2] = p.key_end, w[3] = p.slot;
  }
  std::copy(plan.seq_first_slot.begin(), plan.seq_first_slot.end(), out.begin() + l.seq_first_slot);
  int32_t* cut_out = out.data() + l.cut_seqs;
  for (int32_t b = 0; b < batch; ++b) {
    if (plan.seq_first_slot[b + 1] > plan.seq_first_slot[b]) *cut_out++ = b;
  }
  return l.words;
}

PlanView check_plan(std::span<const int32_t> words, int32_t batch, int32_t workers, int32_t kv_tile,
                    int32_t max_len) {
  if (words.size() < static_cast<size_t>(kPlanHeaderWords)) {
    bad(str(static_cast<int64_t>(words.size())) + " words, shorter than its header");
  }
  if (words[0] != kPlanMagic) bad("word 0 is not the plan magic");
  if (words[1] != kPlanVersion) {
    bad("version " + str(words[1]) + ", this build reads " + str(kPlanVersion));
  }
  auto expect = [&](int i, int32_t want, const char* what) {
    if (words[i] != want) {
      bad(std::string(what) + " " + str(words[i]) + " in word " + str(i) + ", the launch has " +
          str(want));
    }
  };
  expect(2, batch, "batch");
  expect(3, workers, "workers");
  expect(4, kv_tile, "kv_tile");
  PlanView v;
  v.words = words.data();
  v.batch = batch;
  v.workers = workers;
  v.kv_tile = kv_tile;
  v.pieces = words[5];
  v.slots = words[6];
  v.cut_seqs = words[7];
  if (batch < 1 || workers < 1 || kv_tile < 1) bad("empty launch");
  const int64_t max_slots = max_plan_slots(batch, workers);
  if (v.pieces < batch || int64_t{v.pieces} > int64_t{batch} + workers - 1) {
    bad(str(v.pieces) + " pieces for " + str(batch) + " sequences over " + str(workers) +
        " workers");
  }
  if (v.slots < 0 || v.slots > max_slots) {
    bad(str(v.slots) + " slots, at most " + str(max_slots) + " fit the workspace");
  }
  if (v.cut_seqs < 0 || v.cut_seqs > batch || v.cut_seqs > v.slots) {
    bad(str(v.cut_seqs) + " cut sequences");
  }
  v.layout = plan_layout(batch, workers, v.pieces, v.cut_seqs);
  if (static_cast<int64_t>(words.size()) < v.layout.words) {
    bad(str(static_cast<int64_t>(words.size())) + " words, its header says " + str(v.layout.words));
  }

  if (v.worker_first(0) != 0 || v.worker_first(workers) != v.pieces) {
    bad("worker ranges do not span the pieces");
  }
  for (int32_t w = 0; w < workers; ++w) {
    if (v.worker_first(w + 1) < v.worker_first(w)) bad("worker " + str(w) + "'s range ends first");
  }
  if (v.seq_first_slot(0) != 0 || v.seq_first_slot(batch) != v.slots) {
    bad("sequence slot ranges do not span the slots");
  }
  int32_t next_cut = 0;
  int32_t i = 0;  // the first piece of sequence b
  for (int32_t b = 0; b < batch; ++b) {
    // 64-bit: the words are untrusted, their differences may not fit 32 bits (fuzz_launch_plan).
    const int64_t first = v.seq_first_slot(b);
    const int64_t count = int64_t{v.seq_first_slot(b + 1)} - first;
    if (first < 0 || first > v.slots || count < 0) {
      bad("sequence " + str(b) + "'s slot range [" + str(first) + ", " + str(first + count) +
          ") is not inside [0, " + str(v.slots) + ")");
    }
    if (count > 0) {
      if (count == 1) bad("sequence " + str(b) + " has one slot (a whole piece has none)");
      if (next_cut >= v.cut_seqs || v.cut_seq(next_cut) != b) {
        bad("sequence " + str(b) + " has slots but is not in the cut list");
      }
      ++next_cut;
    }
    int32_t key = 0;
    int32_t n = 0;
    for (; i < v.pieces && v.piece(i).seq == b; ++i, ++n) {
      const WorkPiece p = v.piece(i);
      const std::string where = "piece " + str(i) + " (sequence " + str(b) + ")";
      if (p.key_begin != key)
        bad(where + " starts at key " + str(p.key_begin) + ", not " + str(key));
      if (p.key_begin % kv_tile != 0) bad(where + " does not start on a tile");
      if (p.key_end < p.key_begin || p.key_end > max_len) {
        bad(where + " ends at key " + str(p.key_end) + " (begins " + str(p.key_begin) +
            ", at most " + str(max_len) + ")");
      }
      const int64_t want_slot = count > 0 ? first + n : -1;
      if (p.slot != want_slot)
        bad(where + " writes slot " + str(p.slot) + ", not " + str(want_slot));
      key = p.key_end;
    }
    if (n == 0) bad("sequence " + str(b) + " has no piece (or pieces are out of sequence order)");
    if (n != (count > 0 ? count : 1)) {
      bad("sequence " + str(b) + " has " + str(n) + " pieces and " + str(count) + " slots");
    }
  }
  if (i != v.pieces) bad("piece " + str(i) + " names sequence " + str(v.piece(i).seq));
  if (next_cut != v.cut_seqs) bad("the cut list names sequences without slots");
  return v;
}

}  // namespace mlatune
