#include "tuner/validation_case.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace mlatune {
namespace {

// splitmix64: a small, portable generator, so that validation points and lengths are identical on
// every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  uint64_t next() { return casegen::mix64(s_ += 0x9e3779b97f4a7c15ull); }
  int64_t range(int64_t lo, int64_t hi) {  // [lo, hi]
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo + 1));
  }

 private:
  uint64_t s_;
};

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

ValidationCase make_case(const BucketKey& b, const ValidationPoint& p, uint64_t seed,
                         InputPattern pattern, double sm_scale, bool uniform_lengths) {
  Rng rng(seed ^ (uint64_t(p.batch) << 32) ^ uint64_t(p.max_kv_len) ^
          (uint64_t(static_cast<int>(pattern)) << 56));
  DecodeShape s;
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
  std::vector<int32_t> lens = uniform_lengths
                                  ? std::vector<int32_t>(static_cast<size_t>(p.batch), p.max_kv_len)
                                  : sequence_lengths(p.batch, p.max_kv_len, s.qlen, rng);
  ValidationCase c;
  c.spec = make_case_spec(s, std::move(lens), rng.next(), pattern);
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

ValidationCase make_validation_case(const BucketKey& b, const ValidationPoint& point, uint64_t seed,
                                    InputPattern pattern, double sm_scale,
                                    const ValidationSettings& settings) {
  ValidationCase c = make_case(b, point, seed, pattern, sm_scale, false);
  Rng rng(seed * 31 + 7);
  c.checked_rows = rows_to_check(c.spec.shape, c.spec.kv_lens, settings, rng);
  return c;
}

int64_t input_bytes(const CaseSpec& spec) {
  const DecodeShape& s = spec.shape;
  const int64_t q = s.q_elems() * static_cast<int64_t>(dtype_bytes(s.q_dtype));
  const int64_t kv =
      spec.gen.num_pages * s.page_size * kHeadDimQK * static_cast<int64_t>(dtype_bytes(s.kv_dtype));
  const int64_t table = int64_t{s.batch} * (s.max_pages_per_seq + 1) * sizeof(int32_t);
  return q + kv + table;
}

ValidationCase make_timing_case(const BucketKey& b, double sm_scale) {
  ValidationPoint mid{b.batch_lo + (b.batch_hi - b.batch_lo) / 2,
                      std::max(b.key.qlen, b.kv_lo + (b.kv_hi - b.kv_lo) / 2)};
  return make_case(b, mid, 1, InputPattern::kRandom, sm_scale, true);
}

std::vector<ValidationCase> make_timing_cases(const BucketKey& b, double sm_scale,
                                              bool top_corner) {
  std::vector<ValidationCase> out{make_timing_case(b, sm_scale)};
  const ValidationPoint top{b.batch_hi, std::max(b.key.qlen, b.kv_hi)};
  const DecodeShape& mid = out.front().shape();
  if (top_corner && (top.batch != mid.batch || top.max_kv_len != mid.max_kv_len)) {
    out.push_back(make_case(b, top, 1, InputPattern::kRandom, sm_scale, true));
  }
  return out;
}

}  // namespace mlatune
