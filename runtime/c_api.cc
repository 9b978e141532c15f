// The C ABI of libmlatune (mlatune/mlatune.h) over WinnerTable. Every entry point catches every
// exception and turns it into a status plus a per-thread message: nothing C++ crosses the ABI.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "mlatune/mlatune.h"
#include "runtime/winner_table.h"

#ifndef MLATUNE_VERSION
#error "MLATUNE_VERSION must be defined by the build"
#endif

namespace mlatune {
namespace {

// Fixed-size and thread_local: setting it never allocates, so even an out-of-memory failure can
// be reported, and threads never see each other's messages.
constexpr size_t kErrorCapacity = 1024;
thread_local char t_last_error[kErrorCapacity];

void set_error(const char* message) noexcept {
  std::snprintf(t_last_error, kErrorCapacity, "%s", message);
}

// Runs `body` (which returns a status), mapping any exception to a status and message.
template <typename Body>
mlatune_status guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const RuntimeError& e) {
    set_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    std::snprintf(t_last_error, kErrorCapacity, "%s: out of memory", function);
    return MLATUNE_STATUS_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    std::snprintf(t_last_error, kErrorCapacity, "%s: internal error: %s", function, e.what());
    return MLATUNE_STATUS_INTERNAL;
  } catch (...) {
    std::snprintf(t_last_error, kErrorCapacity, "%s: internal error: unknown exception", function);
    return MLATUNE_STATUS_INTERNAL;
  }
}

mlatune_status invalid(const char* message) noexcept {
  set_error(message);
  return MLATUNE_STATUS_INVALID_ARGUMENT;
}

// mlatune_db is never defined: a handle is a WinnerTable pointer under an opaque C name.
const WinnerTable* table_of(const mlatune_db* db) {
  return reinterpret_cast<const WinnerTable*>(db);
}

}  // namespace
}  // namespace mlatune

using mlatune::guarded;
using mlatune::invalid;
using mlatune::table_of;

extern "C" {

MLATUNE_API mlatune_status mlatune_open(const char* path, const mlatune_open_options* options,
                                        mlatune_db** out) {
  if (out) *out = nullptr;
  if (!out) return invalid("mlatune_open: out is NULL");
  if (!path) return invalid("mlatune_open: path is NULL");
  if (!*path) return invalid("mlatune_open: path is empty");
  mlatune::OpenOptions opts;
  if (options) {
    const char* dev = options->expected_device;
    if (dev && std::strcmp(dev, "current") != 0) {
      return invalid(
          "mlatune_open: options->expected_device: only NULL or \"current\" is supported");
    }
    opts.allow_foreign_device = options->allow_foreign_device != 0;
  }
  return guarded("mlatune_open", [&] {
    std::unique_ptr<mlatune::WinnerTable> table = mlatune::WinnerTable::open(path, opts);
    *out = reinterpret_cast<mlatune_db*>(table.release());
    return MLATUNE_STATUS_OK;
  });
}

MLATUNE_API void mlatune_close(mlatune_db* db) {
  delete reinterpret_cast<mlatune::WinnerTable*>(db);  // the destructor cannot throw
}

MLATUNE_API mlatune_status mlatune_lookup(const mlatune_db* db, const mlatune_decode_key* key,
                                          mlatune_selection* out) {
  if (!db || !key || !out) [[unlikely]] {
    if (out) std::memset(out, 0, sizeof *out);
    return invalid(!db    ? "mlatune_lookup: db is NULL"
                   : !key ? "mlatune_lookup: key is NULL"
                          : "mlatune_lookup: out is NULL");
  }
  // The message is written only on failure, so that a hit touches no thread-local storage
  // (whose address costs a __tls_get_addr call in a shared library).
  const mlatune::WinnerTable* table = table_of(db);
  const mlatune_status s = table->lookup(*key, out);
  if (s != MLATUNE_STATUS_OK) [[unlikely]] {
    table->explain(*key, mlatune::t_last_error, mlatune::kErrorCapacity);
  }
  return s;
}

MLATUNE_API mlatune_status mlatune_table_stats(const mlatune_db* db, int64_t* usable,
                                               int64_t* stale, int64_t* no_valid) {
  if (!db) return invalid("mlatune_table_stats: db is NULL");
  if (!usable || !stale || !no_valid) {
    return invalid("mlatune_table_stats: usable, stale and no_valid must not be NULL");
  }
  const mlatune::TableStats& s = table_of(db)->stats();
  *usable = s.usable;
  *stale = s.stale;
  *no_valid = s.no_valid;
  return MLATUNE_STATUS_OK;
}

MLATUNE_API const char* mlatune_db_info(const mlatune_db* db) {
  if (!db) {
    invalid("mlatune_db_info: db is NULL");
    return "";
  }
  return table_of(db)->info().c_str();
}

MLATUNE_API const char* mlatune_status_string(mlatune_status status) {
  switch (status) {
    case MLATUNE_STATUS_OK:
      return "ok";
    case MLATUNE_STATUS_INVALID_ARGUMENT:
      return "invalid argument";
    case MLATUNE_STATUS_IO_ERROR:
      return "io error";
    case MLATUNE_STATUS_CORRUPT:
      return "corrupt";
    case MLATUNE_STATUS_SCHEMA_MISMATCH:
      return "schema mismatch";
    case MLATUNE_STATUS_FOREIGN_DEVICE:
      return "foreign device";
    case MLATUNE_STATUS_UNTUNED:
      return "untuned";
    case MLATUNE_STATUS_STALE:
      return "stale";
    case MLATUNE_STATUS_NO_VALID_KERNEL:
      return "no valid kernel";
    case MLATUNE_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case MLATUNE_STATUS_INTERNAL:
      return "internal";
  }
  return "unknown status";
}

MLATUNE_API const char* mlatune_last_error(void) { return mlatune::t_last_error; }

MLATUNE_API const char* mlatune_version(void) { return MLATUNE_VERSION; }

}  // extern "C"
