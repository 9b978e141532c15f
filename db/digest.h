// The winners digest: what "integrity" means for a dispatch database beyond SQLite's own checks.
//
// SHA-256 over a canonical text of the provenance (every column except the digest itself), every
// bucket (key, ranges, status) and, for tuned buckets, the winning trial's variant, launch
// parameters, disposition and evidence plus the variant's code identity, in a fixed order. The
// tuner rewrites it in the transaction of every bucket; the runtime recomputes it at open and
// refuses a mismatch. It detects damage and hand edits of the rows that decide which kernel runs;
// it is not a signature (anyone with the tool can recompute it).
#pragma once

#include <string>

#include "db/sqlite_util.h"

namespace mlatune {

// 64 lowercase hex digits. Throws DbError if the tables cannot be read.
std::string compute_winners_digest(const SqliteDb& db);

}  // namespace mlatune
