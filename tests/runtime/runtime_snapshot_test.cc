// Open through the dispatch snapshot (db/snapshot.h): it gives exactly the table the rows give,
// says in the handle's info which it used and why, falls back to the rows whenever the snapshot
// cannot stand for them, and refuses a damaged or doctored snapshot as the rows path refuses
// damaged or doctored rows.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "db/snapshot.h"
#include "runtime/runtime_fixture.h"
#include "runtime/winner_table.h"

namespace mlatune::test_db {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::unique_ptr<WinnerTable> open_table(const std::string& path, bool use_snapshot,
                                        bool allow_foreign = false) {
  OpenOptions o;
  o.use_snapshot = use_snapshot;
  o.allow_foreign_device = allow_foreign;
  return WinnerTable::open(path, o);
}

// How open ends: "ok" or the status and message of the refusal.
std::string open_outcome(const std::string& path, bool use_snapshot = true) {
  try {
    open_table(path, use_snapshot);
    return "ok";
  } catch (const RuntimeError& e) {
    return std::string(mlatune_status_string(e.status())) + ": " + e.what();
  }
}

// Calls around every edge of every bucket of `spec`, and some between.
std::vector<mlatune_decode_key> probe_keys(const TestDbSpec& spec) {
  std::vector<mlatune_decode_key> keys;
  for (const TestBucket& b : spec.buckets) {
    for (int32_t batch :
         {b.batch_lo - 1, b.batch_lo, (b.batch_lo + b.batch_hi) / 2, b.batch_hi, b.batch_hi + 1}) {
      for (int32_t kv : {b.kv_lo - 1, b.kv_lo, b.kv_hi, b.kv_hi + 1}) {
        keys.push_back(decode_key(b.key, std::max(batch, 1), std::max(kv, 1)));
      }
    }
  }
  keys.push_back(decode_key(make_key(7, 3, DType::kBF16, DType::kBF16, 16, false), 1, 100));
  return keys;
}

// Everything a caller observes: per key the status, the selection's bytes and the explanation.
std::vector<std::string> observe(const WinnerTable& t,
                                 const std::vector<mlatune_decode_key>& keys) {
  std::vector<std::string> out;
  for (const mlatune_decode_key& k : keys) {
    mlatune_selection s;
    const mlatune_status st = t.lookup(k, &s);
    char why[512];
    t.explain(k, why, sizeof why);
    out.push_back(std::to_string(st) + "|" +
                  std::string(reinterpret_cast<const char*>(&s), sizeof s) + "|" + why);
  }
  const TableStats& st = t.stats();
  out.push_back(std::to_string(st.usable) + "/" + std::to_string(st.stale) + "/" +
                std::to_string(st.no_valid) + "/" + std::to_string(t.max_plan_words(64)));
  return out;
}

// A larger layout: random discrete keys, each an irregular grid with gaps, some buckets without
// a valid kernel, winners of every builtin host variant and of a variant this build lacks.
TestDbSpec random_spec(uint32_t seed) {
  std::mt19937 rng(seed);
  TestDbSpec spec;
  spec.extra_variants.push_back({"host_retired_v0", "host", "0ld1d", "gone"});
  const char* variants[] = {"host_split_kv_v1", "host_tiled_kv_v1", "host_online_softmax_v1",
                            "host_persistent_v1", "host_retired_v0"};
  const DType dtypes[] = {DType::kBF16, DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ};
  for (int k = 0; k < 6; ++k) {
    const DecodeKey key =
        make_key(1 + static_cast<int32_t>(rng() % 128), 1 + k % 4, dtypes[rng() % 3],
                 dtypes[rng() % 3], 1 << static_cast<int>(rng() % 8), rng() % 2 == 0);
    int32_t batch = 1;
    for (int i = 0; i < 5; ++i) {
      const int32_t batch_hi = batch + static_cast<int32_t>(rng() % 40);
      int32_t kv = key.qlen;
      for (int j = 0; j < 6; ++j) {
        const int32_t kv_hi = kv + static_cast<int32_t>(rng() % 5000);
        if (rng() % 7 != 0) {  // else a gap
          TestBucket b;
          b.key = key;
          b.batch_lo = batch, b.batch_hi = batch_hi, b.kv_lo = kv, b.kv_hi = kv_hi;
          b.no_valid = rng() % 9 == 0;
          b.variant = variants[rng() % 5];
          b.time_us = static_cast<double>(rng() % 100000) / 64.0;
          spec.buckets.push_back(b);
        }
        kv = kv_hi + 1 + static_cast<int32_t>(rng() % 3);
      }
      batch = batch_hi + 1 + static_cast<int32_t>(rng() % 3);
    }
  }
  return spec;
}

class SnapshotOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path();
    write_test_db(path_, standard_spec());
  }
  void TearDown() override { remove_db_files(path_); }

  std::string stored_blob() {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT data FROM dispatch_snapshot WHERE id = 1");
    if (!st.step()) return "";
    const auto b = st.column_blob(0);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void store(const std::string& blob, bool rebind) {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    store_snapshot_blob(db, std::span(reinterpret_cast<const uint8_t*>(blob.data()), blob.size()),
                        rebind);
  }
  DispatchSnapshot stored() {
    const std::string b = stored_blob();
    return decode_snapshot(std::span(reinterpret_cast<const uint8_t*>(b.data()), b.size()));
  }
  void store(const DispatchSnapshot& s) {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    store_snapshot(db, s);
  }

  std::string path_;
};

