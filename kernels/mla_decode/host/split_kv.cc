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
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "mla_decode/code_identity.h"
#include "mla_decode/host/host_common.h"
#include "mla_decode/host/host_variants.h"
#include "mla_decode/host/thread_pool.h"

namespace mlatune {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
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
  ParamSpace param_space() const override {
    ParamSpace p;
    p.kv_splits = {1, 2, 3, 4, 8, 16};
    p.kv_tile = {64};
    p.workers = {1, 2, 4, 8, 16, 32, 64};
    return p;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    return host::check_support(s, p, param_space());
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.kv_splits <= 0) return 0;
    return static_cast<size_t>(partial_count(s, p)) * (kHeadDimV + 1) * sizeof(float);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

// Computes split `split` of sequence b into its partial slots.
void run_split(const DecodeShape& s, const DecodeArgs& a, int32_t b, int32_t splits, int32_t split,
               int64_t kv_tile, float* part_out, float* part_lse) {
  const int64_t rows = int64_t{s.qlen} * s.heads;  // r = i * heads + h
  const int64_t first = (int64_t{b} * splits + split) * rows;
  float* lse = part_lse + first;
  const int64_t len = a.kv_lens[b];
  const int64_t chunk = (len + splits - 1) / splits;
  const int64_t lo = std::min(len, split * chunk);
  const int64_t hi = std::min(len, lo + chunk);
  if (lo == hi) {
    std::fill(lse, lse + rows, kNegInf);
    return;
  }

  const int64_t tile = std::min(kv_tile, hi - lo);  // same tiles, smaller buffers
  std::vector<float> q(rows * kHeadDimQK);
  std::vector<float> acc(rows * kHeadDimV, 0.0f);
  std::vector<float> m(rows, kNegInf);
  std::vector<float> l(rows, 0.0f);
  std::vector<float> kv(tile * kHeadDimQK);
  std::vector<float> p(tile);
  host::load_q_rows(s, a, b, 0, s.heads, q.data());
  const int32_t* pages = host::seq_pages(s, a, b);

  for (int64_t t0 = lo; t0 < hi; t0 += tile) {
    const int64_t n = std::min(tile, hi - t0);
    host::load_kv_rows(s, a, pages, t0, n, kv.data());
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t i = static_cast<int32_t>(r / s.heads);
      const int64_t cnt = std::clamp<int64_t>(host::visible_keys(len, s.qlen, i) - t0, 0, n);
      if (cnt == 0) continue;
      const float* qr = &q[r * kHeadDimQK];
      float mt = m[r];
      for (int64_t c = 0; c < cnt; ++c) {
        p[c] = host::dot_qk(qr, &kv[c * kHeadDimQK]);
        mt = std::max(mt, p[c]);
      }
      const float alpha = std::exp(m[r] - mt);  // 0 before the first key (m = -inf)
      float* ar = &acc[r * kHeadDimV];
      float sum = 0.0f;
      for (int64_t c = 0; c < cnt; ++c) {
        const float e = std::exp(p[c] - mt);
        sum += e;
        host::scale_add_v(ar, c == 0 ? alpha : 1.0f, e, &kv[c * kHeadDimQK]);
      }
      l[r] = l[r] * alpha + sum;
      m[r] = mt;
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    if (!(l[r] > 0.0f)) {
      lse[r] = kNegInf;  // every key of this split is masked for this row
      continue;
    }
    const float inv = 1.0f / l[r];
    float* o = part_out + (first + r) * kHeadDimV;
    const float* ar = &acc[r * kHeadDimV];
    for (int d = 0; d < kHeadDimV; ++d) o[d] = ar[d] * inv;
    lse[r] = m[r] + std::log(l[r]);
  }
}

// Merges the splits of output row `row` (= token * heads + head).
void combine_row(const DecodeShape& s, const DecodeArgs& a, int32_t splits, int64_t row,
                 const float* part_out, const float* part_lse, float* acc) {
  const int64_t rows = int64_t{s.qlen} * s.heads;
  const int64_t b = row / rows;
  const int64_t r = row % rows;
  auto slot = [&](int32_t sp) { return (b * splits + sp) * rows + r; };
  float mx = kNegInf;
  for (int32_t sp = 0; sp < splits; ++sp) mx = std::max(mx, part_lse[slot(sp)]);
  uint16_t* out = a.out + row * kHeadDimV;
  float* lse = s.return_lse ? a.lse + row : nullptr;
  if (mx == kNegInf) {  // no split saw a key; unreachable for valid shapes (L >= qlen)
    host::store_row(acc, kNegInf, 0.0f, s.kv_scale, out, lse);
    return;
  }
  std::fill(acc, acc + kHeadDimV, 0.0f);
  float total = 0.0f;
  for (int32_t sp = 0; sp < splits; ++sp) {
    const float ls = part_lse[slot(sp)];
    if (ls == kNegInf) continue;  // contributes exactly 0; its part_out is unwritten
    const float w = std::exp(ls - mx);
    total += w;
    host::scale_add_v(acc, 1.0f, w, part_out + slot(sp) * kHeadDimV);
  }
  // store_row divides by `total` and writes lse = mx + log(total).
  host::store_row(acc, mx, total, s.kv_scale, out, lse);
}

void SplitKvVariant::run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const {
  if (p.kv_splits <= 0 || p.kv_tile <= 0) {
    throw LaunchError("kv_splits and kv_tile must be positive, got " + p.to_string());
  }
  host::check_launch(s, a, workspace_bytes(s, p));
  float* part_out = static_cast<float*>(a.workspace);
  float* part_lse = part_out + partial_count(s, p) * kHeadDimV;
  const int32_t splits = p.kv_splits;
  parallel_for(int64_t{s.batch} * splits, p.workers, [&](int64_t t) {
    run_split(s, a, static_cast<int32_t>(t / splits), splits, static_cast<int32_t>(t % splits),
              p.kv_tile, part_out, part_lse);
  });
  const int64_t rows = s.rows();
  const int64_t tasks = (rows + kCombineRowsPerTask - 1) / kCombineRowsPerTask;
  parallel_for(tasks, p.workers, [&](int64_t t) {
    std::vector<float> acc(kHeadDimV);
    const int64_t end = std::min(rows, (t + 1) * kCombineRowsPerTask);
    for (int64_t row = t * kCombineRowsPerTask; row < end; ++row) {
      combine_row(s, a, splits, row, part_out, part_lse, acc.data());
    }
  });
}

}  // namespace

const Variant& host_split_kv_variant() {
  static const SplitKvVariant v;
  return v;
}

}  // namespace mlatune
