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

// Opens `path` as the runtime would (integrity, schema, device, stale winners; a database tuned on
// another device only with allow_foreign_device), checks that the stored config matches its hash,
// and validates every usable winner with `registry`'s variants, printing one line per winner to
// `out`. Throws DbError (damaged, doctored or refused database), ConfigError (stored config does
// not parse) or LaunchError (no device for the config's backend).
VerifySummary verify_database(const std::string& path, const Registry& registry,
                              bool allow_foreign_device, std::FILE* out);

}  // namespace mlatune