TEST_F(SnapshotOpenTest, GivesExactlyTheTableTheRowsGive) {
  std::vector<TestDbSpec> specs = {standard_spec(), random_spec(1), random_spec(2), random_spec(3)};
  for (size_t i = 0; i < specs.size(); ++i) {
    SCOPED_TRACE("spec " + std::to_string(i));
    write_test_db(path_, specs[i]);
    const auto fast = open_table(path_, true);
    const auto rows = open_table(path_, false);
    ASSERT_TRUE(fast->from_snapshot());
    ASSERT_FALSE(rows->from_snapshot());
    const std::vector<mlatune_decode_key> keys = probe_keys(specs[i]);
    EXPECT_TRUE(observe(*fast, keys) == observe(*rows, keys));
    if (i > 0) {
      EXPECT_GT(fast->stats().stale, 0);  // the retired variant's winners
      EXPECT_GT(fast->stats().no_valid, 0);
    }
  }
}

TEST_F(SnapshotOpenTest, StaleWinnersReadTheSameOnBothPaths) {
  // A variant's code edited, as a retune of another build would leave it (sealed and snapshot).
  edit_db(path_, "UPDATE variants SET code_identity = 'old' WHERE name = 'host_tiled_kv_v1'", true,
          true);
  const auto fast = open_table(path_, true);
  const auto rows = open_table(path_, false);
  ASSERT_TRUE(fast->from_snapshot());
  const std::vector<mlatune_decode_key> keys = probe_keys(standard_spec());
  EXPECT_TRUE(observe(*fast, keys) == observe(*rows, keys));
  char why[512];
  fast->explain(decode_key(key_c(), 1, 2), why, sizeof why);
  EXPECT_THAT(std::string(why),
              HasSubstr("winner 'host_tiled_kv_v1' of bucket heads=128 qlen=2 q=bf16 "
                        "kv=fp8_e4m3fnuz page=1 lse=0 batch=1..10 kv=2..100 is stale: tuned with "
                        "code identity old, this build has "));
}

TEST_F(SnapshotOpenTest, TheInfoSaysWhereTheBucketsCameFromAndWhy) {
  EXPECT_THAT(open_table(path_, true)->info(), HasSubstr("loaded from its dispatch snapshot"));
  EXPECT_THAT(open_table(path_, false)->info(),
              HasSubstr("loaded from its rows: the caller asked for the rows"));

  TestDbSpec spec = standard_spec();
  spec.snapshot = false;
  write_test_db(path_, spec);
  EXPECT_THAT(open_table(path_, true)->info(),
              HasSubstr("loaded from its rows: it has no dispatch snapshot (`mlatune snapshot"));

  write_test_db(path_, standard_spec());
  edit_db(path_, "PRAGMA journal_mode = WAL", false);  // as a resumed tune runs
  EXPECT_THAT(open_table(path_, true)->info(), HasSubstr("loaded from its rows: the database is "
                                                         "in WAL mode"));

  write_test_db(path_, standard_spec());
  edit_db(path_, "UPDATE buckets SET completed_at = 'later'", false);
  EXPECT_THAT(open_table(path_, true)->info(),
              HasSubstr("loaded from its rows: the file was changed after its dispatch snapshot "
                        "was written (SQLite change counter"));

  write_test_db(path_, standard_spec());
  edit_db(path_, "UPDATE provenance SET kernel_build_id = 'feedface'", true);
  EXPECT_THAT(
      open_table(path_, true)->info(),
      HasSubstr("loaded from its rows: its dispatch snapshot was made from winners digest"));
}

