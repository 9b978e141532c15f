// The hostile-database corpus (issue 5; docs/reliability.md): damaged and doctored files, generated
// from one intact database, each opened through the C API. A case passes when the runtime refuses
// it with a status allowed for its class, or - for byte-level damage only - opens it and answers
// every probe exactly as the intact file does (the damage hit free space or a field that decides
// nothing). No case may open and answer differently: that would be a choice drawn from a damaged
// or doctored row. Each class prints its count and outcomes (the table in docs/reliability.md).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "db/records.h"
#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

class HostileDbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path();
    write_test_db(path_, standard_spec());
    pristine_ = read_file(path_);
    DbHandle db;
    ASSERT_EQ(open_db(path_, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
    good_ = probe(db.get());
  }
  void TearDown() override {
    remove_db_files(path_);
    std::printf("[corpus] %-58s %5d cases:", name_.c_str(), cases_);
    for (const auto& [what, n] : outcomes_) std::printf(" %s %d;", what.c_str(), n);
    std::printf("\n");
  }

  // Opens the file now at path_ and records the outcome. `refusals`: the statuses this class
  // may be refused with; `harmless_ok`: whether opening with unchanged answers is acceptable;
  // `stale_ok`: whether opening is acceptable when every changed answer is a STALE refusal.
  void judge(const std::string& what, const std::set<mlatune_status>& refusals, bool harmless_ok,
             bool stale_ok = false) {
    ++cases_;
    DbHandle db;
    const mlatune_status s = open_db(path_, &db);
    if (s != MLATUNE_STATUS_OK) {
      EXPECT_TRUE(refusals.count(s))
          << what << ": refused as " << mlatune_status_string(s) << ": " << mlatune_last_error();
      EXPECT_NE(std::string(mlatune_last_error()).find(path_), std::string::npos)
          << what << ": the message does not name the file: " << mlatune_last_error();
      ++outcomes_[std::string("refused ") + mlatune_status_string(s)];
      return;
    }
    const Answers got = probe(db.get());
    if (got == good_) {
      EXPECT_TRUE(harmless_ok) << what << ": opened, although this class must be refused";
      ++outcomes_["opened, answers unchanged"];
      return;
    }
    bool only_stale = stale_ok;
    for (size_t i = 0; i < got.status.size(); ++i) {
      if (got.status[i] != good_.status[i] || got.selection[i] != good_.selection[i]) {
        only_stale = only_stale && got.status[i] == MLATUNE_STATUS_STALE;
      }
    }
    EXPECT_TRUE(only_stale) << what << ": opened and ANSWERED DIFFERENTLY";
    ++outcomes_[only_stale ? "opened, its winners refused as stale" : "WRONG ANSWERS"];
  }

  // Restores the intact file, applies `sql` (triggers off) and optionally re-seals the digest.
  void doctor(const std::string& sql, bool reseal) {
    write_file(path_, pristine_);
    remove_db_files(path_ + "-wal");
    edit_db(path_, sql, reseal);
  }

  // Ids of the buckets that have a winner.
  std::vector<int64_t> tuned_buckets() const {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT bucket_id FROM winners ORDER BY bucket_id");
    std::vector<int64_t> ids;
    while (st.step()) ids.push_back(st.column_int(0));
    return ids;
  }

  std::string path_, pristine_, name_;
  Answers good_;
  int cases_ = 0;
  std::map<std::string, int> outcomes_;
};

const std::set<mlatune_status> kDamaged = {MLATUNE_STATUS_CORRUPT, MLATUNE_STATUS_IO_ERROR,
                                           MLATUNE_STATUS_SCHEMA_MISMATCH};

TEST_F(HostileDbTest, TruncatedAtEvery512thByte) {
  name_ = "truncated at every 512-byte offset and 1..100 bytes short";
  for (size_t cut = 0; cut < pristine_.size(); cut += 512) {
    write_file(path_, pristine_.substr(0, cut));
    judge("cut at " + std::to_string(cut), kDamaged, false);
  }
  for (size_t lost : {1, 2, 7, 64, 100}) {
    write_file(path_, pristine_.substr(0, pristine_.size() - lost));
    judge(std::to_string(lost) + " bytes short", kDamaged, true);
  }
}

