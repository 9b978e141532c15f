// The GPU (HIP) gate backend: cases generated in device memory by kernels (case_gen.h), the fp32
// GPU reference of the checked rows, and comparisons by kernels. Plain C++ header; the definition
// lives in hip_gate.hip, built only when MLATUNE_WITH_HIP is defined.
#pragma once

#include "mla_decode/gate_backend.h"

namespace mlatune {

// Process-wide. Its first use on a machine without a GPU throws LaunchError("no GPU device: ...").
// Not thread-safe.
GateBackend& hip_gate_backend();

}  // namespace mlatune
