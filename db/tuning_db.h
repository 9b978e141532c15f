// The tuner's access to a dispatch database: creating it, resuming it, writing one shape bucket
// per transaction, and reading it back for `show` and `explain`.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/records.h"
#include "db/snapshot.h"
#include "db/sqlite_util.h"
#include "mla_decode/registry.h"

namespace mlatune {

struct BucketSummary {
  int64_t id = 0;
  BucketKey bucket;
  std::string status;                 // "tuned" or "no_valid_candidate"
  std::optional<TrialRecord> winner;  // set when tuned
  int64_t trials = 0;                 // candidates tried
  int64_t passed = 0;                 // of which passed
};

class TuningDb {
 public:
  enum class Mode {
    kCreate,  // the file must not exist (or be empty): write a new database
    kResume,  // the file must be a database of the same device, config and variant code
  };

  // Opens for tuning. Takes an exclusive advisory lock on the file for the object's lifetime, so
  // a second tuner is refused with a clear message instead of interleaving writes. Throws DbError.
  static std::unique_ptr<TuningDb> open_for_tuning(const std::string& path, Mode mode,
                                                   const Provenance& provenance,
                                                   const std::vector<VariantRecord>& variants);
  // Opens an existing database read-only (show, explain). Throws DbError.
  static std::unique_ptr<TuningDb> open_read_only(const std::string& path);
  ~TuningDb();

  bool has_bucket(const BucketKey& b);
  // Records a bucket, all its trials, the winner (index into `trials`, which must have passed;
  // nullopt: no candidate passed) and the new winners digest, in one transaction.
  void write_bucket(const BucketKey& b, const std::vector<TrialRecord>& trials,
                    std::optional<size_t> winner);
  // Folds the WAL back into the main file so that the database is a single self-contained file
  // (rollback-journal mode from then on), and writes its dispatch snapshot (db/snapshot.h) from
  // the rows. Called when a tune or a --resume has gone through every bucket of its config.
  void finalize();

  // Opens an existing database to (re)write its dispatch snapshot from its rows (`mlatune
  // snapshot`), taking the same lock as a tuner; the schema version must be this tool's. Throws
  // DbError.
  static std::unique_ptr<TuningDb> open_for_snapshot(const std::string& path);
  // Switches the file to rollback-journal mode (if it is not) and writes the snapshot; the rows
  // and the provenance are not changed. Returns what was written. Throws DbError (rows that do
  // not match their digest, or are inconsistent: nothing is written).
  DispatchSnapshot write_snapshot();
  SnapshotReport snapshot_report(bool compare_with_rows);

  Provenance provenance();
  std::vector<VariantRecord> variants();
  std::vector<BucketSummary> buckets();
  std::vector<TrialRecord> trials(int64_t bucket_id);  // ordered: passed by time, then the rest

 private:
  TuningDb(std::unique_ptr<SqliteDb> db, int lock_fd);
  void create_schema(const Provenance& p, const std::vector<VariantRecord>& variants);
  void check_resumable(const Provenance& p, const std::vector<VariantRecord>& variants);

  std::unique_ptr<SqliteDb> db_;
  int lock_fd_ = -1;
};

}  // namespace mlatune
