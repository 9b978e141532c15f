// mlatune_open creates nothing beside the database and never reads a log that is not the
// database's: a stray -wal beside a finished (rollback-journal) database is refused, naming it,
// and is left as it was.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
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
