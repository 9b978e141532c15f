// Shared by the C API's translation units: the per-thread last error and the wrapper that turns
// every exception into a status, so that nothing C++ crosses the ABI.
#pragma once

#include <cstddef>
#include <cstdio>
#include <exception>
#include <new>

#include "mlatune/mlatune.h"
#include "runtime/db_handle.h"
#include "runtime/error_sink.h"
#include "runtime/winner_table.h"

namespace mlatune::c_api {

// Fixed-size and thread_local: setting it never allocates, so even an out-of-memory failure can
// be reported, and threads never see each other's messages.
inline constexpr size_t kErrorCapacity = 1024;
inline thread_local char t_last_error[kErrorCapacity];

inline ErrorSink last_error() { return ErrorSink{t_last_error, kErrorCapacity}; }

inline mlatune_status invalid(const char* message) noexcept {
  return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "%s", message);
}

// The refusal of a database handle argument that DbHandle::of() did not accept.
inline mlatune_status bad_handle(const char* function, const mlatune_db* db) noexcept {
  return last_error().fail(
      MLATUNE_STATUS_INVALID_ARGUMENT, "%s: %s", function,
      !db                    ? "db is NULL"
      : DbHandle::closed(db) ? "db was closed (its last reference was released)"
                             : "db does not point to a database handle (not from mlatune_open "
                               "or mlatune_live_acquire: a plan?)");
}

// Runs `body` (which returns a status), mapping any exception to a status and message.
template <typename Body>
mlatune_status guarded(const char* function, Body&& body) noexcept {
  const ErrorSink error = last_error();
  try {
    return body();
  } catch (const RuntimeError& e) {
    return error.fail(e.status(), "%s", e.what());
  } catch (const std::bad_alloc&) {
    return error.fail(MLATUNE_STATUS_OUT_OF_MEMORY, "%s: out of memory", function);
  } catch (const std::exception& e) {
    return error.fail(MLATUNE_STATUS_INTERNAL, "%s: internal error: %s", function, e.what());
  } catch (...) {
    return error.fail(MLATUNE_STATUS_INTERNAL, "%s: internal error: unknown exception", function);
  }
}

// Opens `path` with the C options into a new handle (one reference) or returns the refusal;
// `function` names the entry point in messages. *out is null on failure.
mlatune_status open_handle(const char* function, const char* path,
                           const mlatune_open_options* options, const DbHandle** out);

}  // namespace mlatune::c_api
