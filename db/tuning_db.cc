#include "db/tuning_db.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "db/digest.h"
#include "db/read_only_open.h"
#include "db/schema_sql.h"

namespace mlatune {
namespace {

const char* kTrialColumns =
    "variant, kv_splits, kv_tile, block_rows, workers, disposition, reason, worst_row, "
    "validation_points, validation_runs, rows_checked, max_abs_err, max_rel_err, min_cosine, "
    "max_lse_err, time_median_us, time_spread_us, time_samples, timing_method";

TrialRecord read_trial(const Statement& st, int c) {
  TrialRecord t;
  t.variant = st.column_text(c + 0);
  t.params.kv_splits = static_cast<int32_t>(st.column_int(c + 1));
  t.params.kv_tile = static_cast<int32_t>(st.column_int(c + 2));
  t.params.block_rows = static_cast<int32_t>(st.column_int(c + 3));
  t.params.workers = static_cast<int32_t>(st.column_int(c + 4));
  t.disposition = parse_disposition(st.column_text(c + 5)).value_or(Disposition::kIncorrect);
  t.reason = st.column_text(c + 6);
  t.worst_row = st.column_text(c + 7);
  t.validation_points = static_cast<int32_t>(st.column_int(c + 8));
  t.validation_runs = static_cast<int32_t>(st.column_int(c + 9));
  t.rows_checked = st.column_int(c + 10);
  t.max_abs_err = st.column_opt_double(c + 11);
  t.max_rel_err = st.column_opt_double(c + 12);
  t.min_cosine = st.column_opt_double(c + 13);
  t.max_lse_err = st.column_opt_double(c + 14);
  t.time_median_us = st.column_opt_double(c + 15);
  t.time_spread_us = st.column_opt_double(c + 16);
  if (!st.is_null(c + 17)) t.time_samples = static_cast<int32_t>(st.column_int(c + 17));
  t.timing_method = st.column_text(c + 18);
  return t;
}

BucketKey read_bucket_key(const Statement& st, int c) {
  BucketKey b;
  b.key.heads = static_cast<int32_t>(st.column_int(c + 0));
  b.key.qlen = static_cast<int32_t>(st.column_int(c + 1));
  b.key.q_dtype = parse_dtype(st.column_text(c + 2)).value_or(DType::kBF16);
  b.key.kv_dtype = parse_dtype(st.column_text(c + 3)).value_or(DType::kBF16);
  b.key.page_size = static_cast<int32_t>(st.column_int(c + 4));
  b.key.lse = st.column_int(c + 5) != 0;
  b.batch_lo = static_cast<int32_t>(st.column_int(c + 6));
  b.batch_hi = static_cast<int32_t>(st.column_int(c + 7));
  b.kv_lo = static_cast<int32_t>(st.column_int(c + 8));
  b.kv_hi = static_cast<int32_t>(st.column_int(c + 9));
  return b;
}

void bind_bucket_key(Statement& st, int first, const BucketKey& b) {
  st.bind(first + 0, int64_t{b.key.heads})
      .bind(first + 1, int64_t{b.key.qlen})
      .bind(first + 2, dtype_name(b.key.q_dtype))
      .bind(first + 3, dtype_name(b.key.kv_dtype))
      .bind(first + 4, int64_t{b.key.page_size})
      .bind(first + 5, int64_t{b.key.lse ? 1 : 0})
      .bind(first + 6, int64_t{b.batch_lo})
      .bind(first + 7, int64_t{b.batch_hi})
      .bind(first + 8, int64_t{b.kv_lo})
      .bind(first + 9, int64_t{b.kv_hi});
}

const char* kBucketKeyWhere =
    "heads = ?1 AND qlen = ?2 AND q_dtype = ?3 AND kv_dtype = ?4 AND page_size = ?5 AND lse = ?6 "
    "AND batch_lo = ?7 AND batch_hi = ?8 AND kv_lo = ?9 AND kv_hi = ?10";

std::string now_utc() {
  time_t t = time(nullptr);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// Advisory lock held by a tuner for its whole run. flock() locks are independent of SQLite's own
// fcntl() locks and are released by the kernel if the process dies.
int lock_exclusively(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw DbError(SQLITE_CANTOPEN, path + ": cannot open: " + std::strerror(errno));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      throw DbError(SQLITE_BUSY, path +
                                     ": another mlatune tune is writing this database; wait "
                                     "for it to finish or use another file");
    }
    throw DbError(SQLITE_IOERR, path + ": cannot lock: " + std::strerror(err));
  }
  return fd;
}

}  // namespace

