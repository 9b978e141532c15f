// Everything mlatune_open must refuse, and how: unreadable files, damage, foreign schema versions
// and devices, hand-edited winners. Damage must be reported, never crash and never change answers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;

std::string last_error() { return mlatune_last_error(); }

class OpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = temp_path();
    write_test_db(path_, standard_spec());
  }
  mlatune_status open(const mlatune_open_options* options = nullptr) {
    return open_db(path_, &db_, options);
  }
  std::string path_;
  DbHandle db_;
};

TEST_F(OpenTest, ValidDatabaseOpensAndIsNotModified) {
  const std::string before = read_file(path_);
  ASSERT_EQ(open(), MLATUNE_STATUS_OK) << last_error();
  db_.reset();
  EXPECT_TRUE(read_file(path_) == before) << "opening must not write to the database";
}

TEST_F(OpenTest, WalModeDatabaseOpens) {
  TestDbSpec spec = standard_spec();
  spec.wal = true;
  write_test_db(path_, spec);
  ASSERT_EQ(open(), MLATUNE_STATUS_OK) << last_error();
  const Answers wal = probe(db_.get());
  write_test_db(path_, standard_spec());
  ASSERT_EQ(open(), MLATUNE_STATUS_OK) << last_error();
  EXPECT_TRUE(probe(db_.get()) == wal);
}

// A shipped database often lies in a read-only directory, where SQLite cannot create the -shm
// file that reading a WAL-mode database normally needs.
TEST_F(OpenTest, WalModeDatabaseInAReadOnlyDirectoryOpens) {
  const std::string dir = temp_path(".dir");
  const std::string path = dir + "/tuned.db";
  ::mkdir(dir.c_str(), 0755);
  TestDbSpec spec = standard_spec();
  spec.wal = true;
  write_test_db(path, spec);
  ASSERT_EQ(::chmod(path.c_str(), 0644), 0);
  ASSERT_EQ(::access((path + "-wal").c_str(), F_OK), -1) << "the writer left a -wal file";
  if (::geteuid() != 0) {
    ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
    const mlatune_status st = open_db(path, &db_);
    ::chmod(dir.c_str(), 0755);
    ASSERT_EQ(st, MLATUNE_STATUS_OK) << last_error();
    EXPECT_EQ(probe(db_.get()).status[0], MLATUNE_STATUS_OK);
    return;
  }
  // Root ignores directory permissions: open as an unprivileged user in a child process.
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(100);
    if (::access(dir.c_str(), W_OK) == 0) ::_exit(101);  // the directory must be read-only
    mlatune_db* db = nullptr;
    const mlatune_status st = mlatune_open(path.c_str(), nullptr, &db);
    if (st != MLATUNE_STATUS_OK) {
      std::fprintf(stderr, "%s\n", mlatune_last_error());
      ::_exit(st);
    }
    const mlatune_decode_key k = decode_key(key_a(), 1, 1);
    mlatune_selection s;
    ::_exit(mlatune_lookup(db, &k, &s) == MLATUNE_STATUS_OK ? 0 : 102);
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  EXPECT_EQ(WEXITSTATUS(wstatus), 0) << "status " << WEXITSTATUS(wstatus) << " in the child";
}

TEST_F(OpenTest, MissingFileIsAnIoError) {
  const std::string missing = path_ + ".missing";
  std::remove(missing.c_str());
  ASSERT_EQ(open_db(missing, &db_), MLATUNE_STATUS_IO_ERROR);
  EXPECT_THAT(last_error(), HasSubstr(missing));
  EXPECT_THAT(last_error(), HasSubstr("No such file"));
  // SQLite would have created it; the runtime must not.
  struct stat st;
  EXPECT_NE(::stat(missing.c_str(), &st), 0);
}

TEST_F(OpenTest, DirectoryIsAnIoError) {
  ASSERT_EQ(open_db(MLATUNE_TEST_TMPDIR, &db_), MLATUNE_STATUS_IO_ERROR);
  EXPECT_THAT(last_error(), HasSubstr("directory"));
}

TEST_F(OpenTest, NonRegularFilesAreIoErrors) {
  ASSERT_EQ(open_db("/dev/null", &db_), MLATUNE_STATUS_IO_ERROR);
  EXPECT_THAT(last_error(), HasSubstr("not a regular file"));
  const std::string fifo = temp_path(".fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  ASSERT_EQ(open_db(fifo, &db_), MLATUNE_STATUS_IO_ERROR);  // and does not block
  std::remove(fifo.c_str());
}

TEST_F(OpenTest, EmptyFileIsCorrupt) {
  write_file(path_, "");
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("empty file"));
}

