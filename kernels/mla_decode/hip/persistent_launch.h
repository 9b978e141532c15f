// What the persistent members of the GPU MLA decode family (hip_mma_fp8kv_persistent_v1,
// hip_wgmma_fp8kv_persistent_v1) share around their kernels: how many plan workers a launch deals
// to, the workspace layout, planning (write_launch_plan: nothing allocated on the decode path),
// the checks of a plan before a launch, the plan's words carried by value in the kernel's
// parameters, and the combine over the plan's cut sequences.
//
// Layout of a launch: W = max(1, workers x SMs / row groups) plan workers, each run by one
// workgroup per row group of `rows_per_group` query rows (grid W x groups, group fastest).
// Workspace: the plan's words (workgroup 0 writes there the sections the combine kernel reads),
// 16-byte aligned, then the partial records (512 fp32 outputs, then one LSE per row) of
// max_plan_slots(batch, W) slots.
//
// For GPU sources only; everything lives in an anonymous namespace like mma_common.h's.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/mma_common.h"
#include "mla_decode/launch_plan.h"
#include "mla_decode/plan_writer.h"
#include "mla_decode/problem.h"
#include "mla_decode/variant.h"
#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {
namespace persistent {

// The launch plan's words by value in the kernel parameters, so that a launch is one kernel on
// the caller's stream: no host-to-device copy (which, from pageable memory, would make the host
// wait for the stream) and nothing to keep alive after run() returns. Two capacities, so that
// small batches do not ship 31 KB of parameters with every launch; CUDA allows 32 764 bytes of
// kernel parameters from sm_70 and CUDA 12.1.
template <int kWords>
struct alignas(16) PlanWords {
  int32_t w[kWords];
};
constexpr int kSmallPlanWords = 2048;
constexpr int kLargePlanWords = 7936;

// Where a kernel finds the sections it reads, and where workgroup 0 writes the sections the
// combine kernel reads (seq_first_slot and cut_seqs, `tail_words` words from word `tail`).
struct PlanRef {
  int32_t worker_first = 0;
  int32_t pieces = 0;
  int32_t tail = 0;
  int32_t tail_words = 0;
  int32_t* tail_dev = nullptr;
};

// Workgroup 0's copy of the plan's tail into the workspace (the combine kernel's input).
template <int kWords>
__device__ __forceinline__ void publish_tail(const PlanWords<kWords>& plan, const PlanRef& ref,
                                             int threads) {
  if (blockIdx.x != 0) return;
  for (int32_t k = static_cast<int32_t>(threadIdx.x); k < ref.tail_words; k += threads) {
    ref.tail_dev[k] = plan.w[ref.tail + k];
  }
}

// ---- Host side --------------------------------------------------------------------------------

inline int32_t max_len_of(const DecodeShape& s) {
  return static_cast<int32_t>(
      std::min<int64_t>(int64_t{s.max_pages_per_seq} * s.page_size, kMaxKvLen));
}

// The current device's SM count: plan and run of one launch must see the same device. Queried
// once per device (a plan per decode step should not make an attribute query each time; the
// current device is a thread-local read). Throws LaunchError without a device.
inline int32_t sm_count() {
  constexpr int kCachedDevices = 64;
  static std::atomic<int32_t> cached[kCachedDevices] = {};  // 0: not queried yet
  int device = 0;
  MLATUNE_HIP_CHECK(hipGetDevice(&device));
  const bool cacheable = device >= 0 && device < kCachedDevices;
  if (cacheable) {
    if (const int32_t n = cached[device].load(std::memory_order_relaxed); n > 0) return n;
  }
  int sms = 0;
  MLATUNE_HIP_CHECK(hipDeviceGetAttribute(&sms, hipDeviceAttributeMultiprocessorCount, device));
  const int32_t n = std::max(sms, 1);
  if (cacheable) cached[device].store(n, std::memory_order_relaxed);
  return n;
}

// A launch's plan geometry (header comment).
struct Layout {
  int32_t groups = 0;
  int32_t workers = 0;
  int64_t max_words = 0;
  size_t plan_bytes = 0;
  int64_t slot_rows = 0;

