// Whether this build can run a database's winners of a variant, and if not why: a database from
// another build names variants this one lacks, which is not the same as a variant whose code
// changed since it was validated (both are stale: re-tune, but the first may mean the wrong build).
#pragma once

#include <string>
#include <string_view>

#include "mla_decode/registry.h"

namespace mlatune {

enum class Staleness {
  kCurrent,      // the variant is built in with the code identity the database recorded
  kNotInBuild,   // no variant of that name in this build
  kCodeChanged,  // built in, with another code identity
};

Staleness staleness_of(const Registry& registry, const std::string& variant,
                       const std::string& recorded_identity);

// "variant not in this build", "variant code changed"; empty for kCurrent.
std::string_view staleness_reason(Staleness s);

}  // namespace mlatune
