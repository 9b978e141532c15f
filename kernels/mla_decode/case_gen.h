// The validation inputs of the gate as pure functions of their indices, so that the host and the
// GPU generate the same bytes without moving them: a GPU backend writes a case of tens of GB in
// place in milliseconds, and tests check that the host and the device agree bit for bit.
//
// Every value comes from a counter-based hash of (seed, stream, index) and integer arithmetic; the
// only floating-point operations are exact ones and single, correctly rounded conversions and
// multiplies, so no compiler's contraction or library's transcendental can change a bit.
//
// What a case holds (b = sequence, j < L_b = key, d = dim, u_b = a random direction per sequence):
//   q[token, head, d]   random: z; wide-range: 12 z; peaked and causal-trap: u_b[d] / 2 + z
//   kv row (b, j)       z, except the pattern's dominant keys: 2 u_b + z / 8, which score far above
//                       every other key for every head and token of sequence b
//   dominant keys       peaked: one key in [0, L - qlen], visible to every token; causal-trap: the
//                       last max(1, qlen - 1) keys, which the first token must not see (qlen 1: the
//                       last key, which it must see)
//   pool                used page u of the case (sequences in order, pages in order) is page
//                       (u * perm_mul + perm_add) mod num_pages; the other pages and every row past
//                       L_b are NaN; block-table slots past a sequence's pages hold INT32_MAX or -1
// z is an Irwin-Hall(4) approximation of a unit normal, bounded by 2 sqrt(3) = 3.4641.
#pragma once

#include <cstdint>

#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/problem.h"

