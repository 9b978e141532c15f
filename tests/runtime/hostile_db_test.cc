// The hostile-database corpus (docs/reliability.md): damaged and doctored files, generated
// from one intact database, each opened through the C API. A case passes when the runtime refuses
// it with a status allowed for its class, or - for byte-level damage only - opens it and answers
// every probe exactly as the intact file does (the damage hit free space or a field that decides
// nothing). No case may open and answer differently: that would be a choice drawn from a damaged
// or doctored row. Each class prints its count and outcomes (the table in docs/reliability.md);
// an opened case says whether the buckets came from the dispatch snapshot or from the rows.
//
// The intact file is what a finished tune leaves: rollback-journal mode, with a current dispatch
// snapshot (db/snapshot.h). Re-sealed row classes run twice: with the digest re-sealed (the old
// snapshot is left, no longer bound), and with the snapshot re-made as well, as a forger with this
// tool would (`mlatune snapshot` refuses inconsistent rows; such cases keep the unbound one).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "db/records.h"
#include "db/snapshot.h"
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
    ASSERT_NE(std::string(mlatune_db_info(db.get())).find("loaded from its dispatch snapshot"),
              std::string::npos)
        << mlatune_db_info(db.get());
    good_ = probe(db.get());
    SqliteDb sdb(path_, SQLITE_OPEN_READONLY);
    Statement st(sdb, "SELECT data FROM dispatch_snapshot WHERE id = 1");
    ASSERT_TRUE(st.step());
    const std::span<const uint8_t> b = st.column_blob(0);
    blob_.assign(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void TearDown() override {
    remove_db_files(path_);
    std::printf("[corpus] %-58s %5d cases:", name_.c_str(), cases_);
    for (const auto& [what, n] : outcomes_) std::printf(" %s %d;", what.c_str(), n);
    if (tool_refused_ > 0)
      std::printf(" (snapshot re-make refused by the tool: %d)", tool_refused_);
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
    const std::string from =
        std::string(mlatune_db_info(db.get())).find("loaded from its dispatch snapshot") !=
                std::string::npos
            ? " (snapshot)"
            : " (rows)";
    const Answers got = probe(db.get());
    if (got == good_) {
      EXPECT_TRUE(harmless_ok) << what << ": opened, although this class must be refused";
      ++outcomes_["opened, answers unchanged" + from];
      return;
    }
    bool only_stale = stale_ok;
    for (size_t i = 0; i < got.status.size(); ++i) {
      if (got.status[i] != good_.status[i] || got.selection[i] != good_.selection[i]) {
        only_stale = only_stale && got.status[i] == MLATUNE_STATUS_STALE;
      }
    }
    EXPECT_TRUE(only_stale) << what << ": opened and ANSWERED DIFFERENTLY";
    ++outcomes_[only_stale ? "opened, its winners refused as stale" + from : "WRONG ANSWERS"];
  }

  enum class Reseal { kNone, kDigest, kDigestAndSnapshot };
  static constexpr Reseal kResealings[] = {Reseal::kDigest, Reseal::kDigestAndSnapshot};
  static std::string suffix(Reseal r) {
    return r == Reseal::kDigestAndSnapshot ? " [snapshot re-made]" : "";
  }

  // Restores the intact file, applies `sql` (triggers off) and optionally re-seals the digest and
  // re-makes the snapshot (counted when the tool refuses to).
  void doctor(const std::string& sql, Reseal reseal) {
    restore();
    if (reseal != Reseal::kDigestAndSnapshot) {
      edit_db(path_, sql, reseal == Reseal::kDigest);
      return;
    }
    try {
      edit_db(path_, sql, true, true);
    } catch (const DbError&) {
      ++tool_refused_;
    }
  }
  void doctor(const std::string& sql, bool reseal) {
    doctor(sql, reseal ? Reseal::kDigest : Reseal::kNone);
  }

  void restore() {
    write_file(path_, pristine_);
    remove_db_files(path_ + "-wal");
    remove_db_files(path_ + "-journal");
  }

  // Restores the intact file and stores `blob` as its snapshot, as is or re-sealed and re-bound to
  // the file (store_snapshot_blob).
  void with_snapshot(const std::string& blob, bool rebind) {
    restore();
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    store_snapshot_blob(db, std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size()),
                        rebind);
  }
  // Offset of the first entry of the snapshot blob.
  size_t first_entry() const {
    uint32_t variants_bytes = 0;
    for (int i = 0; i < 4; ++i) variants_bytes |= uint32_t(uint8_t(blob_[84 + i])) << (8 * i);
    return 92 + variants_bytes;
  }
  static std::string patched(std::string blob, size_t at, const std::string& bytes) {
    blob.replace(at, bytes.size(), bytes);
    return blob;
  }
  static std::string le32(uint32_t v) {
    return {char(v), char(v >> 8), char(v >> 16), char(v >> 24)};
  }

  // Ids of the buckets that have a winner.
  std::vector<int64_t> tuned_buckets() const {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT bucket_id FROM winners ORDER BY bucket_id");
    std::vector<int64_t> ids;
    while (st.step()) ids.push_back(st.column_int(0));
    return ids;
  }

  std::string path_, pristine_, name_, blob_;
  Answers good_;
  int cases_ = 0, tool_refused_ = 0;
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
  for (const Reseal r : kResealings) {
    for (const char* sql : {"UPDATE provenance SET device_name = 'AMD Instinct MI355X'",
                            "UPDATE provenance SET arch = 'gfx950'",
                            "UPDATE provenance SET compute_units = compute_units * 2",
                            "UPDATE provenance SET backend = 'hip'"}) {
      doctor(sql, r);
      judge(sql + suffix(r), {MLATUNE_STATUS_FOREIGN_DEVICE}, false);
    }
  }
}

