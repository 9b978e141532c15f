// The dispatch snapshot: what the runtime loads from a dispatch database, as one sealed binary blob
// (table dispatch_snapshot of db/schema.sql), so that opening a database with 100 000 buckets
// reads one row instead of joining 100 000.
//
// It holds every bucket (key, ranges, whether it has a winner) and every winner's variant name,
// launch parameters and median time, plus the code identity of each variant (what the runtime's
// stale check compares). It is made from the rows - never edited by hand - when a tune (or a
// --resume) completes, and by `mlatune snapshot` for an existing database. The rows stay the
// record; the snapshot is a sealed copy of the part of them the runtime needs.
//
// When the runtime may use it: the blob is intact (its SHA-256 trailer), of a format version this
// build reads, made from the winners digest the provenance records now, and bound to this state of
// the file. "This state": SQLite increments the change counter in the file's header (bytes 24..27)
// on every transaction that modifies a database in rollback-journal mode, and the writer records
// the value its own transaction leaves there. Any later change made through SQLite - an edit, a
// re-sealed digest, a resume, a VACUUM, a switch to WAL mode - changes the counter, and the runtime
// reads the rows instead, exactly as before snapshots existed. A WAL-mode database (a tuner may be
// writing it) never uses its snapshot: WAL commits do not advance the counter.
//
// Format, version 1 (every integer little-endian; no field is trusted before it is range-checked,
// no length or count before the total size it implies has been compared with the blob's size):
//
//   header (92 bytes)
//     0  char[8]  magic "MLATSNAP"
//     8  u32      format version (1)
//    12  u32      SQLite file change counter the file has after the snapshot's transaction
//    16  u8[32]   the winners digest (db/digest.h) it was made from, as raw bytes
//    48  u8[32]   SHA-256 of the digest's canonical provenance line (db/digest.cc)
//    80  u32      variant count
//    84  u32      size of the variants section in bytes
//    88  u32      entry (bucket) count
//   variants section, ordered by name, names unique
//     u8 name length (1..63), name ([a-z][a-z0-9_]*), u8 identity length (1..255), identity
//     (printable ASCII)
//   entries, 52 bytes each, in the runtime's index order (key, batch_lo, kv_lo, batch_hi, kv_hi)
//     0  u16 heads    2  u16 page_size    4  u8 qlen    5  u8 q_dtype    6  u8 kv_dtype
//     7  u8 flags: bit 0 lse, bit 1 no valid candidate (no winner); other bits zero
//     8  i32 batch_lo   12  i32 batch_hi   16  i32 kv_lo   20  i32 kv_hi
//    24  u32 variant index (0xffffffff: no winner)
//    28  i32 kv_splits  32  i32 kv_tile  36  i32 block_rows  40  i32 workers
//    44  f64 time_median_us (NaN: not recorded)
//   trailer: SHA-256 of every byte before it (32 bytes)
//
// Every future version keeps the first 12 bytes (magic, version) and the SHA-256 trailer, so that
// a reader can tell damage (refused) from a format it does not know (it reads the rows).
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "db/records.h"
#include "db/sqlite_util.h"

namespace mlatune {

inline constexpr uint32_t kSnapshotFormatVersion = 1;
inline constexpr uint32_t kSnapshotNoVariant = 0xffffffffu;
// More buckets than a config may expand to (2^20), fewer than the 32-bit indexes can count.
inline constexpr uint32_t kSnapshotMaxEntries = uint32_t{1} << 24;
inline constexpr uint32_t kSnapshotMaxVariants = 1u << 16;

// A damaged or malformed snapshot: the message names the field and its byte offset in the blob.
class SnapshotError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct SnapshotVariant {
  std::string name;
  std::string code_identity;
  bool operator==(const SnapshotVariant&) const = default;
};

struct SnapshotEntry {
  BucketKey bucket;
  bool has_winner = false;                // false: no candidate passed validation
  uint32_t variant = kSnapshotNoVariant;  // index into DispatchSnapshot::variants
  LaunchParams params{0, 0, 0, 0};        // all zero without a winner
  double time_median_us = std::numeric_limits<double>::quiet_NaN();

  // Bit-exact (NaN equals NaN), for round-trip checks.
  bool same_as(const SnapshotEntry& o) const;
};

struct DispatchSnapshot {
  uint32_t file_change_counter = 0;
  std::array<uint8_t, 32> winners_digest{};
  std::array<uint8_t, 32> provenance_sha256{};
  std::vector<SnapshotVariant> variants;  // ordered by name
  std::vector<SnapshotEntry> entries;     // in snapshot_entry_less order

