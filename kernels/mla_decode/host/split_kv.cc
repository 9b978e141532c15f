// host_split_kv_v1: each sequence's keys are cut into kv_splits contiguous chunks of
// ceil(L / kv_splits) keys; every (sequence, split) is a parallel task that walks its chunk in
// tiles of kv_tile keys and writes a partial result; a separate combine pass, parallel over rows,
// merges the splits by their LSE.
//
// Workspace layout (floats), P = (sequence * kv_splits + split) * rows + r, r = i * heads + h:
//   part_out [batch, kv_splits, rows, 512]: the split's normalised output (sum p v / sum p),
//       without kv_scale; written only where part_lse is finite.
//   part_lse [batch, kv_splits, rows]: m + log(sum p), or -inf for a split with no visible key
//       (empty, or fully masked for an early query token), whose part_out is never read.
#include <algorithm>
#include <string>
#include <vector>

#include "mla_decode/code_identity.h"
#include "mla_decode/host/host_common.h"
#include "mla_decode/host/host_variants.h"
#include "mla_decode/host/key_range.h"
#include "mla_decode/host/thread_pool.h"

namespace mlatune {
namespace {

constexpr int64_t kCombineRowsPerTask = 16;

int64_t partial_count(const DecodeShape& s, const LaunchParams& p) {
  return int64_t{s.batch} * p.kv_splits * s.qlen * s.heads;
}

class SplitKvVariant final : public Variant {
 public:
  std::string_view name() const override { return "host_split_kv_v1"; }
  std::string_view description() const override {
    return "host CPU: keys cut into kv_splits chunks computed as parallel (sequence, split) "
           "tasks writing partial out/LSE, then an LSE-merge combine pass parallel over rows";
  }
  Backend backend() const override { return Backend::kHost; }
  std::string_view code_identity() const override { return code_identity::k_host_split_kv_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_splits = {1, 2, 3, 4, 8, 16};
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
    if (validate(s) || p.kv_splits <= 0) return 0;
    return static_cast<size_t>(partial_count(s, p)) * (kHeadDimV + 1) * sizeof(float);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

void SplitKvVariant::run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const {
  if (p.kv_splits <= 0 || p.kv_tile <= 0) {
    throw LaunchError("kv_splits and kv_tile must be positive, got " + p.to_string());
  }
  host::check_launch(s, a, workspace_bytes(s, p));
  float* part_out = static_cast<float*>(a.workspace);
  float* part_lse = part_out + partial_count(s, p) * kHeadDimV;
  const int32_t splits = p.kv_splits;
  parallel_for(int64_t{s.batch} * splits, p.workers, [&](int64_t t) {
    const int32_t b = static_cast<int32_t>(t / splits);
    const int64_t len = a.kv_lens[b];
    const int64_t chunk = (len + splits - 1) / splits;
    const int64_t lo = std::min(len, t % splits * chunk);
    host::attend_keys(s, a, b, lo, std::min(len, lo + chunk), p.kv_tile, t, part_out, part_lse);
  });
  const int64_t rows = s.rows();
  const int64_t tasks = (rows + kCombineRowsPerTask - 1) / kCombineRowsPerTask;
  parallel_for(tasks, p.workers, [&](int64_t t) {
    std::vector<float> acc(kHeadDimV);
    const int64_t end = std::min(rows, (t + 1) * kCombineRowsPerTask);
    for (int64_t row = t * kCombineRowsPerTask; row < end; ++row) {
      host::merge_partials(s, a, row, row / (int64_t{s.qlen} * s.heads) * splits, splits, part_out,
                           part_lse, acc.data());
    }
  });
}

}  // namespace

const Variant& host_split_kv_variant() {
  static const SplitKvVariant v;
  return v;
}

}  // namespace mlatune
