// Where the C ABI's objects go when they are closed: the large state they own is freed at once,
// but the small shell (whose first word is the object's magic, now overwritten with a "closed"
// word) is kept for the next kCapacity closes, so that a call on a handle closed recently - a
// lookup after mlatune_close, a double close, a double destroy - reads a live "closed" word and
// is refused with a status instead of touching freed memory. Older shells are freed; a call on
// one of those is undefined, as for any freed pointer. Thread-safe (a mutex: closing is rare and
// never on the lookup path).
#pragma once

#include <cstddef>
#include <mutex>

namespace mlatune {

class HandleQuarantine {
 public:
  static constexpr size_t kCapacity = 256;
  using Deleter = void (*)(void*);

  // Takes ownership of `shell`; frees the oldest kept shell when full.
  static void retire(void* shell, Deleter deleter) {
    Ring& ring = instance();
    void* evicted = nullptr;
    Deleter evicted_deleter = nullptr;
    {
      std::lock_guard<std::mutex> lock(ring.mutex);
      Entry& slot = ring.entries[ring.next];
      evicted = slot.shell;
      evicted_deleter = slot.deleter;
      slot = Entry{shell, deleter};
      ring.next = (ring.next + 1) % kCapacity;
    }
    if (evicted) evicted_deleter(evicted);
  }

 private:
  struct Entry {
    void* shell = nullptr;
    Deleter deleter = nullptr;
  };
  struct Ring {
    std::mutex mutex;
    Entry entries[kCapacity];
    size_t next = 0;
  };
  // Never destroyed: a handle may be closed during static destruction. The kept shells stay
  // reachable through it (no leak report).
  static Ring& instance() {
    static Ring* ring = new Ring;
    return *ring;
  }
};

}  // namespace mlatune
