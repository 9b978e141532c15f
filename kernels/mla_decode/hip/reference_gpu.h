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

}  // namespace mlatune
