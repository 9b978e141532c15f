#include "runtime/winner_table.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <string_view>
#include <system_error>
#include <utility>

#include "common/sha256.h"
#include "db/digest.h"
#include "db/read_only_open.h"
#include "db/records.h"
#include "db/snapshot.h"
#include "db/sqlite_util.h"
#include "mla_decode/memory.h"
#include "mla_decode/problem.h"

namespace mlatune {

namespace {

constexpr std::array<const char*, 3> kDtypeNames = {"bf16", "fp8_e4m3fn", "fp8_e4m3fnuz"};
constexpr std::array<std::string_view, 5> kTables = {"provenance", "variants", "buckets", "trials",
                                                     "winners"};

// The discrete key packed so that integer order is (heads, qlen, q_dtype, kv_dtype, page_size,
// lse) order; every field is range-checked before packing.
constexpr uint64_t pack_key(int32_t heads, int32_t qlen, int32_t q_dtype, int32_t kv_dtype,
                            int32_t page_size, int32_t lse) {
  return uint64_t(uint32_t(heads)) << 40 | uint64_t(uint32_t(qlen)) << 32 |
         uint64_t(uint32_t(q_dtype)) << 28 | uint64_t(uint32_t(kv_dtype)) << 24 |
         uint64_t(uint32_t(page_size)) << 4 | uint64_t(uint32_t(lse));
}
struct UnpackedKey {
  int32_t heads, qlen, q_dtype, kv_dtype, page_size, lse;
};
constexpr UnpackedKey unpack_key(uint64_t k) {
  return {int32_t(k >> 40),         int32_t((k >> 32) & 0xff),   int32_t((k >> 28) & 0xf),
          int32_t((k >> 24) & 0xf), int32_t((k >> 4) & 0xfffff), int32_t(k & 0xf)};
}
static_assert(kMaxHeads < (1 << 20) && kMaxQlen < (1 << 8) && kMaxPageSize < (1 << 20));

// Number of elements of a[0, n) that are <= x (a sorted ascending). Branch-free, so that the
// lookup's cost does not depend on how predictable the callers' shapes are.
template <typename T>
inline size_t count_le(const T* a, size_t n, T x) {
  if (n == 0) return 0;
  const T* base = a;
  while (n > 1) {
    const size_t half = n / 2;
    base = (base[half] <= x) ? base + half : base;
    n -= half;
  }
  return static_cast<size_t>(base - a) + (*base <= x);
}

}  // namespace

// Appends printf-formatted text to a fixed buffer, truncating; never allocates.
class WinnerTable::MessageWriter {
 public:
  MessageWriter(char* buf, size_t cap) : buf_(buf), cap_(buf ? cap : 0) {
    if (cap_ > 0) buf_[0] = '\0';
  }
  __attribute__((format(printf, 2, 3))) void add(const char* fmt, ...) {
    if (len_ + 1 >= cap_) return;
    va_list ap;
    va_start(ap, fmt);
    const int n = std::vsnprintf(buf_ + len_, cap_ - len_, fmt, ap);
    va_end(ap);
    if (n > 0) len_ = std::min(cap_ - 1, len_ + static_cast<size_t>(n));
  }
  void add_key(const UnpackedKey& k) {
    add("heads=%d qlen=%d q=%s kv=%s page=%d lse=%d", k.heads, k.qlen, kDtypeNames[k.q_dtype],
        kDtypeNames[k.kv_dtype], k.page_size, k.lse);
  }

