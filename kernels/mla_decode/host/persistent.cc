// host_persistent_v1: persistent scheduling on the host. The work planner (work_plan.h) deals the
// batch's KV tiles out to `workers` threads as contiguous runs of about equal cost; each thread
// walks its pieces in order (key_range.h): a piece that is its whole sequence writes the output
// rows directly, a piece of a cut sequence writes a partial into its slot, and a combine pass,
// parallel over the rows of cut sequences, merges the slots in key order. Unlike
// host_split_kv_v1 (every sequence cut into the same number of chunks), the cost of a batch of
// unequal lengths is spread evenly and a short sequence is never cut.
//
// Workspace (floats): part_out [slots, rows, 512] then part_lse [slots, rows], slots bounded by
// max_plan_slots(batch, workers) (the plan of any lengths fits). kv_splits is 1: the plan, not a
// launch parameter, decides where sequences are cut. The plan is made by plan() from the host
// copy of the lengths (launch_plan.h) and checked by run() before any piece is read.
#include <algorithm>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "mla_decode/code_identity.h"
#include "mla_decode/host/host_common.h"
#include "mla_decode/host/host_variants.h"
#include "mla_decode/host/key_range.h"
#include "mla_decode/host/thread_pool.h"
#include "mla_decode/launch_plan.h"
#include "mla_decode/plan_writer.h"
#include "mla_decode/work_plan.h"

namespace mlatune {
namespace {

constexpr int64_t kCombineRowsPerTask = 16;
constexpr const char* kName = "host_persistent_v1";

int32_t max_len_of(const DecodeShape& s) {
  return static_cast<int32_t>(
      std::min<int64_t>(int64_t{s.max_pages_per_seq} * s.page_size, INT32_MAX));
}

class PersistentVariant final : public Variant {
 public:
  std::string_view name() const override { return "host_persistent_v1"; }
  std::string_view description() const override {
    return "host CPU, persistent scheduling: a host-side planner deals the batch's KV tiles to "
           "the worker threads as contiguous runs of equal cost (long sequences cut, short ones "
           "shared), partials of cut sequences merged by LSE";
  }
  Backend backend() const override { return Backend::kHost; }
  std::string_view code_identity() const override { return code_identity::k_host_persistent_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_tile = {64};
      p.workers = {1, 2, 4, 8, 16, 32, 64};
      return p;
    }();
    return s;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    return host::check_support(s, p, space());
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.workers <= 0) return 0;
    const int64_t slots = max_plan_slots(s.batch, p.workers);
    return static_cast<size_t>(slots * s.qlen * s.heads) * (kHeadDimV + 1) * sizeof(float);
  }
  size_t plan_words(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.workers <= 0) return 0;
    return static_cast<size_t>(max_plan_words(s.batch, p.workers));
  }
  size_t plan(const DecodeShape& s, const LaunchParams& p, std::span<const int32_t> kv_lens,
              std::span<int32_t> out) const override {
    if (!space().contains(p)) throw LaunchError(std::string(kName) + ": bad launch params");
    if (kv_lens.size() != static_cast<size_t>(s.batch)) {
      throw LaunchError(std::string(kName) + ": " + std::to_string(kv_lens.size()) +
                        " lengths for a batch of " + std::to_string(s.batch));
    }
    try {
      return static_cast<size_t>(
          write_launch_plan(kv_lens, p.kv_tile, p.workers, max_len_of(s), out));
    } catch (const std::invalid_argument& e) {
      throw LaunchError(std::string(kName) + ": " + e.what());
    }
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

void PersistentVariant::run(const DecodeShape& s, const LaunchParams& p,
                            const DecodeArgs& a) const {
  if (!space().contains(p)) {
    throw LaunchError("host_persistent_v1: launch params " + p.to_string() + " not supported");
  }
  host::check_launch(s, a, workspace_bytes(s, p));
  if (!a.plan) throw LaunchError(std::string(kName) + ": no plan (Variant::plan makes it)");
  PlanView plan;
  try {
    plan = check_plan(std::span<const int32_t>(a.plan, a.plan_words), s.batch, p.workers, p.kv_tile,
                      max_len_of(s));
  } catch (const std::invalid_argument& e) {
    throw LaunchError(std::string(kName) + ": " + e.what());
  }
  const int64_t rows = int64_t{s.qlen} * s.heads;
  const int64_t slots = max_plan_slots(s.batch, p.workers);
  float* part_out = static_cast<float*>(a.workspace);
  float* part_lse = part_out + slots * rows * kHeadDimV;
  parallel_for(plan.workers, p.workers, [&](int64_t w) {
    const int32_t worker = static_cast<int32_t>(w);
    for (int32_t i = plan.worker_first(worker); i < plan.worker_first(worker + 1); ++i) {
      const WorkPiece piece = plan.piece(i);
      // Keys past the sequence's length are never read, whatever lengths the plan was made for.
      const int64_t len = a.kv_lens[piece.seq];
      host::attend_keys(s, a, piece.seq, std::min<int64_t>(piece.key_begin, len),
                        std::min<int64_t>(piece.key_end, len), p.kv_tile, piece.slot, part_out,
                        part_lse);
    }
  });
  // The rows of cut sequences, in row order.
  std::vector<int64_t> cut_rows;
  for (int32_t c = 0; c < plan.cut_seqs; ++c) {
    for (int64_t r = 0; r < rows; ++r) cut_rows.push_back(int64_t{plan.cut_seq(c)} * rows + r);
  }
  const int64_t n = static_cast<int64_t>(cut_rows.size());
  parallel_for((n + kCombineRowsPerTask - 1) / kCombineRowsPerTask, p.workers, [&](int64_t t) {
    std::vector<float> acc(kHeadDimV);
    for (int64_t k = t * kCombineRowsPerTask; k < std::min(n, (t + 1) * kCombineRowsPerTask); ++k) {
      const int64_t row = cut_rows[k];
      const int32_t b = static_cast<int32_t>(row / rows);
      host::merge_partials(s, a, row, plan.seq_first_slot(b),
                           plan.seq_first_slot(b + 1) - plan.seq_first_slot(b), part_out, part_lse,
                           acc.data());
    }
  });
}

}  // namespace

const Variant& host_persistent_variant() {
  static const PersistentVariant v;
  return v;
}

}  // namespace mlatune
