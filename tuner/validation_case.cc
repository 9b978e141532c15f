#include "tuner/validation_case.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "mla_decode/numformat.h"

namespace mlatune {
namespace {

// splitmix64: a small, portable generator, so that validation inputs are identical on every
// platform and standard library (std::normal_distribution is implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  int64_t range(int64_t lo, int64_t hi) {                                     // [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }
  double normal() {
    double u1 = std::max(uniform(), 1e-300), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t s_;
};

constexpr int32_t kPoisonPages = 2;  // extra NaN pages in the pool that no sequence owns

// Quantises `values` into `out` as dtype `t` and returns the per-tensor scale: 1 for bf16; for
// fp8 the scale that maps the largest magnitude to 90% of the format's maximum.
float quantise(const std::vector<float>& values, DType t, std::vector<uint8_t>& out) {
  out.assign(values.size() * dtype_bytes(t), 0);
  float scale = 1.0f;
  if (is_fp8(t)) {
    float amax = 0;
    for (float v : values) amax = std::max(amax, std::fabs(v));
    scale = amax > 0 ? amax / (0.9f * dtype_max(t)) : 1.0f;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    encode_element(t, out.data(), static_cast<int64_t>(i), values[i] / scale);
  }
  return scale;
}

std::vector<int32_t> sequence_lengths(int32_t batch, int32_t max_kv, int32_t qlen, Rng& rng) {
  std::vector<int32_t> lens(static_cast<size_t>(batch));
  size_t longest = static_cast<size_t>(rng.range(0, batch - 1));
  for (size_t b = 0; b < lens.size(); ++b) {
    int32_t l = static_cast<int32_t>(rng.range(qlen, max_kv));
    // Lengths that are multiples of common tile and page sizes hide tail bugs: avoid them.
    if (l % 16 == 0 && l > qlen) --l;
    lens[b] = l;
  }
  if (batch >= 2) lens[(longest + 1) % lens.size()] = qlen;  // the minimum length
  lens[longest] = max_kv;
  return lens;
}

std::vector<int64_t> rows_to_check(const DecodeShape& s, const std::vector<int32_t>& kv_lens,
                                   const ValidationSettings& v, Rng& rng) {
  std::vector<int64_t> rows;
  if (s.rows() <= v.full_check_rows) {
    rows.resize(static_cast<size_t>(s.rows()));
    std::iota(rows.begin(), rows.end(), 0);
    return rows;
  }
  std::vector<int32_t> order(kv_lens.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return kv_lens[a] > kv_lens[b]; });
  std::set<int64_t> chosen;
  int64_t rows_per_seq = int64_t{s.qlen} * s.heads;
  size_t full = std::min(order.size(), static_cast<size_t>(v.sampled_sequences));
  for (size_t i = 0; i < full; ++i) {
    for (int64_t r = 0; r < rows_per_seq; ++r) chosen.insert(order[i] * rows_per_seq + r);
  }
  for (int32_t i = 0; i < v.sampled_rows; ++i) chosen.insert(rng.range(0, s.rows() - 1));
  return {chosen.begin(), chosen.end()};
}

// Fills q, kv, block table and lengths; every KV row no sequence owns is NaN.
void fill_inputs(ValidationCase& c, InputPattern pattern, Rng& rng) {
  DecodeShape& s = c.shape;
  std::vector<float> q(static_cast<size_t>(s.q_elems()));
  double q_gain = pattern == InputPattern::kWideRange ? 12.0 : 1.0;
  for (float& x : q) x = static_cast<float>(rng.normal() * q_gain);

  // Pages: each sequence owns ceil(L / page) pages, assigned in shuffled order from the pool.
  int64_t used_pages = 0;
  for (int32_t l : c.kv_lens) used_pages += (l + s.page_size - 1) / s.page_size;
  s.num_pages = used_pages + kPoisonPages;
  std::vector<int32_t> page_ids(static_cast<size_t>(s.num_pages));
  std::iota(page_ids.begin(), page_ids.end(), 0);
  for (size_t i = page_ids.size(); i > 1; --i) {
    std::swap(page_ids[i - 1], page_ids[static_cast<size_t>(rng.range(0, int64_t(i) - 1))]);
  }
  c.block_table.assign(static_cast<size_t>(s.block_table_elems()), 0);
  size_t next_page = 0;
  for (int32_t b = 0; b < s.batch; ++b) {
    int32_t pages = (c.kv_lens[b] + s.page_size - 1) / s.page_size;
    for (int32_t p = 0; p < s.max_pages_per_seq; ++p) {
      int32_t& slot = c.block_table[static_cast<size_t>(b) * s.max_pages_per_seq + p];
      // Unused slots hold ids far outside the pool: reading one is a bug the gate must see.
      slot = p < pages ? page_ids[next_page++] : (p % 2 ? -1 : std::numeric_limits<int32_t>::max());
    }
  }

  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> kv(static_cast<size_t>(s.kv_elems()), nan);
  auto row_of = [&](int32_t b, int32_t j) -> float* {
    int32_t page = c.block_table[static_cast<size_t>(b) * s.max_pages_per_seq + j / s.page_size];
    return &kv[(static_cast<size_t>(page) * s.page_size + j % s.page_size) * kHeadDimQK];
  };
  for (int32_t b = 0; b < s.batch; ++b) {
    const int32_t len = c.kv_lens[b];
    for (int32_t j = 0; j < len; ++j) {
      float* row = row_of(b, j);
      for (int32_t d = 0; d < kHeadDimQK; ++d) row[d] = static_cast<float>(rng.normal());
    }
    // Keys that dominate: aligned with the sum of the sequence's query rows, so that every head's
    // score for them is large and positive.
    std::vector<int32_t> dominant;
    if (pattern == InputPattern::kPeaked) {
      dominant.push_back(static_cast<int32_t>(rng.range(0, len - s.qlen)));
    } else if (pattern == InputPattern::kCausalTrap) {
      // The last qlen - 1 keys are hidden from the sequence's first token; qlen 1: the last key.
      for (int32_t j = std::max(0, len - std::max(1, s.qlen - 1)); j < len; ++j) {
        dominant.push_back(j);
      }
    }
    if (dominant.empty()) continue;
    std::vector<double> dir(kHeadDimQK, 0.0);
    for (int32_t r = 0; r < s.qlen * s.heads; ++r) {
      const float* qr = &q[(static_cast<size_t>(b) * s.qlen * s.heads + r) * kHeadDimQK];
      for (int32_t d = 0; d < kHeadDimQK; ++d) dir[d] += qr[d];
    }
    double norm = 0;
    for (double x : dir) norm += x * x;
    norm = std::sqrt(std::max(norm, 1e-30));
    // |q_h| is about sqrt(576) = 24: a key of length 24 * 1.5 along the mean direction lifts the
    // score of every head by several units after sm_scale, enough to dominate.
    for (int32_t j : dominant) {
      float* row = row_of(b, j);
      for (int32_t d = 0; d < kHeadDimQK; ++d) {
        row[d] = static_cast<float>(36.0 * dir[d] / norm + 0.1 * rng.normal());
      }
    }
  }
  s.q_scale = quantise(q, s.q_dtype, c.q);
  // NaN rows must stay NaN after quantisation; the scale comes from the finite values only.
  std::vector<float> finite_kv(kv);
  for (float& x : finite_kv) {
    if (std::isnan(x)) x = 0;
  }
  s.kv_scale = quantise(finite_kv, s.kv_dtype, c.kv);
  for (size_t i = 0; i < kv.size(); ++i) {
    if (std::isnan(kv[i])) encode_element(s.kv_dtype, c.kv.data(), static_cast<int64_t>(i), nan);
  }
}

ValidationCase make_case_inputs(const BucketKey& b, const ValidationPoint& p, uint64_t seed,
                                InputPattern pattern, double sm_scale, bool uniform_lengths) {
  ValidationCase c;
  Rng rng(seed ^ (uint64_t(p.batch) << 32) ^ uint64_t(p.max_kv_len) ^
          (uint64_t(static_cast<int>(pattern)) << 56));
  DecodeShape& s = c.shape;
  s.batch = p.batch;
  s.qlen = b.key.qlen;
  s.heads = b.key.heads;
  s.page_size = b.key.page_size;
  s.q_dtype = b.key.q_dtype;
  s.kv_dtype = b.key.kv_dtype;
  s.sm_scale = static_cast<float>(sm_scale);
  s.return_lse = b.key.lse;
  s.max_kv_len = p.max_kv_len;
  // One spare slot per row, poisoned, so that reading one slot too far is caught.
  s.max_pages_per_seq = (p.max_kv_len + s.page_size - 1) / s.page_size + 1;
  c.kv_lens = uniform_lengths ? std::vector<int32_t>(static_cast<size_t>(p.batch), p.max_kv_len)
                              : sequence_lengths(p.batch, p.max_kv_len, s.qlen, rng);
  fill_inputs(c, pattern, rng);
  c.label = "batch=" + std::to_string(p.batch) + " max_kv=" + std::to_string(p.max_kv_len) +
            " seed " + std::to_string(seed) + " " + std::string(pattern_name(pattern));
  return c;
}

}  // namespace