// A file from before snapshots (no table) opens from its rows; `mlatune snapshot`'s write adds
// the table and the snapshot, and the answers do not change.
TEST_F(SnapshotOpenTest, AFileFromBeforeSnapshotsIsMigratedWithoutChangingAnAnswer) {
  edit_db(path_, "DROP TABLE dispatch_snapshot", false);
  const std::vector<mlatune_decode_key> keys = probe_keys(standard_spec());
  const auto before = open_table(path_, true);
  ASSERT_FALSE(before->from_snapshot());
  std::string rows_digest;
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    rows_digest = compute_winners_digest(db);
    write_snapshot(db);
    EXPECT_EQ(compute_winners_digest(db), rows_digest) << "the rows must not change";
  }
  const auto after = open_table(path_, true);
  ASSERT_TRUE(after->from_snapshot());
  EXPECT_TRUE(observe(*before, keys) == observe(*after, keys));
}

TEST_F(SnapshotOpenTest, ADamagedSnapshotIsCorruptWhateverItsBinding) {
  std::string blob = stored_blob();
  blob[blob.size() / 2] ^= 0x10;
  store(blob, false);
  EXPECT_THAT(open_outcome(path_),
              HasSubstr("corrupt: " + path_ + ": dispatch snapshot: damaged: the SHA-256 of its"));
  store(stored_blob().substr(0, 40), false);
  EXPECT_THAT(open_outcome(path_), HasSubstr("dispatch snapshot: truncated: 40 bytes"));
  // A snapshot that is not used is still part of the file: its damage is reported.
  write_test_db(path_, standard_spec());
  blob = stored_blob();
  edit_db(path_, "UPDATE buckets SET completed_at = 'later'", false);
  blob[10] ^= 1;
  store(blob, false);
  EXPECT_THAT(open_outcome(path_), HasSubstr("dispatch snapshot: damaged"));
}

TEST_F(SnapshotOpenTest, AbsurdCountsAreRefusedBeforeAnythingIsAllocatedFromThem) {
  const std::string good = stored_blob();
  for (const auto& [at, value] : std::vector<std::pair<size_t, uint32_t>>{
           {88, 0xffffffffu}, {88, 1u << 24}, {80, 0xffffffffu}, {84, 0xfffffff0u}}) {
    std::string blob = good;
    for (int i = 0; i < 4; ++i) blob[at + i] = static_cast<char>(value >> (8 * i));
    store(blob, true);  // re-sealed and bound, as a forger with this code could
    const std::string outcome = open_outcome(path_);
    EXPECT_THAT(outcome, HasSubstr("corrupt: " + path_ + ": dispatch snapshot: ")) << at;
  }
}