  size_t workspace_bytes() const {
    return plan_bytes + static_cast<size_t>(slot_rows) * (kHeadDimV + 1) * sizeof(float);
  }
};

// Throws LaunchError where there is no device to count SMs on.
inline Layout layout_of(const DecodeShape& s, int32_t workers_per_sm, int32_t rows_per_group) {
  Layout l;
  l.groups = (s.qlen * s.heads + rows_per_group - 1) / rows_per_group;
  const int64_t w = int64_t{workers_per_sm} * sm_count() / l.groups;
  l.workers = static_cast<int32_t>(std::clamp<int64_t>(w, 1, kMaxPlanWorkers));
  l.max_words = max_plan_words(s.batch, l.workers);
  l.plan_bytes = (static_cast<size_t>(l.max_words) * 4 + 15) / 16 * 16;
  l.slot_rows = max_plan_slots(s.batch, l.workers) * s.qlen * s.heads;
  return l;
}

// Refuses batches whose largest plan would not fit the kernel parameters.
inline Support check_plan_room(const DecodeShape& s, const Layout& l) {
  if (l.max_words > kLargePlanWords) {
    return Support::no("a plan of up to " + std::to_string(l.max_words) + " words (batch " +
                       std::to_string(s.batch) + ") exceeds the " +
                       std::to_string(kLargePlanWords) + " a launch carries in its parameters");
  }
  return Support::yes();
}

// Variant::plan of a persistent variant whose can_implement passed: the plan of `kv_lens` into
// `out`. Throws LaunchError("<name>: ...").
inline size_t write_plan(std::string_view name, const DecodeShape& s, int32_t kv_tile,
                         const Layout& l, std::span<const int32_t> kv_lens,
                         std::span<int32_t> out) {
  if (kv_lens.size() != static_cast<size_t>(s.batch)) {
    throw LaunchError(std::string(name) + ": " + std::to_string(kv_lens.size()) +
                      " lengths for a batch of " + std::to_string(s.batch));
  }
  try {
    return static_cast<size_t>(write_launch_plan(kv_lens, kv_tile, l.workers, max_len_of(s), out));
  } catch (const std::invalid_argument& e) {
    throw LaunchError(std::string(name) + ": " + e.what());
  }
}

// A checked plan and where its launch reads and writes.
struct Launch {
  PlanView plan;
  PlanRef ref;
  int32_t* plan_dev = nullptr;  // the workspace's plan words
  float* part_out = nullptr;    // [slot_rows][512]
  float* part_lse = nullptr;    // [slot_rows]
  dim3 grid;
};

// Checks a.plan as the plan of this launch (check_plan: every index and range inside it) and
// lays out the workspace. Throws LaunchError("<name>: ...").
inline Launch prepare(std::string_view name, const DecodeShape& s, int32_t kv_tile,
                      const Layout& l, const DecodeArgs& a) {
  if (!a.plan) throw LaunchError(std::string(name) + ": no plan (Variant::plan makes it)");
  Launch x;
  try {
    x.plan = check_plan(std::span<const int32_t>(a.plan, a.plan_words), s.batch, l.workers,
                        kv_tile, max_len_of(s));
  } catch (const std::invalid_argument& e) {
    throw LaunchError(std::string(name) + ": " + e.what());
  }
  x.plan_dev = static_cast<int32_t*>(a.workspace);
  x.part_out = reinterpret_cast<float*>(static_cast<uint8_t*>(a.workspace) + l.plan_bytes);
  x.part_lse = x.part_out + l.slot_rows * kHeadDimV;
  x.ref.worker_first = static_cast<int32_t>(x.plan.layout.worker_first);
  x.ref.pieces = static_cast<int32_t>(x.plan.layout.pieces);
  if (x.plan.cut_seqs > 0) {  // else the combine kernel does not run and reads nothing
    x.ref.tail = static_cast<int32_t>(x.plan.layout.seq_first_slot);
    x.ref.tail_words = static_cast<int32_t>(x.plan.layout.words - x.plan.layout.seq_first_slot);
    x.ref.tail_dev = x.plan_dev + x.ref.tail;
  }
  x.grid = dim3(static_cast<unsigned>(int64_t{l.workers} * l.groups));
  return x;
}

// The launch's words as PlanWords<kWords> (their count checked against the capacity by the
// caller's choice of kWords).
template <int kWords>
PlanWords<kWords> plan_words_of(const DecodeArgs& a, const Launch& x) {
  PlanWords<kWords> w;
  std::copy(a.plan, a.plan + x.plan.layout.words, w.w);
  return w;
}

// Enqueues the combine kernel over the plan's cut sequences, if any.
inline void combine_cut(const DecodeShape& s, const Launch& x, uint16_t* out, float* lse,
                        hipStream_t stream, const char* what) {
  if (x.plan.cut_seqs == 0) return;
  mma::launch_plan_combine(s, x.plan.cut_seqs, x.plan_dev + x.plan.layout.cut_seqs,
                           x.plan_dev + x.plan.layout.seq_first_slot, x.part_out, x.part_lse, out,
                           lse, stream, what);
}

}  // namespace persistent
}  // namespace
}  // namespace mlatune