 private:
  char* buf_;
  size_t cap_;
  size_t len_ = 0;
};

namespace {

[[noreturn]] void refuse(mlatune_status status, const std::string& path, const std::string& what) {
  throw RuntimeError(status, path + ": " + what);
}

// How a SQLite failure during open is reported: damage is CORRUPT, an unreadable file IO_ERROR.
mlatune_status status_of_sqlite(int code) {
  switch (code & 0xff) {
    case SQLITE_NOMEM:
      return MLATUNE_STATUS_OUT_OF_MEMORY;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:  // e.g. a WAL database with a -wal file but no -shm, read-only directory
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return MLATUNE_STATUS_IO_ERROR;
    case SQLITE_IOERR:
      // SQLite reports a file cut short as a short read: that is damage, not an unreadable disk.
      return code == SQLITE_IOERR_SHORT_READ ? MLATUNE_STATUS_CORRUPT : MLATUNE_STATUS_IO_ERROR;
    default:  // SQLITE_NOTADB, SQLITE_CORRUPT, SQLITE_ERROR (a missing column), SQLITE_RANGE, ...
      return MLATUNE_STATUS_CORRUPT;
  }
}

std::string errno_message(int err) {
  return std::error_code(err, std::generic_category()).message();
}

// Fails with IO_ERROR before SQLite gets involved, so that the message carries errno's reason
// (SQLite would report a missing file as an empty new database or a generic "unable to open").
void check_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) refuse(MLATUNE_STATUS_IO_ERROR, path, errno_message(errno));
  if (S_ISDIR(st.st_mode)) {
    refuse(MLATUNE_STATUS_IO_ERROR, path, "is a directory, not a database file");
  }
  if (S_ISFIFO(st.st_mode)) {
    refuse(MLATUNE_STATUS_IO_ERROR, path, "is a FIFO (named pipe), not a regular file");
  }
  if (!S_ISREG(st.st_mode)) {
    refuse(MLATUNE_STATUS_IO_ERROR, path, "is not a regular file (a pipe, socket or device)");
  }
  // O_NONBLOCK: should the file be swapped for a FIFO meanwhile, fail rather than hang.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) refuse(MLATUNE_STATUS_IO_ERROR, path, "cannot be read: " + errno_message(errno));
  ::close(fd);
  if (st.st_size == 0) {
    refuse(MLATUNE_STATUS_CORRUPT, path, "empty file, not an mlatune database");
  }
}

// A read-only connection whose schema has been read, creating nothing beside the file
// (db/read_only_open.h: a WAL-mode file without its log is read as immutable, a stray -wal is
// refused, ...).
std::unique_ptr<SqliteDb> open_read_only(const std::string& path) {
  return open_for_reading(path, SQLITE_OPEN_NOMUTEX);
}

// PRAGMA quick_check of the whole file (table empty) or of one table and its indexes.
void check_integrity(const SqliteDb& db, const std::string& path, std::string_view table = {}) {
  Statement st(db, table.empty() ? std::string("PRAGMA quick_check")
                                 : "PRAGMA quick_check(" + std::string(table) + ")");
  std::string first;
  int problems = 0;
  while (st.step()) {
    std::string row = st.column_text(0);
    if (row == "ok") continue;
    if (problems++ == 0) first = std::move(row);
  }
  if (problems > 0) {
    refuse(MLATUNE_STATUS_CORRUPT, path,
           "damaged database: SQLite quick_check" +
               (table.empty() ? std::string() : " of table '" + std::string(table) + "'") +
               " found " + std::to_string(problems) + " problem(s), first: " + first);
  }
}

void check_schema(SqliteDb& db, const std::string& path) {
  const int version = db.user_version();
  std::vector<std::string_view> missing;
  {
    Statement st(db, "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?1");
    for (std::string_view t : kTables) {
      st.reset();
      st.bind(1, t);
      if (!st.step()) missing.push_back(t);
    }
  }
  if (version != kSchemaVersion) {
    if (version == 0 && missing.size() == kTables.size()) {
      refuse(MLATUNE_STATUS_CORRUPT, path,
             "not an mlatune database (an SQLite file without any mlatune table)");
    }
    refuse(MLATUNE_STATUS_SCHEMA_MISMATCH, path,
           "schema version " + std::to_string(version) + " is " +
               (version > kSchemaVersion ? "newer" : "older") + " than this runtime's " +
               std::to_string(kSchemaVersion) + "; use a runtime and database of the same release");
  }
  if (!missing.empty()) {
    refuse(MLATUNE_STATUS_CORRUPT, path,
           "not an mlatune database (missing table '" + std::string(missing.front()) + "')");
  }
}

struct StoredProvenance {
  Provenance provenance;
  std::string winners_digest;
  std::string config_text_sha256;  // of the stored config text, which config_hash claims
};

// The digest covers config_hash, not the config text (`mlatune verify` re-validates with the
// text): checked after the digest, so that an edited hash is reported as the digest's mismatch.
void check_config_text(const StoredProvenance& stored, const std::string& path) {
  if (stored.config_text_sha256 != stored.provenance.config_hash) {
    refuse(MLATUNE_STATUS_CORRUPT, path,
           "the stored config text hashes to " + stored.config_text_sha256 +
               ", but the provenance records config hash " + stored.provenance.config_hash +
               " (the file was damaged or edited)");
  }
}

// Winner rows of no bucket: the bucket pass (and so the digest) never sees them.
void check_no_orphan_winners(const SqliteDb& db, const std::string& path) {
  if (const int64_t orphans = count_orphan_winners(db); orphans != 0) {
    refuse(MLATUNE_STATUS_CORRUPT, path,
           std::to_string(orphans) + " winner(s) name a bucket that does not exist");
  }
}

