// Builds dispatch databases directly with SQL, for the runtime's tests, its C test's fixture and
// the lookup benchmark. Independent of the tuner: it executes the embedded schema and inserts the
// rows a tuner would (provenance of the host, the builtin variants with their real code
// identities, buckets, a failed and a passed trial per tuned bucket, winners, the digest) and,
// like a finished tune, the dispatch snapshot (db/snapshot.h).
// Header-only so that every test executable can include it without extra build wiring.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "db/digest.h"
#include "db/records.h"
#include "db/schema_sql.h"
#include "db/snapshot.h"
#include "db/sqlite_util.h"
#include "mla_decode/device.h"
#include "mla_decode/registry.h"

namespace mlatune::test_db {

struct TestBucket {
  DecodeKey key;
  int32_t batch_lo = 1, batch_hi = 1;
  int32_t kv_lo = 1, kv_hi = 1;
  bool no_valid = false;                     // status 'no_valid_candidate', no winner
  std::string variant = "host_split_kv_v1";  // the winner's variant
  std::optional<LaunchParams> params;        // default: the variant's last candidate
  double time_us = 10.0;
};

struct TestDbSpec {
  std::vector<TestBucket> buckets;
  std::optional<DeviceInfo> device;  // default: host_device_info()
  int user_version = kSchemaVersion;
  bool wal = false;      // journal_mode=WAL, as the tuner writes (then there is no snapshot)
  bool snapshot = true;  // write the dispatch snapshot, as a finished tune does
  std::vector<VariantRecord> extra_variants;  // variants absent from the builtin registry
};

inline DecodeKey make_key(int32_t heads, int32_t qlen, DType q, DType kv, int32_t page, bool lse) {
  return DecodeKey{heads, qlen, q, kv, page, lse};
}

inline void remove_db_files(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) ::unlink((path + suffix).c_str());
}

inline void write_digest(const SqliteDb& db) {
  Statement(db, "UPDATE provenance SET winners_digest = ?1")
      .bind(1, compute_winners_digest(db))
      .run();
}