TEST_F(SnapshotOpenTest, ADoctoredButSealedSnapshotStillMeetsEveryCheckOfTheRows) {
  // Launch parameters outside the variant's space.
  DispatchSnapshot s = stored();
  s.entries[0].params.kv_splits = 12345;
  store(s);
  EXPECT_THAT(open_outcome(path_), HasSubstr("outside the variant's parameter space"));
  EXPECT_THAT(open_outcome(path_), HasSubstr("splits=12345"));
  // Two buckets of a key overlapping.
  write_test_db(path_, standard_spec());
  s = stored();
  s.entries[0].bucket.kv_hi = s.entries[1].bucket.kv_lo;
  store(s);
  EXPECT_THAT(open_outcome(path_), HasSubstr("corrupt: " + path_ + ": overlapping buckets"));
  // A variant renamed to one this build lacks, or its identity changed: stale, not served.
  write_test_db(path_, standard_spec());
  s = stored();
  for (SnapshotVariant& v : s.variants) v.code_identity = "forged";
  store(s);
  {
    const auto t = open_table(path_, true);
    ASSERT_TRUE(t->from_snapshot());
    EXPECT_EQ(t->stats().usable, 0);
    EXPECT_GT(t->stats().stale, 0);
  }
  // Another format version (sealed and bound): not read; the rows are.
  write_test_db(path_, standard_spec());
  std::string blob = stored_blob();
  blob[8] = 2;
  store(blob, true);
  {
    const auto t = open_table(path_, true);
    EXPECT_FALSE(t->from_snapshot());
    EXPECT_THAT(t->info(), HasSubstr("format version 2, this build reads version 1"));
  }
  // The snapshot of another database, bound to this file: made from another digest.
  TestDbSpec other = standard_spec();
  other.buckets.pop_back();
  const std::string other_path = temp_path(".other.db");
  write_test_db(other_path, other);
  {
    SqliteDb db(other_path, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT data FROM dispatch_snapshot");
    ASSERT_TRUE(st.step());
    const auto b = st.column_blob(0);
    store(std::string(reinterpret_cast<const char*>(b.data()), b.size()), true);
  }
  remove_db_files(other_path);
  {
    const auto t = open_table(path_, true);
    EXPECT_FALSE(t->from_snapshot());
    EXPECT_THAT(t->info(), HasSubstr("was made from winners digest"));
  }
}

// The provenance is not rehashed with the buckets on this path: the snapshot's record of it is
// compared instead, so that a damaged provenance is still damage, not a foreign device.
TEST_F(SnapshotOpenTest, ProvenanceBytesChangedUnderTheSnapshotAreCorrupt) {
  for (const std::string& field : {std::string("test-config"), host_device_info().arch}) {
    SCOPED_TRACE(field);
    write_test_db(path_, standard_spec());
    std::string file = read_file(path_);
    const size_t at = file.find(field);
    ASSERT_NE(at, std::string::npos);
    ASSERT_EQ(file.find(field, at + 1), std::string::npos) << "the field occurs twice";
    file[at + 1] = static_cast<char>(file[at + 1] ^ 0x20);  // case flip: same length
    write_file(path_, file);
    EXPECT_THAT(open_outcome(path_), HasSubstr("corrupt: " + path_ +
                                               ": integrity digest mismatch: provenance records "));
    EXPECT_THAT(open_outcome(path_), HasSubstr("does not hash to what its dispatch snapshot "
                                               "recorded"));
    EXPECT_THAT(open_outcome(path_, false), HasSubstr("integrity digest mismatch"));
  }
}

TEST_F(SnapshotOpenTest, TheDeviceIsCheckedOnThisPathToo) {
  edit_db(path_, "UPDATE provenance SET device_name = 'AMD Instinct MI355X'", true, true);
  EXPECT_THAT(open_outcome(path_), HasSubstr("foreign device"));
  const auto t = open_table(path_, true, true);
  EXPECT_TRUE(t->from_snapshot());
  EXPECT_THAT(t->info(), HasSubstr("FOREIGN DEVICE ACCEPTED"));
  // A schema version from elsewhere is refused before any snapshot is looked at.
  write_test_db(path_, standard_spec());
  edit_db(path_, "PRAGMA user_version = " + std::to_string(kSchemaVersion + 1), false);
  EXPECT_THAT(open_outcome(path_), HasSubstr("schema mismatch"));
}

// Every page overwritten with garbage: a page holding part of the snapshot is always found
// (quick_check of its table, or its SHA-256); any other page either is found or cannot change an
// answer, because this path does not read it.
TEST_F(SnapshotOpenTest, EveryGarbagePageIsFoundOrHarmless) {
  TestDbSpec big = random_spec(4);
  for (int i = 0; i < 3; ++i) {
    TestDbSpec more = random_spec(10 + i);
    for (TestBucket& b : more.buckets) b.key.heads += 150 * (i + 1);
    big.buckets.insert(big.buckets.end(), more.buckets.begin(), more.buckets.end());
  }
  write_test_db(path_, big);
  const std::string whole = read_file(path_);
  const std::string blob = stored_blob();
  ASSERT_GT(blob.size(), 3 * 4096u) << "the snapshot should span several overflow pages";
  const std::vector<mlatune_decode_key> keys = probe_keys(big);
  const std::vector<std::string> good = observe(*open_table(path_, true), keys);
  int snapshot_pages = 0, found = 0, harmless = 0;
  std::mt19937 rng(3);
  for (size_t page = 1; page < whole.size() / 4096; ++page) {  // not the header page
    const std::string_view content(whole.data() + page * 4096, 4096);
    bool holds_snapshot = false;
    for (size_t at = 0; at + 64 <= blob.size() && !holds_snapshot; at += 256) {
      holds_snapshot = content.find(std::string_view(blob).substr(at, 64)) != content.npos;
    }
    std::string bad = whole;
    for (size_t i = 0; i < 4096; ++i) bad[page * 4096 + i] = static_cast<char>(rng());
    write_file(path_, bad);
    SCOPED_TRACE("page " + std::to_string(page + 1));
    std::unique_ptr<WinnerTable> t;
    try {
      t = open_table(path_, true);
    } catch (const RuntimeError& e) {
      EXPECT_TRUE(e.status() == MLATUNE_STATUS_CORRUPT || e.status() == MLATUNE_STATUS_IO_ERROR)
          << e.what();
      ++found;
      snapshot_pages += holds_snapshot;
      continue;
    }
    EXPECT_FALSE(holds_snapshot) << "a damaged snapshot page went unnoticed";
    EXPECT_TRUE(observe(*t, keys) == good) << "opened and answered differently";
    ++harmless;
  }
  EXPECT_GE(snapshot_pages, 3);
  std::printf("[pages] %d found (%d of them the snapshot's), %d harmless\n", found, snapshot_pages,
              harmless);
}

}  // namespace
}  // namespace mlatune::test_db
