// The tuning driver: for every bucket of a config, validate every candidate, time those that
// pass, pick the winner and record the bucket in the database in one transaction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "db/tuning_db.h"
#include "mla_decode/registry.h"
#include "tuner/config.h"
#include "tuner/progress.h"
#include "tuner/timing.h"

namespace mlatune {

struct Candidate {
  const Variant* variant = nullptr;
  LaunchParams params;
};

// The candidates of a config: variants of its backend (restricted to config.variants if given)
// times their launch parameters (config.params overriding the declared values). Throws
// ConfigError naming file:line:column, the key and the value (TuneConfig::error_at) when the
// config names an unknown variant or a value outside a variant's declared ParamSpace, or selects
// no variant.
std::vector<Candidate> enumerate_candidates(const TuneConfig& config, const Registry& registry);

// The index of the winner among passed, timed trials: the trial least slower than the fastest at
// its worst timing point (TrialRecord::point_medians_us; its slowdown is the largest ratio of its
// median to the fastest median at a point), so that a bucket's winner serves all of it. Slowdowns
// within tie_fraction of the least tie, and the simplest candidate (Variant::complexity, then the
// smaller slowdown, then name) wins. With one point this is the fastest median. nullopt if none
// passed.
std::optional<size_t> pick_winner(const std::vector<TrialRecord>& trials,
                                  const std::vector<Candidate>& candidates, double tie_fraction);

struct TuneSummary {
  int64_t buckets = 0;   // in the config
  int64_t skipped = 0;   // already in the database (resume)
  int64_t tuned = 0;     // recorded with a winner
  int64_t no_valid = 0;  // recorded without one: no candidate passed
  // The most bytes of generated inputs held at once (per backend, summed): a bucket holds its
  // pre-timing, validation and timing inputs one set at a time.
  int64_t peak_input_bytes = 0;
  double seconds = 0;
};

// The most bytes of generated inputs a bucket of `config` holds at once (per backend): the larger
// of its validation cases' and its timing inputs' (the pre-timing input is one of the latter).
int64_t bucket_input_peak(const BucketKey& b, const TuneConfig& config);

// Throws ConfigError naming how many of `buckets` need more than `available` bytes of `where`
// for their inputs (bucket_input_peak) and the largest of them, or a bucket whose inputs cannot
// be made at all; nothing when all fit or `available` is unknown.
void check_inputs_fit(const TuneConfig& config, const std::vector<BucketKey>& buckets,
                      std::string_view where, std::optional<int64_t> available);
// The same against the available memory of every backend of `candidates` (which it touches: not
// for a process that must leave the GPU runtime alone).
void check_inputs_fit(const TuneConfig& config, const std::vector<Candidate>& candidates,
                      const std::vector<BucketKey>& buckets);

// TuningDb::open_for_tuning of `path` for a run of `config` with `candidates`, refusing up front
// (check_inputs_fit) a run whose buckets cannot fit the backends' memory: every bucket before a
// new database is created, the buckets a resumed one lacks once it is open. Throws ConfigError,
// DbError, LaunchError.
std::unique_ptr<TuningDb> open_checked_for_tuning(const std::string& path, TuningDb::Mode mode,
                                                  const TuneConfig& config,
                                                  const Registry& registry,
                                                  const std::vector<Candidate>& candidates);

// Provenance for a run of `config` with `registry` on this host.
Provenance make_provenance(const TuneConfig& config, const Registry& registry);
std::vector<VariantRecord> variant_records(const std::vector<Candidate>& candidates);

// Lets a supervising process follow and steer a run (tuner/isolation.h). Indices are into
// config.buckets() and the candidate list.
struct TuneHooks {
  // Before a candidate of a bucket first runs (pre-timing or validation).
  std::function<void(size_t bucket, size_t candidate)> candidate_started;
  // After a candidate was recorded as launch_error or timed_out (a supervisor checks whether the
  // device survived it).
  std::function<void(size_t bucket, size_t candidate, const TrialRecord&)> candidate_failed;
  // After a bucket's transaction committed.
  std::function<void(size_t bucket, bool has_winner)> bucket_recorded;
  // Candidates known to crash or hang the process: recorded with this disposition and reason,
  // never run.
  std::map<std::pair<size_t, size_t>, std::pair<Disposition, std::string>> quarantined;
  // The timer of every pre-timing and timing run (time_candidate); empty: the memory space's.
  TimerFactory make_timer;
};

// Tunes every bucket of `config` not yet in `db`.
TuneSummary tune(const TuneConfig& config, const std::vector<Candidate>& candidates, TuningDb& db,
                 Progress& progress, const TuneHooks& hooks = {});

}  // namespace mlatune
