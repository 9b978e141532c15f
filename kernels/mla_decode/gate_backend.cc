#include "mla_decode/gate_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <string>

#include "mla_decode/numformat.h"
#include "mla_decode/reference.h"
#if defined(MLATUNE_WITH_HIP)
#include "mla_decode/hip/hip_gate.h"
#endif

namespace mlatune {
namespace {

// Smallest power of two s with bound / s <= the format's maximum: dividing by it is exact.
float power_of_two_scale(float bound, DType t, float* inverse) {
  if (!is_fp8(t)) {
    *inverse = 1.0f;
    return 1.0f;
  }
  int exp = 0;
  const double m = std::frexp(static_cast<double>(bound) / dtype_max(t), &exp);
  if (m == 0.5) --exp;  // an exact power of two
  *inverse = std::ldexp(1.0f, -exp);
  return std::ldexp(1.0f, exp);
}

class HostPreparedCase final : public PreparedCase {
 public:
  HostPreparedCase(const CaseSpec& spec, const std::vector<int64_t>& rows, int threads)
      : spec_(spec), host_(generate_host_case(spec)), rows_(rows) {
    if (!rows_.empty()) ref_ = reference_decode_rows(spec_.shape, host_.args(), rows_, threads);
  }
  const CaseSpec& spec() const override { return spec_; }
  DecodeArgs args() const override { return host_.args(); }
  OutputCheck check(const uint16_t* out, const float* lse, double atol,
                    double rtol) const override {
    return compare_host(spec_.shape, rows_, ref_.out.data(), ref_.lse.data(), out, lse, atol, rtol);
  }

