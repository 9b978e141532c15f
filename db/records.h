// Plain records of the dispatch database (db/schema.sql), shared by the tuner and the runtime.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mla_decode/device.h"
#include "mla_decode/problem.h"
#include "mla_decode/variant.h"

namespace mlatune {

// 3: the winners digest's encoding became unambiguous (db/digest.cc); a version-2 file is refused
// with its version named rather than as a digest mismatch.
inline constexpr int kSchemaVersion = 3;

// A shape bucket: the discrete key plus inclusive ranges of batch size and max KV length.
struct BucketKey {
  DecodeKey key;
  int32_t batch_lo = 0, batch_hi = 0;
  int32_t kv_lo = 0, kv_hi = 0;

  bool operator==(const BucketKey&) const = default;
  bool contains(int32_t batch, int32_t max_kv_len) const {
    return batch >= batch_lo && batch <= batch_hi && max_kv_len >= kv_lo && max_kv_len <= kv_hi;
  }
  std::string to_string() const;  // key + " batch=lo..hi kv=lo..hi"
};

// kPruned: not validated, because pre-timing put it too far behind a candidate that passed
// (TimingSettings::prune_factor).
enum class Disposition : uint8_t {
  kPassed,
  kIncorrect,
  kLaunchError,
  kUnsupported,
  kTimedOut,
  kPruned
};
std::string_view disposition_name(Disposition d);  // as stored: "passed", "incorrect", ...
std::optional<Disposition> parse_disposition(std::string_view s);

struct TrialRecord {
  std::string variant;
  LaunchParams params;
  Disposition disposition = Disposition::kUnsupported;
  std::string reason;     // empty iff passed
  std::string worst_row;  // "point 2 (batch=4 kv=257) seed 1 token 3 head 5", or empty
  int32_t validation_points = 0;
  int32_t validation_runs = 0;
  int64_t rows_checked = 0;
  std::optional<double> max_abs_err, max_rel_err, min_cosine, max_lse_err;
  std::optional<double> time_median_us, time_spread_us;
  std::optional<int32_t> time_samples;
  std::string timing_method;
  // The median at each timing point (midpoint first), when timed at several: what the tuner
  // picks its winner by. Not stored (timing_method lists them); empty for a trial read back.
  std::vector<double> point_medians_us;
};

struct Provenance {
  std::string tool_version;
  DeviceInfo device;
  std::string kernel_build_id;
  std::string config_name;
  std::string config_hash;  // SHA-256 of config_text
  std::string config_text;  // the config file's bytes, so that `mlatune verify` can re-validate
  std::string created_at;   // ISO 8601 UTC
};

struct VariantRecord {
  std::string name;
  std::string backend;
  std::string code_identity;
  std::string description;
};

}  // namespace mlatune
