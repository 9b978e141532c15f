#include "mla_decode/host/host_common.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "mla_decode/numformat.h"

namespace mlatune::host {
namespace {

using Fp8Table = std::array<float, 256>;

template <float (*Decode)(uint8_t)>
const Fp8Table& fp8_table() {
  static const Fp8Table table = [] {
    Fp8Table t{};
    for (int i = 0; i < 256; ++i) t[i] = Decode(static_cast<uint8_t>(i));
    return t;
  }();
  return table;
}

// Decodes n elements of `t` starting at element `offset` of `base`.
void decode_span(DType t, const void* base, int64_t offset, int64_t n, float* __restrict__ dst) {
  if (t == DType::kBF16) {
    const uint8_t* src = static_cast<const uint8_t*>(base) + offset * 2;
    for (int64_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, src + 2 * i, sizeof(h));
      const uint32_t bits = static_cast<uint32_t>(h) << 16;
      std::memcpy(dst + i, &bits, sizeof(bits));
    }
    return;
  }
  const float* table = t == DType::kFP8E4M3FN ? fp8_table<e4m3fn_to_float>().data()
                                              : fp8_table<e4m3fnuz_to_float>().data();
  const uint8_t* src = static_cast<const uint8_t*>(base) + offset;
  for (int64_t i = 0; i < n; ++i) dst[i] = table[src[i]];
}

[[noreturn]] void fail(const std::string& why) { throw LaunchError(why); }

}  // namespace

Support check_support(const DecodeShape& s, const LaunchParams& p, const ParamSpace& space) {
  if (auto err = validate(s)) return Support::no("invalid shape: " + *err);
  if (!space.contains(p)) return Support::no("launch params " + p.to_string() + " not supported");
  return Support::yes();
}

void check_launch(const DecodeShape& s, const DecodeArgs& a, size_t workspace_needed) {
  if (auto err = validate(s)) fail("invalid shape: " + *err);
  if (!a.q || !a.kv || !a.block_table || !a.kv_lens || !a.out) {
    fail("null q, kv, block_table, kv_lens or out pointer");
  }
  if (s.return_lse && !a.lse) fail("return_lse set but lse pointer is null");
  if (workspace_needed > 0) {
    if (!a.workspace)
      fail("null workspace (" + std::to_string(workspace_needed) + " bytes needed)");
    if (a.workspace_bytes < workspace_needed) {
      fail("workspace too small: " + std::to_string(a.workspace_bytes) + " bytes given, " +
           std::to_string(workspace_needed) + " needed");
    }
    if (reinterpret_cast<uintptr_t>(a.workspace) % alignof(float) != 0) {
      fail("workspace not aligned to " + std::to_string(alignof(float)) + " bytes");
    }
  }
  const int64_t max_len = int64_t{s.max_pages_per_seq} * s.page_size;
  for (int32_t b = 0; b < s.batch; ++b) {
    const int64_t len = a.kv_lens[b];
    if (len < s.qlen || len > max_len) {
      fail("sequence " + std::to_string(b) + ": kv_len " + std::to_string(len) +
           " outside [qlen, max_pages_per_seq * page_size] = [" + std::to_string(s.qlen) + ", " +
           std::to_string(max_len) + "]");
    }
    const int32_t* pages = seq_pages(s, a, b);
    const int64_t used = (len + s.page_size - 1) / s.page_size;
    for (int64_t p = 0; p < used; ++p) {
      if (pages[p] < 0 || pages[p] >= s.num_pages) {
        fail("sequence " + std::to_string(b) + ": block_table slot " + std::to_string(p) +
             " holds page " + std::to_string(pages[p]) + " outside [0, " +
             std::to_string(s.num_pages) + ")");
      }
    }
  }
}

void load_kv_rows(const DecodeShape& s, const DecodeArgs& a, const int32_t* pages, int64_t j0,
                  int64_t n, float* dst) {
  // Runs of keys inside one page are contiguous in the pool: decode them in one span.
  int64_t j = j0;
  while (j < j0 + n) {
    const int64_t run = std::min(j0 + n - j, s.page_size - j % s.page_size);
    decode_span(s.kv_dtype, a.kv, kv_row_offset(s, pages, j), run * kHeadDimQK,
                dst + (j - j0) * kHeadDimQK);
    j += run;
  }
}

void load_q_rows(const DecodeShape& s, const DecodeArgs& a, int32_t b, int32_t h0, int32_t nh,
                 float* dst) {
  const float scale = s.sm_scale * s.q_scale * s.kv_scale;
  for (int32_t i = 0; i < s.qlen; ++i) {
    const int64_t row = (int64_t{b} * s.qlen + i) * s.heads + h0;
    float* d = dst + int64_t{i} * nh * kHeadDimQK;
    decode_span(s.q_dtype, a.q, row * kHeadDimQK, int64_t{nh} * kHeadDimQK, d);
    for (int64_t e = 0; e < int64_t{nh} * kHeadDimQK; ++e) d[e] *= scale;
  }
}

void store_row(const float* acc, float m, float l, float kv_scale, uint16_t* out, float* lse) {
  if (!(l > 0.0f)) {
    std::memset(out, 0, kHeadDimV * sizeof(uint16_t));
    if (lse) *lse = -std::numeric_limits<float>::infinity();
    return;
  }
  const float f = kv_scale / l;
  for (int d = 0; d < kHeadDimV; ++d) out[d] = float_to_bf16(acc[d] * f);
  if (lse) *lse = m + std::log(l);
}

}  // namespace mlatune::host
