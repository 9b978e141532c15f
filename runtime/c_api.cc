// The C ABI of libmlatune (mlatune/mlatune.h) over WinnerTable. Every entry point catches every
// exception and turns it into a status plus a per-thread message: nothing C++ crosses the ABI.
// Plan/run and live update are in c_api_plan.cc and c_api_live.cc.
#include <cstring>

#include "mlatune/mlatune.h"
#include "runtime/c_api_guard.h"
#include "runtime/db_handle.h"
#include "runtime/winner_table.h"

#ifndef MLATUNE_VERSION
#error "MLATUNE_VERSION must be defined by the build"
#endif

namespace mlatune::c_api {

mlatune_status open_handle(const char* function, const char* path,
                           const mlatune_open_options* options, const DbHandle** out) {
  *out = nullptr;
  if (!path)
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "%s: path is NULL", function);
  if (!*path) {
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "%s: path is empty", function);
  }
  OpenOptions opts;
  if (options) {
    const char* dev = options->expected_device;
    if (dev && std::strcmp(dev, "current") != 0) {
      return last_error().fail(
          MLATUNE_STATUS_INVALID_ARGUMENT,
          "%s: options->expected_device: only NULL or \"current\" is supported", function);
    }
    opts.allow_foreign_device = options->allow_foreign_device != 0;
  }
  return guarded(function, [&] {
    *out = DbHandle::adopt(WinnerTable::open(path, opts));
    return MLATUNE_STATUS_OK;
  });
}

}  // namespace mlatune::c_api

using mlatune::DbHandle;
using mlatune::c_api::bad_handle;
using mlatune::c_api::guarded;
using mlatune::c_api::invalid;

extern "C" {

MLATUNE_API mlatune_status mlatune_open(const char* path, const mlatune_open_options* options,
                                        mlatune_db** out) {
  if (!out) return invalid("mlatune_open: out is NULL");
  const DbHandle* handle = nullptr;
  const mlatune_status s = mlatune::c_api::open_handle("mlatune_open", path, options, &handle);
  *out = handle ? handle->c_handle() : nullptr;
  return s;
}

MLATUNE_API mlatune_status mlatune_close(mlatune_db* db) {
  if (!db) return MLATUNE_STATUS_OK;
  const DbHandle* handle = DbHandle::of(db);
  if (!handle) return bad_handle("mlatune_close", db);
  handle->release();  // the destructor cannot throw
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_db_retain(mlatune_db* db) {
  const DbHandle* handle = DbHandle::of(db);
  if (!handle) return bad_handle("mlatune_db_retain", db);
  handle->retain();
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_lookup(const mlatune_db* db, const mlatune_decode_key* key,
                                          mlatune_selection* out) {
  const DbHandle* handle = DbHandle::of(db);
  if (!handle || !key || !out) [[unlikely]] {
    if (out) std::memset(out, 0, sizeof *out);
    if (!handle) return bad_handle("mlatune_lookup", db);
    return invalid(!key ? "mlatune_lookup: key is NULL" : "mlatune_lookup: out is NULL");
  }
  // The message is written only on failure, so that a hit touches no thread-local storage
  // (whose address costs a __tls_get_addr call in a shared library).
  const mlatune::WinnerTable& table = handle->table();
  const mlatune_status s = table.lookup(*key, out);
  if (s != MLATUNE_STATUS_OK) [[unlikely]] {
    table.explain(*key, mlatune::c_api::t_last_error, mlatune::c_api::kErrorCapacity);
  }
  return s;
}

MLATUNE_API mlatune_status mlatune_table_stats(const mlatune_db* db, int64_t* usable,
                                               int64_t* stale, int64_t* no_valid) {
  const DbHandle* handle = DbHandle::of(db);
  if (!handle) return bad_handle("mlatune_table_stats", db);
  if (!usable || !stale || !no_valid) {
    return invalid("mlatune_table_stats: usable, stale and no_valid must not be NULL");
  }
  const mlatune::TableStats& s = handle->table().stats();
  *usable = s.usable;
  *stale = s.stale;
  *no_valid = s.no_valid;
  return MLATUNE_STATUS_OK;
}

MLATUNE_API const char* mlatune_db_info(const mlatune_db* db) {
  const DbHandle* handle = DbHandle::of(db);
  if (!handle) {
    bad_handle("mlatune_db_info", db);
    return "";
  }
  return handle->table().info().c_str();
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
    case MLATUNE_STATUS_BAD_PLAN:
      return "bad plan";
    case MLATUNE_STATUS_LAUNCH_FAILED:
      return "launch failed";
  }
  return "unknown status";
}

MLATUNE_API const char* mlatune_last_error(void) { return mlatune::c_api::t_last_error; }

MLATUNE_API const char* mlatune_version(void) { return MLATUNE_VERSION; }

}  // extern "C"