std::string_view pattern_name(InputPattern p) {
  switch (p) {
    case InputPattern::kRandom:
      return "random";
    case InputPattern::kPeaked:
      return "peaked";
    case InputPattern::kWideRange:
      return "wide-range";
    case InputPattern::kCausalTrap:
      return "causal-trap";
  }
  return "?";
}

std::vector<ValidationPoint> validation_points(const BucketKey& b, int32_t interior) {
  const int32_t kv_lo = std::max(b.kv_lo, b.key.qlen);
  std::vector<ValidationPoint> pts = {
      {b.batch_lo, kv_lo}, {b.batch_hi, b.kv_hi}, {b.batch_lo, b.kv_hi}, {b.batch_hi, kv_lo}};
  Rng rng(0x5eed ^ (uint64_t(b.batch_lo) << 20) ^ uint64_t(b.kv_lo));
  for (int32_t i = 0; i < interior; ++i) {
    if (b.batch_hi - b.batch_lo < 2 && b.kv_hi - kv_lo < 2) break;
    int32_t batch = b.batch_hi - b.batch_lo >= 2
                        ? static_cast<int32_t>(rng.range(b.batch_lo + 1, b.batch_hi - 1))
                        : b.batch_lo;
    int32_t kv =
        b.kv_hi - kv_lo >= 2 ? static_cast<int32_t>(rng.range(kv_lo + 1, b.kv_hi - 1)) : kv_lo;
    pts.push_back({batch, kv});
  }
  std::vector<ValidationPoint> unique;
  for (const ValidationPoint& p : pts) {
    auto same = [&](const ValidationPoint& u) {
      return u.batch == p.batch && u.max_kv_len == p.max_kv_len;
    };
    if (std::none_of(unique.begin(), unique.end(), same)) unique.push_back(p);
  }
  return unique;
}

DecodeArgs ValidationCase::args() const {
  DecodeArgs a;
  a.q = q.data();
  a.kv = kv.data();
  a.block_table = block_table.data();
  a.kv_lens = kv_lens.data();
  return a;
}

ValidationCase make_validation_case(const BucketKey& b, const ValidationPoint& point, uint64_t seed,
                                    InputPattern pattern, double sm_scale,
                                    const ValidationSettings& settings, int reference_threads) {
  ValidationCase c = make_case_inputs(b, point, seed, pattern, sm_scale, false);
  Rng rng(seed * 31 + 7);
  c.checked_rows = rows_to_check(c.shape, c.kv_lens, settings, rng);
  c.ref = reference_decode_rows(c.shape, c.args(), c.checked_rows, reference_threads);
  return c;
}

ValidationCase make_timing_case(const BucketKey& b, double sm_scale) {
  ValidationPoint mid{b.batch_lo + (b.batch_hi - b.batch_lo) / 2,
                      std::max(b.key.qlen, b.kv_lo + (b.kv_hi - b.kv_lo) / 2)};
  return make_case_inputs(b, mid, 1, InputPattern::kRandom, sm_scale, true);
}

}  // namespace mlatune