StoredProvenance read_provenance(const SqliteDb& db, const std::string& path) {
  {
    Statement st(db, "SELECT count(*) FROM provenance");
    const int64_t rows = st.step() ? st.column_int(0) : 0;
    if (rows != 1) {
      refuse(MLATUNE_STATUS_CORRUPT, path,
             "expected exactly one provenance row, found " + std::to_string(rows));
    }
  }
  Statement st(db,
               "SELECT tool_version, backend, arch, device_name, compute_units, driver_version, "
               "runtime_version, kernel_build_id, config_name, config_hash, created_at, "
               "winners_digest, config_text FROM provenance");
  if (!st.step()) refuse(MLATUNE_STATUS_CORRUPT, path, "the provenance row vanished");
  StoredProvenance p;
  p.provenance.tool_version = st.column_text(0);
  p.provenance.device.backend = st.column_text(1);
  p.provenance.device.arch = st.column_text(2);
  p.provenance.device.name = st.column_text(3);
  p.provenance.device.compute_units = static_cast<int32_t>(st.column_int(4));
  p.provenance.device.driver_version = st.column_text(5);
  p.provenance.device.runtime_version = st.column_text(6);
  p.provenance.kernel_build_id = st.column_text(7);
  p.provenance.config_name = st.column_text(8);
  p.provenance.config_hash = st.column_text(9);
  p.provenance.created_at = st.column_text(10);
  p.winners_digest = st.column_text(11);
  p.config_text_sha256 = sha256_hex(st.column_text_view(12));
  return p;
}

// The device check (step 4 of docs/reliability.md): returns the note for the info string when a
// foreign device is accepted, refuses it otherwise.
std::string check_device(const DeviceInfo& tuned, const OpenOptions& options,
                         const std::string& path) {
  DeviceInfo expected;
  if (options.expected_device) {
    expected = *options.expected_device;
  } else {
    try {
      expected = current_device_info(tuned.backend);
    } catch (const std::exception& e) {
      // No device of the database's backend in this process (a GPU database read by a CPU-only
      // build or machine): it cannot match, so it is foreign like any other device.
      expected.backend = "none";
      expected.name = "no " + tuned.backend + " device (" + e.what() + ")";
    }
  }
  if (expected.matches(tuned)) return {};
  if (!options.allow_foreign_device) {
    refuse(MLATUNE_STATUS_FOREIGN_DEVICE, path,
           "tuned on " + tuned.to_string() + ", but this process runs on " + expected.to_string() +
               "; refusing its winners (allow_foreign_device overrides)");
  }
  return "; FOREIGN DEVICE ACCEPTED by allow_foreign_device: tuned on " + tuned.to_string() +
         ", running on " + expected.to_string();
}

[[noreturn]] void refuse_digest_mismatch(const std::string& path, const std::string& recorded,
                                         const std::string& what) {
  refuse(MLATUNE_STATUS_CORRUPT, path,
         "integrity digest mismatch: provenance records " + recorded + " but " + what +
             " (the file was damaged or edited)");
}

}  // namespace

