#include "db/read_only_open.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <optional>

namespace mlatune {
namespace {

[[noreturn]] void cannot_open(const std::string& path, const std::string& why) {
  throw DbError(SQLITE_CANTOPEN, path + ": " + why);
}

// The size of file `path`, or nullopt when there is none.
std::optional<int64_t> file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return static_cast<int64_t>(st.st_size);
}

// Whether the SQLite header of `path` says WAL mode (file format read or write version 2). A file
// too short or without the SQLite magic is not: SQLite then reports what it is.
bool header_says_wal(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) cannot_open(path, std::string("cannot be read: ") + std::strerror(errno));
  uint8_t h[100];
  const ssize_t n = ::pread(fd, h, sizeof h, 0);
  ::close(fd);
  static constexpr char kMagic[] = "SQLite format 3";  // with its NUL: 16 bytes
  if (n != static_cast<ssize_t>(sizeof h) || std::memcmp(h, kMagic, sizeof kMagic) != 0) {
    return false;
  }
  return h[18] == 2 || h[19] == 2;
}

// SQLite URI for `path` with the immutable flag: no locks, no -shm or -wal files.
std::string immutable_uri(const std::string& path) {
  std::string uri = path.starts_with('/') ? "file://" : "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%%%02x", static_cast<unsigned char>(c));
      uri += hex;
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

void refuse_stray_wal(const std::string& path, int64_t wal_bytes) {
  cannot_open(path, "a write-ahead log " + path + "-wal (" + std::to_string(wal_bytes) +
                        " bytes) lies beside this rollback-journal database; it is not this "
                        "database's (a WAL-mode database says so in its header), so it is not "
                        "read: remove the stray -wal file");
}

}  // namespace

void require_regular_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) cannot_open(path, std::strerror(errno));
  if (S_ISDIR(st.st_mode)) cannot_open(path, "is a directory, not a database file");
  if (S_ISFIFO(st.st_mode)) cannot_open(path, "is a FIFO (named pipe), not a database file");
  if (!S_ISREG(st.st_mode)) {
    cannot_open(path, "is not a regular file (a socket or device), not a database file");
  }
}

void refuse_stray_wal(const std::string& path) {
  const std::optional<int64_t> wal = file_size(path + "-wal");
  if (wal && !header_says_wal(path)) refuse_stray_wal(path, *wal);
}

std::unique_ptr<SqliteDb> open_for_reading(const std::string& path, int flags) {
  require_regular_file(path);
  flags |= SQLITE_OPEN_READONLY;
  const std::optional<int64_t> wal = file_size(path + "-wal");
  bool immutable = false;
  if (!header_says_wal(path)) {
    if (wal) refuse_stray_wal(path, *wal);
  } else if (!wal) {
    immutable = true;  // SQLite removes the log only once every page of it is in the file
  } else if (!file_size(path + "-shm")) {
    if (*wal > 0) {
      cannot_open(path, "its write-ahead log " + path + "-wal (" + std::to_string(*wal) +
                            " bytes) may hold transactions not yet in the file, but " + path +
                            "-shm is missing and reading the log would create it; not read (a "
                            "writer such as `mlatune tune --resume` folds the log into the file)");
    }
    immutable = true;  // an empty log holds nothing
  }
  auto db = immutable ? std::make_unique<SqliteDb>(immutable_uri(path), flags | SQLITE_OPEN_URI)
                      : std::make_unique<SqliteDb>(path, flags);
  try {
    Statement(*db, "SELECT count(*) FROM sqlite_schema").step();
  } catch (const DbError& e) {
    // A read-only connection cannot roll back a hot journal, and SQLite then reads nothing: say
    // what it is and how it goes away, rather than "attempt to write a readonly database".
    if (e.code() != SQLITE_READONLY_ROLLBACK) throw;
    throw DbError(e.code(),
                  path + ": " + path + "-journal is a hot rollback journal: a writer stopped in "
                  "the middle of a transaction, and the file may hold pages it never committed; "
                  "not read. Opening it once for writing (e.g. `mlatune snapshot --db " + path +
                  "`, or any SQLite client) rolls the transaction back");
  }
  return db;
}

}  // namespace mlatune
