// hip_mma_fp8kv_v1 and hip_mma_fp8kv_persistent_v1: the fp8-KV members of the GPU MLA decode family (mma_fp8kv.hip). Plain C++
// header: callers need no GPU compiler.
#pragma once

#include "mla_decode/variant.h"

namespace mlatune {

// Split-KV decode for e4m3fn KV caches (q bf16 or e4m3fn) on NVIDIA tensor cores, the KV tile
// kept as raw fp8 in shared memory and converted in registers; LSE-merge combine kernel when
// kv_splits > 1. Refuses every shape on other platforms.
const Variant& hip_mma_fp8kv_variant();  // name "hip_mma_fp8kv_v1"

// The same kernel over a host-side launch plan (Variant::plan): persistent workgroups, `workers`
// per SM, deal the batch's KV tiles among themselves; only cut sequences are combined.
const Variant& hip_mma_fp8kv_persistent_variant();  // name "hip_mma_fp8kv_persistent_v1"

}  // namespace mlatune