std::unique_ptr<WinnerTable> WinnerTable::open(const std::string& path,
                                               const OpenOptions& options) {
  check_file(path);
  std::unique_ptr<WinnerTable> table(new WinnerTable());
  Registry builtin;
  const Registry* registry = options.registry;
  if (!registry) {
    builtin = builtin_registry();
    registry = &builtin;
  }
  try {
    // Read-only: the runtime never changes the file, and a shipped database may be read-only.
    const std::unique_ptr<SqliteDb> connection = open_read_only(path);
    SqliteDb& db = *connection;
    // One read transaction: every step below sees the same state of the file, and the header
    // that binds a dispatch snapshot is the header of that state.
    const ReadTransaction read(db);
    Statement(db, "SELECT count(*) FROM sqlite_schema").step();  // takes SQLite's shared lock
    const SqliteFileHeader header = read_file_header(db);
    const bool snapshot_table = options.use_snapshot && has_snapshot_table(db);

    // 1. Integrity. Where a snapshot may stand for the rows, only the tables that path reads are
    // checked now; the whole file is checked before the rows are read.
    const bool whole_file_checked = !snapshot_table || header.wal;
    if (whole_file_checked) {
      check_integrity(db, path);
    } else {
      // The snapshot's pages are read twice (checked, then loaded): keep them in SQLite's page
      // cache for this connection's short life (pages are allocated as used, up to 64 MiB).
      db.exec("PRAGMA cache_size = -65536");
      check_integrity(db, path, "provenance");
      check_integrity(db, path, "dispatch_snapshot");
    }
    // 2. Schema version and tables.
    check_schema(db, path);
    const StoredProvenance stored = read_provenance(db, path);
    const DeviceInfo& tuned = stored.provenance.device;

    std::string override_note;
    std::string rows_reason =
        options.use_snapshot
            ? "it has no dispatch snapshot (`mlatune snapshot --db FILE` writes one)"
            : "the caller asked for the rows";
    if (snapshot_table) {
      Statement st(db, "SELECT data FROM dispatch_snapshot WHERE id = 1");
      if (st.step()) {
        const std::span<const uint8_t> blob = st.column_blob(0);
        SnapshotEnvelope envelope;
        try {
          envelope = open_snapshot_envelope(blob);  // a damaged snapshot is damage
        } catch (const SnapshotError& e) {
          refuse(MLATUNE_STATUS_CORRUPT, path, e.what());
        }
        rows_reason = snapshot_unbound_reason(envelope, header, stored.winners_digest);
        if (rows_reason.empty()) {
          // 3. The snapshot is bound to this file's state and winners digest, and sealed: its
          // record of the provenance stands in for the digest's.
          Sha256 sha;
          sha.update(provenance_digest_line(db));
          if (sha.finish() != envelope.provenance_sha256) {
            refuse_digest_mismatch(path, stored.winners_digest,
                                   "the provenance row does not hash to what its dispatch "
                                   "snapshot recorded");
          }
          override_note = check_device(tuned, options, path);  // 4.
          DispatchSnapshot snapshot;
          try {
            snapshot = decode_snapshot(blob);  // 5. every field range-checked
          } catch (const SnapshotError& e) {
            refuse(MLATUNE_STATUS_CORRUPT, path, e.what());
          }
          table->load(snapshot, *registry, path);  // 5. and 6.
          table->from_snapshot_ = true;
        }
      }
    }

    if (!table->from_snapshot_) {
      if (!whole_file_checked) check_integrity(db, path);
      // 3. One pass over the buckets reads them and computes the digest. A problem found in a
      // row waits until the digest has been compared: damage anywhere in the deciding rows (the
      // provenance included) is reported as such, not as whatever the damaged field claims.
      const RowsSnapshot rows = snapshot_from_rows(db);
      if (rows.computed_digest != stored.winners_digest) {
        refuse_digest_mismatch(path, stored.winners_digest,
                               "the buckets and winners hash to " + rows.computed_digest);
      }
      override_note = check_device(tuned, options, path);  // 4.
      check_no_orphan_winners(db, path);                   // 5.
      if (!rows.problem.empty()) refuse(MLATUNE_STATUS_CORRUPT, path, rows.problem);
      table->load(rows.snapshot, *registry, path);  // 5. and 6.
    }
    check_config_text(stored, path);  // 3.
    table->build_index(path);         // 5. (overlapping buckets)

    const Provenance& p = stored.provenance;
    table->info_ = "file " + path + "; tool mlatune " + p.tool_version + "; tuned on " +
                   tuned.to_string() + "; config " + p.config_name + " (" + p.config_hash +
                   "); kernel build " + p.kernel_build_id + "; created " + p.created_at + "; " +
                   std::to_string(table->stats_.usable) + " usable, " +
                   std::to_string(table->stats_.stale) + " stale, " +
                   std::to_string(table->stats_.no_valid) + " without a valid kernel" +
                   (table->from_snapshot_ ? "; loaded from its dispatch snapshot"
                                          : "; loaded from its rows: " + rows_reason) +
                   override_note;
  } catch (const DbError& e) {
    const int code = e.code();
    if ((code & 0xff) == SQLITE_NOTADB) {
      refuse(MLATUNE_STATUS_CORRUPT, path,
             "not an SQLite database (" + std::string(e.what()) + ")");
    }
    throw RuntimeError(status_of_sqlite(code),
                       std::string(e.what()) + " [SQLite error " + std::to_string(code) + "]");
  }
  // The SQLite connection is closed here: lookups only ever read the arrays built above.
  return table;
}

