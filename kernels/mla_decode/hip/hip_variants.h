// The GPU (HIP) members of the MLA decode family, built when MLATUNE_GPU is nvidia or amd. All
// pointers in DecodeArgs are device pointers; run() enqueues on the default stream and returns
// without waiting (MemorySpace::synchronize waits and surfaces faults).
#pragma once

#include "mla_decode/variant.h"

namespace mlatune {

// No matrix cores: one workgroup per (sequence, KV split, head group), fp32 math, separate
// LSE-merge combine kernel. The portable baseline of the family.
const Variant& hip_portable_split_variant();  // name "hip_portable_split_v1"

}  // namespace mlatune
