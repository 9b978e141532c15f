// The variant registry: which kernel variants a build (or a tuning session) can choose from.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "mla_decode/variant.h"

namespace mlatune {

class Registry {
 public:
  Registry() = default;
  Registry(Registry&&) = default;
  Registry& operator=(Registry&&) = default;

  // Adds a variant it owns. Throws std::invalid_argument on a duplicate or empty name.
  void add(std::unique_ptr<Variant> v);
  // Adds a variant owned elsewhere that outlives this registry (built-in singletons).
  void add_borrowed(const Variant* v);

  const Variant* find(std::string_view name) const;  // null if absent
  const std::vector<const Variant*>& all() const { return order_; }

 private:
  void insert(const Variant* v);
  std::vector<std::unique_ptr<Variant>> owned_;
  std::vector<const Variant*> order_;
};

// Every variant compiled into this build (the host family, plus GPU families when built).
Registry builtin_registry();

// Hash over every built-in variant's name and code identity: changes whenever any kernel changes.
std::string kernel_build_id(const Registry& r);

}  // namespace mlatune
