// Opening a database to read it, without creating anything beside it or reading what is not its
// committed state. SQLite's own read-only open falls short of both: a WAL-mode file makes it
// create F-wal and F-shm, and any F-wal it finds - even beside a rollback-journal database, where
// it can only be stray (say another database's log copied beside it) - is opened, F-shm created
// for it, and its frames read as if they were the database's. So the side files are looked at
// first, and SQLite is only let open what it reads correctly.
#pragma once

#include <sqlite3.h>

#include <memory>
#include <string>

#include "db/sqlite_util.h"

namespace mlatune {

// Throws DbError(SQLITE_CANTOPEN) naming what `path` is (missing, a directory, a FIFO, a device)
// unless it is a regular file: SQLite's open of a FIFO blocks until a writer comes.
void require_regular_file(const std::string& path);

// Throws DbError(SQLITE_CANTOPEN) naming F-wal when a write-ahead log lies beside `path` but the
// database's header says rollback-journal mode: a WAL-mode database says so in its header, so the
// log is not this database's, and any SQLite connection would read its frames (a writer would
// also copy them into the file). Nothing is removed.
void refuse_stray_wal(const std::string& path);

// A read-only connection to the regular file `path` whose schema has been read (`flags`: more
// SQLITE_OPEN_* flags besides SQLITE_OPEN_READONLY). By what lies beside the file:
// - rollback-journal database: opened as usual (locks keep a writer's transaction out); a stray
//   F-wal is refused (refuse_stray_wal);
// - WAL-mode database without F-wal, or with an empty one and no F-shm: every committed page is
//   in the file, which is read as immutable, creating nothing;
// - WAL-mode database with F-wal and F-shm (a tuner writes it, or was killed): opened as usual,
//   reading the committed transactions of the log only;
// - WAL-mode database whose non-empty F-wal lacks its F-shm: refused, since reading the log would
//   create F-shm;
// - rollback-journal database with a hot F-journal (a writer killed mid-transaction): refused
//   (SQLITE_READONLY_ROLLBACK) naming the journal; a reader never rolls it back, nor reads the
//   uncommitted pages.
// Throws DbError.
std::unique_ptr<SqliteDb> open_for_reading(const std::string& path, int flags = 0);

}  // namespace mlatune