TuningDb::TuningDb(std::unique_ptr<SqliteDb> db, int lock_fd)
    : db_(std::move(db)), lock_fd_(lock_fd) {}

TuningDb::~TuningDb() {
  db_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

std::unique_ptr<TuningDb> TuningDb::open_for_tuning(const std::string& path, Mode mode,
                                                    const Provenance& provenance,
                                                    const std::vector<VariantRecord>& variants) {
  struct stat st {};
  bool exists = ::stat(path.c_str(), &st) == 0;
  if (exists) require_regular_file(path);  // names what it is: a directory, a FIFO, ...
  const bool empty = !exists || st.st_size == 0;
  if (mode == Mode::kCreate && !empty) {
    throw DbError(SQLITE_CANTOPEN, path +
                                       ": already exists; pass --resume to continue tuning it, "
                                       "or choose a new file (nothing was changed)");
  }
  if (mode == Mode::kResume && !exists) {
    throw DbError(SQLITE_CANTOPEN, path + ": --resume needs an existing database (no such file)");
  }
  // SQLite would copy the frames of a stray log into the file.
  if (exists) refuse_stray_wal(path);
  int fd = lock_exclusively(path);
  std::unique_ptr<TuningDb> t;
  try {
    auto db = std::make_unique<SqliteDb>(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    t.reset(new TuningDb(std::move(db), fd));
  } catch (...) {
    ::close(fd);
    throw;
  }
  t->db_->exec("PRAGMA foreign_keys = ON");
  // A tuner killed while creating the file leaves it empty, or with a creation that SQLite rolls
  // back on this first read: nothing was recorded, so resuming it starts it afresh.
  bool never_created = false;
  {
    Statement tables(*t->db_, "SELECT count(*) FROM sqlite_master");
    never_created = tables.step() && tables.column_int(0) == 0 && t->db_->user_version() == 0;
  }
  if (mode == Mode::kCreate || never_created) {
    t->create_schema(provenance, variants);
  } else {
    t->check_resumable(provenance, variants);
  }
  t->db_->exec("PRAGMA journal_mode = WAL");
  t->db_->exec("PRAGMA synchronous = FULL");
  return t;
}

std::unique_ptr<TuningDb> TuningDb::open_read_only(const std::string& path) {
  auto db = open_for_reading(path);  // creates nothing beside the file, refuses a stray -wal
  auto t = std::unique_ptr<TuningDb>(new TuningDb(std::move(db), -1));
  int v = t->db_->user_version();
  if (v != kSchemaVersion) {
    throw DbError(SQLITE_MISMATCH, path + ": schema version " + std::to_string(v) +
                                       ", this tool reads version " +
                                       std::to_string(kSchemaVersion));
  }
  return t;
}

void TuningDb::create_schema(const Provenance& p, const std::vector<VariantRecord>& variants) {
  Transaction tx(*db_);
  db_->exec(kSchemaSql);
  Statement ins(*db_,
                "INSERT INTO provenance (id, tool_version, backend, arch, device_name, "
                "compute_units, driver_version, runtime_version, kernel_build_id, config_name, "
                "config_hash, config_text, created_at, winners_digest) "
                "VALUES (1, ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, '')");
  ins.bind(1, p.tool_version)
      .bind(2, p.device.backend)
      .bind(3, p.device.arch)
      .bind(4, p.device.name)
      .bind(5, int64_t{p.device.compute_units})
      .bind(6, p.device.driver_version)
      .bind(7, p.device.runtime_version)
      .bind(8, p.kernel_build_id)
      .bind(9, p.config_name)
      .bind(10, p.config_hash)
      .bind(11, p.config_text)
      .bind(12, p.created_at.empty() ? now_utc() : p.created_at);
  ins.run();
  Statement var(*db_,
                "INSERT INTO variants (name, backend, code_identity, description) "
                "VALUES (?1, ?2, ?3, ?4)");
  for (const VariantRecord& v : variants) {
    var.reset();
    var.bind(1, v.name).bind(2, v.backend).bind(3, v.code_identity).bind(4, v.description);
    var.run();
  }
  Statement dig(*db_, "UPDATE provenance SET winners_digest = ?1");
  dig.bind(1, compute_winners_digest(*db_));
  dig.run();
  db_->set_user_version(kSchemaVersion);
  tx.commit();
}

void TuningDb::check_resumable(const Provenance& p, const std::vector<VariantRecord>& variants) {
  const std::string& path = db_->path();
  int v = db_->user_version();
  if (v != kSchemaVersion) {
    throw DbError(SQLITE_MISMATCH, path + ": schema version " + std::to_string(v) +
                                       ", this tool writes version " +
                                       std::to_string(kSchemaVersion) + "; cannot resume");
  }
  Provenance stored = provenance();
  if (!p.device.matches(stored.device)) {
    throw DbError(SQLITE_MISMATCH, path + ": tuned on " + stored.device.to_string() + ", this is " +
                                       p.device.to_string() + "; cannot resume");
  }
  if (stored.config_hash != p.config_hash) {
    throw DbError(SQLITE_MISMATCH, path + ": started with config '" + stored.config_name +
                                       "' (hash " + stored.config_hash.substr(0, 12) +
                                       "), which differs from this config; cannot resume");
  }
  std::vector<VariantRecord> have = this->variants();
  for (const VariantRecord& want : variants) {
    auto it = std::find_if(have.begin(), have.end(),
                           [&](const VariantRecord& h) { return h.name == want.name; });
    if (it == have.end()) {
      throw DbError(SQLITE_MISMATCH,
                    path + ": variant " + want.name + " was not part of this run; cannot resume");
    }
    if (it->code_identity != want.code_identity) {
      throw DbError(SQLITE_MISMATCH, path + ": the code of variant " + want.name +
                                         " changed since this database was started (" +
                                         it->code_identity + " -> " + want.code_identity +
                                         "); start a new database");
    }
  }
}

bool TuningDb::has_bucket(const BucketKey& b) {
  Statement st(*db_, std::string("SELECT 1 FROM buckets WHERE ") + kBucketKeyWhere);
  bind_bucket_key(st, 1, b);
  return st.step();
}

void TuningDb::write_bucket(const BucketKey& b, const std::vector<TrialRecord>& trials,
                            std::optional<size_t> winner) {
  if (winner && (*winner >= trials.size() || trials[*winner].disposition != Disposition::kPassed)) {
    throw DbError(SQLITE_CONSTRAINT, db_->path() + ": winner must be a passed trial");
  }
  Transaction tx(*db_);
  Statement ins_b(*db_,
                  "INSERT INTO buckets (heads, qlen, q_dtype, kv_dtype, page_size, lse, batch_lo, "
                  "batch_hi, kv_lo, kv_hi, status, completed_at) "
                  "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
  bind_bucket_key(ins_b, 1, b);
  ins_b.bind(11, winner ? "tuned" : "no_valid_candidate").bind(12, now_utc());
  ins_b.run();
  int64_t bucket_id = sqlite3_last_insert_rowid(db_->get());

  Statement ins_t(*db_, std::string("INSERT INTO trials (bucket_id, ") + kTrialColumns +
                            ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, "
                            "?14, ?15, ?16, ?17, ?18, ?19, ?20)");
  int64_t winner_trial_id = 0;
  for (size_t i = 0; i < trials.size(); ++i) {
    const TrialRecord& t = trials[i];
    ins_t.reset();
    ins_t.bind(1, bucket_id)
        .bind(2, t.variant)
        .bind(3, int64_t{t.params.kv_splits})
        .bind(4, int64_t{t.params.kv_tile})
        .bind(5, int64_t{t.params.block_rows})
        .bind(6, int64_t{t.params.workers})
        .bind(7, disposition_name(t.disposition))
        .bind(8, t.reason)
        .bind(9, t.worst_row)
        .bind(10, int64_t{t.validation_points})
        .bind(11, int64_t{t.validation_runs})
        .bind(12, t.rows_checked)
        .bind(13, t.max_abs_err)
        .bind(14, t.max_rel_err)
        .bind(15, t.min_cosine)
        .bind(16, t.max_lse_err)
        .bind(17, t.time_median_us)
        .bind(18, t.time_spread_us)
        .bind(19, t.time_samples)
        .bind(20, t.timing_method);
    ins_t.run();
    if (winner && i == *winner) winner_trial_id = sqlite3_last_insert_rowid(db_->get());
  }
  if (winner) {
    Statement ins_w(*db_, "INSERT INTO winners (bucket_id, trial_id) VALUES (?1, ?2)");
    ins_w.bind(1, bucket_id).bind(2, winner_trial_id);
    ins_w.run();
  }
  Statement dig(*db_, "UPDATE provenance SET winners_digest = ?1");
  dig.bind(1, compute_winners_digest(*db_));
  dig.run();
  tx.commit();
}

void TuningDb::finalize() {
  db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
  db_->exec("PRAGMA journal_mode = DELETE");
  mlatune::write_snapshot(*db_);
}

std::unique_ptr<TuningDb> TuningDb::open_for_snapshot(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw DbError(SQLITE_CANTOPEN, path + ": " + std::strerror(errno));
  }
  require_regular_file(path);  // names what it is: a directory, a FIFO, ...
  if (st.st_size == 0) throw DbError(SQLITE_NOTADB, path + ": empty file, not an mlatune database");
  refuse_stray_wal(path);  // SQLite would copy the frames of a stray log into the file
  const int fd = lock_exclusively(path);
  std::unique_ptr<TuningDb> t;
  try {
    t.reset(new TuningDb(std::make_unique<SqliteDb>(path, SQLITE_OPEN_READWRITE), fd));
  } catch (...) {
    ::close(fd);
    throw;
  }
  const int v = t->db_->user_version();
  if (v != kSchemaVersion) {
    throw DbError(SQLITE_MISMATCH, path + ": schema version " + std::to_string(v) +
                                       ", this tool writes snapshots for version " +
                                       std::to_string(kSchemaVersion));
  }
  return t;
}

DispatchSnapshot TuningDb::write_snapshot() {
  db_->exec("PRAGMA journal_mode = DELETE");
  return mlatune::write_snapshot(*db_);
}

SnapshotReport TuningDb::snapshot_report(bool compare_with_rows) {
  return inspect_snapshot(*db_, compare_with_rows);
}

Provenance TuningDb::provenance() {
  Statement st(*db_,
               "SELECT tool_version, backend, arch, device_name, compute_units, driver_version, "
               "runtime_version, kernel_build_id, config_name, config_hash, created_at, "
               "config_text FROM provenance WHERE id = 1");
  if (!st.step()) db_->fail(SQLITE_CORRUPT, "no provenance row");
  Provenance p;
  p.tool_version = st.column_text(0);
  p.device.backend = st.column_text(1);
  p.device.arch = st.column_text(2);
  p.device.name = st.column_text(3);
  p.device.compute_units = static_cast<int32_t>(st.column_int(4));
  p.device.driver_version = st.column_text(5);
  p.device.runtime_version = st.column_text(6);
  p.kernel_build_id = st.column_text(7);
  p.config_name = st.column_text(8);
  p.config_hash = st.column_text(9);
  p.created_at = st.column_text(10);
  p.config_text = st.column_text(11);
  return p;
}

std::vector<VariantRecord> TuningDb::variants() {
  Statement st(*db_,
               "SELECT name, backend, code_identity, description FROM variants ORDER BY name");
  std::vector<VariantRecord> out;
  while (st.step()) {
    out.push_back({st.column_text(0), st.column_text(1), st.column_text(2), st.column_text(3)});
  }
  return out;
}

std::vector<BucketSummary> TuningDb::buckets() {
  Statement st(
      *db_,
      std::string("SELECT b.id, b.heads, b.qlen, b.q_dtype, b.kv_dtype, b.page_size, b.lse, "
                  "b.batch_lo, b.batch_hi, b.kv_lo, b.kv_hi, b.status, "
                  "(SELECT count(*) FROM trials x WHERE x.bucket_id = b.id), "
                  "(SELECT count(*) FROM trials x WHERE x.bucket_id = b.id AND "
                  "x.disposition = 'passed'), w.trial_id, ") +
          kTrialColumns +  // unqualified: only trials has these column names
          " FROM buckets b LEFT JOIN winners w ON w.bucket_id = b.id "
          "LEFT JOIN trials t ON t.id = w.trial_id "
          "ORDER BY b.heads, b.qlen, b.q_dtype, b.kv_dtype, b.page_size, b.lse, b.batch_lo, "
          "b.kv_lo");
  std::vector<BucketSummary> out;
  while (st.step()) {
    BucketSummary s;
    s.id = st.column_int(0);
    s.bucket = read_bucket_key(st, 1);
    s.status = st.column_text(11);
    s.trials = st.column_int(12);
    s.passed = st.column_int(13);
    if (!st.is_null(14)) s.winner = read_trial(st, 15);
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<TrialRecord> TuningDb::trials(int64_t bucket_id) {
  Statement st(*db_, std::string("SELECT ") + kTrialColumns +
                         " FROM trials WHERE bucket_id = ?1 ORDER BY disposition <> 'passed', "
                         "time_median_us, variant, kv_splits, kv_tile, block_rows, workers");
  st.bind(1, bucket_id);
  std::vector<TrialRecord> out;
  while (st.step()) out.push_back(read_trial(st, 0));
  return out;
}

}  // namespace mlatune
