// mlatune_open creates nothing beside the database and never reads a log that is not the
// database's: a stray -wal beside a finished (rollback-journal) database is refused, naming it,
// and is left as it was; a hot rollback journal (a writer killed mid-transaction) is refused,
// naming it, until a writer has rolled it back.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "runtime/runtime_fixture.h"

namespace mlatune::test_db {
namespace {

using ::testing::HasSubstr;

bool exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// The log of another database with committed, uncheckpointed frames: a copy taken while its
// writer is open (closing would fold it into its file and remove it).
std::string foreign_wal_bytes(const std::string& other) {
  TestDbSpec spec = standard_spec();
  spec.wal = true;
  write_test_db(other, spec);
  SqliteDb writer(other, SQLITE_OPEN_READWRITE);
  writer.exec("PRAGMA wal_autocheckpoint = 0");
  writer.exec("CREATE TABLE only_in_the_log (x)");
  return read_file(other + "-wal");
}

// A child process writes more pages than its cache holds inside a transaction (so they spill into
// the file, their originals into the journal) and dies without committing.
void die_mid_transaction(const std::string& path) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    sqlite3* db = nullptr;
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) _exit(2);
    const char* sql =
        "PRAGMA cache_size = 1; BEGIN; CREATE TABLE uncommitted (x); "
        "INSERT INTO uncommitted WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c "
        "WHERE i < 500) SELECT randomblob(1000) FROM c;";
    _exit(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(SideFilesTest, AHotJournalIsRefusedNamingItUntilAWriterRollsItBack) {
  const std::string path = temp_path();
  write_test_db(path, standard_spec());
  const std::string committed = read_file(path);
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  const std::string info = mlatune_db_info(db.get());
  db.reset();

  die_mid_transaction(path);
  ASSERT_TRUE(exists(path + "-journal"));
  ASSERT_NE(read_file(path), committed) << "no uncommitted page reached the file";
  const std::string journal = read_file(path + "-journal");
  EXPECT_EQ(open_db(path, &db), MLATUNE_STATUS_IO_ERROR);
  EXPECT_THAT(mlatune_last_error(), HasSubstr(path + "-journal is a hot rollback journal"));
  EXPECT_EQ(read_file(path + "-journal"), journal) << "a reader touched the journal";

  {  // Any writer rolls the transaction back.
    SqliteDb writer(path, SQLITE_OPEN_READWRITE);
    writer.exec("SELECT count(*) FROM sqlite_schema");
  }
  EXPECT_FALSE(exists(path + "-journal"));
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  EXPECT_EQ(mlatune_db_info(db.get()), info);
  remove_db_files(path);
}

TEST(SideFilesTest, StrayWalIsRefusedAndNoShmIsCreated) {
  const std::string path = temp_path();
  write_test_db(path, standard_spec());
  const std::string wal = foreign_wal_bytes(temp_path(".other.db"));
  ASSERT_FALSE(wal.empty());
  write_file(path + "-wal", wal);
  DbHandle db;
  EXPECT_EQ(open_db(path, &db), MLATUNE_STATUS_IO_ERROR);
  EXPECT_THAT(mlatune_last_error(), HasSubstr(path + "-wal ("));
  EXPECT_THAT(mlatune_last_error(), HasSubstr("rollback-journal database"));
  EXPECT_FALSE(exists(path + "-shm")) << "opening created a -shm file";
  EXPECT_EQ(read_file(path + "-wal"), wal) << "the stray log was changed";
  remove_db_files(path);
  remove_db_files(temp_path(".other.db"));
}

TEST(SideFilesTest, WalModeDatabaseWithoutItsLogOpensCreatingNothing) {
  const std::string path = temp_path();
  TestDbSpec spec = standard_spec();
  spec.wal = true;
  write_test_db(path, spec);
  ASSERT_FALSE(exists(path + "-wal"));
  DbHandle db;
  ASSERT_EQ(open_db(path, &db), MLATUNE_STATUS_OK) << mlatune_last_error();
  db.reset();
  EXPECT_FALSE(exists(path + "-wal"));
  EXPECT_FALSE(exists(path + "-shm"));
  remove_db_files(path);
}

}  // namespace
}  // namespace mlatune::test_db
