// The GPU reference: fp32 accumulation, written for obvious correctness rather than speed. Used to
// validate GPU variants on shapes too large for the float64 CPU reference, and itself checked
// against that reference in tests.
#pragma once

#include "mla_decode/problem.h"

namespace mlatune {

// args holds device pointers (out, lse and workspace are ignored). Writes the fp32 result of every
// (token, head) row to out_f32 [tokens, heads, 512] and lse_f32 [tokens, heads] (device memory).
// Enqueues on the default stream; throws LaunchError on a launch failure.
void gpu_reference_decode(const DecodeShape& s, const DecodeArgs& args, float* out_f32,
                          float* lse_f32);

// The same for a subset of rows: `rows` (device memory, n_rows entries of token * heads + head)
// are computed into out_f32 [n_rows, 512] and lse_f32 [n_rows], laid out by position in `rows`.
void gpu_reference_decode_rows(const DecodeShape& s, const DecodeArgs& args, const int64_t* rows,
                               int64_t n_rows, float* out_f32, float* lse_f32);

}  // namespace mlatune
