// Building blocks shared by the host variants: argument checks, dequantisation of q and KV rows,
// the dot product and the final normalisation of an output row. Every host variant's code identity
// covers this file, so variant-specific logic stays in the variant files.
//
// Scale convention: KV rows are dequantised without kv_scale; q rows carry sm_scale * q_scale *
// kv_scale, so q.k is the final softmax score, and kv_scale is applied once to the normalised
// output (store_row).
#pragma once

#include <cstddef>
#include <cstdint>

#include "mla_decode/problem.h"
#include "mla_decode/variant.h"

namespace mlatune::host {

// Ok when the shape is valid and params lie in the variant's space, otherwise why not.
Support check_support(const DecodeShape& s, const LaunchParams& p, const ParamSpace& space);

// Throws LaunchError unless the shape is valid, every pointer the shape needs is set, the
// workspace holds `workspace_needed` bytes (float-aligned), and every sequence has
// qlen <= L <= max_pages_per_seq * page_size with used page ids in [0, num_pages).
void check_launch(const DecodeShape& s, const DecodeArgs& a, size_t workspace_needed);

// Keys query token i of a sequence of length L may see (causal, right-aligned).
inline int64_t visible_keys(int64_t len, int32_t qlen, int32_t i) { return len - qlen + i + 1; }

// Block-table row of sequence b (only its first ceil(L / page_size) slots may be read).
inline const int32_t* seq_pages(const DecodeShape& s, const DecodeArgs& a, int32_t b) {
  return a.block_table + int64_t{b} * s.max_pages_per_seq;
}

// Element offset of key j's row in the KV pool.
inline int64_t kv_row_offset(const DecodeShape& s, const int32_t* pages, int64_t j) {
  return (int64_t{pages[j / s.page_size]} * s.page_size + j % s.page_size) * kHeadDimQK;
}

// Dequantises keys [j0, j0 + n) of a sequence into dst [n, 576], without kv_scale.
void load_kv_rows(const DecodeShape& s, const DecodeArgs& a, const int32_t* pages, int64_t j0,
                  int64_t n, float* dst);

// Dequantises the q rows of sequence b, all qlen tokens, heads [h0, h0 + nh), into
// dst [qlen, nh, 576] with sm_scale * q_scale * kv_scale folded in.
void load_q_rows(const DecodeShape& s, const DecodeArgs& a, int32_t b, int32_t h0, int32_t nh,
                 float* dst);

// q.k over 576 dims in 16 independent lanes summed in a fixed order: vectorisable without
// -ffast-math and bitwise reproducible.
inline float dot_qk(const float* __restrict__ q, const float* __restrict__ k) {
  constexpr int kLanes = 16;
  float lane[kLanes] = {};
  for (int d = 0; d < kHeadDimQK; d += kLanes) {
    for (int l = 0; l < kLanes; ++l) lane[l] += q[d + l] * k[d + l];
  }
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int l = 0; l < w; ++l) lane[l] += lane[l + w];
  }
  return lane[0];
}

// acc[0..512) = acc * alpha + p * v.
inline void scale_add_v(float* __restrict__ acc, float alpha, float p,
                        const float* __restrict__ v) {
  for (int d = 0; d < kHeadDimV; ++d) acc[d] = acc[d] * alpha + p * v[d];
}

// Writes one finished row: out = acc * kv_scale / l as bf16 and, when lse is non-null,
// lse = m + log(l). A row that saw no key (l == 0) gets zeros and -inf.
void store_row(const float* acc, float m, float l, float kv_scale, uint16_t* out, float* lse);

}  // namespace mlatune::host
