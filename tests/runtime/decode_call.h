// A decode call's host buffers with random contents, for the runtime's plan/run tests: bf16 or fp8
// q and KV in [-1, 1], a shuffled page pool, random lengths, and the float64 reference of the call.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "mla_decode/numformat.h"
#include "mla_decode/problem.h"
#include "mla_decode/reference.h"
#include "mlatune/mlatune.h"

namespace mlatune::test_db {

struct DecodeCall {
  mlatune_decode_problem problem{};
  std::vector<uint8_t> q, kv;
  std::vector<int32_t> block_table, kv_lens;
  std::vector<uint16_t> out;
  std::vector<float> lse;
  std::vector<uint8_t> workspace;

  // key.batch sequences, lengths in [qlen, key.max_kv_len], the longest exactly max_kv_len.
  DecodeCall(const mlatune_decode_key& key, uint32_t seed) {
    std::mt19937 rng(seed);
    problem.key = key;
    problem.q_scale = 1.0f;
    problem.kv_scale = 1.0f;
    problem.sm_scale = 1.0f / std::sqrt(float{kHeadDimQK});
    problem.max_pages_per_seq = (key.max_kv_len + key.page_size - 1) / key.page_size;
    problem.num_pages = int64_t{problem.max_pages_per_seq} * key.batch + 3;  // a few spare pages
    const DecodeShape s = shape();
    std::uniform_int_distribution<int32_t> len(key.qlen, key.max_kv_len);
    for (int32_t b = 0; b < key.batch; ++b) kv_lens.push_back(b == 0 ? key.max_kv_len : len(rng));
    std::vector<int32_t> pages(static_cast<size_t>(problem.num_pages));
    std::iota(pages.begin(), pages.end(), 0);
    std::shuffle(pages.begin(), pages.end(), rng);
    block_table.assign(pages.begin(), pages.begin() + s.block_table_elems());
    std::uniform_real_distribution<float> value(-1.0f, 1.0f);
    q.resize(static_cast<size_t>(s.q_elems()) * dtype_bytes(s.q_dtype));
    for (int64_t i = 0; i < s.q_elems(); ++i) encode_element(s.q_dtype, q.data(), i, value(rng));
    kv.resize(static_cast<size_t>(s.kv_elems()) * dtype_bytes(s.kv_dtype));
    for (int64_t i = 0; i < s.kv_elems(); ++i) encode_element(s.kv_dtype, kv.data(), i, value(rng));
    out.assign(static_cast<size_t>(s.out_elems()), 0xffff);  // NaN: a row left unwritten shows
    if (key.lse) lse.assign(static_cast<size_t>(s.rows()), -1.0f);
  }

  DecodeShape shape() const {
    DecodeShape s;
    s.batch = problem.key.batch;
    s.qlen = problem.key.qlen;
    s.heads = problem.key.heads;
    s.page_size = problem.key.page_size;
    s.q_dtype = static_cast<DType>(problem.key.q_dtype);
    s.kv_dtype = static_cast<DType>(problem.key.kv_dtype);
    s.sm_scale = problem.sm_scale;
    s.return_lse = problem.key.lse != 0;
    s.num_pages = problem.num_pages;
    s.max_pages_per_seq = problem.max_pages_per_seq;
    s.max_kv_len = problem.key.max_kv_len;
    return s;
  }

  mlatune_decode_buffers buffers(size_t workspace_bytes) {
    workspace.assign(workspace_bytes, 0xcd);
    mlatune_decode_buffers b{};
    b.q = q.data();
    b.kv = kv.data();
    b.block_table = block_table.data();
    b.kv_lens = kv_lens.data();
    b.out = out.data();
    b.lse = problem.key.lse ? lse.data() : nullptr;
    b.workspace = workspace.empty() ? nullptr : workspace.data();
    b.workspace_bytes = workspace.size();
    return b;
  }

  // The largest |out - reference| over every output element (infinity for a NaN) and, with LSE,
  // over the LSE values.
  double max_error() const {
    DecodeArgs a;
    a.q = q.data();
    a.kv = kv.data();
    a.block_table = block_table.data();
    a.kv_lens = kv_lens.data();
    const ReferenceResult ref = reference_decode(shape(), a);
    double worst = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      const double d = std::fabs(double{bf16_to_float(out[i])} - ref.out[i]);
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    for (size_t i = 0; i < lse.size(); ++i) {
      const double d = std::fabs(double{lse[i]} - ref.lse[i]);
      worst = std::isnan(d) ? INFINITY : std::max(worst, d);
    }
    return worst;
  }
};

}  // namespace mlatune::test_db