TEST_F(OpenTest, TextFileIsCorrupt) {
  write_file(path_, "heads,qlen,variant\n16,1,host_split_kv_v1\n" + std::string(5000, 'x'));
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("not an SQLite database"));
  EXPECT_THAT(last_error(), HasSubstr(path_));
}

TEST_F(OpenTest, OtherSqliteDatabaseIsNotAnMlatuneDatabase) {
  remove_db_files(path_);
  {
    SqliteDb db(path_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)");
  }
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("not an mlatune database"));
}

TEST_F(OpenTest, MissingTableIsCorrupt) {
  edit_db(path_, "DROP TABLE winners", false);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("missing table 'winners'"));
}

// Where the rows are read (no dispatch snapshot), quick_check covers the whole file: every page
// overwritten with garbage is found. Where a current snapshot is read instead, only the pages of
// the tables that path reads are checked; damage elsewhere is found or cannot change an answer
// (runtime_snapshot_test.cc checks that every page holding part of the snapshot is found).
TEST_F(OpenTest, GarbagePagesAreDetected) {
  for (const bool with_snapshot : {false, true}) {
    SCOPED_TRACE(with_snapshot ? "with a snapshot" : "without a snapshot");
    TestDbSpec spec = standard_spec();
    spec.snapshot = with_snapshot;
    write_test_db(path_, spec);
    ASSERT_EQ(open(), MLATUNE_STATUS_OK) << last_error();
    const Answers good = probe(db_.get());
    db_.reset();
    const std::string whole = read_file(path_);
    const size_t page = 4096, pages = whole.size() / page;
    ASSERT_GE(pages, 4u);
    std::mt19937 rng(99);
    int found = 0;
    for (size_t p = 1; p < pages; ++p) {  // every page but the header page
      std::string bad = whole;
      for (size_t i = 0; i < page; ++i) bad[p * page + i] = static_cast<char>(rng());
      write_file(path_, bad);
      SCOPED_TRACE("page " + std::to_string(p + 1));
      const mlatune_status st = open();
      if (!with_snapshot || st != MLATUNE_STATUS_OK) {
        EXPECT_THAT(st, AnyOf(MLATUNE_STATUS_CORRUPT, MLATUNE_STATUS_IO_ERROR)) << last_error();
        found += st != MLATUNE_STATUS_OK;
        continue;
      }
      EXPECT_TRUE(probe(db_.get()) == good) << "opened with damage and answered differently";
    }
    EXPECT_GE(found, with_snapshot ? 2 : static_cast<int>(pages) - 1);
  }
}

TEST_F(OpenTest, NewerAndOlderSchemaVersionsAreRefused) {
  edit_db(path_, "PRAGMA user_version = 7", false);
  ASSERT_EQ(open(), MLATUNE_STATUS_SCHEMA_MISMATCH);
  const std::string ours = "this runtime's " + std::to_string(kSchemaVersion);
  EXPECT_THAT(last_error(), HasSubstr("schema version 7 is newer than " + ours));
  edit_db(path_, "PRAGMA user_version = 0", false);
  ASSERT_EQ(open(), MLATUNE_STATUS_SCHEMA_MISMATCH);
  EXPECT_THAT(last_error(), HasSubstr("schema version 0 is older than " + ours));
}

TEST_F(OpenTest, MissingProvenanceIsCorrupt) {
  edit_db(path_, "DELETE FROM provenance", false);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("exactly one provenance row, found 0"));
}

TEST_F(OpenTest, ForeignDeviceIsRefusedUnlessAllowed) {
  const std::string edits[] = {
      "UPDATE provenance SET device_name = 'AMD Instinct MI355X'",
      "UPDATE provenance SET arch = 'gfx950'",
      "UPDATE provenance SET compute_units = compute_units + 1",
      "UPDATE provenance SET backend = 'hip'",
  };
  for (const std::string& sql : edits) {
    SCOPED_TRACE(sql);
    write_test_db(path_, standard_spec());
    edit_db(path_, sql, /*recompute_digest=*/true);
    ASSERT_EQ(open(), MLATUNE_STATUS_FOREIGN_DEVICE);
    EXPECT_THAT(last_error(), HasSubstr("tuned on backend="));
    // A GPU database read where this build or machine has no GPU names the missing device.
    EXPECT_THAT(last_error(), HasSubstr(sql.find("'hip'") != std::string::npos
                                            ? "no hip device"
                                            : "this process runs on backend=host"));
    mlatune_open_options allow{nullptr, 1};
    ASSERT_EQ(open(&allow), MLATUNE_STATUS_OK) << last_error();
    EXPECT_THAT(std::string(mlatune_db_info(db_.get())), HasSubstr("FOREIGN DEVICE ACCEPTED"));
    EXPECT_EQ(probe(db_.get()).status[0], MLATUNE_STATUS_OK);
  }
}