// Entries from the snapshot (made from the rows, or stored): each winner checked against the
// linked kernels. A variant this build lacks, or whose code identity differs, makes its winners
// stale; a current variant's winner must lie in the variant's parameter space.
void WinnerTable::load(const DispatchSnapshot& s, const Registry& registry,
                       const std::string& path) {
  struct Resolved {
    const Variant* variant = nullptr;  // null: stale
    uint32_t message = 0;              // its stale reason in messages_
    ParamSpace space;
  };
  std::vector<Resolved> resolved(s.variants.size());
  for (size_t i = 0; i < s.variants.size(); ++i) {
    const SnapshotVariant& sv = s.variants[i];
    Resolved& r = resolved[i];
    const Variant* v = registry.find(sv.name);
    if (v && v->code_identity() == sv.code_identity) {
      r.variant = v;
      r.space = v->param_space();
      continue;
    }
    r.message = static_cast<uint32_t>(messages_.size());
    messages_.push_back(v ? "tuned with code identity " + sv.code_identity + ", this build has " +
                                std::string(v->code_identity()) + "; re-tune the bucket"
                          : "the variant is not part of this build (database code identity " +
                                sv.code_identity + "); re-tune the bucket");
  }
  entries_.reserve(s.entries.size());
  for (const SnapshotEntry& x : s.entries) {
    const BucketKey& b = x.bucket;
    Entry e{};
    e.key = pack_key(b.key.heads, b.key.qlen, static_cast<int32_t>(b.key.q_dtype),
                     static_cast<int32_t>(b.key.kv_dtype), b.key.page_size, b.key.lse ? 1 : 0);
    e.batch_lo = e.selection.batch_lo = b.batch_lo;
    e.batch_hi = e.selection.batch_hi = b.batch_hi;
    e.kv_lo = e.selection.kv_lo = b.kv_lo;
    e.kv_hi = e.selection.kv_hi = b.kv_hi;
    if (!x.has_winner) {
      e.kind = Kind::kNoValid;
      ++stats_.no_valid;
      entries_.push_back(e);
      continue;
    }
    if (x.variant >= s.variants.size()) {  // decode_snapshot and snapshot_from_rows ensure this
      refuse(MLATUNE_STATUS_INTERNAL, path, "bucket " + b.to_string() + ": no such variant index");
    }
    const std::string& name = s.variants[x.variant].name;
    if (name.empty() || name.size() >= MLATUNE_VARIANT_NAME_MAX) {
      refuse(MLATUNE_STATUS_INTERNAL, path, "bucket " + b.to_string() + ": variant name length");
    }
    std::memcpy(e.selection.variant, name.data(), name.size());
    e.selection.kv_splits = x.params.kv_splits;
    e.selection.kv_tile = x.params.kv_tile;
    e.selection.block_rows = x.params.block_rows;
    e.selection.workers = x.params.workers;
    e.selection.time_median_us = x.time_median_us;
    const Resolved& r = resolved[x.variant];
    if (!r.variant) {
      e.kind = Kind::kStale;
      e.message = r.message;
      ++stats_.stale;
    } else {
      if (!r.space.contains(x.params)) {
        refuse(MLATUNE_STATUS_CORRUPT, path,
               "bucket " + b.to_string() + ": winner '" + name + "' has launch parameters " +
                   x.params.to_string() + " outside the variant's parameter space");
      }
      e.kind = Kind::kUsable;
      e.variant = r.variant;
      e.params = x.params;
      ++stats_.usable;
    }
    entries_.push_back(e);
  }
}