TEST_F(HostileDbTest, ProvenanceOrIdentitiesOfAnotherKernelBuild) {
  name_ = "another kernel build: build id or variant identities (re-sealed)";
  // The build id alone is informative (winners are judged per variant); an identity that differs
  // from this build's makes that variant's winners stale.
  for (const Reseal r : kResealings) {
    doctor("UPDATE provenance SET kernel_build_id = 'feedface'", r);
    judge("kernel_build_id" + suffix(r), {}, true);
    for (const char* v : {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1"}) {
      doctor(std::string("UPDATE variants SET code_identity = 'old' WHERE name = '") + v + "'", r);
      judge(v + suffix(r), {}, false, true);
    }
  }
}

TEST_F(HostileDbTest, WinnersEditedToPointElsewhere) {
  name_ = "winner pointed at a failed trial, another bucket's, none (re-sealed)";
  const std::vector<int64_t> tuned = tuned_buckets();
  ASSERT_GE(tuned.size(), 10u);
  for (const Reseal r : kResealings) {
    for (int64_t bucket : tuned) {
      const std::string b = std::to_string(bucket);
      doctor("UPDATE winners SET trial_id = (SELECT id FROM trials WHERE bucket_id = " + b +
                 " AND disposition <> 'passed') WHERE bucket_id = " + b,
             r);
      judge("bucket " + b + " -> failed trial" + suffix(r), {MLATUNE_STATUS_CORRUPT}, false);
      doctor("DELETE FROM winners WHERE bucket_id = " + b, r);
      judge("bucket " + b + " without its winner" + suffix(r), {MLATUNE_STATUS_CORRUPT}, true);
    }
    doctor(
        "DELETE FROM winners WHERE bucket_id = 2; UPDATE winners SET bucket_id = 2 WHERE "
        "bucket_id = 1; INSERT INTO winners SELECT 1, id FROM trials WHERE bucket_id = 2 AND "
        "disposition = 'passed'",
        r);
    judge("winners of buckets 1 and 2 swapped" + suffix(r), {MLATUNE_STATUS_CORRUPT}, false);
  }
}

TEST_F(HostileDbTest, WinnersNamingAVariantThatDoesNotExist) {
  name_ = "winner naming a variant this build does not have (re-sealed)";
  for (const Reseal r : kResealings) {
    for (const char* v : {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1"}) {
      // Renamed everywhere, consistently, as a forger would.
      doctor(std::string("INSERT INTO variants SELECT 'host_imaginary_v9', backend, "
                         "code_identity, description FROM variants WHERE name = '") +
                 v + "'; UPDATE trials SET variant = 'host_imaginary_v9' WHERE variant = '" + v +
                 "'",
             r);
      judge(v + suffix(r), {}, false, true);
      doctor(
          std::string("UPDATE trials SET variant = 'host_nowhere_v1' WHERE variant = '") + v + "'",
          r);
      judge(std::string(v) + " -> unlisted" + suffix(r), {MLATUNE_STATUS_CORRUPT}, false);
    }
  }
}

TEST_F(HostileDbTest, DuplicateAndOverlappingKeys) {
  name_ = "overlapping or duplicated buckets (re-sealed)";
  // Every bucket's copy shifted so that it overlaps the original.
  const std::vector<int64_t> tuned = tuned_buckets();
  for (const Reseal r : kResealings) {
    for (int64_t bucket : tuned) {
      const std::string b = std::to_string(bucket);
      doctor(
          "INSERT INTO buckets (heads, qlen, q_dtype, kv_dtype, page_size, lse, batch_lo, "
          "batch_hi, kv_lo, kv_hi, status, completed_at) SELECT heads, qlen, q_dtype, kv_dtype, "
          "page_size, lse, batch_lo, batch_hi, kv_lo, kv_hi + 1, status, completed_at FROM "
          "buckets WHERE id = " +
              b,
          r);
      judge("bucket " + b + " duplicated" + suffix(r), {MLATUNE_STATUS_CORRUPT}, false);
    }
    doctor("UPDATE buckets SET kv_hi = 2000 WHERE id = 1", r);
    judge("bucket 1 grown into bucket 2" + suffix(r), {MLATUNE_STATUS_CORRUPT}, false);
  }
}

TEST_F(HostileDbTest, LaunchParametersOutsideTheVariantsRange) {
  name_ = "winner launch parameters outside the declared range (re-sealed)";
  for (const Reseal r : kResealings) {
    for (const char* set : {"kv_splits = 0", "kv_splits = 12345", "kv_tile = 7", "workers = 0",
                            "workers = -3", "block_rows = 99", "kv_splits = 2147483647"}) {
      // The schema's CHECKs forbid these; a forger writing the file directly is not bound by them.
      doctor(std::string("PRAGMA ignore_check_constraints = 1; UPDATE trials SET ") + set +
                 " WHERE id IN (SELECT trial_id FROM winners)",
             r);
      judge(set + suffix(r), {MLATUNE_STATUS_CORRUPT}, false);
    }
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
    // The same edit made in WAL mode and folded back: the file's change counter moves all the
    // same, so the snapshot is not used and the rows' digest is compared.
    doctor(std::string("PRAGMA journal_mode = WAL; ") + sql +
               "; PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE",
           false);
    judge(std::string(sql) + " (in WAL mode)", {MLATUNE_STATUS_CORRUPT}, false);
  }
}

// ---- the dispatch snapshot
// -----------------------------------------------------------------------

TEST_F(HostileDbTest, SnapshotTruncated) {
  name_ = "dispatch snapshot truncated (as is; re-sealed and re-bound)";
  std::vector<size_t> lengths = {0, 1, 11, 12, 43, 44, 47, 48, 91, 92, 123, 124, 125};
  for (size_t n = 150; n < blob_.size(); n += 61) lengths.push_back(n);
  lengths.push_back(blob_.size() - 33);
  lengths.push_back(blob_.size() - 1);
  for (size_t n : lengths) {
    with_snapshot(blob_.substr(0, n), false);
    judge("cut to " + std::to_string(n), {MLATUNE_STATUS_CORRUPT}, false);
    if (n >= 48) {
      with_snapshot(blob_.substr(0, n), true);
      judge("cut to " + std::to_string(n) + ", re-sealed", {MLATUNE_STATUS_CORRUPT}, false);
    }
  }
}

TEST_F(HostileDbTest, SnapshotByteFlipped) {
  name_ = "one byte of the dispatch snapshot flipped (every byte)";
  std::mt19937 rng(11);
  for (size_t at = 0; at < blob_.size(); ++at) {
    std::string bad = blob_;
    bad[at] = static_cast<char>(bad[at] ^ (1 + rng() % 255));
    with_snapshot(bad, false);
    judge("byte " + std::to_string(at), {MLATUNE_STATUS_CORRUPT}, false);
  }
}

TEST_F(HostileDbTest, SnapshotOfAnotherFormatVersion) {
  name_ = "dispatch snapshot of another format version (re-sealed, re-bound)";
  for (uint32_t v : {0u, 2u, 3u, 0xffffffffu}) {
    with_snapshot(patched(blob_, 8, le32(v)), true);
    judge("version " + std::to_string(v), {}, true);
  }
}

TEST_F(HostileDbTest, SnapshotFromAnotherDigest) {
  name_ = "dispatch snapshot made from another digest (re-sealed, re-bound)";
  // Another database's snapshot: the intact layout without its last bucket, or with other times.
  for (int variant = 0; variant < 2; ++variant) {
    TestDbSpec other = standard_spec();
    if (variant == 0) other.buckets.pop_back();
    if (variant == 1) other.buckets[0].time_us = 99;
    const std::string other_path = path_ + ".other";
    write_test_db(other_path, other);
    std::string other_blob;
    {
      SqliteDb db(other_path, SQLITE_OPEN_READONLY);
      Statement st(db, "SELECT data FROM dispatch_snapshot");
      ASSERT_TRUE(st.step());
      const auto b = st.column_blob(0);
      other_blob.assign(reinterpret_cast<const char*>(b.data()), b.size());
    }
    remove_db_files(other_path);
    with_snapshot(other_blob, true);
    judge("another database's", {}, true);
  }
  // Its own, with the digest it claims edited.
  for (size_t at : {16, 31, 47}) {
    std::string bad = blob_;
    bad[at] = static_cast<char>(bad[at] ^ 1);
    with_snapshot(bad, true);
    judge("digest byte " + std::to_string(at), {}, true);
  }
}

TEST_F(HostileDbTest, SnapshotWithAbsurdCounts) {
  name_ = "dispatch snapshot with absurd counts (re-sealed, re-bound)";
  const std::vector<std::pair<size_t, uint32_t>> edits = {
      {80, 0xffffffffu}, {80, 1u << 16}, {80, 0},           {80, 4},        {84, 0xffffffffu},
      {84, 0},           {84, 1},        {88, 0xffffffffu}, {88, 1u << 24}, {88, 0},
      {88, 13},          {88, 15},       {88, 1u << 20}};
  for (const auto& [at, v] : edits) {
    with_snapshot(patched(blob_, at, le32(v)), true);
    judge("offset " + std::to_string(at) + " = " + std::to_string(v), {MLATUNE_STATUS_CORRUPT},
          false);
  }
}

TEST_F(HostileDbTest, SnapshotFieldsOutOfRange) {
  name_ = "dispatch snapshot fields out of range (re-sealed, re-bound)";
  const size_t e = first_entry(), e1 = e + 52;
  const std::vector<std::pair<size_t, std::string>> edits = {
      {e, std::string("\0\0", 2)},  // heads 0
      {e, "\x01\x08"},              // heads 2049
      {e + 2, std::string("\0\0", 2)},
      {e + 4, "\x11"},  // qlen 17
      {e + 5, "\x03"},  // q_dtype 3
      {e + 6, "\x09"},  // kv_dtype 9
      {e + 7, "\x80"},  // unknown flag
      {e + 8, le32(0)},
      {e + 12, le32(0)},                                 // batch_hi below batch_lo
      {e + 20, le32(1u << 30)},                          // kv_hi past 2^24
      {e + 24, le32(3)},                                 // variant index past the three listed
      {e + 44, std::string("\0\0\0\0\0\0\xf0\xbf", 8)},  // time -1.0
      {e1, std::string("\x01\0", 2)},                    // out of order
      {92, std::string(1, '\0')},                        // name length 0
      {93, "H"},                                         // a name with a capital
      {92 + 1 + 22 + 1, "\x07"},  // identity of the first variant starts with a control byte
  };
  for (const auto& [at, bytes] : edits) {
    with_snapshot(patched(blob_, at, bytes), true);
    judge("offset " + std::to_string(at), {MLATUNE_STATUS_CORRUPT}, false);
  }
}

TEST_F(HostileDbTest, SnapshotDoctoredConsistently) {
  name_ = "dispatch snapshot doctored, re-sealed and re-bound with this code";
  const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(blob_.data()),
                                       blob_.size());
  auto store = [&](const DispatchSnapshot& s) {
    restore();
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    store_snapshot(db, s);
  };
  // Launch parameters outside each winner's variant space, one winner at a time.
  for (size_t i = 0; i < decode_snapshot(bytes).entries.size(); ++i) {
    DispatchSnapshot s = decode_snapshot(bytes);
    if (!s.entries[i].has_winner) continue;
    s.entries[i].params.kv_splits = 12345;
    store(s);
    judge("entry " + std::to_string(i) + " params", {MLATUNE_STATUS_CORRUPT}, false);
  }
  // A bucket grown into its neighbour (within one key).
  for (size_t i = 0; i + 1 < decode_snapshot(bytes).entries.size(); ++i) {
    DispatchSnapshot s = decode_snapshot(bytes);
    SnapshotEntry& a = s.entries[i];
    const SnapshotEntry& b = s.entries[i + 1];
    if (!(a.bucket.key == b.bucket.key) || a.bucket.batch_lo != b.bucket.batch_lo) continue;
    a.bucket.kv_hi = b.bucket.kv_lo;
    store(s);
    judge("entry " + std::to_string(i) + " overlaps", {MLATUNE_STATUS_CORRUPT}, false);
  }
  // Code identities of another build, and a variant this build lacks: stale, never served.
  for (size_t v = 0; v < decode_snapshot(bytes).variants.size(); ++v) {
    DispatchSnapshot s = decode_snapshot(bytes);
    s.variants[v].code_identity = "forged";
    store(s);
    judge("variant " + std::to_string(v) + " identity", {}, false, true);
  }
  DispatchSnapshot s = decode_snapshot(bytes);
  s.variants.back().name = "host_zzz_v9";  // still last in name order
  store(s);
  judge("a variant renamed", {}, false, true);
}

TEST_F(HostileDbTest, ProvenanceBytesChangedUnderACurrentSnapshot) {
  name_ = "provenance bytes changed without SQLite (snapshot current)";
  for (const std::string& field : {std::string("test-config"), host_device_info().name}) {
    for (size_t k = 0; k < field.size(); ++k) {
      std::string bad = pristine_;
      const size_t at = bad.find(field);
      ASSERT_NE(at, std::string::npos);
      ASSERT_EQ(bad.find(field, at + 1), std::string::npos) << field << " occurs twice";
      bad[at + k] = static_cast<char>(bad[at + k] ^ 0x01);
      write_file(path_, bad);
      judge(field + " byte " + std::to_string(k), {MLATUNE_STATUS_CORRUPT}, false);
    }
  }
}

TEST_F(HostileDbTest, FileChangedThroughSqliteAfterItsSnapshot) {
  name_ = "file changed through SQLite after its snapshot, no answer changed";
  for (const char* sql :
       {"UPDATE trials SET reason = 'edited' WHERE disposition <> 'passed'",
        "UPDATE buckets SET completed_at = 'later'", "UPDATE provenance SET created_at = 'now'",
        "VACUUM", "PRAGMA journal_mode = WAL; PRAGMA journal_mode = DELETE",
        "PRAGMA journal_mode = WAL"}) {
    doctor(sql, false);
    judge(sql, {}, true);
  }
}

}  // namespace
}  // namespace mlatune::test_db
