// The dispatch snapshot's format (db/snapshot.h): what it round-trips, every way a blob can be
// damaged or malformed (refused with a message naming the field and its byte offset), and its
// binding to the winners digest and to the state of the file (SQLite's change counter).
#include "db/snapshot.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/sha256.h"
#include "runtime/test_db.h"

namespace mlatune {
namespace {

using ::testing::HasSubstr;

std::span<const uint8_t> bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// Recomputes the SHA-256 trailer, as anyone with this code can.
void reseal(std::string& blob) {
  Sha256 sha;
  sha.update(blob.data(), blob.size() - 32);
  const std::array<uint8_t, 32> t = sha.finish();
  std::memcpy(blob.data() + blob.size() - 32, t.data(), 32);
}

void put_u32(std::string& blob, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) blob[at + i] = static_cast<char>(v >> (8 * i));
}

SnapshotEntry entry(int32_t heads, int32_t batch_lo, int32_t batch_hi, int32_t kv_lo, int32_t kv_hi,
                    uint32_t variant, LaunchParams p, double t) {
  SnapshotEntry e;
  e.bucket.key = DecodeKey{heads, 1, DType::kBF16, DType::kFP8E4M3FN, 64, true};
  e.bucket.batch_lo = batch_lo;
  e.bucket.batch_hi = batch_hi;
  e.bucket.kv_lo = kv_lo;
  e.bucket.kv_hi = kv_hi;
  e.has_winner = variant != kSnapshotNoVariant;
  e.variant = variant;
  e.params = p;
  e.time_median_us = t;
  return e;
}

// Two variants, four entries: a winner of each, a bucket without a valid kernel, a NaN time.
DispatchSnapshot sample() {
  DispatchSnapshot s;
  s.file_change_counter = 0xdeadbeef;
  for (uint8_t i = 0; i < 32; ++i) {
    s.winners_digest[i] = i;
    s.provenance_sha256[i] = static_cast<uint8_t>(255 - i);
  }
  s.variants = {{"host_split_kv_v1", "0123456789abcdef"}, {"hip_x_v2", "identity two"}};
  std::sort(s.variants.begin(), s.variants.end(),
            [](const SnapshotVariant& a, const SnapshotVariant& b) { return a.name < b.name; });
  s.entries = {
      entry(16, 1, 8, 1, 4096, 0, {4, 64, 0, 8}, 12.5),
      entry(16, 1, 8, 4097, 8192, kSnapshotNoVariant, {0, 0, 0, 0},
            std::numeric_limits<double>::quiet_NaN()),
      entry(16, 9, 64, 1, 8192, 1, {1, 32, 16, 2}, std::numeric_limits<double>::quiet_NaN()),
      entry(128, 1, 65536, 1, 16777216, 1, {-5, 0, 0, 2147483647}, 0.0)};
  return s;
}

constexpr size_t kHeader = 92, kEntry = 52;

size_t first_entry(const std::string& blob) {
  uint32_t variants_bytes;
  std::memcpy(&variants_bytes, blob.data() + 84, 4);
  return kHeader + variants_bytes;
}

std::string decode_error(const std::string& blob) {
  try {
    decode_snapshot(bytes(blob));
  } catch (const SnapshotError& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(SnapshotFormatTest, RoundTripsBitExactly) {
  const DispatchSnapshot s = sample();
  const std::string blob = encode_snapshot(s);
  EXPECT_EQ(blob.size(), kHeader + (1 + 8 + 1 + 12) + (1 + 16 + 1 + 16) + 4 * kEntry + 32);
  EXPECT_EQ(blob.substr(0, 8), "MLATSNAP");
  const DispatchSnapshot back = decode_snapshot(bytes(blob));
  EXPECT_TRUE(back.same_as(s));
  EXPECT_EQ(encode_snapshot(back), blob);
  const SnapshotEnvelope e = open_snapshot_envelope(bytes(blob));
  EXPECT_EQ(e.format_version, kSnapshotFormatVersion);
  EXPECT_EQ(e.file_change_counter, 0xdeadbeefu);
  EXPECT_EQ(e.winners_digest, s.winners_digest);
  EXPECT_EQ(e.provenance_sha256, s.provenance_sha256);
}

TEST(SnapshotFormatTest, EmptySnapshotRoundTrips) {
  DispatchSnapshot s;
  const std::string blob = encode_snapshot(s);
  EXPECT_EQ(blob.size(), kHeader + 32);
  EXPECT_TRUE(decode_snapshot(bytes(blob)).same_as(s));
}

TEST(SnapshotFormatTest, EveryTruncationIsRefused) {
  const std::string blob = encode_snapshot(sample());
  for (size_t n = 0; n < blob.size(); ++n) {
    std::string cut = blob.substr(0, n);
    EXPECT_THAT(decode_error(cut), HasSubstr("dispatch snapshot: ")) << n;
    // Re-sealed, a cut is still refused: by its size, never read past.
    if (n >= 44) {
      reseal(cut);
      EXPECT_THAT(decode_error(cut), HasSubstr("dispatch snapshot: ")) << n << " re-sealed";
    }
  }
  EXPECT_THAT(decode_error(blob.substr(0, 10)), HasSubstr("truncated: 10 bytes"));
}

TEST(SnapshotFormatTest, EveryFlippedBitIsRefusedByTheTrailer) {
  const std::string blob = encode_snapshot(sample());
  for (size_t at = 0; at < blob.size(); ++at) {
    for (int bit = 0; bit < 8; bit += 3) {
      std::string bad = blob;
      bad[at] = static_cast<char>(bad[at] ^ (1 << bit));
      EXPECT_THAT(decode_error(bad), HasSubstr("SHA-256")) << "byte " << at << " bit " << bit;
    }
  }
}

TEST(SnapshotFormatTest, TrailingBytesAreRefused) {
  std::string blob = encode_snapshot(sample());
  blob.insert(blob.size() - 32, "x");
  reseal(blob);
  EXPECT_THAT(decode_error(blob), HasSubstr("implies"));
}

TEST(SnapshotFormatTest, AnotherFormatVersionIsNotDamageButIsNotRead) {
  for (uint32_t v : {0u, 2u, 0xffffffffu}) {
    std::string blob = encode_snapshot(sample());
    put_u32(blob, 8, v);
    reseal(blob);
    EXPECT_EQ(open_snapshot_envelope(bytes(blob)).format_version, v);
    EXPECT_THAT(decode_error(blob), HasSubstr("format version " + std::to_string(v)));
  }
  std::string blob = encode_snapshot(sample());
  blob[0] = 'X';
  reseal(blob);
  EXPECT_THAT(decode_error(blob), HasSubstr("no MLATSNAP magic"));
}

// A re-sealed blob with one field changed: each is refused, and the message names it and where.
TEST(SnapshotFormatTest, EveryFieldIsRangeChecked) {
  const std::string good = encode_snapshot(sample());
  const size_t e0 = first_entry(good), e1 = e0 + kEntry, e2 = e1 + kEntry;
  struct Case {
    size_t at;
    std::vector<uint8_t> bytes;  // written at `at`, little-endian as needed
    std::string message;
  };
  auto u32 = [](uint32_t v) {
    return std::vector<uint8_t>{uint8_t(v), uint8_t(v >> 8), uint8_t(v >> 16), uint8_t(v >> 24)};
  };
  auto f64 = [](double d) {
    uint64_t b;
    std::memcpy(&b, &d, 8);
    std::vector<uint8_t> v;
    for (int i = 0; i < 8; ++i) v.push_back(uint8_t(b >> (8 * i)));
    return v;
  };
  const std::string at_e0 = "entry 0 (at byte " + std::to_string(e0) + "): ";
  const std::vector<Case> cases = {
      {80, u32(0xffffffff), "variant count 4294967295 (at byte 80) over the limit"},
      {80, u32(3), "variant 2 (at byte 148): runs past the variants section"},
      {80, u32(0), "bytes left over after the last variant"},
      {84, u32(0xffffffff), "implies"},
      {84, u32(0), "implies"},
      {88, u32(0xffffffff), "entry count 4294967295 (at byte 88) over the limit"},
      {88, u32(5), "implies"},
      {88, u32(3), "implies"},
      {88, u32(0), "implies"},
      {kHeader, {0}, "variant 0 (at byte 92): a length of 0 bytes"},
      {kHeader, {64}, "variant 0 (at byte 92): a length of 64 bytes"},
      {kHeader + 1, {'H'}, "variant name 'Hip_x_v2' is not [a-z][a-z0-9_]*"},
      {kHeader + 10, {0x07}, "code identity with a byte that is not printable ASCII"},
      {kHeader + 23, {'a'}, "'aost_split_kv_v1' is not after 'hip_x_v2'"},
      {e0, {0, 0}, at_e0 + "heads=0 outside 1..1024"},
      {e0, {0x01, 0x04}, at_e0 + "heads=1025 outside 1..1024"},
      {e0 + 2, {0, 0}, at_e0 + "page_size=0 outside 1..4096"},
      {e0 + 2, {0x01, 0x10}, at_e0 + "page_size=4097 outside 1..4096"},
      {e0 + 4, {17}, at_e0 + "qlen=17 outside 1..16"},
      {e0 + 5, {3}, at_e0 + "q_dtype=3 outside 0..2"},
      {e0 + 6, {255}, at_e0 + "kv_dtype=255 outside 0..2"},
      {e0 + 7, {0x81}, at_e0 + "unknown flag bits 129"},
      {e0 + 8, u32(0), at_e0 + "batch_lo=0 outside 1..65536"},
      {e0 + 12, u32(0), at_e0 + "batch_hi=0 outside 1..65536"},
      {e0 + 12, u32(65537), at_e0 + "batch_hi=65537 outside 1..65536"},
      {e0 + 16, u32(0xffffffff), at_e0 + "kv_lo=-1 outside 1..16777216"},
      {e0 + 20, u32(16777217), at_e0 + "kv_hi=16777217 outside 1..16777216"},
      {e0 + 24, u32(2), at_e0 + "variant index 2 (the snapshot lists 2)"},
      {e0 + 24, u32(kSnapshotNoVariant), at_e0 + "variant index 4294967295"},
      {e0 + 44, f64(-1.0), at_e0 + "time_median_us -1.000000 is not a duration"},
      {e0 + 44, f64(std::numeric_limits<double>::infinity()), at_e0 + "time_median_us inf is"},
      {e1 + 24, u32(0), "a bucket without a winner names a variant"},
      {e1 + 28, u32(1), "a bucket without a winner has launch parameters"},
      {e1 + 44, f64(1.0), "a bucket without a winner has a time"},
      {e1, {15, 0}, "entry 1 (at byte " + std::to_string(e1) + "): not after entry 0"},
      {e2 + 8, u32(1), "entry 2 (at byte " + std::to_string(e2) + "): not after entry 1"},
  };
  for (const Case& c : cases) {
    std::string bad = good;
    std::memcpy(bad.data() + c.at, c.bytes.data(), c.bytes.size());
    reseal(bad);
    EXPECT_THAT(decode_error(bad), HasSubstr(c.message)) << "at " << c.at;
  }
}

TEST(SnapshotFormatTest, TheEncoderRefusesWhatNoReaderWouldTake) {
  auto refused = [](const DispatchSnapshot& s) {
    try {
      encode_snapshot(s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(encoded)");
  };
  DispatchSnapshot s = sample();
  std::swap(s.entries[0], s.entries[2]);
  EXPECT_THAT(refused(s), HasSubstr("entries not in order"));
  s = sample();
  s.entries[0].bucket.key.heads = 0;
  EXPECT_THAT(refused(s), HasSubstr("heads=0"));
  s = sample();
  s.entries[0].variant = 7;
  EXPECT_THAT(refused(s), HasSubstr("variant index 7"));
  s = sample();
  s.variants[0].name = "Bad name";
  EXPECT_THAT(refused(s), HasSubstr("is not [a-z][a-z0-9_]*"));
  s = sample();
  std::swap(s.variants[0], s.variants[1]);
  EXPECT_THAT(refused(s), HasSubstr("not ordered by name"));
  s = sample();
  s.variants[1].code_identity = std::string(256, 'a');
  EXPECT_THAT(refused(s), HasSubstr("code identity of 256 bytes"));
}

// Random valid snapshots survive encode -> decode unchanged; random damage never crashes.
TEST(SnapshotFormatTest, RandomSnapshotsRoundTripAndRandomDamageIsRefused) {
  std::mt19937 rng(5);
  for (int round = 0; round < 50; ++round) {
    DispatchSnapshot s;
    s.file_change_counter = static_cast<uint32_t>(rng());
    const int variants = 1 + static_cast<int>(rng() % 5);
    for (int v = 0; v < variants; ++v) {
      // (std::string::append: GCC 12 warns falsely on "literal" + std::string here.)
      std::string name = std::string("v").append(std::to_string(v));
      std::string identity = std::string("id").append(std::to_string(rng()));
      s.variants.push_back({name, identity});
    }
    for (int i = 0; i < 200; ++i) {
      SnapshotEntry e = entry(1 + static_cast<int32_t>(rng() % 1024), 1 + i * 10, 10 + i * 10, 1,
                              1 + static_cast<int32_t>(rng() % 1000), rng() % variants,
                              {static_cast<int32_t>(rng()), 0, 1, 2}, rng() % 1000 / 7.0);
      if (rng() % 5 == 0) {
        e.has_winner = false;
        e.variant = kSnapshotNoVariant;
        e.params = {0, 0, 0, 0};
        e.time_median_us = std::numeric_limits<double>::quiet_NaN();
      }
      s.entries.push_back(e);
    }
    std::sort(s.entries.begin(), s.entries.end(), snapshot_entry_less);
    const std::string blob = encode_snapshot(s);
    ASSERT_TRUE(decode_snapshot(bytes(blob)).same_as(s));
    std::string bad = blob;
    for (int k = 0; k < 4; ++k) bad[rng() % bad.size()] = static_cast<char>(rng());
    reseal(bad);  // past the trailer: the field checks alone must hold
    try {
      const DispatchSnapshot d = decode_snapshot(bytes(bad));
      EXPECT_EQ(encode_snapshot(d).size(), bad.size());
    } catch (const SnapshotError&) {
    }
  }
}

// ---- binding to a database file ---------------------------------------------------------------

class SnapshotBindingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const ::testing::TestInfo* t = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::string(MLATUNE_TEST_TMPDIR) + "/snapshot_" + t->name() + ".db";
    spec_ = spec();
    test_db::write_test_db(path_, spec_);
  }
  void TearDown() override { test_db::remove_db_files(path_); }

  static test_db::TestDbSpec spec() {
    test_db::TestDbSpec s;
    const DecodeKey k = test_db::make_key(16, 1, DType::kBF16, DType::kBF16, 64, false);
    s.buckets.push_back({k, 1, 8, 1, 4096, false, "host_split_kv_v1", std::nullopt, 12.5});
    s.buckets.push_back({k, 9, 64, 1, 4096, false, "host_online_softmax_v1", std::nullopt, 40.0});
    s.buckets.push_back({k, 1, 64, 4097, 8192, true, "", std::nullopt, 0.0});
    return s;
  }

  // Why the stored snapshot cannot stand for the rows ("" when it can).
  std::string unbound_reason() {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    const ReadTransaction read(db);
    Statement st(db, "SELECT data FROM dispatch_snapshot WHERE id = 1");
    if (!st.step()) return "(none)";
    const SnapshotEnvelope e = open_snapshot_envelope(st.column_blob(0));
    Statement p(db, "SELECT winners_digest FROM provenance");
    p.step();
    return snapshot_unbound_reason(e, read_file_header(db), p.column_text(0));
  }
  std::string stored_blob() {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT data FROM dispatch_snapshot WHERE id = 1");
    if (!st.step()) return "";
    const auto b = st.column_blob(0);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  std::string write_error(const std::string& path) {
    try {
      SqliteDb db(path, SQLITE_OPEN_READWRITE);
      write_snapshot(db);
    } catch (const DbError& e) {
      return e.what();
    }
    return "(written)";
  }

  std::string path_;
  test_db::TestDbSpec spec_;
};

TEST_F(SnapshotBindingTest, AFreshSnapshotIsBoundToTheFileAndItsDigest) {
  EXPECT_EQ(unbound_reason(), "");
  SqliteDb db(path_, SQLITE_OPEN_READONLY);
  const ReadTransaction read(db);
  Statement st(db, "SELECT data, winners_digest FROM dispatch_snapshot");
  ASSERT_TRUE(st.step());
  const DispatchSnapshot s = decode_snapshot(st.column_blob(0));
  EXPECT_EQ(s.file_change_counter, read_file_header(db).change_counter);
  EXPECT_EQ(to_hex(s.winners_digest), compute_winners_digest(db));
  EXPECT_EQ(st.column_text(1), compute_winners_digest(db));  // the informative copy
  EXPECT_EQ(s.entries.size(), 3u);
  EXPECT_EQ(s.variants.size(), 2u);
  // What the rows say, exactly.
  RowsSnapshot rows = snapshot_from_rows(db);
  EXPECT_EQ(rows.problem, "");
  rows.snapshot.file_change_counter = s.file_change_counter;
  rows.snapshot.winners_digest = s.winners_digest;
  EXPECT_TRUE(rows.snapshot.same_as(s));
  SqliteDb other(path_, SQLITE_OPEN_READONLY);
  EXPECT_TRUE(inspect_snapshot(other, true).usable);
}

TEST_F(SnapshotBindingTest, AnyLaterWriteThroughSqliteUnbindsIt) {
  const std::string same_version = "PRAGMA user_version = " + std::to_string(kSchemaVersion);
  const std::string writes[] = {
      "UPDATE trials SET reason = 'x' WHERE disposition <> 'passed'",  // decides nothing
      "UPDATE buckets SET completed_at = 'later'",
      same_version,  // the same value, written again
      "VACUUM",
      "PRAGMA journal_mode = WAL; PRAGMA journal_mode = DELETE",
  };
  for (const std::string& sql : writes) {
    SCOPED_TRACE(sql);
    test_db::write_test_db(path_, spec_);
    ASSERT_EQ(unbound_reason(), "");
    test_db::edit_db(path_, sql, false);
    EXPECT_THAT(unbound_reason(), HasSubstr("the file was changed after its dispatch snapshot"));
  }
  // Rows edited in WAL mode and checkpointed back: the mode switch back is a write.
  test_db::write_test_db(path_, spec_);
  test_db::edit_db(path_,
                   "PRAGMA journal_mode = WAL; UPDATE trials SET kv_splits = 1; "
                   "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE",
                   false);
  EXPECT_THAT(unbound_reason(), HasSubstr("changed after"));
  // Left in WAL mode: never bound.
  test_db::write_test_db(path_, spec_);
  test_db::edit_db(path_, "PRAGMA journal_mode = WAL", false);
  EXPECT_THAT(unbound_reason(), HasSubstr("WAL mode"));
  // Re-sealed rows: another digest.
  test_db::write_test_db(path_, spec_);
  test_db::edit_db(path_, "UPDATE trials SET time_median_us = 1 WHERE disposition = 'passed'",
                   true);
  EXPECT_THAT(unbound_reason(), HasSubstr("was made from winners digest"));
}

TEST_F(SnapshotBindingTest, WriteRefusesRowsThatDoNotMatchTheirDigest) {
  const std::string before = stored_blob();
  test_db::edit_db(path_, "UPDATE trials SET kv_splits = 2 WHERE disposition = 'passed'", false);
  const std::string e = write_error(path_);
  EXPECT_THAT(e, HasSubstr("hash to"));
  EXPECT_THAT(e, HasSubstr("not writing a dispatch snapshot"));
  EXPECT_EQ(stored_blob(), before) << "a refused write must leave the old snapshot";
}

TEST_F(SnapshotBindingTest, WriteRefusesInconsistentRowsNamingTheBucket) {
  test_db::edit_db(path_,
                   "UPDATE winners SET trial_id = (SELECT id FROM trials t WHERE t.bucket_id = 1 "
                   "AND t.disposition = 'incorrect') WHERE bucket_id = 1",
                   true);
  EXPECT_THAT(write_error(path_), HasSubstr("bucket 1: its winner is a trial with disposition "
                                            "'incorrect'"));
  test_db::write_test_db(path_, spec_);
  test_db::edit_db(path_,
                   "PRAGMA ignore_check_constraints = 1; UPDATE variants SET code_identity = "
                   "char(7) WHERE name = 'host_split_kv_v1'",
                   true);
  EXPECT_THAT(write_error(path_), HasSubstr("not printable ASCII"));
}

TEST_F(SnapshotBindingTest, WriteRefusesWalMode) {
  test_db::TestDbSpec wal = spec_;
  wal.wal = true;
  test_db::write_test_db(path_, wal);
  EXPECT_THAT(write_error(path_), HasSubstr("WAL mode"));
}

// A version-2 file from before snapshots: the table is created as schema.sql defines it.
TEST_F(SnapshotBindingTest, AFileFromBeforeSnapshotsGetsTheTable) {
  std::string fresh_sql;
  {
    SqliteDb db(path_, SQLITE_OPEN_READONLY);
    Statement st(db, "SELECT sql FROM sqlite_schema WHERE name = 'dispatch_snapshot'");
    ASSERT_TRUE(st.step());
    fresh_sql = st.column_text(0);
  }
  test_db::edit_db(path_, "DROP TABLE dispatch_snapshot", false);
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    EXPECT_FALSE(has_snapshot_table(db));
    EXPECT_THAT(inspect_snapshot(db, true).detail, HasSubstr("written before snapshots existed"));
  }
  EXPECT_EQ(write_error(path_), "(written)");
  EXPECT_EQ(unbound_reason(), "");
  SqliteDb db(path_, SQLITE_OPEN_READONLY);
  Statement st(db, "SELECT sql FROM sqlite_schema WHERE name = 'dispatch_snapshot'");
  ASSERT_TRUE(st.step());
  EXPECT_EQ(st.column_text(0), fresh_sql);
}

TEST_F(SnapshotBindingTest, InspectionTellsForgedFromDamagedFromCurrent) {
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    EXPECT_THAT(inspect_snapshot(db, true).detail, HasSubstr("identical to its rows"));
    // Forged (by this code, so sealed and bound): the runtime would use it; the audit sees it.
    DispatchSnapshot s = decode_snapshot(bytes(stored_blob()));
    s.entries[0].time_median_us = 1.0;
    store_snapshot(db, s);
    const SnapshotReport quick = inspect_snapshot(db, false);
    EXPECT_TRUE(quick.usable) << quick.detail;
    const SnapshotReport audit = inspect_snapshot(db, true);
    EXPECT_FALSE(audit.usable);
    EXPECT_THAT(audit.detail, HasSubstr("differs from what its rows say"));
  }
  std::string blob = stored_blob();
  blob[100] ^= 1;
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE);
    store_snapshot_blob(db, bytes(blob), false);
    const SnapshotReport r = inspect_snapshot(db, false);
    EXPECT_FALSE(r.usable);
    EXPECT_THAT(r.detail, HasSubstr("damaged"));
  }
}

}  // namespace
}  // namespace mlatune
