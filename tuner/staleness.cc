#include "tuner/staleness.h"

namespace mlatune {

Staleness staleness_of(const Registry& registry, const std::string& variant,
                       const std::string& recorded_identity) {
  const Variant* here = registry.find(variant);
  if (!here) return Staleness::kNotInBuild;
  return here->code_identity() == recorded_identity ? Staleness::kCurrent : Staleness::kCodeChanged;
}

std::string_view staleness_reason(Staleness s) {
  switch (s) {
    case Staleness::kNotInBuild:
      return "variant not in this build";
    case Staleness::kCodeChanged:
      return "variant code changed";
    case Staleness::kCurrent:
      break;
  }
  return "";
}

}  // namespace mlatune
