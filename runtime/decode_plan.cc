#include "runtime/decode_plan.h"

#include <algorithm>
#include <exception>
#include <new>
#include <span>
#include <string>

namespace mlatune {
namespace {

DecodeShape shape_of(const mlatune_decode_problem& p) {
  DecodeShape s;
  s.batch = p.key.batch;
  s.qlen = p.key.qlen;
  s.heads = p.key.heads;
  s.page_size = p.key.page_size;
  s.q_dtype = static_cast<DType>(p.key.q_dtype);  // the lookup checked both codes
  s.kv_dtype = static_cast<DType>(p.key.kv_dtype);
  s.q_scale = p.q_scale;
  s.kv_scale = p.kv_scale;
  s.sm_scale = p.sm_scale;
  s.return_lse = p.key.lse != 0;
  s.num_pages = p.num_pages;
  s.max_pages_per_seq = p.max_pages_per_seq;
  s.max_kv_len = p.key.max_kv_len;
  return s;
}

}  // namespace

DecodePlan::DecodePlan(const DbHandle& db, int32_t max_batch) {
  kv_lens_.reserve(static_cast<size_t>(max_batch));
  words_.resize(db.table().max_plan_words(max_batch));
}

DecodePlan* DecodePlan::of(mlatune_plan* p) {
  DecodePlan* plan = reinterpret_cast<DecodePlan*>(p);
  return plan && plan->magic_ == kMagic ? plan : nullptr;
}

mlatune_status DecodePlan::check_lengths(const int32_t* kv_lens,
                                         const ErrorSink& error) const noexcept {
  const int64_t capacity = int64_t{shape_.max_pages_per_seq} * shape_.page_size;
  // The extremes in one pass without branches (it vectorises); the first length out of range is
  // looked for only if there is one.
  int32_t shortest = INT32_MAX;
  int32_t longest = 0;
  for (int32_t b = 0; b < shape_.batch; ++b) {
    shortest = std::min(shortest, kv_lens[b]);
    longest = std::max(longest, kv_lens[b]);
  }
  if (shortest < shape_.qlen || longest > capacity) {
    for (int32_t b = 0;; ++b) {
      const int32_t len = kv_lens[b];
      if (len < shape_.qlen || len > capacity) {
        return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT,
                          "mlatune_plan_decode: kv_lens[%d]=%d outside [qlen=%d, "
                          "max_pages_per_seq * page_size=%lld]",
                          b, len, shape_.qlen, static_cast<long long>(capacity));
      }
    }
  }
  if (longest != shape_.max_kv_len) {
    return error.fail(
        MLATUNE_STATUS_INVALID_ARGUMENT,
        "mlatune_plan_decode: the longest of kv_lens is %d but key.max_kv_len is %d (the "
        "lookup keys on it, so they must agree)",
        longest, shape_.max_kv_len);
  }
  return MLATUNE_STATUS_OK;
}

mlatune_status DecodePlan::plan(const DbHandle& db, const mlatune_decode_problem& problem,
                                const int32_t* kv_lens, const ErrorSink& error) noexcept {
  ready_ = false;
  const WinnerTable& table = db.table();
  const WinnerTable::Entry* entry = nullptr;
  const mlatune_status found = table.find(problem.key, &entry);
  if (found != MLATUNE_STATUS_OK) {
    table.explain(problem.key, error.buffer, error.capacity);
    return found;
  }
  try {
    shape_ = shape_of(problem);
    if (const std::optional<std::string> why = validate(shape_)) {
      return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_plan_decode: %s", why->c_str());
    }
    if (const mlatune_status s = check_lengths(kv_lens, error); s != MLATUNE_STATUS_OK) return s;
    const Variant& v = *entry->variant;
    if (const Support sup = v.can_implement(shape_, entry->params); !sup.ok) {
      return error.fail(
          MLATUNE_STATUS_NO_VALID_KERNEL,
          "mlatune_plan_decode: the winner %s (%s) of this bucket cannot run this call: %s",
          entry->selection.variant, entry->params.to_string().c_str(), sup.reason.c_str());
    }
    kv_lens_.assign(kv_lens, kv_lens + shape_.batch);
    words_used_ = 0;
    if (const size_t need = v.plan_words(shape_, entry->params); need > 0) {
      if (words_.size() < need) words_.resize(need);
      words_used_ =
          v.plan(shape_, entry->params, kv_lens_, std::span<int32_t>(words_.data(), need));
    }
    workspace_bytes_ = v.workspace_bytes(shape_, entry->params);
    variant_ = &v;
    params_ = entry->params;
    selection_ = entry->selection;
    db_serial_ = db.serial();
    ready_ = true;
    return MLATUNE_STATUS_OK;
  } catch (const LaunchError& e) {
    return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_plan_decode: %s", e.what());
  } catch (const std::bad_alloc&) {
    return error.fail(MLATUNE_STATUS_OUT_OF_MEMORY, "mlatune_plan_decode: out of memory");
  } catch (const std::exception& e) {
    return error.fail(MLATUNE_STATUS_INTERNAL, "mlatune_plan_decode: internal error: %s", e.what());
  }
}

