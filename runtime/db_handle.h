// What an mlatune_db* points to: an open WinnerTable, reference counted so that a live update can
// replace the current handle while threads still use the old one, and numbered so that a plan can
// tell the handle it was made with from any other (even one allocated at the same address). Its
// first word is a magic word, so that the C ABI refuses a pointer to anything else (a plan) or to
// a handle whose last reference was released (kept in HandleQuarantine for a while) with a
// status instead of reading it as a handle.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "mlatune/mlatune.h"
#include "runtime/handle_quarantine.h"
#include "runtime/winner_table.h"

namespace mlatune {

class DbHandle {
 public:
  // Takes ownership of `table`; the new handle holds one reference (the caller's).
  static DbHandle* adopt(std::unique_ptr<WinnerTable> table) {
    return new DbHandle(std::move(table));
  }
  // The handle behind a C pointer, or null when `db` is null or points to no open handle (see
  // closed() for which).
  static const DbHandle* of(const mlatune_db* db) {
    const DbHandle* h = reinterpret_cast<const DbHandle*>(db);
    return h && h->magic_ == kOpenMagic ? h : nullptr;
  }
  // Whether non-null `db`, which of() refused, is a handle already closed (else: not a handle).
  static bool closed(const mlatune_db* db) {
    return reinterpret_cast<const DbHandle*>(db)->magic_ == kClosedMagic;
  }
  mlatune_db* c_handle() const {
    return reinterpret_cast<mlatune_db*>(const_cast<DbHandle*>(this));
  }

  const WinnerTable& table() const { return *table_; }
  // Unique per handle for the life of the process; never 0.
  uint64_t serial() const { return serial_; }

  void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Drops one reference; the last one frees the table and retires the shell.
  void release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    DbHandle* self = const_cast<DbHandle*>(this);
    self->magic_ = kClosedMagic;
    self->table_.reset();
    HandleQuarantine::retire(self, [](void* shell) { delete static_cast<DbHandle*>(shell); });
  }

 private:
  static constexpr uint64_t kOpenMagic = 0x4c444e4854424c4dULL;    // "MLBTHNDL"
  static constexpr uint64_t kClosedMagic = 0x44534f4c43424c4dULL;  // "MLBCLOSD"

  explicit DbHandle(std::unique_ptr<WinnerTable> table)
      : table_(std::move(table)), serial_(next_serial()) {}
  static uint64_t next_serial() {
    static std::atomic<uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  uint64_t magic_ = kOpenMagic;  // first: what of() and closed() read
  std::unique_ptr<const WinnerTable> table_;
  uint64_t serial_;
  mutable std::atomic<int64_t> refs_{1};
};

}  // namespace mlatune
