// Inputs of the validation gate: the validation points of a shape bucket and, per point, seeded
// adversarial inputs in poisoned memory (generated where the variant runs, from a CaseSpec; see
// mla_decode/case_gen.h) and the rows to check against the reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/records.h"
#include "mla_decode/gate_backend.h"
#include "tuner/config.h"

namespace mlatune {

std::string_view pattern_name(InputPattern p);

struct ValidationPoint {
  int32_t batch = 0;
  int32_t max_kv_len = 0;
};

// The bucket's corners (batch lo/hi x kv lo/hi, kv lo raised to qlen) and `interior` points
// strictly inside when the ranges allow, deduplicated, deterministic for a bucket.
std::vector<ValidationPoint> validation_points(const BucketKey& b, int32_t interior);

// One input set of one validation point.
struct ValidationCase {
  std::string label;                  // "batch=4 max_kv=257 seed 1 peaked"
  CaseSpec spec;                      // shape, lengths and generator of the inputs
  std::vector<int64_t> checked_rows;  // (token * heads + head) rows compared with the reference

  const DecodeShape& shape() const { return spec.shape; }
};

// The inputs of one (point, seed, pattern): mixed lengths (the longest = the point's, one at the
// minimum qlen, none a multiple of 16 unless forced), and the rows to check: every row when the
// point has at most settings.full_check_rows rows, otherwise every row of the longest
// sampled_sequences sequences plus sampled_rows random rows of the others.
ValidationCase make_validation_case(const BucketKey& b, const ValidationPoint& point, uint64_t seed,
                                    InputPattern pattern, double sm_scale,
                                    const ValidationSettings& settings);

// The bytes a backend allocates for the case's inputs: q, the KV pool and the block table.
int64_t input_bytes(const CaseSpec& spec);

// Inputs for timing a bucket: its midpoint, every sequence at the point's max length, random
// data, no rows to check.
ValidationCase make_timing_case(const BucketKey& b, double sm_scale);

// The midpoint's timing inputs and, with top_corner, those of the bucket's largest point
// (batch_hi, kv_hi) when it differs from the midpoint.
std::vector<ValidationCase> make_timing_cases(const BucketKey& b, double sm_scale,
                                              bool top_corner);

}  // namespace mlatune
