// open_for_reading: reading a database creates nothing beside it, never reads a log that is not
// the database's, and reads the committed transactions of one that is.
#include "db/read_only_open.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace mlatune {
namespace {

namespace fs = std::filesystem;

bool exists(const std::string& path) { return fs::exists(fs::symlink_status(path)); }

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int64_t count_rows(SqliteDb& db) {
  Statement st(db, "SELECT count(*) FROM t");
  EXPECT_TRUE(st.step());
  return st.column_int(0);
}

class ReadOnlyOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::string(MLATUNE_TEST_TMPDIR) + "/read_only_open-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = dir_ + "/tuned.db";
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A database of `rows` rows in table t, in rollback-journal or WAL mode, closed cleanly (no
  // side files left).
  void make_db(const std::string& path, int rows, bool wal) {
    SqliteDb db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("CREATE TABLE t (x INTEGER)");
    for (int i = 0; i < rows; ++i) db.exec("INSERT INTO t VALUES (" + std::to_string(i) + ")");
    if (wal) db.exec("PRAGMA journal_mode = WAL");
  }

  // Commits `rows` more rows to the WAL-mode database `path` and, while the writer is still open
  // (so the log holds them, uncheckpointed), copies its -wal file to `copy_to`.
  void commit_to_wal_and_copy(const std::string& path, int rows, const std::string& copy_to) {
    SqliteDb db(path, SQLITE_OPEN_READWRITE);
    db.exec("PRAGMA wal_autocheckpoint = 0");
    for (int i = 0; i < rows; ++i) db.exec("INSERT INTO t VALUES (" + std::to_string(i) + ")");
    fs::copy_file(path + "-wal", copy_to, fs::copy_options::overwrite_existing);
  }

  void expect_refused_naming(const std::string& part) {
    try {
      open_for_reading(path_);
      FAIL() << "opened";
    } catch (const DbError& e) {
      EXPECT_EQ(e.code(), SQLITE_CANTOPEN);
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  }

  std::string dir_, path_;
};

TEST_F(ReadOnlyOpenTest, RollbackDatabaseOpensAndNothingIsCreated) {
  make_db(path_, 3, false);
  auto db = open_for_reading(path_);
  EXPECT_EQ(count_rows(*db), 3);
  db.reset();
  EXPECT_FALSE(exists(path_ + "-wal"));
  EXPECT_FALSE(exists(path_ + "-shm"));
  EXPECT_FALSE(exists(path_ + "-journal"));
}

TEST_F(ReadOnlyOpenTest, StrayWalOfAnotherDatabaseIsRefusedNotRead) {
  // Another database's log, with 5 committed rows: SQLite alone would read them as this one's
  // (5 rows instead of 1) and create tuned.db-shm.
  make_db(path_, 1, false);
  const std::string other = dir_ + "/other.db";
  make_db(other, 0, true);
  commit_to_wal_and_copy(other, 5, path_ + "-wal");
  const std::string wal_before = read_bytes(path_ + "-wal");
  ASSERT_GT(wal_before.size(), 0u);
  expect_refused_naming(path_ + "-wal (" + std::to_string(wal_before.size()) +
                        " bytes) lies beside this rollback-journal database");
  EXPECT_FALSE(exists(path_ + "-shm")) << "reading created a -shm file";
  EXPECT_EQ(read_bytes(path_ + "-wal"), wal_before) << "the stray log was changed";
  EXPECT_THROW(refuse_stray_wal(path_), DbError);
}

TEST_F(ReadOnlyOpenTest, StrayWalThatIsNoLogIsRefusedToo) {
  make_db(path_, 1, false);
  std::ofstream(path_ + "-wal") << "not a log";
  expect_refused_naming("-wal (9 bytes)");
  EXPECT_FALSE(exists(path_ + "-shm"));
}

TEST_F(ReadOnlyOpenTest, WalModeDatabaseWithoutItsLogIsReadAsItIs) {
  make_db(path_, 4, true);
  ASSERT_FALSE(exists(path_ + "-wal"));
  auto db = open_for_reading(path_);
  EXPECT_EQ(count_rows(*db), 4);
  db.reset();
  EXPECT_FALSE(exists(path_ + "-wal"));
  EXPECT_FALSE(exists(path_ + "-shm"));
  EXPECT_NO_THROW(refuse_stray_wal(path_));
}

TEST_F(ReadOnlyOpenTest, LiveWalIsReadWithItsCommittedTransactions) {
  // A tuner writing (or killed): its log and -shm lie beside the file; the reader sees what the
  // log committed.
  make_db(path_, 2, true);
  SqliteDb writer(path_, SQLITE_OPEN_READWRITE);
  writer.exec("PRAGMA wal_autocheckpoint = 0");
  writer.exec("INSERT INTO t VALUES (7)");
  ASSERT_TRUE(exists(path_ + "-wal") && exists(path_ + "-shm"));
  auto db = open_for_reading(path_);
  EXPECT_EQ(count_rows(*db), 3);
}

TEST_F(ReadOnlyOpenTest, LogWithoutItsShmIsRefusedNotRecreated) {
  make_db(path_, 2, true);
  const std::string saved_wal = dir_ + "/saved-wal";
  commit_to_wal_and_copy(path_, 3, saved_wal);  // the writer's close folds the log in ...
  fs::copy_file(saved_wal, path_ + "-wal");     // ... so put it back, as a copy without -shm
  ASSERT_FALSE(exists(path_ + "-shm"));
  expect_refused_naming("-shm is missing and reading the log would create it");
  EXPECT_FALSE(exists(path_ + "-shm"));
  EXPECT_EQ(read_bytes(path_ + "-wal"), read_bytes(saved_wal));
}

TEST_F(ReadOnlyOpenTest, EmptyLogWithoutShmIsReadAsItIs) {
  make_db(path_, 2, true);
  std::ofstream(path_ + "-wal").flush();
  auto db = open_for_reading(path_);
  EXPECT_EQ(count_rows(*db), 2);
  db.reset();
  EXPECT_FALSE(exists(path_ + "-shm"));
}

TEST_F(ReadOnlyOpenTest, NonRegularFilesAreRefusedWithoutBlocking) {
  const std::string fifo = dir_ + "/fifo.db";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  try {
    open_for_reading(fifo);
    FAIL() << "opened a FIFO";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("is a FIFO (named pipe)"), std::string::npos) << e.what();
  }
  try {
    open_for_reading(dir_);
    FAIL() << "opened a directory";
  } catch (const DbError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_THROW(open_for_reading("/dev/zero"), DbError);
  EXPECT_THROW(open_for_reading(dir_ + "/missing.db"), DbError);
  EXPECT_FALSE(exists(dir_ + "/missing.db"));
}

}  // namespace
}  // namespace mlatune
