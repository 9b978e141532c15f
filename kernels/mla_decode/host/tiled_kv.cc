// host_tiled_kv_v1: keys in tiles of kv_tile. A tile's KV rows are dequantised once and used by
// all heads x qlen rows of the sequence (the point of MLA: one latent KV head), scores of the
// tile are computed as a small GEMM against the transposed tile, then one max/rescale per row and
// tile, then P.V. Tasks are whole sequences, so KV is read exactly once.
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

constexpr int kRowBlock = 4;  // query rows sharing each load of K and V in the inner loops

class TiledKvVariant final : public Variant {
 public:
  std::string_view name() const override { return "host_tiled_kv_v1"; }
  std::string_view description() const override {
    return "host CPU: KV tiles of kv_tile keys dequantised once for all heads x qlen rows of a "
           "sequence, tile GEMM for scores, one rescale per tile; parallel over sequences";
  }
  Backend backend() const override { return Backend::kHost; }
  std::string_view code_identity() const override { return code_identity::k_host_tiled_kv_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_tile = {16, 32, 64, 128, 256};
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

// Scores of rows [r0, r0 + 4) against the n keys of the tile: s[r][c] = q[r] . kt[:, c].
void tile_scores(const float* q, const float* __restrict__ kt, int64_t n, int64_t ld,
                 float* __restrict__ s0, float* __restrict__ s1, float* __restrict__ s2,
                 float* __restrict__ s3) {
  const float* q0 = q;
  const float* q1 = q + kHeadDimQK;
  const float* q2 = q + 2 * kHeadDimQK;
  const float* q3 = q + 3 * kHeadDimQK;
  std::fill(s0, s0 + n, 0.0f);
  std::fill(s1, s1 + n, 0.0f);
  std::fill(s2, s2 + n, 0.0f);
  std::fill(s3, s3 + n, 0.0f);
  for (int d = 0; d < kHeadDimQK; ++d) {
    const float* k = kt + d * ld;
    const float a0 = q0[d], a1 = q1[d], a2 = q2[d], a3 = q3[d];
    for (int64_t c = 0; c < n; ++c) {
      s0[c] += a0 * k[c];
      s1[c] += a1 * k[c];
      s2[c] += a2 * k[c];
      s3[c] += a3 * k[c];
    }
  }
}

// acc rows [r0, r0 + 4) += p[r][c] * v[c] over the first n keys of the tile.
void tile_pv(const float* __restrict__ kv, int64_t n, const float* p0, const float* p1,
             const float* p2, const float* p3, float* __restrict__ a0, float* __restrict__ a1,
             float* __restrict__ a2, float* __restrict__ a3) {
  for (int64_t c = 0; c < n; ++c) {
    const float* v = kv + c * kHeadDimQK;
    const float w0 = p0[c], w1 = p1[c], w2 = p2[c], w3 = p3[c];
    for (int d = 0; d < kHeadDimV; ++d) {
      a0[d] += w0 * v[d];
      a1[d] += w1 * v[d];
      a2[d] += w2 * v[d];
      a3[d] += w3 * v[d];
    }
  }
}

void run_sequence(const DecodeShape& s, const DecodeArgs& a, int32_t b, int64_t kv_tile) {
  const int64_t len = a.kv_lens[b];
  const int64_t tile = std::min(kv_tile, len);     // same tiles, smaller buffers
  const int64_t rows = int64_t{s.qlen} * s.heads;  // r = i * heads + h
  const int64_t padded = (rows + kRowBlock - 1) / kRowBlock * kRowBlock;
  std::vector<float> q(padded * kHeadDimQK, 0.0f);
  std::vector<float> acc(padded * kHeadDimV, 0.0f);
  std::vector<float> m(padded, -std::numeric_limits<float>::infinity());
  std::vector<float> l(padded, 0.0f);
  std::vector<float> kv(tile * kHeadDimQK);
  std::vector<float> kt(kHeadDimQK * tile);
  std::vector<float> sc(padded * tile);  // scores, then probabilities (0 where masked)
  host::load_q_rows(s, a, b, 0, s.heads, q.data());

  const int32_t* pages = host::seq_pages(s, a, b);
  for (int64_t t0 = 0; t0 < len; t0 += tile) {
    const int64_t n = std::min(tile, len - t0);
    host::load_kv_rows(s, a, pages, t0, n, kv.data());
    for (int64_t c = 0; c < n; ++c) {
      for (int d = 0; d < kHeadDimQK; ++d) kt[d * n + c] = kv[c * kHeadDimQK + d];
    }
    for (int64_t r = 0; r < padded; r += kRowBlock) {
      float* s0 = &sc[r * tile];
      tile_scores(&q[r * kHeadDimQK], kt.data(), n, n, s0, s0 + tile, s0 + 2 * tile, s0 + 3 * tile);
    }
    for (int64_t r = 0; r < padded; ++r) {
      float* p = &sc[r * tile];
      const int32_t i = static_cast<int32_t>(r / s.heads);
      const int64_t seen = r < rows ? host::visible_keys(len, s.qlen, i) - t0 : 0;
      const int64_t cnt = std::clamp<int64_t>(seen, 0, n);
      float mt = m[r];
      for (int64_t c = 0; c < cnt; ++c) mt = std::max(mt, p[c]);
      float sum = 0.0f;
      for (int64_t c = 0; c < cnt; ++c) {
        p[c] = std::exp(p[c] - mt);
        sum += p[c];
      }
      std::fill(p + cnt, p + n, 0.0f);  // masked keys contribute exactly nothing
      if (cnt == 0) continue;
      const float alpha = std::exp(m[r] - mt);  // 0 before the first key (m = -inf)
      if (alpha != 1.0f) {
        float* ar = &acc[r * kHeadDimV];
        for (int d = 0; d < kHeadDimV; ++d) ar[d] *= alpha;
      }
      l[r] = l[r] * alpha + sum;
      m[r] = mt;
    }
    for (int64_t r = 0; r < padded; r += kRowBlock) {
      const float* p0 = &sc[r * tile];
      float* a0 = &acc[r * kHeadDimV];
      tile_pv(kv.data(), n, p0, p0 + tile, p0 + 2 * tile, p0 + 3 * tile, a0, a0 + kHeadDimV,
              a0 + 2 * kHeadDimV, a0 + 3 * kHeadDimV);
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    const int64_t out_row = int64_t{b} * rows + r;
    host::store_row(&acc[r * kHeadDimV], m[r], l[r], s.kv_scale, a.out + out_row * kHeadDimV,
                    s.return_lse ? a.lse + out_row : nullptr);
  }
}

void TiledKvVariant::run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const {
  host::check_launch(s, a, 0);
  if (p.kv_tile <= 0)
    throw LaunchError("kv_tile must be positive, got " + std::to_string(p.kv_tile));
  parallel_for(s.batch, p.workers,
               [&](int64_t b) { run_sequence(s, a, static_cast<int32_t>(b), p.kv_tile); });
}

}  // namespace

const Variant& host_tiled_kv_variant() {
  static const TiledKvVariant v;
  return v;
}

}  // namespace mlatune
