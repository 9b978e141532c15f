#include "db/sqlite_util.h"

namespace mlatune {

SqliteDb::SqliteDb(const std::string& path, int flags) : path_(path) {
  int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close(db_);
    db_ = nullptr;
    throw DbError(rc, path + ": cannot open database: " + msg);
  }
  sqlite3_extended_result_codes(db_, 1);
  // Another process (a tuner writing, a reader opening) may hold a lock briefly: wait, then fail
  // with SQLITE_BUSY rather than hang forever.
  sqlite3_busy_timeout(db_, 10000);
}

SqliteDb::~SqliteDb() { sqlite3_close(db_); }

void SqliteDb::fail(int code, std::string_view context) const {
  throw DbError(code, path_ + ": " + std::string(context) + ": " + sqlite3_errmsg(db_));
}

void SqliteDb::exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    throw DbError(rc, path_ + ": " + msg);
  }
}

int SqliteDb::user_version() {
  Statement st(*this, "PRAGMA user_version");
  if (!st.step()) fail(SQLITE_ERROR, "PRAGMA user_version returned no row");
  return static_cast<int>(st.column_int(0));
}

void SqliteDb::set_user_version(int v) { exec("PRAGMA user_version = " + std::to_string(v)); }

Statement::Statement(const SqliteDb& db, std::string_view sql) : db_(db), sql_(sql) {
  int rc =
      sqlite3_prepare_v2(db.get(), sql_.data(), static_cast<int>(sql_.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) db_.fail(rc, "preparing '" + sql_ + "'");
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int i, int64_t v) {
  int rc = sqlite3_bind_int64(stmt_, i, v);
  if (rc != SQLITE_OK)
    db_.fail(rc, "binding parameter " + std::to_string(i) + " of '" + sql_ + "'");
  return *this;
}

Statement& Statement::bind(int i, double v) {
  int rc = sqlite3_bind_double(stmt_, i, v);
  if (rc != SQLITE_OK)
    db_.fail(rc, "binding parameter " + std::to_string(i) + " of '" + sql_ + "'");
  return *this;
}

Statement& Statement::bind(int i, std::string_view v) {
  int rc = sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK)
    db_.fail(rc, "binding parameter " + std::to_string(i) + " of '" + sql_ + "'");
  return *this;
}

Statement& Statement::bind_blob(int i, std::span<const uint8_t> v) {
  int rc = sqlite3_bind_blob64(stmt_, i, v.data(), v.size(), SQLITE_TRANSIENT);
  if (rc != SQLITE_OK)
    db_.fail(rc, "binding parameter " + std::to_string(i) + " of '" + sql_ + "'");
  return *this;
}

Statement& Statement::bind(int i, std::nullopt_t) {
  int rc = sqlite3_bind_null(stmt_, i);
  if (rc != SQLITE_OK)
    db_.fail(rc, "binding parameter " + std::to_string(i) + " of '" + sql_ + "'");
  return *this;
}

Statement& Statement::bind(int i, const std::optional<double>& v) {
  return v ? bind(i, *v) : bind(i, std::nullopt);
}

Statement& Statement::bind(int i, const std::optional<int32_t>& v) {
  return v ? bind(i, int64_t{*v}) : bind(i, std::nullopt);
}

bool Statement::step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  db_.fail(rc, "executing '" + sql_ + "'");
}

void Statement::run() {
  if (step()) db_.fail(SQLITE_MISUSE, "'" + sql_ + "' returned a row where none was expected");
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Statement::is_null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
int64_t Statement::column_int(int col) const { return sqlite3_column_int64(stmt_, col); }
double Statement::column_double(int col) const { return sqlite3_column_double(stmt_, col); }
int Statement::column_type(int col) const { return sqlite3_column_type(stmt_, col); }

std::string Statement::column_text(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n)) : std::string();
}

std::string_view Statement::column_text_view(int col) const {
  const unsigned char* p = sqlite3_column_text(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(n))
           : std::string_view();
}

std::span<const uint8_t> Statement::column_blob(int col) const {
  const void* p = sqlite3_column_blob(stmt_, col);
  const int n = sqlite3_column_bytes(stmt_, col);
  if (!p || n <= 0) return {};
  return {static_cast<const uint8_t*>(p), static_cast<size_t>(n)};
}

std::optional<double> Statement::column_opt_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return column_double(col);
}

ReadTransaction::ReadTransaction(SqliteDb& db) : db_(db) { db_.exec("BEGIN"); }

ReadTransaction::~ReadTransaction() {
  sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

Transaction::Transaction(SqliteDb& db) : db_(db) { db_.exec("BEGIN IMMEDIATE"); }

Transaction::~Transaction() {
  if (!done_) sqlite3_exec(db_.get(), "ROLLBACK", nullptr, nullptr, nullptr);
}

void Transaction::commit() {
  db_.exec("COMMIT");
  done_ = true;
}

}  // namespace mlatune
