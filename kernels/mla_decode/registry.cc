#include "mla_decode/registry.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/sha256.h"
#include "mla_decode/host/host_variants.h"
#if defined(MLATUNE_WITH_HIP)
#include "mla_decode/hip/hip_variants.h"
#include "mla_decode/hip/mma_fp8kv.h"
#include "mla_decode/hip/mma_split.h"
#include "mla_decode/hip/wgmma_fp8kv.h"
#include "mla_decode/hip/wgmma_split.h"
#endif

namespace mlatune {

#if defined(MLATUNE_WITH_MFMA)
// mla_decode/hip/mfma_split.hip. Declared here rather than in a header under hip/: every header
// there counts in every GPU variant's code identity, and this one exists in AMD builds only.
const Variant& hip_mfma_split_variant();  // name "hip_mfma_split_v1"
#endif

void Registry::add(std::unique_ptr<Variant> v) {
  if (!v) throw std::invalid_argument("registry: null variant");
  insert(v.get());
  owned_.push_back(std::move(v));
}

void Registry::add_borrowed(const Variant* v) {
  if (!v) throw std::invalid_argument("registry: null variant");
  insert(v);
}

void Registry::insert(const Variant* v) {
  if (v->name().empty()) throw std::invalid_argument("registry: variant with an empty name");
  if (find(v->name())) {
    throw std::invalid_argument("registry: duplicate variant name '" + std::string(v->name()) +
                                "'");
  }
  order_.push_back(v);
}

const Variant* Registry::find(std::string_view name) const {
  auto it = std::find_if(order_.begin(), order_.end(),
                         [&](const Variant* v) { return v->name() == name; });
  return it == order_.end() ? nullptr : *it;
}

Registry builtin_registry() {
  Registry r;
  r.add_borrowed(&host_online_softmax_variant());
  r.add_borrowed(&host_tiled_kv_variant());
  r.add_borrowed(&host_split_kv_variant());
  r.add_borrowed(&host_persistent_variant());
#if defined(MLATUNE_WITH_HIP)
  r.add_borrowed(&hip_portable_split_variant());
  r.add_borrowed(&hip_mma_split_variant());
  r.add_borrowed(&hip_mma_fp8kv_variant());
  r.add_borrowed(&hip_mma_fp8kv_persistent_variant());
  r.add_borrowed(&hip_wgmma_split_variant());
  r.add_borrowed(&hip_wgmma_fp8kv_variant());
  r.add_borrowed(&hip_wgmma_fp8kv_persistent_variant());
#endif
#if defined(MLATUNE_WITH_MFMA)
  r.add_borrowed(&hip_mfma_split_variant());
#endif
  return r;
}

std::string kernel_build_id(const Registry& r) {
  std::vector<const Variant*> sorted = r.all();
  std::sort(sorted.begin(), sorted.end(),
            [](const Variant* a, const Variant* b) { return a->name() < b->name(); });
  Sha256 h;
  for (const Variant* v : sorted) {
    h.update(v->name());
    h.update("=");
    h.update(v->code_identity());
    h.update("\n");
  }
  return h.finish_hex().substr(0, 32);
}

}  // namespace mlatune
