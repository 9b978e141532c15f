// Thin RAII helpers over the SQLite C API, shared by the tuner and the runtime. Every failure
// throws DbError carrying the SQLite result code and a message naming the file and the statement.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mlatune {

class DbError : public std::runtime_error {
 public:
  DbError(int code, const std::string& what) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }  // SQLite primary or extended result code

 private:
  int code_;
};

// An open connection; closes on destruction.
class SqliteDb {
 public:
  // flags: SQLITE_OPEN_* flags. Throws DbError if the file cannot be opened.
  SqliteDb(const std::string& path, int flags);
  ~SqliteDb();
  SqliteDb(const SqliteDb&) = delete;
  SqliteDb& operator=(const SqliteDb&) = delete;

  sqlite3* get() const { return db_; }
  const std::string& path() const { return path_; }
  void exec(std::string_view sql);  // runs one or more statements without results
  int user_version();
  void set_user_version(int v);
  [[noreturn]] void fail(int code, std::string_view context) const;

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A prepared statement. Bind indices are 1-based, column indices 0-based.
class Statement {
 public:
  Statement(const SqliteDb& db, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  Statement& bind(int i, int64_t v);
  Statement& bind(int i, double v);
  Statement& bind(int i, std::string_view v);
  Statement& bind_blob(int i, std::span<const uint8_t> v);
  Statement& bind(int i, std::nullopt_t);
  Statement& bind(int i, const std::optional<double>& v);
  Statement& bind(int i, const std::optional<int32_t>& v);

  bool step();  // true while a row is available; false when done
  void run();   // step() once, expecting no row
  void reset();

  bool is_null(int col) const;
  int64_t column_int(int col) const;
  double column_double(int col) const;
  std::string column_text(int col) const;
  // The column's text without a copy: valid until the next step(), reset() or column access of
  // another type on this column.
  std::string_view column_text_view(int col) const;
  std::optional<double> column_opt_double(int col) const;
  // The column's bytes without a copy (empty for NULL): valid until the next step() or reset().
  std::span<const uint8_t> column_blob(int col) const;
  int column_type(int col) const;  // SQLITE_INTEGER, SQLITE_FLOAT, SQLITE_TEXT, SQLITE_NULL, ...

 private:
  const SqliteDb& db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

// BEGIN (deferred) on construction, ROLLBACK on destruction: a read transaction, so that several
// statements see one state of the file. SQLite takes its shared lock at the first read.
class ReadTransaction {
 public:
  explicit ReadTransaction(SqliteDb& db);
  ~ReadTransaction();
  ReadTransaction(const ReadTransaction&) = delete;
  ReadTransaction& operator=(const ReadTransaction&) = delete;

 private:
  SqliteDb& db_;
};

// BEGIN IMMEDIATE on construction; ROLLBACK on destruction unless commit() was called.
class Transaction {
 public:
  explicit Transaction(SqliteDb& db);
  ~Transaction();
  void commit();

 private:
  SqliteDb& db_;
  bool done_ = false;
};

}  // namespace mlatune
