// Tuning in a supervised worker process, so that a candidate that kills or hangs its process (a
// segfault in a host kernel, a GPU fault that leaves the device context unusable, a kernel that
// never returns) costs a restart and a recorded disposition, not the run.
//
// The supervisor (the calling process) forks a worker that opens the database and runs tune();
// the worker reports over a pipe which candidate it is running and sends a heartbeat around every
// kernel run. When the worker dies by a signal, reports that the device did not survive a
// candidate, or stays silent past the watchdog, the supervisor records the candidate in flight as
// launch_error (crash, device fault) or timed_out (hang) and starts a new worker on the same
// database with --resume semantics: finished buckets are kept, the bucket in flight is redone
// with that candidate quarantined (recorded, never run again).
//
// The supervisor itself never touches a GPU (a forked child cannot use a GPU runtime its parent
// initialised), so the device check, the provenance and every kernel run happen in the worker.
#pragma once

#include <string>
#include <vector>

#include "db/tuning_db.h"
#include "mla_decode/registry.h"
#include "tuner/config.h"
#include "tuner/tune.h"

namespace mlatune {

struct IsolationSettings {
  double watchdog_s = 120;  // a worker silent this long is killed and its candidate timed out
  int max_restarts = 64;    // then the run fails (something is wrong beyond single candidates)
};

// The watchdog of a config: well above the slowest legitimate single run the config allows.
double watchdog_seconds(const TuneConfig& config);

// Tunes like tune() on the database at `db_path` (opened by the worker with `mode` first and
// kResume after a restart). Errors of the worker are rethrown here as the same kind: DbError,
// LaunchError (no device: the CLI's exit code 7) or ConfigError; any other failure, or a worker
// that dies while no candidate is in flight, as std::runtime_error.
TuneSummary tune_isolated(const TuneConfig& config, const std::vector<Candidate>& candidates,
                          const Registry& registry, const std::string& db_path, TuningDb::Mode mode,
                          bool live_progress, const IsolationSettings& settings);

}  // namespace mlatune
