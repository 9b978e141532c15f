// host_online_softmax_v1: one pass over each sequence's keys, key by key, with a running max and
// running sum per query row; the accumulator is rescaled whenever a row's max grows. Tasks are
// (sequence, group of heads); each task dequantises a key once for all its qlen x heads rows.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "mla_decode/code_identity.h"
#include "mla_decode/host/host_common.h"
#include "mla_decode/host/host_variants.h"
#include "mla_decode/host/thread_pool.h"

namespace mlatune {
namespace {

class OnlineSoftmaxVariant final : public Variant {
 public:
  std::string_view name() const override { return "host_online_softmax_v1"; }
  std::string_view description() const override {
    return "host CPU: one pass per key with running max/sum per row (online softmax); parallel "
           "over (sequence, head group)";
  }
  Backend backend() const override { return Backend::kHost; }
  std::string_view code_identity() const override {
    return code_identity::k_host_online_softmax_v1;
  }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.workers = {1, 2, 4, 8, 16, 32, 64};
      return p;
    }();
    return s;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    return host::check_support(s, p, space());
  }
  size_t workspace_bytes(const DecodeShape&, const LaunchParams&) const override { return 0; }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

// Processes sequence b, heads [h0, h0 + nh).
void run_task(const DecodeShape& s, const DecodeArgs& a, int32_t b, int32_t h0, int32_t nh) {
  const int64_t rows = int64_t{s.qlen} * nh;  // r = i * nh + h
  std::vector<float> q(rows * kHeadDimQK);
  std::vector<float> acc(rows * kHeadDimV, 0.0f);
  std::vector<float> m(rows, -std::numeric_limits<float>::infinity());
  std::vector<float> l(rows, 0.0f);
  std::vector<float> kv(kHeadDimQK);
  host::load_q_rows(s, a, b, h0, nh, q.data());

  const int64_t len = a.kv_lens[b];
  const int32_t* pages = host::seq_pages(s, a, b);
  // Token i sees keys j <= len - qlen + i: every token sees the keys below the first one's limit.
  for (int64_t j = 0; j < len; ++j) {
    host::load_kv_rows(s, a, pages, j, 1, kv.data());
    const int32_t first_token = static_cast<int32_t>(std::max<int64_t>(0, j - (len - s.qlen)));
    for (int64_t r = int64_t{first_token} * nh; r < rows; ++r) {
      const float score = host::dot_qk(&q[r * kHeadDimQK], kv.data());
      float alpha = 1.0f;
      if (score > m[r]) {
        alpha = std::exp(m[r] - score);  // 0 for the first key (m = -inf)
        m[r] = score;
      }
      const float p = std::exp(score - m[r]);
      l[r] = l[r] * alpha + p;
      host::scale_add_v(&acc[r * kHeadDimV], alpha, p, kv.data());
    }
  }

  for (int32_t i = 0; i < s.qlen; ++i) {
    for (int32_t h = 0; h < nh; ++h) {
      const int64_t r = int64_t{i} * nh + h;
      const int64_t out_row = (int64_t{b} * s.qlen + i) * s.heads + h0 + h;
      host::store_row(&acc[r * kHeadDimV], m[r], l[r], s.kv_scale, a.out + out_row * kHeadDimV,
                      s.return_lse ? a.lse + out_row : nullptr);
    }
  }
}

void OnlineSoftmaxVariant::run(const DecodeShape& s, const LaunchParams& p,
                               const DecodeArgs& a) const {
  host::check_launch(s, a, 0);
  // About two tasks per worker; every row's arithmetic is the same whatever the grouping, so
  // the output does not depend on the worker count.
  const int64_t want_groups = (2 * int64_t{std::max(p.workers, 1)} + s.batch - 1) / s.batch;
  const int32_t group =
      static_cast<int32_t>((s.heads + std::min<int64_t>(want_groups, s.heads) - 1) /
                           std::min<int64_t>(want_groups, s.heads));
  const int32_t groups = (s.heads + group - 1) / group;
  parallel_for(int64_t{s.batch} * groups, p.workers, [&](int64_t t) {
    const int32_t b = static_cast<int32_t>(t / groups);
    const int32_t h0 = static_cast<int32_t>(t % groups) * group;
    run_task(s, a, b, h0, std::min(group, s.heads - h0));
  });
}

}  // namespace

const Variant& host_online_softmax_variant() {
  static const OnlineSoftmaxVariant v;
  return v;
}

}  // namespace mlatune
