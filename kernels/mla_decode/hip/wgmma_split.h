// hip_wgmma_split_v1: the Hopper warpgroup-MMA member of the GPU MLA decode family
// (wgmma_split.hip). Plain C++ header: callers need no GPU compiler.
#pragma once

#include "mla_decode/variant.h"

namespace mlatune {

// Split-KV decode with 64 query rows (heads x qlen packed) per workgroup on Hopper's wgmma
// (bf16 operands from shared memory, fp32 accumulation), online softmax in fp32, LSE-merge
// combine kernel when kv_splits > 1. bf16 KV only; NVIDIA sm_90a builds on sm_90 devices only,
// refuses every shape elsewhere.
const Variant& hip_wgmma_split_variant();  // name "hip_wgmma_split_v1"

}  // namespace mlatune
