// What an mlatune_db* points to: an open WinnerTable, reference counted so that a live update can
// replace the current handle while threads still use the old one, and numbered so that a plan can
// tell the handle it was made with from any other (even one allocated at the same address).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "mlatune/mlatune.h"
#include "runtime/winner_table.h"

namespace mlatune {

class DbHandle {
 public:
  // Takes ownership of `table`; the new handle holds one reference (the caller's).
  static DbHandle* adopt(std::unique_ptr<WinnerTable> table) {
    return new DbHandle(std::move(table));
  }
  static const DbHandle* of(const mlatune_db* db) { return reinterpret_cast<const DbHandle*>(db); }
  mlatune_db* c_handle() const {
    return reinterpret_cast<mlatune_db*>(const_cast<DbHandle*>(this));
  }

  const WinnerTable& table() const { return *table_; }
  // Unique per handle for the life of the process; never 0.
  uint64_t serial() const { return serial_; }

  void retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Drops one reference and frees the handle with the last one.
  void release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  explicit DbHandle(std::unique_ptr<WinnerTable> table)
      : table_(std::move(table)), serial_(next_serial()) {}
  static uint64_t next_serial() {
    static std::atomic<uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
  }

  std::unique_ptr<const WinnerTable> table_;
  uint64_t serial_;
  mutable std::atomic<int64_t> refs_{1};
};

}  // namespace mlatune