TEST_F(OpenTest, DriverAndRuntimeVersionsAreInformativeOnly) {
  edit_db(path_, "UPDATE provenance SET driver_version = '0.0', runtime_version = 'other'", true);
  EXPECT_EQ(open(), MLATUNE_STATUS_OK) << last_error();
}

TEST_F(OpenTest, EditedWinnerWithoutDigestIsCorrupt) {
  edit_db(path_,
          "UPDATE trials SET kv_splits = 1 WHERE id IN (SELECT trial_id FROM winners) "
          "AND variant = 'host_split_kv_v1'",
          false);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("integrity digest mismatch"));
}

TEST_F(OpenTest, EveryDecidingFieldIsCoveredByTheDigest) {
  const std::string edits[] = {
      "UPDATE trials SET time_median_us = 0.5 WHERE id = (SELECT min(trial_id) FROM winners)",
      "UPDATE trials SET min_cosine = 0.5 WHERE id = (SELECT min(trial_id) FROM winners)",
      "UPDATE buckets SET kv_hi = kv_hi + 1 WHERE id = 1",
      "UPDATE buckets SET status = 'no_valid_candidate' WHERE id = 1",
      "UPDATE variants SET code_identity = 'x' WHERE name = 'host_split_kv_v1'",
      "UPDATE provenance SET config_hash = 'beef'",
      "DELETE FROM winners WHERE bucket_id = 2",
  };
  for (const std::string& sql : edits) {
    SCOPED_TRACE(sql);
    write_test_db(path_, standard_spec());
    edit_db(path_, sql, false);
    ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
    EXPECT_THAT(last_error(), HasSubstr("integrity digest mismatch"));
  }
}

TEST_F(OpenTest, LosingTrialsAndTimestampsAreOutsideTheDigest) {
  edit_db(path_,
          "UPDATE trials SET reason = 'edited' WHERE disposition <> 'passed';"
          "UPDATE buckets SET completed_at = 'later'; UPDATE provenance SET created_at = 'now'",
          false);
  ASSERT_EQ(open(), MLATUNE_STATUS_OK) << last_error();
}

// Sets the host_split_kv_v1 winners' kv_splits outside that variant's parameter space.
constexpr const char* kWinnerSplitsOutsideTheSpace =
    "UPDATE trials SET kv_splits = 12345 WHERE id IN (SELECT trial_id FROM winners) "
    "AND variant = 'host_split_kv_v1'";

TEST_F(OpenTest, WinnerOutsideTheParamSpaceIsCorruptEvenWithADigest) {
  const ParamSpace space = builtin_registry().find("host_split_kv_v1")->param_space();
  LaunchParams p = space.enumerate().back();
  p.kv_splits = 12345;
  ASSERT_FALSE(space.contains(p));
  edit_db(path_, kWinnerSplitsOutsideTheSpace, true);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("outside the variant's parameter space"));
  EXPECT_THAT(last_error(), HasSubstr("splits=12345"));
}

// Open checks the rows and computes the digest in one pass: a bad row found before the end still
// reports the digest mismatch (damage), not what the damaged field claims.
TEST_F(OpenTest, AnUnsealedBadRowIsReportedAsADigestMismatch) {
  edit_db(path_, kWinnerSplitsOutsideTheSpace, false);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("integrity digest mismatch"));
  EXPECT_THAT(last_error(), Not(HasSubstr("splits=12345")));
}

TEST_F(OpenTest, WinnerThatIsNotAPassedTrialOfItsBucketIsCorrupt) {
  // A failed trial as winner.
  edit_db(path_,
          "UPDATE winners SET trial_id = (SELECT id FROM trials t WHERE t.bucket_id = 1 AND "
          "t.disposition = 'incorrect') WHERE bucket_id = 1",
          true);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("disposition 'incorrect'"));

  // Another bucket's passed trial as winner (the first bucket's winner moves to bucket 2).
  write_test_db(path_, standard_spec());
  edit_db(path_,
          "DELETE FROM winners WHERE bucket_id = 2;"
          "UPDATE winners SET bucket_id = 2 WHERE bucket_id = 1;"
          "INSERT INTO winners SELECT 1, id FROM trials WHERE bucket_id = 2 AND "
          "disposition = 'passed'",
          true);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("trial of another bucket"));

  // A tuned bucket without a winner.
  write_test_db(path_, standard_spec());
  edit_db(path_, "DELETE FROM winners WHERE bucket_id = 3", true);
  ASSERT_EQ(open(), MLATUNE_STATUS_CORRUPT);
  EXPECT_THAT(last_error(), HasSubstr("tuned but has no winner"));
}

}  // namespace
}  // namespace mlatune::test_db
