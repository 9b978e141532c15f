#include "mla_decode/host/key_range.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "mla_decode/host/host_common.h"

namespace mlatune::host {
namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}  // namespace

void attend_keys(const DecodeShape& s, const DecodeArgs& a, int32_t b, int64_t lo, int64_t hi,
                 int64_t kv_tile, int64_t slot, float* part_out, float* part_lse) {
  const int64_t rows = int64_t{s.qlen} * s.heads;  // r = i * heads + h
  const int64_t len = a.kv_lens[b];
  std::vector<float> acc(rows * kHeadDimV, 0.0f);
  std::vector<float> m(rows, kNegInf);
  std::vector<float> l(rows, 0.0f);
  if (lo < hi) {
    const int64_t tile = std::min(kv_tile, hi - lo);  // same tiles, smaller buffers
    std::vector<float> q(rows * kHeadDimQK);
    std::vector<float> kv(tile * kHeadDimQK);
    std::vector<float> p(tile);
    load_q_rows(s, a, b, 0, s.heads, q.data());
    const int32_t* pages = seq_pages(s, a, b);
    for (int64_t t0 = lo; t0 < hi; t0 += tile) {
      const int64_t n = std::min(tile, hi - t0);
      load_kv_rows(s, a, pages, t0, n, kv.data());
      for (int64_t r = 0; r < rows; ++r) {
        const int32_t i = static_cast<int32_t>(r / s.heads);
        const int64_t cnt = std::clamp<int64_t>(visible_keys(len, s.qlen, i) - t0, 0, n);
        if (cnt == 0) continue;
        const float* qr = &q[r * kHeadDimQK];
        float mt = m[r];
        for (int64_t c = 0; c < cnt; ++c) {
          p[c] = dot_qk(qr, &kv[c * kHeadDimQK]);
          mt = std::max(mt, p[c]);
        }
        const float alpha = std::exp(m[r] - mt);  // 0 before the first key (m = -inf)
        float* ar = &acc[r * kHeadDimV];
        float sum = 0.0f;
        for (int64_t c = 0; c < cnt; ++c) {
          const float e = std::exp(p[c] - mt);
          sum += e;
          scale_add_v(ar, c == 0 ? alpha : 1.0f, e, &kv[c * kHeadDimQK]);
        }
        l[r] = l[r] * alpha + sum;
        m[r] = mt;
      }
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    const float* ar = &acc[r * kHeadDimV];
    if (slot < 0) {
      const int64_t row = int64_t{b} * rows + r;
      store_row(ar, m[r], l[r], s.kv_scale, a.out + row * kHeadDimV,
                s.return_lse ? a.lse + row : nullptr);
      continue;
    }
    const int64_t at = slot * rows + r;
    if (!(l[r] > 0.0f)) {
      part_lse[at] = kNegInf;  // every key of this range is masked for this row
      continue;
    }
    const float inv = 1.0f / l[r];
    float* o = part_out + at * kHeadDimV;
    for (int d = 0; d < kHeadDimV; ++d) o[d] = ar[d] * inv;
    part_lse[at] = m[r] + std::log(l[r]);
  }
}

void merge_partials(const DecodeShape& s, const DecodeArgs& a, int64_t row, int64_t first_slot,
                    int32_t count, const float* part_out, const float* part_lse, float* acc) {
  const int64_t rows = int64_t{s.qlen} * s.heads;
  const int64_t r = row % rows;
  auto at = [&](int32_t k) { return (first_slot + k) * rows + r; };
  float mx = kNegInf;
  for (int32_t k = 0; k < count; ++k) mx = std::max(mx, part_lse[at(k)]);
  uint16_t* out = a.out + row * kHeadDimV;
  float* lse = s.return_lse ? a.lse + row : nullptr;
  if (mx == kNegInf) {  // no range saw a key; unreachable for valid shapes (L >= qlen)
    store_row(acc, kNegInf, 0.0f, s.kv_scale, out, lse);
    return;
  }
  std::fill(acc, acc + kHeadDimV, 0.0f);
  float total = 0.0f;
  for (int32_t k = 0; k < count; ++k) {
    const float ls = part_lse[at(k)];
    if (ls == kNegInf) continue;  // contributes exactly 0; its part_out is unwritten
    const float w = std::exp(ls - mx);
    total += w;
    scale_add_v(acc, 1.0f, w, part_out + at(k) * kHeadDimV);
  }
  // store_row divides by `total` and writes lse = mx + log(total).
  store_row(acc, mx, total, s.kv_scale, out, lse);
}

}  // namespace mlatune::host
