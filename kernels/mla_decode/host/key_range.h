// The pieces split-KV host variants are made of: attention of every query row of one sequence
// over a contiguous range of its keys, written either as a split-KV partial or as the final
// output, and the LSE merge of a row's partials. Used by host_split_kv_v1 (fixed splits) and
// host_persistent_v1 (planned pieces), so both compute a key range bit for bit alike.
//
// Partial layout: the partial of row r (= token * heads + head) in slot k lives at
// part_out[(k * rows + r) * 512] (the range's output normalised by its own sum of p, without
// kv_scale) and part_lse[k * rows + r] (m + log(sum p), or -inf for a row that saw no key of the
// range, whose part_out is then never written nor read).
#pragma once

#include <cstdint>

#include "mla_decode/problem.h"

namespace mlatune::host {

// Sequence b over keys [lo, hi) (0 <= lo <= hi <= L), in tiles of kv_tile keys, causal per
// token. slot >= 0: writes the partial of slot `slot`; slot < 0: writes the sequence's output
// rows (and LSE when the shape returns it) directly, as if [lo, hi) were all its keys.
void attend_keys(const DecodeShape& s, const DecodeArgs& a, int32_t b, int64_t lo, int64_t hi,
                 int64_t kv_tile, int64_t slot, float* part_out, float* part_lse);

// Merges the `count` partials of output row `row` (= b * rows + r) held in slots first_slot ..
// first_slot + count - 1, in slot order, into out and lse. `acc` is scratch of 512 floats.
void merge_partials(const DecodeShape& s, const DecodeArgs& a, int64_t row, int64_t first_slot,
                    int32_t count, const float* part_out, const float* part_lse, float* acc);

}  // namespace mlatune::host