 private:
  CaseSpec spec_;
  HostCase host_;
  std::vector<int64_t> rows_;
  ReferenceResult ref_;
};

class HostGateBackend final : public GateBackend {
 public:
  std::unique_ptr<PreparedCase> prepare(const CaseSpec& spec, const std::vector<int64_t>& rows,
                                        int threads) override {
    return std::make_unique<HostPreparedCase>(spec, rows, threads);
  }
  int64_t first_difference(const void* a, const void* b, size_t bytes) override {
    const auto* x = static_cast<const uint8_t*>(a);
    const auto* y = static_cast<const uint8_t*>(b);
    if (bytes == 0 || std::memcmp(x, y, bytes) == 0) return -1;
    size_t i = 0;
    while (x[i] == y[i]) ++i;
    return static_cast<int64_t>(i);
  }
};

}  // namespace

CaseSpec make_case_spec(const DecodeShape& shape, std::vector<int32_t> kv_lens, uint64_t seed,
                        InputPattern pattern) {
  CaseSpec c;
  c.shape = shape;
  DecodeShape& s = c.shape;
  if (kv_lens.size() != static_cast<size_t>(std::max(s.batch, 0))) {
    throw std::invalid_argument("make_case_spec: " + std::to_string(kv_lens.size()) +
                                " lengths for batch " + std::to_string(s.batch));
  }
  c.kv_lens = std::move(kv_lens);
  c.page_start.resize(c.kv_lens.size());
  int64_t used = 0;
  for (size_t b = 0; b < c.kv_lens.size(); ++b) {
    c.page_start[b] = used;
    used += (int64_t{c.kv_lens[b]} + s.page_size - 1) / std::max(s.page_size, 1);
  }
  s.num_pages = used + kPoisonPages;
  CaseGen& g = c.gen;
  g.seed = seed;
  g.pattern = pattern;
  g.qlen = s.qlen;
  g.heads = s.heads;
  g.page_size = s.page_size;
  g.max_pages_per_seq = s.max_pages_per_seq;
  g.num_pages = s.num_pages;
  g.q_dtype = s.q_dtype;
  g.kv_dtype = s.kv_dtype;
  s.q_scale = power_of_two_scale(casegen::q_bound(pattern), s.q_dtype, &g.q_inv_scale);
  s.kv_scale = power_of_two_scale(casegen::kv_bound(pattern), s.kv_dtype, &g.kv_inv_scale);
  if (auto e = validate(s)) throw std::invalid_argument("make_case_spec: " + *e);
  // A multiplier coprime with the pool size makes u -> (u * mul + add) mod pages a permutation.
  const int64_t n = s.num_pages;
  uint64_t h = casegen::hash(seed, 0x9a9e, static_cast<uint64_t>(n));
  g.perm_mul = n == 1 ? 1 : 1 + static_cast<int64_t>(h % static_cast<uint64_t>(n - 1));
  while (std::gcd(g.perm_mul, n) != 1) g.perm_mul = g.perm_mul % (n - 1) + 1;
  g.perm_add = static_cast<int64_t>(casegen::mix64(h) % static_cast<uint64_t>(n));
  return c;
}

DecodeArgs HostCase::args() const {
  DecodeArgs a;
  a.q = q.data();
  a.kv = kv.data();
  a.block_table = block_table.data();
  a.kv_lens = kv_lens.data();
  return a;
}

HostCase generate_host_case(const CaseSpec& spec) {
  const DecodeShape& s = spec.shape;
  const CaseGen& g = spec.gen;
  HostCase h;
  h.kv_lens = spec.kv_lens;
  h.q.resize(static_cast<size_t>(s.q_elems()) * dtype_bytes(s.q_dtype));
  for (int64_t row = 0; row < s.rows(); ++row) {
    for (int32_t d = 0; d < kHeadDimQK; ++d) {
      casegen::store(s.q_dtype, h.q.data(), row * kHeadDimQK + d,
                     casegen::q_value(g, row, d) * g.q_inv_scale);
    }
  }
  h.kv.assign(static_cast<size_t>(s.kv_elems()) * dtype_bytes(s.kv_dtype),
              casegen::poison_byte(s.kv_dtype));
  h.block_table.resize(static_cast<size_t>(s.block_table_elems()));
  for (int32_t b = 0; b < s.batch; ++b) {
    const int32_t len = spec.kv_lens[b];
    const int64_t pages = (int64_t{len} + s.page_size - 1) / s.page_size;
    int32_t* slots = &h.block_table[static_cast<size_t>(b) * s.max_pages_per_seq];
    for (int64_t p = 0; p < s.max_pages_per_seq; ++p) {
      slots[p] = p < pages ? casegen::page_id(g, spec.page_start[b] + p) : casegen::unused_slot(p);
    }
    for (int32_t j = 0; j < len; ++j) {
      const int64_t row = int64_t{slots[j / s.page_size]} * s.page_size + j % s.page_size;
      const bool dominant = casegen::dominant(g, b, j, len);
      for (int32_t d = 0; d < kHeadDimQK; ++d) {
        casegen::store(s.kv_dtype, h.kv.data(), row * kHeadDimQK + d,
                       casegen::kv_value(g, b, j, d, dominant) * g.kv_inv_scale);
      }
    }
  }
  return h;
}

OutputCheck compare_host(const DecodeShape& s, const std::vector<int64_t>& checked_rows,
                         const double* ref_out, const double* ref_lse, const uint16_t* out,
                         const float* lse, double atol, double rtol) {
  OutputCheck r;
  for (int64_t i = 0; i < s.out_elems(); ++i) {
    const float v = bf16_to_float(out[i]);
    if (!std::isfinite(v)) {
      r.bad_out = i;
      r.bad_out_value = v;
      break;
    }
  }
  if (lse) {
    for (int64_t i = 0; i < s.rows(); ++i) {
      if (!std::isfinite(lse[i])) {
        r.bad_lse = i;
        r.bad_lse_value = lse[i];
        break;
      }
    }
  }
  r.rows.resize(checked_rows.size());
  for (size_t k = 0; k < checked_rows.size(); ++k) {
    const int64_t row = checked_rows[k];
    const uint16_t* o = out + row * kHeadDimV;
    const double* ref = ref_out + k * kHeadDimV;
    RowCheck& c = r.rows[k];
    double dot = 0, no = 0, nr = 0;
    for (int d = 0; d < kHeadDimV; ++d) {
      const double v = bf16_to_float(o[d]);
      const double err = std::fabs(v - ref[d]);
      const double ratio = err / (atol + rtol * std::fabs(ref[d]));
      if (ratio > c.worst_ratio) {
        c.worst_ratio = ratio;
        c.worst_dim = d;
      }
      c.max_abs = std::max(c.max_abs, err);
      dot += v * ref[d];
      no += v * v;
      nr += ref[d] * ref[d];
    }
    c.cosine = (no == 0 && nr == 0) ? 1.0 : dot / std::sqrt(std::max(no * nr, 1e-300));
    c.lse_err = lse ? std::fabs(double{lse[row]} - ref_lse[k]) : 0.0;
  }
  return r;
}

GateBackend& gate_backend(Backend b) {
  switch (b) {
    case Backend::kHost: {
      static HostGateBackend host;
      return host;
    }
    case Backend::kHip:
#if defined(MLATUNE_WITH_HIP)
      return hip_gate_backend();
#else
      throw LaunchError(
          "this build has no GPU backend (configure with -DMLATUNE_GPU=nvidia or amd)");
#endif
  }
  throw LaunchError("gate_backend: unknown backend " + std::to_string(static_cast<int>(b)));
}

}  // namespace mlatune
