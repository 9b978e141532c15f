// The float64 reference. Deliberately plain: element-wise decode_element, double arithmetic, a
// textbook two-pass softmax, and nothing shared with the kernels it judges.
#include "mla_decode/reference.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>

#include "mla_decode/numformat.h"

namespace mlatune {
namespace {

// Rows of one sequence computed together, so that each key row is decoded once per pass for all
// of them instead of once per row.
constexpr size_t kRowsPerItem = 16;

struct Item {
  int32_t seq;
  std::vector<size_t> slots;  // positions in the caller's row list
};

void check_inputs(const DecodeShape& s, const DecodeArgs& a) {
  if (auto e = validate(s)) throw std::invalid_argument("reference: invalid shape: " + *e);
  if (!a.q || !a.kv || !a.block_table || !a.kv_lens) {
    throw std::invalid_argument("reference: null q, kv, block_table or kv_lens");
  }
  std::vector<int32_t> lens(a.kv_lens, a.kv_lens + s.batch);
  std::vector<int32_t> table(a.block_table, a.block_table + s.block_table_elems());
  if (auto e = validate_sequences(s, lens, table)) throw std::invalid_argument("reference: " + *e);
}

void decode_kv_row(const DecodeShape& s, const DecodeArgs& a, const int32_t* pages, int64_t j,
                   double* dst) {
  const int64_t base =
      (int64_t{pages[j / s.page_size]} * s.page_size + j % s.page_size) * kHeadDimQK;
  for (int d = 0; d < kHeadDimQK; ++d) {
    dst[d] = static_cast<double>(decode_element(s.kv_dtype, a.kv, base + d)) * s.kv_scale;
  }
}

void compute_item(const DecodeShape& s, const DecodeArgs& a, const std::vector<int64_t>& rows,
                  const Item& item, ReferenceResult& res) {
  const size_t n = item.slots.size();
  const int64_t len = a.kv_lens[item.seq];
  const int32_t* pages = a.block_table + int64_t{item.seq} * s.max_pages_per_seq;
  std::vector<double> q(n * kHeadDimQK);
  std::vector<int64_t> visible(n);
  int64_t keys = 0;
  for (size_t k = 0; k < n; ++k) {
    const int64_t row = rows[item.slots[k]];
    const int64_t token = row / s.heads;
    const int32_t i = static_cast<int32_t>(token % s.qlen);
    visible[k] = len - s.qlen + i + 1;
    keys = std::max(keys, visible[k]);
    for (int d = 0; d < kHeadDimQK; ++d) {
      q[k * kHeadDimQK + d] =
          static_cast<double>(decode_element(s.q_dtype, a.q, row * kHeadDimQK + d)) * s.q_scale;
    }
  }
  auto score = [&](size_t k, const double* key) {
    double dot = 0.0;
    for (int d = 0; d < kHeadDimQK; ++d) dot += q[k * kHeadDimQK + d] * key[d];
    return dot * s.sm_scale;
  };

  std::vector<double> kv(kHeadDimQK);
  std::vector<double> mx(n, -std::numeric_limits<double>::infinity());
  for (int64_t j = 0; j < keys; ++j) {  // pass 1: row maxima
    decode_kv_row(s, a, pages, j, kv.data());
    for (size_t k = 0; k < n; ++k) {
      if (j < visible[k]) mx[k] = std::max(mx[k], score(k, kv.data()));
    }
  }
  std::vector<double> sum(n, 0.0);
  std::vector<double> acc(n * kHeadDimV, 0.0);
  for (int64_t j = 0; j < keys; ++j) {  // pass 2: exp, sum and P.V
    decode_kv_row(s, a, pages, j, kv.data());
    for (size_t k = 0; k < n; ++k) {
      if (j >= visible[k]) continue;
      const double e = std::exp(score(k, kv.data()) - mx[k]);
      sum[k] += e;
      for (int d = 0; d < kHeadDimV; ++d) acc[k * kHeadDimV + d] += e * kv[d];
    }
  }
  for (size_t k = 0; k < n; ++k) {
    double* out = &res.out[item.slots[k] * kHeadDimV];
    if (sum[k] > 0.0) {
      for (int d = 0; d < kHeadDimV; ++d) out[d] = acc[k * kHeadDimV + d] / sum[k];
      res.lse[item.slots[k]] = mx[k] + std::log(sum[k]);
    } else {
      std::fill(out, out + kHeadDimV, 0.0);
      res.lse[item.slots[k]] = -std::numeric_limits<double>::infinity();
    }
  }
}

}  // namespace

ReferenceResult reference_decode_rows(const DecodeShape& s, const DecodeArgs& a,
                                      const std::vector<int64_t>& rows, int threads) {
  check_inputs(s, a);
  const int64_t per_seq = int64_t{s.qlen} * s.heads;
  std::vector<std::vector<size_t>> by_seq(s.batch);
  for (size_t k = 0; k < rows.size(); ++k) {
    if (rows[k] < 0 || rows[k] >= s.rows()) {
      throw std::invalid_argument("reference: row " + std::to_string(rows[k]) + " outside [0, " +
                                  std::to_string(s.rows()) + ")");
    }
    by_seq[rows[k] / per_seq].push_back(k);
  }
  std::vector<Item> items;
  for (int32_t b = 0; b < s.batch; ++b) {
    for (size_t k = 0; k < by_seq[b].size(); k += kRowsPerItem) {
      const size_t end = std::min(by_seq[b].size(), k + kRowsPerItem);
      items.push_back({b, std::vector<size_t>(by_seq[b].begin() + k, by_seq[b].begin() + end)});
    }
  }

  ReferenceResult res;
  res.out.assign(rows.size() * kHeadDimV, 0.0);
  res.lse.assign(rows.size(), 0.0);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t t; (t = next.fetch_add(1)) < items.size();) compute_item(s, a, rows, items[t], res);
  };
  const size_t extra = std::min<size_t>(std::max(threads, 1), items.size() + 1) - 1;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < extra; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return res;
}

ReferenceResult reference_decode(const DecodeShape& s, const DecodeArgs& a, int threads) {
  check_inputs(s, a);
  std::vector<int64_t> rows(s.rows());
  std::iota(rows.begin(), rows.end(), int64_t{0});
  return reference_decode_rows(s, a, rows, threads);
}

}  // namespace mlatune
