// Canonical text hashed by compute_winners_digest (SHA-256, UTF-8 bytes as stored):
//
//   line 1: the provenance row's tool_version, backend, arch, device_name, compute_units,
//           driver_version, runtime_version, kernel_build_id, config_name, config_hash
//           (every column except id, created_at and winners_digest itself)
//   then one line per bucket, ordered by (heads, qlen, q_dtype, kv_dtype, page_size, lse,
//           batch_lo, batch_hi, kv_lo, kv_hi): heads, qlen, q_dtype, kv_dtype, page_size, lse,
//           batch_lo, batch_hi, kv_lo, kv_hi, status; and, when the bucket has a winner, the
//           winning trial's variant, kv_splits, kv_tile, block_rows, workers, disposition,
//           max_abs_err, max_rel_err, min_cosine, max_lse_err, time_median_us and the variant's
//           code_identity from the variants table.
//
// Fields are joined by '\x1f' (unit separator), lines by '\n' (no trailing newline). Integers are
// written in decimal, reals as printf "%.17g" would (via std::to_chars, so the text does not
// depend on the process's locale), text verbatim, NULL as "null". Bucket ids, completion times,
// losing trials and descriptions are excluded: they do not decide which kernel runs.
#include "db/digest.h"

#include <charconv>
#include <string>
#include <system_error>

#include "common/sha256.h"

namespace mlatune {

namespace {

constexpr char kFieldSep = '\x1f';

void append_column(const Statement& st, int col, std::string& out) {
  switch (st.column_type(col)) {
    case SQLITE_NULL:
      out += "null";
      return;
    case SQLITE_INTEGER: {
      char buf[24];
      auto r = std::to_chars(buf, buf + sizeof buf, st.column_int(col));
      out.append(buf, r.ptr);
      return;
    }
    case SQLITE_FLOAT: {
      char buf[64];
      auto r = std::to_chars(buf, buf + sizeof buf, st.column_double(col),
                             std::chars_format::general, 17);
      out.append(buf, r.ptr);
      return;
    }
    default:  // TEXT (and BLOB, which STRICT tables cannot hold in these columns)
      out += st.column_text_view(col);
      return;
  }
}

void append_row(const Statement& st, int columns, std::string& out) {
  for (int c = 0; c < columns; ++c) {
    if (c > 0) out += kFieldSep;
    append_column(st, c, out);
  }
}

constexpr int kProvenanceColumns = 10;
constexpr std::string_view kProvenanceSql =
    "SELECT tool_version, backend, arch, device_name, compute_units, driver_version, "
    "runtime_version, kernel_build_id, config_name, config_hash FROM provenance";

constexpr int kBucketColumns = 11;
constexpr int kWinnerColumns = 12;
static_assert(kBucketColumns + 1 + kWinnerColumns == kDigestRowColumns);

}  // namespace

const std::string_view kDigestRowsSql =
    "SELECT b.heads, b.qlen, b.q_dtype, b.kv_dtype, b.page_size, b.lse, b.batch_lo, b.batch_hi, "
    "b.kv_lo, b.kv_hi, b.status, "
    "w.trial_id IS NOT NULL, t.variant, t.kv_splits, t.kv_tile, t.block_rows, t.workers, "
    "t.disposition, t.max_abs_err, t.max_rel_err, t.min_cosine, t.max_lse_err, t.time_median_us, "
    "v.code_identity, "
    "b.id, w.trial_id, t.id, t.bucket_id, v.name "
    "FROM buckets b LEFT JOIN winners w ON w.bucket_id = b.id "
    "LEFT JOIN trials t ON t.id = w.trial_id LEFT JOIN variants v ON v.name = t.variant "
    "ORDER BY b.heads, b.qlen, b.q_dtype, b.kv_dtype, b.page_size, b.lse, b.batch_lo, "
    "b.batch_hi, b.kv_lo, b.kv_hi";

std::string provenance_digest_line(const SqliteDb& db) {
  Statement st(db, kProvenanceSql);
  if (!st.step()) throw DbError(SQLITE_CORRUPT, db.path() + ": the provenance table is empty");
  std::string line;
  append_row(st, kProvenanceColumns, line);
  if (st.step()) {
    throw DbError(SQLITE_CORRUPT, db.path() + ": the provenance table has more than one row");
  }
  return line;
}

WinnersDigest::WinnersDigest(const SqliteDb& db) : line_(provenance_digest_line(db)) {
  sha_.update(line_);
}

void WinnersDigest::add(const Statement& row) {
  line_.assign(1, '\n');
  append_row(row, kBucketColumns, line_);
  // A winner row whose trial is missing still hashes as a winner (of nulls), so that deleting a
  // trial changes the digest just as deleting the winner does.
  if (row.column_int(kBucketColumns) != 0) {
    for (int c = 0; c < kWinnerColumns; ++c) {
      line_ += kFieldSep;
      append_column(row, kBucketColumns + 1 + c, line_);
    }
  }
  sha_.update(line_);
}

std::string WinnersDigest::finish_hex() { return sha_.finish_hex(); }

std::string compute_winners_digest(const SqliteDb& db) {
  WinnersDigest digest(db);
  Statement st(db, kDigestRowsSql);
  while (st.step()) digest.add(st);
  return digest.finish_hex();
}

}  // namespace mlatune
