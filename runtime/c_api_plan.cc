// The plan/run entry points of the C ABI (mlatune/mlatune.h) over DecodePlan.
#include <cstring>

#include "mlatune/mlatune.h"
#include "runtime/c_api_guard.h"
#include "runtime/db_handle.h"
#include "runtime/decode_plan.h"

using mlatune::DbHandle;
using mlatune::DecodePlan;
using mlatune::c_api::bad_handle;
using mlatune::c_api::guarded;
using mlatune::c_api::invalid;
using mlatune::c_api::last_error;

namespace {
// For a non-null plan pointer that DecodePlan::of() refused.
const char* not_a_plan(const mlatune_plan* plan) {
  return DecodePlan::destroyed(plan)
             ? "plan was destroyed"
             : "plan does not point to a plan object (not from mlatune_plan_create: a database "
               "handle?)";
}
}  // namespace

extern "C" {

MLATUNE_API mlatune_status mlatune_plan_create(const mlatune_db* db, int32_t max_batch,
                                               mlatune_plan** out) {
  if (!out) return invalid("mlatune_plan_create: out is NULL");
  *out = nullptr;
  const DbHandle* handle = DbHandle::of(db);
  if (!handle) return bad_handle("mlatune_plan_create", db);
  if (max_batch < 1 || max_batch > mlatune::kMaxBatch) {
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT,
                             "mlatune_plan_create: max_batch=%d (must be 1..%d)", max_batch,
                             mlatune::kMaxBatch);
  }
  return guarded("mlatune_plan_create", [&] {
    *out = (new DecodePlan(*handle, max_batch))->c_handle();
    return MLATUNE_STATUS_OK;
  });
}

MLATUNE_API mlatune_status mlatune_plan_destroy(mlatune_plan* plan) {
  if (!plan) return MLATUNE_STATUS_OK;
  DecodePlan* p = DecodePlan::of(plan);
  if (!p) {
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_plan_destroy: %s",
                             not_a_plan(plan));
  }
  DecodePlan::destroy(p);
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_plan_decode(const mlatune_db* db,
                                               const mlatune_decode_problem* problem,
                                               const int32_t* kv_lens, mlatune_plan* plan) {
  DecodePlan* p = DecodePlan::of(plan);
  if (!p) {
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_plan_decode: %s",
                             plan ? not_a_plan(plan) : "plan is NULL");
  }
  const DbHandle* handle = DbHandle::of(db);
  if (!handle || !problem || !kv_lens) [[unlikely]] {
    p->invalidate();
    if (!handle) return bad_handle("mlatune_plan_decode", db);
    return invalid(!problem ? "mlatune_plan_decode: problem is NULL"
                            : "mlatune_plan_decode: kv_lens is NULL");
  }
  return p->plan(*handle, *problem, kv_lens, last_error());
}

MLATUNE_API mlatune_status mlatune_plan_workspace_size(const mlatune_plan* plan, size_t* bytes) {
  if (!bytes) return invalid("mlatune_plan_workspace_size: bytes is NULL");
  *bytes = 0;
  const DecodePlan* p = DecodePlan::of(plan);
  if (!p) {
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_plan_workspace_size: %s",
                             plan ? not_a_plan(plan) : "plan is NULL");
  }
  if (!p->ready()) {
    return last_error().fail(MLATUNE_STATUS_BAD_PLAN,
                             "mlatune_plan_workspace_size: the plan holds no launch");
  }
  *bytes = p->workspace_bytes();
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_plan_selection(const mlatune_plan* plan,
                                                  mlatune_selection* out) {
  if (!out) return invalid("mlatune_plan_selection: out is NULL");
  std::memset(out, 0, sizeof *out);
  const DecodePlan* p = DecodePlan::of(plan);
  if (!p) {
    return last_error().fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_plan_selection: %s",
                             plan ? not_a_plan(plan) : "plan is NULL");
  }
  if (!p->ready()) {
    return last_error().fail(MLATUNE_STATUS_BAD_PLAN,
                             "mlatune_plan_selection: the plan holds no launch");
  }
  *out = p->selection();
  return MLATUNE_STATUS_OK;
}

MLATUNE_API mlatune_status mlatune_run(const mlatune_db* db, const mlatune_plan* plan,
                                       const mlatune_decode_buffers* buffers, void* stream) {
  const DbHandle* handle = DbHandle::of(db);
  if (!handle) return bad_handle("mlatune_run", db);
  if (!buffers) return invalid("mlatune_run: buffers is NULL");
  const DecodePlan* p = DecodePlan::of(plan);
  if (!p) {
    return last_error().fail(MLATUNE_STATUS_BAD_PLAN, "mlatune_run: %s",
                             plan ? not_a_plan(plan) : "plan is NULL (plan the call first)");
  }
  return p->run(*handle, *buffers, stream, last_error());
}

}  // extern "C"