void WinnerTable::build_index(const std::string& path) {
  // A snapshot's entries are in this order already (its format requires it).
  const auto entry_less = [](const Entry& a, const Entry& b) {
    return std::tie(a.key, a.batch_lo, a.kv_lo) < std::tie(b.key, b.batch_lo, b.kv_lo);
  };
  if (!std::is_sorted(entries_.begin(), entries_.end(), entry_less)) {
    std::sort(entries_.begin(), entries_.end(), entry_less);
  }
  interval_cell_.push_back(0);
  std::vector<int32_t> breaks;
  std::vector<std::vector<uint32_t>> covering;
  for (size_t s = 0; s < entries_.size();) {
    size_t e = s;
    while (e < entries_.size() && entries_[e].key == entries_[s].key) ++e;
    keys_.push_back(entries_[s].key);
    key_entry_.push_back(static_cast<uint32_t>(s));
    key_interval_.push_back(static_cast<uint32_t>(interval_lo_.size()));

    // Elementary batch intervals: between consecutive bucket batch boundaries the set of buckets
    // that apply is constant, so each interval gets one sorted list of kv ranges. For the usual
    // grid of batch x kv buckets this is exactly one cell per bucket.
    breaks.clear();
    for (size_t i = s; i < e; ++i) {
      breaks.push_back(entries_[i].batch_lo);
      breaks.push_back(entries_[i].batch_hi + 1);
    }
    if (!std::is_sorted(breaks.begin(), breaks.end())) std::sort(breaks.begin(), breaks.end());
    breaks.erase(std::unique(breaks.begin(), breaks.end()), breaks.end());
    covering.assign(breaks.size() - 1, {});
    for (size_t i = s; i < e; ++i) {
      const auto first = std::lower_bound(breaks.begin(), breaks.end(), entries_[i].batch_lo);
      const auto last = std::lower_bound(breaks.begin(), breaks.end(), entries_[i].batch_hi + 1);
      for (auto b = first; b != last; ++b) {
        covering[static_cast<size_t>(b - breaks.begin())].push_back(static_cast<uint32_t>(i));
      }
    }
    for (size_t j = 0; j < covering.size(); ++j) {
      std::vector<uint32_t>& cells = covering[j];
      if (cells.empty()) continue;  // a gap in batch: lookups there miss
      const auto kv_less = [&](uint32_t a, uint32_t b) {
        return entries_[a].kv_lo < entries_[b].kv_lo;
      };
      // Entries come ordered by (batch_lo, kv_lo): in a grid, the cells already are.
      if (!std::is_sorted(cells.begin(), cells.end(), kv_less)) {
        std::sort(cells.begin(), cells.end(), kv_less);
      }
      for (size_t c = 1; c < cells.size(); ++c) {
        const Entry& prev = entries_[cells[c - 1]];
        const Entry& cur = entries_[cells[c]];
        if (cur.kv_lo <= prev.kv_hi) {
          const UnpackedKey k = unpack_key(cur.key);
          char key_text[160];
          MessageWriter w(key_text, sizeof key_text);
          w.add_key(k);
          refuse(MLATUNE_STATUS_CORRUPT, path,
                 "overlapping buckets for " + std::string(key_text) + ": batch " +
                     std::to_string(prev.batch_lo) + ".." + std::to_string(prev.batch_hi) + " kv " +
                     std::to_string(prev.kv_lo) + ".." + std::to_string(prev.kv_hi) +
                     " and batch " + std::to_string(cur.batch_lo) + ".." +
                     std::to_string(cur.batch_hi) + " kv " + std::to_string(cur.kv_lo) + ".." +
                     std::to_string(cur.kv_hi));
        }
      }
      interval_lo_.push_back(breaks[j]);
      interval_hi_.push_back(breaks[j + 1] - 1);
      for (uint32_t c : cells) {
        cell_kv_lo_.push_back(entries_[c].kv_lo);
        cell_kv_hi_.push_back(entries_[c].kv_hi);
        cell_entry_.push_back(c);
      }
      interval_cell_.push_back(static_cast<uint32_t>(cell_entry_.size()));
    }
    s = e;
  }
  key_entry_.push_back(static_cast<uint32_t>(entries_.size()));
  key_interval_.push_back(static_cast<uint32_t>(interval_lo_.size()));

  size_t slots = 2;
  key_shift_ = 63;
  while (slots < 2 * keys_.size()) slots *= 2, --key_shift_;
  key_slots_.assign(slots, 0);
  for (size_t k = 0; k < keys_.size(); ++k) {
    size_t i = key_slot(keys_[k]);
    while (key_slots_[i] != 0) i = (i + 1) & (slots - 1);
    key_slots_[i] = static_cast<uint32_t>(k + 1);
  }
}

namespace {

// The first field of `key` outside its range, or nullptr when the key is valid.
struct KeyProblem {
  const char* field = nullptr;
  int32_t value = 0;
  const char* range = "";
};
inline KeyProblem check_key(const mlatune_decode_key& key) {
  static_assert(kMaxHeads == 1024 && kMaxQlen == 16 && kMaxPageSize == 4096 && kMaxBatch == 65536 &&
                    kMaxKvLen == 16777216,
                "update the ranges named below");
  KeyProblem p;
  auto check = [&](const char* field, int32_t v, int64_t lo, int64_t hi, const char* range) {
    if (!p.field && (v < lo || v > hi)) p = {field, v, range};
  };
  check("heads", key.heads, 1, kMaxHeads, "1..1024");
  check("qlen", key.qlen, 1, kMaxQlen, "1..16");
  check("q_dtype", key.q_dtype, 0, 2, "0..2, an MLATUNE_DTYPE_* code");
  check("kv_dtype", key.kv_dtype, 0, 2, "0..2, an MLATUNE_DTYPE_* code");
  check("page_size", key.page_size, 1, kMaxPageSize, "1..4096");
  check("lse", key.lse, 0, 1, "0 or 1");
  check("batch", key.batch, 1, kMaxBatch, "1..65536");
  check("max_kv_len", key.max_kv_len, std::max(key.qlen, 1), kMaxKvLen, "qlen..16777216");
  return p;
}

}  // namespace

