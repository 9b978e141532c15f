// What an mlatune_live* points to: the current handle of a serving process, switchable while
// other threads use it. The lock guards only the pointer swap and a reference count increment (a
// few nanoseconds, never I/O): a new database is opened and checked before the lock is taken, and
// a replaced handle is freed when its last user releases it, outside the lock.
#pragma once

#include <cstdint>
#include <mutex>

#include "runtime/db_handle.h"

namespace mlatune {

class LiveDb {
 public:
  // Takes over the caller's reference to `initial`.
  explicit LiveDb(const DbHandle* initial) : current_(initial) {}
  ~LiveDb() { current_->release(); }
  LiveDb(const LiveDb&) = delete;
  LiveDb& operator=(const LiveDb&) = delete;

  static LiveDb* of(mlatune_live* live) { return reinterpret_cast<LiveDb*>(live); }
  mlatune_live* c_handle() { return reinterpret_cast<mlatune_live*>(this); }

  // A new reference to the current handle.
  const DbHandle* acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    current_->retain();
    return current_;
  }
  // Makes `next` (the caller's reference, taken over) current and drops the live object's
  // reference to the previous handle.
  void replace(const DbHandle* next) {
    const DbHandle* previous;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      previous = current_;
      current_ = next;
      ++switches_;
    }
    previous->release();
  }
  int64_t switches() {
    std::lock_guard<std::mutex> lock(mutex_);
    return switches_;
  }

 private:
  std::mutex mutex_;
  const DbHandle* current_;
  int64_t switches_ = 0;
};

}  // namespace mlatune
