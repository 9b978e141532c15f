// Canonical text hashed by compute_winners_digest (SHA-256 over its bytes):
//
//   "mlatune winners digest 2\n", then
//   P + the provenance row's tool_version, backend, arch, device_name, compute_units,
//       driver_version, runtime_version, kernel_build_id, config_name, config_hash
//       (every column except id, created_at, config_text - bound by config_hash, which open
//       checks - and winners_digest itself);
//   then one record per bucket, ordered by (heads, qlen, q_dtype, kv_dtype, page_size, lse,
//       batch_lo, batch_hi, kv_lo, kv_hi): B (no winner) or W (a winner) + heads, qlen, q_dtype,
//       kv_dtype, page_size, lse, batch_lo, batch_hi, kv_lo, kv_hi, status; after W, the winning
//       trial's variant, kv_splits, kv_tile, block_rows, workers, disposition, max_abs_err,
//       max_rel_err, min_cosine, max_lse_err, time_median_us and the variant's code_identity from
//       the variants table.
//
// Every field says its own type and length, so the text is unambiguous whatever a stored value
// holds: NULL is "n;", an integer "i" + decimal + ";", a real "r" + its shortest round-trip form
// (std::to_chars, independent of the locale) + ";", a text "t" + its byte length in decimal + ":"
// + its bytes as stored. A record tag fixes its number of fields, and none of ';' and ':' can
// occur inside a number: no sequence of records encodes to the text of another (a field that
// holds a copy of a deleted bucket's record changes the digest). Bucket ids, completion times,
// losing trials and descriptions are excluded: they do not decide which kernel runs.
#include "db/digest.h"

#include <charconv>
#include <string>
#include <system_error>

#include "common/sha256.h"

namespace mlatune {

namespace {

void append_column(const Statement& st, int col, std::string& out) {
  char buf[64];
  switch (st.column_type(col)) {
    case SQLITE_NULL:
      out += "n;";
      return;
    case SQLITE_INTEGER: {
      auto r = std::to_chars(buf, buf + sizeof buf, st.column_int(col));
      out += 'i';
      out.append(buf, r.ptr);
      out += ';';
      return;
    }
    case SQLITE_FLOAT: {
      auto r = std::to_chars(buf, buf + sizeof buf, st.column_double(col));
      out += 'r';
      out.append(buf, r.ptr);
      out += ';';
      return;
    }
    default: {  // TEXT (and BLOB, which STRICT tables cannot hold in these columns)
      const std::string_view text = st.column_text_view(col);
      auto r = std::to_chars(buf, buf + sizeof buf, text.size());
      out += 't';
      out.append(buf, r.ptr);
      out += ':';
      out += text;
      return;
    }
  }
}

void append_row(const Statement& st, int first, int columns, std::string& out) {
  for (int c = first; c < first + columns; ++c) append_column(st, c, out);
}

constexpr std::string_view kFormatLine = "mlatune winners digest 2\n";

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
  std::string line = "P";
  append_row(st, 0, kProvenanceColumns, line);
  if (st.step()) {
    throw DbError(SQLITE_CORRUPT, db.path() + ": the provenance table has more than one row");
  }
  return line;
}

WinnersDigest::WinnersDigest(const SqliteDb& db) : line_(provenance_digest_line(db)) {
  sha_.update(kFormatLine);
  sha_.update(line_);
}

void WinnersDigest::add(const Statement& row) {
  // A winner row whose trial is missing still hashes as a winner (of nulls), so that deleting a
  // trial changes the digest just as deleting the winner does.
  const bool has_winner = row.column_int(kBucketColumns) != 0;
  line_.assign(1, has_winner ? 'W' : 'B');
  append_row(row, 0, kBucketColumns, line_);
  if (has_winner) append_row(row, kBucketColumns + 1, kWinnerColumns, line_);
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
