// Independent float64 reference for MLA decode, computed from dequantised inputs.
#pragma once

#include <vector>

#include "mla_decode/problem.h"

namespace mlatune {

struct ReferenceResult {
  std::vector<double> out;  // [tokens, heads, 512]
  std::vector<double> lse;  // [tokens, heads], natural log; -inf for a row that sees no key
};

// Straightforward two-pass softmax in double; causal right-aligned for qlen > 1. Reads only the
// block-table slots and KV rows each sequence uses. `threads` > 1 splits rows over std::threads.
ReferenceResult reference_decode(const DecodeShape& s, const DecodeArgs& a, int threads = 1);

// Reference over a subset of (token, head) rows only: `rows[i]` = token * heads + head. Results are
// laid out [rows.size(), 512] and [rows.size()]. Lets the gate check every row of small points and
// sampled rows of large ones without paying for all of them.
ReferenceResult reference_decode_rows(const DecodeShape& s, const DecodeArgs& a,
                                      const std::vector<int64_t>& rows, int threads = 1);

}  // namespace mlatune
