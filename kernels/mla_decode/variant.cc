#include "mla_decode/variant.h"

#include <algorithm>

namespace mlatune {

std::string_view backend_name(Backend b) {
  switch (b) {
    case Backend::kHost:
      return "host";
    case Backend::kHip:
      return "hip";
  }
  return "unknown";
}

std::string LaunchParams::to_string() const {
  return "splits=" + std::to_string(kv_splits) + " tile=" + std::to_string(kv_tile) +
         " rows=" + std::to_string(block_rows) + " workers=" + std::to_string(workers);
}

std::vector<LaunchParams> ParamSpace::enumerate() const {
  std::vector<LaunchParams> out;
  out.reserve(kv_splits.size() * kv_tile.size() * block_rows.size() * workers.size());
  for (int32_t s : kv_splits) {
    for (int32_t t : kv_tile) {
      for (int32_t r : block_rows) {
        for (int32_t w : workers) out.push_back({s, t, r, w});
      }
    }
  }
  return out;
}

bool ParamSpace::contains(const LaunchParams& p) const {
  const auto has = [](const std::vector<int32_t>& v, int32_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  return has(kv_splits, p.kv_splits) && has(kv_tile, p.kv_tile) && has(block_rows, p.block_rows) &&
         has(workers, p.workers);
}

size_t Variant::plan(const DecodeShape&, const LaunchParams&, std::span<const int32_t>,
                     std::span<int32_t>) const {
  throw LaunchError(std::string(name()) + ": has no host-side plan");
}

std::vector<int32_t> plan_launch(const Variant& v, const DecodeShape& shape,
                                 const LaunchParams& params, std::span<const int32_t> kv_lens) {
  std::vector<int32_t> words(v.plan_words(shape, params));
  if (words.empty()) return words;
  words.resize(v.plan(shape, params, kv_lens, words));
  return words;
}

}  // namespace mlatune
