// hip_wgmma_fp8kv_v1 and hip_wgmma_fp8kv_persistent_v1: the Hopper warpgroup-MMA members of the
// GPU MLA decode family for fp8 KV (wgmma_fp8kv.hip). Plain C++ header: callers need no GPU
// compiler.
#pragma once

#include "mla_decode/variant.h"

namespace mlatune {

// Split-KV decode for e4m3fn KV caches (q bf16 or e4m3fn): Q K^T on fp8 wgmma straight from the
// raw KV tile, P V on f16 wgmma; LSE-merge combine kernel when kv_splits > 1. Refuses LSE output
// (fp8 wgmma's reduced-precision sums miss the LSE tolerance) and every shape outside NVIDIA
// sm_90a builds on sm_90 devices.
const Variant& hip_wgmma_fp8kv_variant();  // name "hip_wgmma_fp8kv_v1"

// The same kernel over a host-side launch plan (Variant::plan): persistent workgroups, `workers`
// per SM, deal the batch's KV tiles among themselves; only cut sequences are combined.
const Variant& hip_wgmma_fp8kv_persistent_variant();  // name "hip_wgmma_fp8kv_persistent_v1"

}  // namespace mlatune
