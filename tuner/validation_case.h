// Inputs of the validation gate: the validation points of a shape bucket and, per point, seeded
// adversarial inputs in poisoned memory, with the float64 reference of the rows to be checked.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/records.h"
#include "mla_decode/problem.h"
#include "mla_decode/reference.h"
#include "tuner/config.h"

namespace mlatune {

enum class InputPattern : uint8_t {
  kRandom,      // independent normal q, k, v
  kPeaked,      // one key per sequence dominates the softmax of every head
  kWideRange,   // scores spread over a large range (tests max subtraction and rescaling)
  kCausalTrap,  // the keys a causal row must not see would dominate it if leaked
};
std::string_view pattern_name(InputPattern p);

struct ValidationPoint {
  int32_t batch = 0;
  int32_t max_kv_len = 0;
};

// The bucket's corners (batch lo/hi x kv lo/hi, kv lo raised to qlen) and `interior` points
// strictly inside when the ranges allow, deduplicated, deterministic for a bucket.
std::vector<ValidationPoint> validation_points(const BucketKey& b, int32_t interior);

// One input set of one validation point, with everything the gate needs to check a run.
struct ValidationCase {
  std::string label;  // "point 2 (batch=4 max_kv=257) seed 1 peaked"
  DecodeShape shape;
  std::vector<int32_t> kv_lens;       // [batch]
  std::vector<int32_t> block_table;   // [batch, max_pages_per_seq], unused slots poisoned
  std::vector<uint8_t> q;             // [tokens, heads, 576] raw q_dtype elements
  std::vector<uint8_t> kv;            // [num_pages, page_size, 576], unused rows NaN-poisoned
  std::vector<int64_t> checked_rows;  // (token * heads + head) rows compared with the reference
  ReferenceResult ref;                // laid out by checked_rows

  DecodeArgs args() const;  // q, kv, block_table, kv_lens set; outputs and workspace left null
};

// Builds the inputs of one (point, seed, pattern) and the reference of its checked rows: every
// row when the point has at most settings.full_check_rows rows, otherwise every row of the
// longest sampled_sequences sequences plus sampled_rows random rows of the others.
ValidationCase make_validation_case(const BucketKey& b, const ValidationPoint& point, uint64_t seed,
                                    InputPattern pattern, double sm_scale,
                                    const ValidationSettings& settings, int reference_threads);

// Inputs for timing a bucket: its midpoint, every sequence at the point's max length, random
// data, no reference.
ValidationCase make_timing_case(const BucketKey& b, double sm_scale);

}  // namespace mlatune
