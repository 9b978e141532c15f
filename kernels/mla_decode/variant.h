// The one interface every MLA decode kernel variant implements, whatever its backend.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "mla_decode/problem.h"

namespace mlatune {

enum class Backend : uint8_t { kHost = 0, kHip = 1 };
std::string_view backend_name(Backend b);  // "host", "hip"

// Launch parameters of a candidate. A field a variant does not use stays 0 (kv_splits: 1).
struct LaunchParams {
  int32_t kv_splits = 1;   // KV splits per sequence, merged by an LSE combine step
  int32_t kv_tile = 0;     // keys per tile of the inner loop
  int32_t block_rows = 0;  // query rows (heads x qlen) per workgroup (GPU)
  // Host variants: worker threads. GPU persistent variants: resident workgroups per SM (their
  // plan deals the batch to that many times the device's SM count, over the row groups).
  int32_t workers = 0;

  bool operator==(const LaunchParams&) const = default;
  std::string to_string() const;  // "splits=4 tile=64 rows=0 workers=2"
};

// The values a variant accepts for each parameter; the cross product is its candidate set. A
// launch parameter set outside this space is refused by the runtime even if a database names it.
struct ParamSpace {
  std::vector<int32_t> kv_splits{1};
  std::vector<int32_t> kv_tile{0};
  std::vector<int32_t> block_rows{0};
  std::vector<int32_t> workers{0};

  std::vector<LaunchParams> enumerate() const;
  bool contains(const LaunchParams& p) const;
};

struct Support {
  bool ok = true;
  std::string reason;  // why not, when !ok
  static Support yes() { return {}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// Thrown by Variant::run when the launch itself fails (bad arguments, device error).
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Variant {
 public:
  virtual ~Variant() = default;
  // Stable name built from the variant's traits; the database keys on it, so a name is never
  // reused for different code.
  virtual std::string_view name() const = 0;
  virtual std::string_view description() const = 0;
  virtual Backend backend() const = 0;
  // Changes whenever the variant's code or compile flags change (hash of sources and flags).
  virtual std::string_view code_identity() const = 0;
  virtual ParamSpace param_space() const = 0;
  // Whether this variant computes `shape` correctly with `params`, as far as it knows.
  virtual Support can_implement(const DecodeShape& shape, const LaunchParams& params) const = 0;
  virtual size_t workspace_bytes(const DecodeShape& shape, const LaunchParams& params) const = 0;
  // Host-side planning (design.md §7), for variants whose launch depends on the batch's lengths,
  // such as persistent scheduling. plan_words() is 0 for a variant without a plan, else the most
  // 32-bit words the plan of any lengths of `shape` takes. plan() writes the plan of `kv_lens`
  // (host memory, [batch]) into `out` and returns the words used; it throws LaunchError for
  // lengths outside the shape or an `out` too small. run() of such a variant then needs
  // DecodeArgs::plan to hold that plan and refuses a missing, foreign or malformed one with
  // LaunchError; it never plans again itself.
  virtual size_t plan_words(const DecodeShape&, const LaunchParams&) const { return 0; }
  virtual size_t plan(const DecodeShape& shape, const LaunchParams& params,
                      std::span<const int32_t> kv_lens, std::span<int32_t> out) const;
  // Runs synchronously (host) or enqueues (GPU). Throws LaunchError on failure.
  virtual void run(const DecodeShape& shape, const LaunchParams& params,
                   const DecodeArgs& args) const = 0;
  // Lower is simpler; breaks timing ties. Default: fewer splits, then fewer workers.
  virtual int64_t complexity(const LaunchParams& p) const {
    return int64_t{p.kv_splits} * 1000 + p.workers;
  }
};

// The plan of a launch of `v` over `kv_lens` (empty for a variant without one), for
// DecodeArgs::plan and plan_words. Throws LaunchError as Variant::plan.
std::vector<int32_t> plan_launch(const Variant& v, const DecodeShape& shape,
                                 const LaunchParams& params, std::span<const int32_t> kv_lens);

}  // namespace mlatune
