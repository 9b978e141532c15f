// What an mlatune_plan* points to: one planned decode call (design.md §7's plan/run split).
//
// plan() does the host-side work - lookup, the checks of the call against the winner, the work
// partition of a variant that has one (Variant::plan), the workspace size - into memory the object
// owns, sized at construction; run() only launches the stored launch on the caller's buffers and
// refuses a plan that holds none or was made with another database handle. Both report refusals
// through an ErrorSink and never throw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mla_decode/problem.h"
#include "mla_decode/variant.h"
#include "mlatune/mlatune.h"
#include "runtime/db_handle.h"
#include "runtime/error_sink.h"
#include "runtime/handle_quarantine.h"

namespace mlatune {

class DecodePlan {
 public:
  // Sized for calls of up to `max_batch` sequences on `db` (throws std::bad_alloc).
  DecodePlan(const DbHandle& db, int32_t max_batch);
  ~DecodePlan() { magic_ = 0; }

  // The plan behind a C handle, or null when `p` is null or does not point to a live plan.
  static DecodePlan* of(mlatune_plan* p);
  static const DecodePlan* of(const mlatune_plan* p) { return of(const_cast<mlatune_plan*>(p)); }
  // Whether non-null `p`, which of() refused, is a plan already destroyed (else: not a plan).
  static bool destroyed(const mlatune_plan* p) {
    return reinterpret_cast<const DecodePlan*>(p)->magic_ == kDestroyedMagic;
  }
  // mlatune_plan_destroy: frees what the plan owns and retires its shell (HandleQuarantine), so
  // that a recently destroyed plan is still recognised as one.
  static void destroy(DecodePlan* p) {
    p->magic_ = kDestroyedMagic;
    p->ready_ = false;
    std::vector<int32_t>().swap(p->kv_lens_);
    std::vector<int32_t>().swap(p->words_);
    HandleQuarantine::retire(p, [](void* shell) { delete static_cast<DecodePlan*>(shell); });
  }
  mlatune_plan* c_handle() { return reinterpret_cast<mlatune_plan*>(this); }

  mlatune_status plan(const DbHandle& db, const mlatune_decode_problem& problem,
                      const int32_t* kv_lens, const ErrorSink& error) noexcept;
  mlatune_status run(const DbHandle& db, const mlatune_decode_buffers& buffers, void* stream,
                     const ErrorSink& error) const noexcept;

  // Marks the plan failed (a refused mlatune_plan_decode call leaves no launch behind).
  void invalidate() { ready_ = false; }
  bool ready() const { return ready_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  const mlatune_selection& selection() const { return selection_; }

 private:
  static constexpr uint64_t kMagic = 0x4e414c5045544c4dULL;           // "MLTEPLAN"
  static constexpr uint64_t kDestroyedMagic = 0x44414544504c544dULL;  // "MTLPDEAD"
  mlatune_status check_lengths(const int32_t* kv_lens, const ErrorSink& error) const noexcept;
  mlatune_status run_checked(const mlatune_decode_buffers& b, void* stream,
                             const ErrorSink& error) const;

  uint64_t magic_ = kMagic;
  bool ready_ = false;
  uint64_t db_serial_ = 0;  // the handle the plan was made with
  const Variant* variant_ = nullptr;
  LaunchParams params_;
  DecodeShape shape_;
  mlatune_selection selection_{};
  size_t workspace_bytes_ = 0;
  std::vector<int32_t> kv_lens_;  // the planned lengths (capacity: max_batch)
  std::vector<int32_t> words_;    // the variant's plan; words_used_ of them are valid
  size_t words_used_ = 0;
};

}  // namespace mlatune