inline void write_test_db(const std::string& path, const TestDbSpec& spec) {
  remove_db_files(path);
  const Registry registry = builtin_registry();
  SqliteDb db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  db.exec("PRAGMA synchronous = OFF");  // test data: speed over durability
  if (spec.wal) db.exec("PRAGMA journal_mode = WAL");
  db.exec(kSchemaSql);
  db.set_user_version(spec.user_version);
  Transaction tx(db);

  const DeviceInfo dev = spec.device ? *spec.device : host_device_info();
  Statement(db,
            "INSERT INTO provenance (id, tool_version, backend, arch, device_name, compute_units, "
            "driver_version, runtime_version, kernel_build_id, config_name, config_hash, "
            "config_text, created_at, winners_digest) VALUES (1, 'test', ?1, ?2, ?3, ?4, ?5, ?6, "
            "?7, 'test-config', ?8, '', '2025-01-01T00:00:00Z', '')")
      .bind(1, dev.backend)
      .bind(2, dev.arch)
      .bind(3, dev.name)
      .bind(4, int64_t{dev.compute_units})
      .bind(5, dev.driver_version)
      .bind(6, dev.runtime_version)
      .bind(7, kernel_build_id(registry))
      .bind(8, sha256_hex(""))  // the hash of the (empty) config text, as open checks
      .run();

  Statement add_variant(db, "INSERT INTO variants VALUES (?1, ?2, ?3, ?4)");
  for (const Variant* v : registry.all()) {
    add_variant.reset();
    add_variant.bind(1, v->name())
        .bind(2, backend_name(v->backend()))
        .bind(3, v->code_identity())
        .bind(4, v->description())
        .run();
  }
  for (const VariantRecord& v : spec.extra_variants) {
    add_variant.reset();
    add_variant.bind(1, v.name).bind(2, v.backend).bind(3, v.code_identity).bind(4, v.description);
    add_variant.run();
  }

  Statement add_bucket(db,
                       "INSERT INTO buckets (heads, qlen, q_dtype, kv_dtype, page_size, lse, "
                       "batch_lo, batch_hi, kv_lo, kv_hi, status, completed_at) VALUES "
                       "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, '2025-01-01T00:00:00Z')");
  Statement add_trial(db,
                      "INSERT INTO trials (bucket_id, variant, kv_splits, kv_tile, block_rows, "
                      "workers, disposition, reason, worst_row, validation_points, "
                      "validation_runs, rows_checked, max_abs_err, max_rel_err, min_cosine, "
                      "max_lse_err, time_median_us, time_spread_us, time_samples, timing_method) "
                      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, '', 3, 3, 96, ?9, ?10, ?11, NULL, "
                      "?12, ?13, ?14, 'test')");
  Statement add_winner(db, "INSERT INTO winners (bucket_id, trial_id) VALUES (?1, ?2)");
  // The losing trial of every bucket uses a variant other than the winner's, so that the UNIQUE
  // (bucket, variant, params) key never collides.
  const Variant* loser_a = registry.all().at(0);
  const Variant* loser_b = registry.all().at(1);

  for (const TestBucket& b : spec.buckets) {
    add_bucket.reset();
    add_bucket.bind(1, int64_t{b.key.heads})
        .bind(2, int64_t{b.key.qlen})
        .bind(3, dtype_name(b.key.q_dtype))
        .bind(4, dtype_name(b.key.kv_dtype))
        .bind(5, int64_t{b.key.page_size})
        .bind(6, int64_t{b.key.lse ? 1 : 0})
        .bind(7, int64_t{b.batch_lo})
        .bind(8, int64_t{b.batch_hi})
        .bind(9, int64_t{b.kv_lo})
        .bind(10, int64_t{b.kv_hi})
        .bind(11, b.no_valid ? "no_valid_candidate" : "tuned")
        .run();
    const int64_t bucket_id = sqlite3_last_insert_rowid(db.get());

    const Variant* loser = b.variant == loser_a->name() ? loser_b : loser_a;
    add_trial.reset();
    add_trial.bind(1, bucket_id)
        .bind(2, loser->name())
        .bind(3, int64_t{1})
        .bind(4, int64_t{0})
        .bind(5, int64_t{0})
        .bind(6, int64_t{0})
        .bind(7, "incorrect")
        .bind(8, "test: row 3 exceeds tolerance")
        .bind(9, 0.5)
        .bind(10, 40.0)
        .bind(11, 0.87)
        .bind(12, std::nullopt)
        .bind(13, std::nullopt)
        .bind(14, std::nullopt)
        .run();
    if (b.no_valid) continue;

    LaunchParams p;
    if (b.params) {
      p = *b.params;
    } else if (const Variant* v = registry.find(b.variant)) {
      p = v->param_space().enumerate().back();
    }
    add_trial.reset();
    add_trial.bind(1, bucket_id)
        .bind(2, b.variant)
        .bind(3, int64_t{p.kv_splits})
        .bind(4, int64_t{p.kv_tile})
        .bind(5, int64_t{p.block_rows})
        .bind(6, int64_t{p.workers})
        .bind(7, "passed")
        .bind(8, "")
        .bind(9, 1.0 / 1024)
        .bind(10, 0.25)
        .bind(11, 0.99999)
        .bind(12, b.time_us)
        .bind(13, b.time_us / 20)
        .bind(14, std::optional<int32_t>(31))
        .run();
    add_winner.reset();
    add_winner.bind(1, bucket_id).bind(2, int64_t{sqlite3_last_insert_rowid(db.get())}).run();
  }
  write_digest(db);
  tx.commit();
  if (spec.snapshot && !spec.wal) write_snapshot(db);
}

// Runs `sql` on an existing database with triggers disabled (they forbid exactly the hand edits
// the tests simulate), then optionally rewrites the digest as a careful forger would, and the
// dispatch snapshot as one with this tool would (write_snapshot throws DbError where the rows are
// inconsistent). A snapshot not rewritten stays in the file, bound to its state before the edit.
inline void edit_db(const std::string& path, const std::string& sql, bool recompute_digest,
                    bool rewrite_snapshot = false) {
  SqliteDb db(path, SQLITE_OPEN_READWRITE);
  int enabled = -1;
  sqlite3_db_config(db.get(), SQLITE_DBCONFIG_ENABLE_TRIGGER, 0, &enabled);
  if (enabled != 0) throw std::runtime_error("could not disable triggers");
  db.exec(sql);
  if (recompute_digest) write_digest(db);
  if (rewrite_snapshot) write_snapshot(db);
}

}  // namespace mlatune::test_db