TEST_F(HostileDbTest, RandomByteFlips) {
  name_ = "one random byte flipped (past the 100-byte header)";
  std::mt19937 rng(20261203);
  for (int i = 0; i < 1000; ++i) {
    std::string bad = pristine_;
    const size_t at = 100 + rng() % (bad.size() - 100);
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    write_file(path_, bad);
    judge("byte " + std::to_string(at), kDamaged, true);
  }
}

TEST_F(HostileDbTest, RandomPageCorruption) {
  name_ = "a random 16..4096-byte run of a page overwritten with noise";
  std::mt19937 rng(7);
  const size_t pages = pristine_.size() / 4096;
  for (int i = 0; i < 300; ++i) {
    std::string bad = pristine_;
    const size_t page = 1 + rng() % (pages - 1);  // not the header page
    const size_t len = 16 + rng() % 4081, at = page * 4096 + rng() % (4096 - len + 1);
    for (size_t j = 0; j < len; ++j) bad[at + j] = static_cast<char>(rng());
    write_file(path_, bad);
    judge("page " + std::to_string(page) + " bytes " + std::to_string(at), kDamaged, true);
  }
}

TEST_F(HostileDbTest, SchemaFromThePastOrTheFuture) {
  name_ = "schema version from the past or the future";
  for (int v : {-1, 0, kSchemaVersion - 1, kSchemaVersion + 1, 1000}) {
    doctor("PRAGMA user_version = " + std::to_string(v), false);
    judge("user_version " + std::to_string(v), {MLATUNE_STATUS_SCHEMA_MISMATCH}, false);
  }
}

TEST_F(HostileDbTest, ProvenanceOfAnotherDevice) {
  name_ = "provenance of another device (digest re-sealed)";
  for (const char* sql : {"UPDATE provenance SET device_name = 'AMD Instinct MI355X'",
                          "UPDATE provenance SET arch = 'gfx950'",
                          "UPDATE provenance SET compute_units = compute_units * 2",
                          "UPDATE provenance SET backend = 'hip'"}) {
    doctor(sql, true);
    judge(sql, {MLATUNE_STATUS_FOREIGN_DEVICE}, false);
  }
}

