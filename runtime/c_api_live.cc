// The live-update entry points of the C ABI (mlatune/mlatune.h) over LiveDb.
#include "mlatune/mlatune.h"
#include "runtime/c_api_guard.h"
#include "runtime/db_handle.h"
#include "runtime/live_db.h"

using mlatune::DbHandle;
using mlatune::LiveDb;
using mlatune::c_api::guarded;
using mlatune::c_api::invalid;
using mlatune::c_api::open_handle;

extern "C" {

MLATUNE_API mlatune_status mlatune_live_open(const char* path, const mlatune_open_options* options,
                                             mlatune_live** out) {
  if (!out) return invalid("mlatune_live_open: out is NULL");
  *out = nullptr;
  const DbHandle* handle = nullptr;
  const mlatune_status s = open_handle("mlatune_live_open", path, options, &handle);
  if (s != MLATUNE_STATUS_OK) return s;
  return guarded("mlatune_live_open", [&] {
    try {
      *out = (new LiveDb(handle))->c_handle();
    } catch (...) {
      handle->release();
      throw;
    }
    return MLATUNE_STATUS_OK;
  });
}

MLATUNE_API mlatune_status mlatune_live_update(mlatune_live* live, const char* path,
                                               const mlatune_open_options* options) {
  if (!live) return invalid("mlatune_live_update: live is NULL");
  const DbHandle* handle = nullptr;
  const mlatune_status s = open_handle("mlatune_live_update", path, options, &handle);
  if (s != MLATUNE_STATUS_OK) return s;  // the current handle stays
  LiveDb::of(live)->replace(handle);
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_live_acquire(mlatune_live* live, mlatune_db** out) {
  if (!out) return invalid("mlatune_live_acquire: out is NULL");
  *out = nullptr;
  if (!live) return invalid("mlatune_live_acquire: live is NULL");
  *out = LiveDb::of(live)->acquire()->c_handle();
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_live_generation(mlatune_live* live, int64_t* out) {
  if (!out) return invalid("mlatune_live_generation: out is NULL");
  *out = 0;
  if (!live) return invalid("mlatune_live_generation: live is NULL");
  *out = LiveDb::of(live)->switches();
  return MLATUNE_STATUS_OK;
}

MLATUNE_API void mlatune_live_close(mlatune_live* live) { delete LiveDb::of(live); }

}  // extern "C"
