#include "db/records.h"

#include <array>

namespace mlatune {

namespace {
constexpr std::array<std::string_view, 6> kDispositionNames = {
    "passed", "incorrect", "launch_error", "unsupported", "timed_out", "pruned"};
}  // namespace

std::string BucketKey::to_string() const {
  return key.to_string() + " batch=" + std::to_string(batch_lo) + ".." + std::to_string(batch_hi) +
         " kv=" + std::to_string(kv_lo) + ".." + std::to_string(kv_hi);
}

std::string_view disposition_name(Disposition d) {
  return kDispositionNames.at(static_cast<size_t>(d));
}

std::optional<Disposition> parse_disposition(std::string_view s) {
  for (size_t i = 0; i < kDispositionNames.size(); ++i) {
    if (kDispositionNames[i] == s) return static_cast<Disposition>(i);
  }
  return std::nullopt;
}

}  // namespace mlatune
