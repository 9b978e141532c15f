// A work plan (work_plan.h) in the form a launch carries it (DecodeArgs::plan) and a GPU kernel
// reads it: one flat array of 32-bit words, 16-byte aligned sections, no pointers.
//
//   header         kPlanHeaderWords words: magic, version, batch, workers, kv_tile, pieces, slots,
//                  cut sequences
//   worker_first   [workers + 1]  worker w runs pieces [first[w], first[w + 1])
//   pieces         [pieces][4]    seq, key_begin, key_end, slot (-1: writes out directly)
//   seq_first_slot [batch + 1]    the partial slots of sequence b are [first[b], first[b + 1])
//   cut_seqs       [cut]          the sequences with slots, ascending (what a combine step visits)
// Each section starts at a multiple of 4 words (16 bytes), so that a kernel reads a piece as one
// 16-byte load.
//
// check_plan() is the one way in for words that came from outside the planner: it proves every
// index and range a kernel uses is inside the launch's shape before anything reads through them.
// Pure host code; thread-compatible.
#pragma once

#include <cstdint>
#include <span>

#include "mla_decode/work_plan.h"

namespace mlatune {

inline constexpr int32_t kPlanMagic = 0x504c574d;  // "MWLP" little-endian
inline constexpr int32_t kPlanVersion = 1;
inline constexpr int64_t kPlanHeaderWords = 8;

// Word offsets of the sections after the header, and the total size.
struct PlanLayout {
  int64_t worker_first = 0;
  int64_t pieces = 0;
  int64_t seq_first_slot = 0;
  int64_t cut_seqs = 0;
  int64_t words = 0;
};

PlanLayout plan_layout(int32_t batch, int32_t workers, int32_t pieces, int32_t cut_seqs);

// The most words the plan of any lengths of `batch` sequences over `workers` workers can take.
int64_t max_plan_words(int32_t batch, int32_t workers);

// Writes `plan` (from plan_work over `batch` lengths) into `out` and returns the words used.
// Throws std::invalid_argument when `out` is too small.
int64_t encode_plan(const WorkPlan& plan, std::span<int32_t> out);

// A checked, encoded plan. The accessors read the words in place.
struct PlanView {
  const int32_t* words = nullptr;
  int32_t batch = 0;
  int32_t workers = 0;
  int32_t kv_tile = 0;
  int32_t pieces = 0;
  int32_t slots = 0;
  int32_t cut_seqs = 0;
  PlanLayout layout;

  int32_t worker_first(int32_t w) const { return words[layout.worker_first + w]; }
  WorkPiece piece(int32_t i) const {
    const int32_t* p = words + layout.pieces + 4 * int64_t{i};
    return WorkPiece{p[0], p[1], p[2], p[3]};
  }
  int32_t seq_first_slot(int32_t b) const { return words[layout.seq_first_slot + b]; }
  int32_t cut_seq(int32_t i) const { return words[layout.cut_seqs + i]; }
};

// Accepts `words` only as the plan of a launch of `batch` sequences, `workers` workers and tiles
// of `kv_tile` keys, each sequence at most `max_len` keys: header and sizes; workers' piece ranges
// in order; every sequence covered once, in key order, by tile-aligned pieces from key 0; slots
// numbered consecutively for exactly the sequences of two or more pieces, within
// max_plan_slots(batch, workers); the cut list matching them. Throws std::invalid_argument saying
// which word is wrong.
PlanView check_plan(std::span<const int32_t> words, int32_t batch, int32_t workers, int32_t kv_tile,
                    int32_t max_len);

}  // namespace mlatune