TEST_F(HostileDbTest, ProvenanceOrIdentitiesOfAnotherKernelBuild) {
  name_ = "another kernel build: build id or variant identities (re-sealed)";
  // The build id alone is informative (winners are judged per variant); an identity that differs
  // from this build's makes that variant's winners stale.
  doctor("UPDATE provenance SET kernel_build_id = 'feedface'", true);
  judge("kernel_build_id", {}, true);
  for (const char* v : {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1"}) {
    doctor(std::string("UPDATE variants SET code_identity = 'old' WHERE name = '") + v + "'", true);
    judge(v, {}, false, true);
  }
}

TEST_F(HostileDbTest, WinnersEditedToPointElsewhere) {
  name_ = "winner pointed at a failed trial, another bucket's, none (re-sealed)";
  const std::vector<int64_t> tuned = tuned_buckets();
  ASSERT_GE(tuned.size(), 10u);
  for (int64_t bucket : tuned) {
    const std::string b = std::to_string(bucket);
    doctor("UPDATE winners SET trial_id = (SELECT id FROM trials WHERE bucket_id = " + b +
               " AND disposition <> 'passed') WHERE bucket_id = " + b,
           true);
    judge("bucket " + b + " -> failed trial", {MLATUNE_STATUS_CORRUPT}, false);
    doctor("DELETE FROM winners WHERE bucket_id = " + b, true);
    judge("bucket " + b + " without its winner", {MLATUNE_STATUS_CORRUPT}, true);
  }
  doctor(
      "DELETE FROM winners WHERE bucket_id = 2; UPDATE winners SET bucket_id = 2 WHERE "
      "bucket_id = 1; INSERT INTO winners SELECT 1, id FROM trials WHERE bucket_id = 2 AND "
      "disposition = 'passed'",
      true);
  judge("winners of buckets 1 and 2 swapped", {MLATUNE_STATUS_CORRUPT}, false);
}

TEST_F(HostileDbTest, WinnersNamingAVariantThatDoesNotExist) {
  name_ = "winner naming a variant this build does not have (re-sealed)";
  for (const char* v : {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1"}) {
    // Renamed everywhere, consistently, as a forger would.
    doctor(std::string("INSERT INTO variants SELECT 'host_imaginary_v9', backend, code_identity, "
                       "description FROM variants WHERE name = '") +
               v + "'; UPDATE trials SET variant = 'host_imaginary_v9' WHERE variant = '" + v + "'",
           true);
    judge(v, {}, false, true);
    doctor(std::string("UPDATE trials SET variant = 'host_nowhere_v1' WHERE variant = '") + v + "'",
           true);
    judge(std::string(v) + " -> unlisted", {MLATUNE_STATUS_CORRUPT}, false);
  }
}

TEST_F(HostileDbTest, DuplicateAndOverlappingKeys) {
  name_ = "overlapping or duplicated buckets (re-sealed)";
  // Every bucket's copy shifted so that it overlaps the original.
  const std::vector<int64_t> tuned = tuned_buckets();
  for (int64_t bucket : tuned) {
    const std::string b = std::to_string(bucket);
    doctor(
        "INSERT INTO buckets (heads, qlen, q_dtype, kv_dtype, page_size, lse, batch_lo, "
        "batch_hi, kv_lo, kv_hi, status, completed_at) SELECT heads, qlen, q_dtype, kv_dtype, "
        "page_size, lse, batch_lo, batch_hi, kv_lo, kv_hi + 1, status, completed_at FROM "
        "buckets WHERE id = " +
            b,
        true);
    judge("bucket " + b + " duplicated", {MLATUNE_STATUS_CORRUPT}, false);
  }
  doctor("UPDATE buckets SET kv_hi = 2000 WHERE id = 1", true);
  judge("bucket 1 grown into bucket 2", {MLATUNE_STATUS_CORRUPT}, false);
}

TEST_F(HostileDbTest, LaunchParametersOutsideTheVariantsRange) {
  name_ = "winner launch parameters outside the declared range (re-sealed)";
  for (const char* set : {"kv_splits = 0", "kv_splits = 12345", "kv_tile = 7", "workers = 0",
                          "workers = -3", "block_rows = 99", "kv_splits = 2147483647"}) {
    // The schema's CHECKs forbid these; a forger writing the file directly is not bound by them.
    doctor(std::string("PRAGMA ignore_check_constraints = 1; UPDATE trials SET ") + set +
               " WHERE id IN (SELECT trial_id FROM winners)",
           true);
    judge(set, {MLATUNE_STATUS_CORRUPT}, false);
  }
}

TEST_F(HostileDbTest, DecidingFieldsEditedWithoutResealing) {
  name_ = "a deciding field edited, digest not re-sealed";
  const char* edits[] = {
      "UPDATE trials SET time_median_us = 0.5 WHERE id = (SELECT min(trial_id) FROM winners)",
      "UPDATE trials SET kv_splits = 1 WHERE id IN (SELECT trial_id FROM winners)",
      "UPDATE buckets SET kv_hi = kv_hi + 1 WHERE id = 3",
      "UPDATE buckets SET batch_lo = 2 WHERE id = 1",
      "UPDATE buckets SET status = 'no_valid_candidate' WHERE id = 1",
      "UPDATE variants SET code_identity = 'x'",
      "UPDATE provenance SET config_hash = 'beef'",
      "UPDATE provenance SET winners_digest = ''",
      "DELETE FROM winners WHERE bucket_id = 2",
      "DELETE FROM buckets WHERE id = 5",
  };
  for (const char* sql : edits) {
    doctor(sql, false);
    judge(sql, {MLATUNE_STATUS_CORRUPT}, false);
  }
}

}  // namespace
}  // namespace mlatune::test_db