namespace mlatune {

enum class InputPattern : uint8_t {
  kRandom = 0,      // independent q, k, v
  kPeaked = 1,      // one key per sequence dominates the softmax of every head
  kWideRange = 2,   // scores spread over a large range (tests max subtraction and rescaling)
  kCausalTrap = 3,  // the keys a causal row must not see would dominate it if leaked
};

inline constexpr int32_t kPoisonPages = 2;  // pool pages no sequence owns (NaN)

// Everything that determines a case's bytes besides the per-sequence lengths. Plain data, passed
// to GPU kernels by value.
struct CaseGen {
  uint64_t seed = 0;
  InputPattern pattern = InputPattern::kRandom;
  int32_t qlen = 0;
  int32_t heads = 0;
  int32_t page_size = 0;
  int32_t max_pages_per_seq = 0;
  int64_t num_pages = 0;  // used pages + kPoisonPages
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  float q_inv_scale = 1.0f;  // 1 / q_scale, a power of two (1 for bf16)
  float kv_inv_scale = 1.0f;
  int64_t perm_mul = 1;  // coprime with num_pages
  int64_t perm_add = 0;
};

namespace casegen {

enum Stream : uint64_t { kQ = 1, kKv = 2, kDirection = 3, kPeak = 4 };

inline constexpr float kNormalBound = 3.4641017f;  // 2 sqrt(3), above every |z|

MLATUNE_FORMAT_FN uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

MLATUNE_FORMAT_FN uint64_t hash(uint64_t seed, uint64_t stream, uint64_t index) {
  return mix64(mix64(seed * 0x9e3779b97f4a7c15ull + stream) ^ (index * 0xd6e8feb86659fd93ull));
}

// Sum of four 16-bit uniforms, centred and scaled to unit variance: |z| < 2 sqrt(3).
MLATUNE_FORMAT_FN float normal(uint64_t h) {
  const int32_t sum = static_cast<int32_t>((h & 0xffffu) + ((h >> 16) & 0xffffu) +
                                           ((h >> 32) & 0xffffu) + (h >> 48)) -
                      131070;
  return static_cast<float>(sum) * (1.7320508f / 65536.0f);
}

MLATUNE_FORMAT_FN float z(const CaseGen& g, uint64_t stream, uint64_t index) {
  return normal(hash(g.seed, stream, index));
}

// u_b[d]: the direction shared by sequence b's queries and dominant keys.
MLATUNE_FORMAT_FN float direction(const CaseGen& g, int64_t b, int32_t d) {
  return z(g, kDirection, static_cast<uint64_t>(b) * kHeadDimQK + static_cast<uint64_t>(d));
}

MLATUNE_FORMAT_FN bool shares_direction(InputPattern p) {
  return p == InputPattern::kPeaked || p == InputPattern::kCausalTrap;
}

// q of (token, head) row `row` (= token * heads + head), dim d, before quantisation.
MLATUNE_FORMAT_FN float q_value(const CaseGen& g, int64_t row, int32_t d) {
  const float noise = z(g, kQ, static_cast<uint64_t>(row) * kHeadDimQK + static_cast<uint64_t>(d));
  if (g.pattern == InputPattern::kWideRange) return 12.0f * noise;
  if (!shares_direction(g.pattern)) return noise;
  const int64_t b = row / g.heads / g.qlen;
  return 0.5f * direction(g, b, d) + noise;  // 0.5 u is exact: one rounding, in any order
}

// Whether key j of sequence b (length len) is one of the pattern's dominant keys.
MLATUNE_FORMAT_FN bool dominant(const CaseGen& g, int64_t b, int32_t j, int32_t len) {
  if (g.pattern == InputPattern::kPeaked) {
    const uint64_t span = static_cast<uint64_t>(len - g.qlen + 1);
    return static_cast<uint64_t>(j) == hash(g.seed, kPeak, static_cast<uint64_t>(b)) % span;
  }
  if (g.pattern == InputPattern::kCausalTrap) {
    const int32_t hidden = g.qlen > 1 ? g.qlen - 1 : 1;
    return j >= len - hidden;
  }
  return false;
}

// KV row (b, j), dim d, before quantisation; `is_dominant` = dominant(g, b, j, L_b), computed
// once per row by the callers.
MLATUNE_FORMAT_FN float kv_value(const CaseGen& g, int64_t b, int32_t j, int32_t d,
                                 bool is_dominant) {
  const uint64_t key = (static_cast<uint64_t>(b) << 24) + static_cast<uint64_t>(j);
  const float noise = z(g, kKv, key * kHeadDimQK + static_cast<uint64_t>(d));
  if (!is_dominant) return noise;
  return 2.0f * direction(g, b, d) + 0.125f * noise;  // both products exact: one rounding
}

// Largest |value| the pattern produces: sizes the fp8 scales.
MLATUNE_FORMAT_FN float q_bound(InputPattern p) {
  return p == InputPattern::kWideRange ? 12.0f * kNormalBound
         : shares_direction(p)         ? 1.5f * kNormalBound
                                       : kNormalBound;
}
MLATUNE_FORMAT_FN float kv_bound(InputPattern p) {
  return shares_direction(p) ? 2.125f * kNormalBound : kNormalBound;
}

// Page id of the case's used page u, and the poison a block-table slot past a sequence's pages
// holds.
MLATUNE_FORMAT_FN int32_t page_id(const CaseGen& g, int64_t u) {
  return static_cast<int32_t>((u * g.perm_mul + g.perm_add) % g.num_pages);
}
MLATUNE_FORMAT_FN int32_t unused_slot(int64_t slot) { return slot % 2 ? -1 : 0x7fffffff; }

// Stores `v` (already divided by the tensor's scale) as element i of a buffer of type t.
MLATUNE_FORMAT_FN void store(DType t, void* base, int64_t i, float v) {
  if (t == DType::kBF16) {
    static_cast<uint16_t*>(base)[i] = gpu::float_to_bf16(v);
  } else if (t == DType::kFP8E4M3FN) {
    static_cast<uint8_t*>(base)[i] = gpu::float_to_e4m3fn(v);
  } else {
    static_cast<uint8_t*>(base)[i] = gpu::float_to_e4m3fnuz(v);
  }
}

// The byte every element of an unused KV row holds: a NaN in each format (bf16 0xffff, e4m3fn
// 0xff, e4m3fnuz 0x80), so that a whole pool is poisoned with one memset.
MLATUNE_FORMAT_FN uint8_t poison_byte(DType t) { return t == DType::kFP8E4M3FNUZ ? 0x80 : 0xff; }

}  // namespace casegen
}  // namespace mlatune
