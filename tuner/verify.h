// Re-validation of a shipped database: every winner is run again through the gate, on this
// machine's device, with the config the database was tuned with (stored inside it).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "mla_decode/registry.h"

namespace mlatune {

struct VerifySummary {
  int64_t passed = 0;    // winners that passed again
  int64_t failed = 0;    // winners the gate rejects now
  int64_t stale = 0;     // winners whose variant code differs from `registry`'s (not run)
  int64_t no_valid = 0;  // buckets without a winner (nothing to verify)
};

struct VerifyOptions {
  bool allow_foreign_device = false;  // verify a database tuned on another device
  // Run the winners in a supervised worker process (worker_process.h): a winner that kills the
  // worker (a crash, a device fault) or keeps it silent for watchdog_s (a hang) is reported as
  // failed and verification goes on with the next winner in a new worker.
  bool isolated = false;
  double watchdog_s = 120;
  int max_restarts = 64;  // then verification stops with std::runtime_error
};

// Opens `path` as the runtime would (integrity, schema, device, stale winners; a database tuned on
// another device only with allow_foreign_device), checks that the stored config matches its hash,
// and validates every usable winner with `registry`'s variants, printing one line per winner to
// `out`. Throws DbError (damaged, doctored or refused database), ConfigError (stored config does
// not parse) or LaunchError (no device for the config's backend); isolated, the same kinds from
// the worker, and std::runtime_error for a worker lost outside any winner's run.
VerifySummary verify_database(const std::string& path, const Registry& registry,
                              const VerifyOptions& options, std::FILE* out);

}  // namespace mlatune
