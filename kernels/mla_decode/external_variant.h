// Adapts a variant exposed through the C ABI (mlatune/variant_abi.h) to the Variant interface.
#pragma once

#include <memory>

#include "mla_decode/variant.h"
#include "mlatune/variant_abi.h"

namespace mlatune {

// Checks the descriptor (ABI version, struct size, non-null callbacks and strings, a valid name,
// non-empty param space) and wraps it. Throws std::invalid_argument naming what is wrong.
std::unique_ptr<Variant> wrap_external_variant(const mlatune_variant_v1* desc);

}  // namespace mlatune
