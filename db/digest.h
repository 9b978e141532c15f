// The winners digest: what "integrity" means for a dispatch database beyond SQLite's own checks.
//
// SHA-256 over an unambiguous canonical encoding (db/digest.cc) of the provenance (every column
// except the digest itself and the config text, which its hash stands for), every
// bucket (key, ranges, status) and, for tuned buckets, the winning trial's variant, launch
// parameters, disposition and evidence plus the variant's code identity, in a fixed order. The
// tuner rewrites it in the transaction of every bucket; the runtime recomputes it at open and
// refuses a mismatch. It detects damage and hand edits of the rows that decide which kernel runs;
// it is not a signature (anyone with the tool can recompute it).
#pragma once

#include <string>
#include <string_view>

#include "common/sha256.h"
#include "db/sqlite_util.h"

namespace mlatune {

// 64 lowercase hex digits. Throws DbError if the tables cannot be read.
std::string compute_winners_digest(const SqliteDb& db);

// The digest text's provenance record: the provenance row's hashed columns, canonically encoded.
// The dispatch snapshot (db/snapshot.h) records its SHA-256, so that a reader that does not walk the
// buckets still checks the provenance. Throws DbError (no or several provenance rows).
std::string provenance_digest_line(const SqliteDb& db);

// The same digest for a reader that walks every bucket anyway (the runtime's open), so that the
// rows are read once: construct it (reads and hashes the provenance), step a Statement over
// kDigestRowsSql, add() every row in the order the query returns them, then finish_hex().
// Columns [0, kDigestRowColumns) are the hashed ones; the query's further columns, from
// kDigestRowColumns on, are b.id, w.trial_id, t.id, t.bucket_id and v.name, for the reader.
class WinnersDigest {
 public:
  explicit WinnersDigest(const SqliteDb& db);  // throws DbError (no or several provenance rows)
  void add(const Statement& row);
  std::string finish_hex();  // the object must not be used afterwards

 private:
  Sha256 sha_;
  std::string line_;
};

extern const std::string_view kDigestRowsSql;
inline constexpr int kDigestRowColumns = 24;

}  // namespace mlatune
