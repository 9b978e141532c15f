// Tuning configuration: the shape space, tolerances, validation and timing settings, read from a
// YAML file (configs/*.yaml). See configs/README.md for the format.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "db/records.h"
#include "mla_decode/problem.h"
#include "mla_decode/variant.h"

namespace mlatune {

// A config error; what() is "FILE:LINE:COLUMN: message" (1-based line and column).
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct DtypePair {
  DType q = DType::kBF16;
  DType kv = DType::kBF16;
  bool operator==(const DtypePair&) const = default;
  std::string to_string() const;  // "bf16/fp8_e4m3fn"
};

// Accepted error of one dtype combination. A row passes when every element satisfies
// |out - ref| <= atol + rtol * |ref|, its cosine similarity with the reference row is at least
// min_cosine, and (when returned) |lse - ref_lse| <= lse_atol.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
  double min_cosine = 0;
  double lse_atol = 0;
};

// One cross product of discrete keys and bucketed ranges. Buckets: batch_edges [4, 16] mean
// batch 1..4 and 5..16; kv_len_edges likewise, starting at 1.
struct ShapeSpace {
  std::vector<int32_t> heads;
  std::vector<int32_t> qlen;
  std::vector<DtypePair> dtypes;
  std::vector<int32_t> page_size;
  std::vector<bool> lse;
  std::vector<int32_t> batch_edges;
  std::vector<int32_t> kv_len_edges;
};

struct ValidationSettings {
  int32_t seeds = 2;            // random input sets per validation point
  int32_t repeats = 3;          // runs per input set, compared bitwise
  int32_t interior_points = 1;  // validation points strictly inside the bucket, besides its edges
  int64_t full_check_rows = 1 << 16;  // points with more (token, head) rows are sampled
  int32_t sampled_sequences = 4;      // at sampled points: every row of this many sequences ...
  int32_t sampled_rows = 256;         // ... plus this many random rows of the rest
};

struct TimingSettings {
  int32_t warmup = 2;              // untimed runs before sampling
  int32_t samples = 15;            // timed samples (median and interquartile range reported)
  bool cold_cache = true;          // flush caches before every sample
  int64_t flush_bytes = 64 << 20;  // bytes written to evict caches (host: larger than the LLC)
  double tie_fraction = 0.03;  // slowdowns within this fraction tie (pick_winner): the simpler wins
  double candidate_timeout_s = 30.0;  // a single run slower than this is recorded as timed_out
  // Pruning (0: off, every candidate is validated). Otherwise every supported candidate is first
  // timed with prune_samples samples; candidates are validated fastest first, and those slower
  // than prune_factor x the fastest one that passed are recorded as pruned, never validated.
  double prune_factor = 0;
  int32_t prune_samples = 3;
  // Time passed candidates also at the bucket's largest point (batch_hi, kv_hi), not only at its
  // midpoint; the winner is then the candidate least slower than the fastest at its worse point
  // (pick_winner), so that it serves the whole bucket rather than its centre, and a trial's
  // recorded time is the geometric mean of the two medians (pre-timing uses the midpoint only).
  bool top_corner = false;
};

struct TuneConfig {
  std::string path;     // file it was read from
  std::string name;     // config name (defaults to the file stem)
  std::string backend;  // "host" (GPU backends later)
  std::string hash;     // SHA-256 of the file's bytes
  std::string text;     // the file's bytes
  double sm_scale = 0;  // softmax scale used for validation and timing inputs
  std::vector<ShapeSpace> spaces;
  std::map<std::string, Tolerance> tolerances;  // key: DtypePair::to_string()
  ValidationSettings validation;
  TimingSettings timing;
  // Restricts the variants tuned (empty: all of the backend) ...
  std::vector<std::string> variants;
  // ... and, per variant name, the launch parameter values tried (each must lie in the variant's
  // declared ParamSpace; checked when tuning starts, against the registry).
  std::map<std::string, ParamSpace> params;
  // Where the values checked only against the registry (enumerate_candidates) were written,
  // "FILE:LINE:COLUMN", keyed by location_key(path, value): "variants" and a name, "params" and a
  // variant name (the entry's key), "params.<variant>.<parameter>" and a value, "backend".
  std::map<std::string, std::string> locations;

  // Every bucket of every space, deduplicated, in a stable order.
  std::vector<BucketKey> buckets() const;
  // Tolerance for a dtype combination; throws ConfigError when the config has none.
  const Tolerance& tolerance_for(DtypePair d) const;
  // A config error about `value` at `path`, as parse_config words its own:
  // "FILE:LINE:COLUMN: PATH: MESSAGE" (just "FILE: PATH: MESSAGE" for a value with no recorded
  // location, as in a config built in code).
  ConfigError error_at(const std::string& path, const std::string& value,
                       const std::string& message) const;
};

// The key of TuneConfig::locations for `value` written at `path`.
std::string location_key(const std::string& path, const std::string& value);

// Reads and validates a config. Throws ConfigError naming file, line and column for any syntax
// error, unknown key, missing key, wrong type or out-of-range value; std::runtime_error when the
// file cannot be read. Files above 1 MiB are refused before parsing.
TuneConfig load_config(const std::string& path);
// Same, from text (`origin` is used as the file name in messages).
TuneConfig parse_config(const std::string& text, const std::string& origin);

}  // namespace mlatune
