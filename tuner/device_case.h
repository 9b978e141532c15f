// A validation or timing case's inputs copied into the memory of a backend, so that every
// backend's variants run through the same gate and timing code.
#pragma once

#include "mla_decode/memory.h"
#include "tuner/validation_case.h"

namespace mlatune {

struct DeviceCase {
  // Allocates and uploads q, the KV pool, the block table and the lengths. Throws LaunchError.
  DeviceCase(MemorySpace& memory, const ValidationCase& c);

  // Input pointers in `memory`; outputs and workspace left null.
  DecodeArgs args() const;

  MemorySpace* memory;
  DeviceBuffer q, kv, block_table, kv_lens;
};

}  // namespace mlatune