  bool same_as(const DispatchSnapshot& o) const;
};

// The order of entries in a snapshot: discrete key (heads, qlen, q_dtype, kv_dtype, page_size,
// lse), then batch_lo, kv_lo, batch_hi, kv_hi.
bool snapshot_entry_less(const SnapshotEntry& a, const SnapshotEntry& b);

// The blob for `s`, its SHA-256 trailer included. Sorts nothing: throws std::invalid_argument if
// a field is outside what decode_snapshot accepts (so that nothing is written that no reader
// would take), naming the field.
std::string encode_snapshot(const DispatchSnapshot& s);

// What a snapshot says about itself, read after its size, trailer and magic have been checked.
struct SnapshotEnvelope {
  uint32_t format_version = 0;
  // The rest only for format_version == kSnapshotFormatVersion.
  uint32_t file_change_counter = 0;
  std::array<uint8_t, 32> winners_digest{};
  std::array<uint8_t, 32> provenance_sha256{};
};
// Throws SnapshotError when the blob is too short, its SHA-256 trailer does not match or its magic
// is wrong: damage. An unknown format version is not damage (see format_version).
SnapshotEnvelope open_snapshot_envelope(std::span<const uint8_t> blob);

// The whole snapshot, every field range-checked; throws SnapshotError (damage, or a format
// version other than kSnapshotFormatVersion).
DispatchSnapshot decode_snapshot(std::span<const uint8_t> blob);

std::string to_hex(std::span<const uint8_t> bytes);

// The part of SQLite's 100-byte file header that binds a snapshot to a state of the file.
struct SqliteFileHeader {
  uint32_t change_counter = 0;
  bool wal = false;  // file format read or write version 2: WAL mode
};
// Reads the header through the connection's own file handle (so that it is the file SQLite has
// open, even if the path was replaced meanwhile). Call it inside a transaction, so that the lock
// SQLite holds keeps writers out. Throws DbError.
SqliteFileHeader read_file_header(const SqliteDb& db);

// Why a snapshot with an intact envelope `e` cannot stand for the rows of the file whose header is
// `h` and whose provenance records `provenance_digest`, or "" when it can.
std::string snapshot_unbound_reason(const SnapshotEnvelope& e, const SqliteFileHeader& h,
                                    std::string_view provenance_digest);

// The snapshot made from the rows, as the runtime's row path reads them: one pass over
// kDigestRowsSql that also computes the winners digest. Checks what does not depend on the
// linked kernels (a tuned bucket has exactly one winner, a passed trial of its own bucket, of a
// listed variant; keys and ranges inside the schema's limits); the first problem is returned in
// `problem` ("bucket 12: ...") rather than thrown, so that a caller can compare the digest first.
// Variants are indexed, entries sorted; the binding fields (change counter, digest bytes) are
// left zero except provenance_sha256. Throws DbError if the tables cannot be read.
struct RowsSnapshot {
  DispatchSnapshot snapshot;
  std::string computed_digest;  // 64 hex digits
  std::string problem;          // empty when every row is consistent
};
RowsSnapshot snapshot_from_rows(const SqliteDb& db);

// Winner rows naming no bucket (the bucket pass never sees them): their count.
int64_t count_orphan_winners(const SqliteDb& db);

// Whether the database has a dispatch_snapshot table (files written before it existed do not).
bool has_snapshot_table(const SqliteDb& db);

// Makes the snapshot of `db`'s rows and stores it, bound to the file's state after this write.
// Refuses (DbError, nothing written) a database in WAL mode, one whose rows do not hash to the
// digest its provenance records, or whose rows are inconsistent (the problem named): a snapshot
// must never launder damage or a hand edit. Creates the table in a version-2 file that predates
// it. Returns what was stored.
DispatchSnapshot write_snapshot(SqliteDb& db);

// Stores `s` (binding fields overwritten: change counter, and nothing else) as the database's
// snapshot, bound to the file's state after this write. write_snapshot's second half; tests use it
// to store doctored snapshots as a forger with this code could.
void store_snapshot(SqliteDb& db, DispatchSnapshot s);
// Stores `blob` without checking it. rebind: first overwrite its change counter (bytes 12..15) as
// store_snapshot would and recompute its SHA-256 trailer, as a forger with this code could; else
// as is. For tests of damaged and doctored snapshots.
void store_snapshot_blob(SqliteDb& db, std::span<const uint8_t> blob, bool rebind);

// The state of a database's stored snapshot, for people (`mlatune show`, `mlatune snapshot
// --check`). Reads in one read transaction; throws DbError if the file cannot be read.
struct SnapshotReport {
  bool usable = false;  // the runtime would load it (and, when compared, it matches the rows)
  std::string detail;   // "current: 480 buckets, ..." or why not
};
// compare_with_rows: also rebuild the snapshot from the rows and require it to be identical (an
// audit of the rows, which the runtime does not read when the snapshot is usable).
SnapshotReport inspect_snapshot(SqliteDb& db, bool compare_with_rows);

}  // namespace mlatune
