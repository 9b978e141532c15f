// mlatune runtime, C++ wrapper: header-only RAII over the C ABI of mlatune.h (C++17).
//
// Contract: the same as mlatune.h. Ownership is by value: Database holds one reference to a handle
// (copying takes another), Plan and LiveDatabase own their objects (move-only). Every refusal
// throws mlatune::client::Error carrying the status and the message of mlatune_last_error(),
// except Database::lookup(), which returns the status so that the per-call path has no exception
// machinery. Thread safety is the C API's: Database is safe to share between threads, a Plan is
// used by one thread at a time, LiveDatabase is thread-safe.
#ifndef MLATUNE_MLATUNE_HPP_
#define MLATUNE_MLATUNE_HPP_

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>

#include "mlatune/mlatune.h"

namespace mlatune::client {

class Error : public std::runtime_error {
 public:
  Error(mlatune_status status, const std::string& message)
      : std::runtime_error(std::string(mlatune_status_string(status)) + ": " + message),
        status_(status) {}
  mlatune_status status() const noexcept { return status_; }

 private:
  mlatune_status status_;
};

// Throws Error for any status but MLATUNE_STATUS_OK.
inline void check(mlatune_status status) {
  if (status != MLATUNE_STATUS_OK) throw Error(status, mlatune_last_error());
}

class Database {
 public:
  static Database open(const std::string& path, const mlatune_open_options* options = nullptr) {
    mlatune_db* db = nullptr;
    check(mlatune_open(path.c_str(), options, &db));
    return Database(db);
  }
  // Adopts one reference (as returned by mlatune_open or mlatune_live_acquire).
  explicit Database(mlatune_db* adopted) noexcept : db_(adopted) {}
  Database(const Database& other) noexcept : db_(other.db_) {
    if (db_) mlatune_db_retain(db_);
  }
  Database(Database&& other) noexcept : db_(std::exchange(other.db_, nullptr)) {}
  Database& operator=(Database other) noexcept {
    std::swap(db_, other.db_);
    return *this;
  }
  ~Database() { mlatune_close(db_); }

  mlatune_db* get() const noexcept { return db_; }

  // The hot path: no exception, no allocation. On failure the reason is mlatune_last_error().
  mlatune_status lookup(const mlatune_decode_key& key, mlatune_selection* out) const noexcept {
    return mlatune_lookup(db_, &key, out);
  }
  mlatune_selection lookup_or_throw(const mlatune_decode_key& key) const {
    mlatune_selection s;
    check(mlatune_lookup(db_, &key, &s));
    return s;
  }
  std::string info() const { return mlatune_db_info(db_); }

 private:
  mlatune_db* db_;
};

class Plan {
 public:
  Plan(const Database& db, int32_t max_batch) {
    check(mlatune_plan_create(db.get(), max_batch, &plan_));
  }
  Plan(Plan&& other) noexcept : plan_(std::exchange(other.plan_, nullptr)) {}
  Plan& operator=(Plan&& other) noexcept {
    std::swap(plan_, other.plan_);
    return *this;
  }
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() { mlatune_plan_destroy(plan_); }

  // kv_lens: host memory, problem.key.batch lengths.
  void plan(const Database& db, const mlatune_decode_problem& problem, const int32_t* kv_lens) {
    check(mlatune_plan_decode(db.get(), &problem, kv_lens, plan_));
  }
  size_t workspace_bytes() const {
    size_t bytes = 0;
    check(mlatune_plan_workspace_size(plan_, &bytes));
    return bytes;
  }
  mlatune_selection selection() const {
    mlatune_selection s;
    check(mlatune_plan_selection(plan_, &s));
    return s;
  }
  void run(const Database& db, const mlatune_decode_buffers& buffers,
           void* stream = nullptr) const {
    check(mlatune_run(db.get(), plan_, &buffers, stream));
  }
  mlatune_plan* get() const noexcept { return plan_; }

 private:
  mlatune_plan* plan_ = nullptr;
};

class LiveDatabase {
 public:
  static LiveDatabase open(const std::string& path, const mlatune_open_options* options = nullptr) {
    mlatune_live* live = nullptr;
    check(mlatune_live_open(path.c_str(), options, &live));
    return LiveDatabase(live);
  }
  LiveDatabase(LiveDatabase&& other) noexcept : live_(std::exchange(other.live_, nullptr)) {}
  LiveDatabase& operator=(LiveDatabase&& other) noexcept {
    std::swap(live_, other.live_);
    return *this;
  }
  LiveDatabase(const LiveDatabase&) = delete;
  LiveDatabase& operator=(const LiveDatabase&) = delete;
  ~LiveDatabase() { mlatune_live_close(live_); }

  // Opens and checks `path`, then switches to it; on a refusal the current database stays.
  void update(const std::string& path, const mlatune_open_options* options = nullptr) {
    check(mlatune_live_update(live_, path.c_str(), options));
  }
  // The current database (a reference of the caller's, valid after later updates).
  Database acquire() const {
    mlatune_db* db = nullptr;
    check(mlatune_live_acquire(live_, &db));
    return Database(db);
  }
  int64_t generation() const {
    int64_t g = 0;
    check(mlatune_live_generation(live_, &g));
    return g;
  }

 private:
  explicit LiveDatabase(mlatune_live* live) noexcept : live_(live) {}
  mlatune_live* live_;
};

}  // namespace mlatune::client

#endif  // MLATUNE_MLATUNE_HPP_
