// hip_mma_split_v1: the matrix-core member of the GPU MLA decode family (split-KV, mma.sync bf16
// on NVIDIA; a scalar stand-in for the matrix instructions on AMD until MFMA lands). Plain C++
// header: callers need no GPU compiler.
#pragma once

#include "mla_decode/variant.h"

namespace mlatune {

// Split-KV decode with heads x qlen packed into the M dimension of bf16 tensor-core products,
// online softmax in fp32, and an LSE-merge combine kernel when kv_splits > 1.
const Variant& hip_mma_split_variant();  // name "hip_mma_split_v1"

}  // namespace mlatune