mlatune_status WinnerTable::find(const mlatune_decode_key& key,
                                 const Entry** entry) const noexcept {
  if (check_key(key).field) [[unlikely]]
    return MLATUNE_STATUS_INVALID_ARGUMENT;
  const uint64_t packed =
      pack_key(key.heads, key.qlen, key.q_dtype, key.kv_dtype, key.page_size, key.lse);
  // The table is at most half full, so the probe ends at an empty slot or at the key.
  const size_t mask = key_slots_.size() - 1;
  size_t slot = key_slot(packed);
  uint32_t found = key_slots_[slot];
  while (found != 0 && keys_[found - 1] != packed) found = key_slots_[slot = (slot + 1) & mask];
  if (found == 0) return MLATUNE_STATUS_UNTUNED;
  const size_t k = found - 1;
  const uint32_t i0 = key_interval_[k];
  size_t j = count_le(interval_lo_.data() + i0, key_interval_[k + 1] - i0, key.batch);
  if (j == 0 || key.batch > interval_hi_[i0 + j - 1]) return MLATUNE_STATUS_UNTUNED;
  j = j - 1 + i0;  // j >= 1 here; keep the arithmetic in size_t
  const uint32_t c0 = interval_cell_[j];
  const size_t c = count_le(cell_kv_lo_.data() + c0, interval_cell_[j + 1] - c0, key.max_kv_len);
  if (c == 0 || key.max_kv_len > cell_kv_hi_[c0 + c - 1]) return MLATUNE_STATUS_UNTUNED;
  *entry = &entries_[cell_entry_[c0 + c - 1]];
  switch ((*entry)->kind) {
    case Kind::kUsable:
      return MLATUNE_STATUS_OK;
    case Kind::kStale:
      return MLATUNE_STATUS_STALE;
    case Kind::kNoValid:
      break;
  }
  return MLATUNE_STATUS_NO_VALID_KERNEL;
}

size_t WinnerTable::max_plan_words(int32_t batch) const {
  size_t most = 0;
  for (const Entry& e : entries_) {
    if (e.kind != Kind::kUsable) continue;
    // The largest call of the bucket's key with `batch` sequences: the plan's size is bounded by
    // the batch and the launch parameters, the lengths only fill it.
    const UnpackedKey k = unpack_key(e.key);
    DecodeShape s;
    s.batch = batch;
    s.qlen = k.qlen;
    s.heads = k.heads;
    s.page_size = k.page_size;
    s.q_dtype = static_cast<DType>(k.q_dtype);
    s.kv_dtype = static_cast<DType>(k.kv_dtype);
    s.sm_scale = 1.0f;
    s.return_lse = k.lse != 0;
    s.max_kv_len = e.kv_hi;
    s.max_pages_per_seq = (e.kv_hi + k.page_size - 1) / k.page_size;
    s.num_pages = s.max_pages_per_seq;
    most = std::max(most, e.variant->plan_words(s, e.params));
  }
  return most;
}

mlatune_status WinnerTable::lookup(const mlatune_decode_key& key,
                                   mlatune_selection* out) const noexcept {
  const Entry* e = nullptr;
  const mlatune_status s = find(key, &e);
  if (s == MLATUNE_STATUS_OK) [[likely]] {
    *out = e->selection;
  } else {
    std::memset(out, 0, sizeof *out);
  }
  return s;
}

void WinnerTable::explain(const mlatune_decode_key& key, char* error,
                          size_t error_size) const noexcept {
  MessageWriter w(error, error_size);
  const Entry* e = nullptr;
  switch (find(key, &e)) {
    case MLATUNE_STATUS_OK:
      w.add("ok");
      return;
    case MLATUNE_STATUS_INVALID_ARGUMENT: {
      const KeyProblem p = check_key(key);
      w.add("invalid key: %s=%d (must be %s)", p.field, p.value, p.range);
      return;
    }
    case MLATUNE_STATUS_STALE:
      w.add("winner '%s' of bucket ", e->selection.variant);
      w.add_key(unpack_key(e->key));
      w.add(" batch=%d..%d kv=%d..%d is stale: %s", e->batch_lo, e->batch_hi, e->kv_lo, e->kv_hi,
            messages_[e->message].c_str());
      return;
    case MLATUNE_STATUS_NO_VALID_KERNEL:
      w.add("no valid kernel: bucket ");
      w.add_key(unpack_key(e->key));
      w.add(" batch=%d..%d kv=%d..%d was tuned, but no candidate passed validation", e->batch_lo,
            e->batch_hi, e->kv_lo, e->kv_hi);
      return;
    default:
      describe_miss(key, w);
      return;
  }
}