mlatune_status DecodePlan::run(const DbHandle& db, const mlatune_decode_buffers& b, void* stream,
                               const ErrorSink& error) const noexcept {
  if (!ready_) {
    return error.fail(MLATUNE_STATUS_BAD_PLAN,
                      "mlatune_run: the plan holds no launch (never planned, or its last "
                      "mlatune_plan_decode failed); refusing to guess one");
  }
  if (db.serial() != db_serial_) {
    return error.fail(MLATUNE_STATUS_BAD_PLAN,
                      "mlatune_run: the plan was made with database handle #%llu, not with this "
                      "one (#%llu): plan again with the handle you run with",
                      static_cast<unsigned long long>(db_serial_),
                      static_cast<unsigned long long>(db.serial()));
  }
  try {
    return run_checked(b, stream, error);
  } catch (const LaunchError& e) {
    return error.fail(MLATUNE_STATUS_LAUNCH_FAILED, "mlatune_run: %s", e.what());
  } catch (const std::bad_alloc&) {
    return error.fail(MLATUNE_STATUS_OUT_OF_MEMORY, "mlatune_run: out of memory");
  } catch (const std::exception& e) {
    return error.fail(MLATUNE_STATUS_INTERNAL, "mlatune_run: internal error: %s", e.what());
  }
}

mlatune_status DecodePlan::run_checked(const mlatune_decode_buffers& b, void* stream,
                                       const ErrorSink& error) const {
  const char* missing = !b.q             ? "q"
                        : !b.kv          ? "kv"
                        : !b.block_table ? "block_table"
                        : !b.kv_lens     ? "kv_lens"
                        : !b.out         ? "out"
                                         : nullptr;
  if (missing) {
    return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_run: buffers->%s is NULL", missing);
  }
  if (shape_.return_lse != (b.lse != nullptr)) {
    return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT,
                      shape_.return_lse ? "mlatune_run: buffers->lse is NULL but the plan's key "
                                          "has lse=1"
                                        : "mlatune_run: buffers->lse is set but the plan's key "
                                          "has lse=0");
  }
  if (b.workspace_bytes < workspace_bytes_ || (workspace_bytes_ > 0 && !b.workspace)) {
    return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT,
                      "mlatune_run: the launch needs %zu bytes of workspace; buffers give %zu at "
                      "%p",
                      workspace_bytes_, b.workspace_bytes, b.workspace);
  }
  if (variant_->backend() == Backend::kHost) {
    // A CPU run cannot be ordered after a device stream's work: refused, not silently unordered.
    if (stream) {
      return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT,
                        "mlatune_run: stream must be NULL for a host (CPU) winner");
    }
    // Host memory: the buffers' lengths and pages can be checked against the plan.
    for (int32_t i = 0; i < shape_.batch; ++i) {
      if (b.kv_lens[i] != kv_lens_[static_cast<size_t>(i)]) {
        return error.fail(MLATUNE_STATUS_BAD_PLAN,
                          "mlatune_run: buffers->kv_lens[%d]=%d but the plan was made for %d: "
                          "plan again for these lengths",
                          i, b.kv_lens[i], kv_lens_[static_cast<size_t>(i)]);
      }
    }
    const std::vector<int32_t> table(b.block_table, b.block_table + shape_.block_table_elems());
    if (const std::optional<std::string> why = validate_sequences(shape_, kv_lens_, table)) {
      return error.fail(MLATUNE_STATUS_INVALID_ARGUMENT, "mlatune_run: %s", why->c_str());
    }
  }
  DecodeArgs args;
  args.q = b.q;
  args.kv = b.kv;
  args.block_table = b.block_table;
  args.kv_lens = b.kv_lens;
  args.out = static_cast<uint16_t*>(b.out);
  args.lse = b.lse;
  args.workspace = b.workspace;
  args.workspace_bytes = b.workspace_bytes;
  args.stream = stream;
  if (words_used_ > 0) {
    args.plan = words_.data();
    args.plan_words = words_used_;
  }
  variant_->run(shape_, params_, args);
  return MLATUNE_STATUS_OK;
}

}  // namespace mlatune