void WinnerTable::describe_miss(const mlatune_decode_key& key, MessageWriter& w) const noexcept {
  const uint64_t packed =
      pack_key(key.heads, key.qlen, key.q_dtype, key.kv_dtype, key.page_size, key.lse);
  w.add("no bucket covers ");
  w.add_key(unpack_key(packed));
  w.add(" batch=%d max_kv_len=%d", key.batch, key.max_kv_len);
  if (keys_.empty()) {
    w.add("; the database has no buckets");
    return;
  }
  constexpr size_t kNearest = 3;
  const size_t k = count_le(keys_.data(), keys_.size(), packed);
  if (k > 0 && keys_[k - 1] == packed) {
    // The discrete key is tuned, the ranges are not: name the buckets closest in relative
    // distance along batch and kv length.
    std::array<std::pair<double, uint32_t>, kNearest> best;
    best.fill({std::numeric_limits<double>::infinity(), 0});
    auto gap = [](int32_t v, int32_t lo, int32_t hi) {
      return v < lo ? double(lo - v) / v : v > hi ? double(v - hi) / v : 0.0;
    };
    for (uint32_t i = key_entry_[k - 1]; i < key_entry_[k]; ++i) {
      const Entry& e = entries_[i];
      const double d =
          gap(key.batch, e.batch_lo, e.batch_hi) + gap(key.max_kv_len, e.kv_lo, e.kv_hi);
      if (d < best.back().first) {
        best.back() = {d, i};
        std::sort(best.begin(), best.end());
      }
    }
    w.add("; nearest tuned buckets of this key:");
    for (const auto& [d, i] : best) {
      if (std::isinf(d)) break;
      const Entry& e = entries_[i];
      w.add(" [batch=%d..%d kv=%d..%d%s]", e.batch_lo, e.batch_hi, e.kv_lo, e.kv_hi,
            e.kind == Kind::kUsable  ? ""
            : e.kind == Kind::kStale ? " stale"
                                     : " no valid kernel");
    }
    return;
  }
  // The discrete key itself is untuned: name the tuned keys differing in the fewest fields (then
  // the closest head count, query length and page size), with the ranges each covers.
  const UnpackedKey want = unpack_key(packed);
  std::array<std::pair<std::pair<int, int64_t>, uint32_t>, kNearest> best;
  best.fill({{std::numeric_limits<int>::max(), 0}, 0});
  for (uint32_t i = 0; i < keys_.size(); ++i) {
    const UnpackedKey h = unpack_key(keys_[i]);
    const int differing = (h.heads != want.heads) + (h.qlen != want.qlen) +
                          (h.q_dtype != want.q_dtype) + (h.kv_dtype != want.kv_dtype) +
                          (h.page_size != want.page_size) + (h.lse != want.lse);
    const int64_t spread = std::abs(int64_t{h.heads} - want.heads) +
                           std::abs(int64_t{h.qlen} - want.qlen) +
                           std::abs(int64_t{h.page_size} - want.page_size);
    const std::pair<int, int64_t> score{differing, spread};
    if (score < best.back().first) {
      best.back() = {score, i};
      std::sort(best.begin(), best.end());
    }
  }
  w.add("; nearest tuned keys:");
  for (const auto& [score, i] : best) {
    if (score.first == std::numeric_limits<int>::max()) break;
    int32_t batch_lo = std::numeric_limits<int32_t>::max(), batch_hi = 0;
    int32_t kv_lo = std::numeric_limits<int32_t>::max(), kv_hi = 0;
    for (uint32_t e = key_entry_[i]; e < key_entry_[i + 1]; ++e) {
      batch_lo = std::min(batch_lo, entries_[e].batch_lo);
      batch_hi = std::max(batch_hi, entries_[e].batch_hi);
      kv_lo = std::min(kv_lo, entries_[e].kv_lo);
      kv_hi = std::max(kv_hi, entries_[e].kv_hi);
    }
    w.add(" [");
    w.add_key(unpack_key(keys_[i]));
    w.add(" batch=%d..%d kv=%d..%d]", batch_lo, batch_hi, kv_lo, kv_hi);
  }
}

}  // namespace mlatune
