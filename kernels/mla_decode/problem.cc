#include "mla_decode/problem.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace mlatune {
namespace {

// Largest byte size of any buffer derived from a shape; far above real use, far below 2^63.
constexpr int64_t kMaxBufferBytes = int64_t{1} << 50;

bool known(DType t) {
  return t == DType::kBF16 || t == DType::kFP8E4M3FN || t == DType::kFP8E4M3FNUZ;
}

std::string range_error(const char* field, int64_t value, int64_t lo, int64_t hi) {
  return std::string(field) + "=" + std::to_string(value) + " outside [" + std::to_string(lo) +
         ", " + std::to_string(hi) + "]";
}

// Product of non-negative factors, or nullopt once it passes kMaxBufferBytes (checked before
// each multiplication, so it never overflows).
std::optional<int64_t> bounded_product(std::initializer_list<int64_t> factors) {
  int64_t p = 1;
  for (int64_t f : factors) {
    if (f != 0 && p > kMaxBufferBytes / f) return std::nullopt;
    p *= f;
  }
  return p;
}

std::optional<std::string> check_scale(const char* field, float v, DType t) {
  if (!std::isfinite(v) || v <= 0) {
    return std::string(field) + "=" + std::to_string(v) + " must be finite and > 0";
  }
  if (t == DType::kBF16 && v != 1.0f) {
    return std::string(field) + "=" + std::to_string(v) + " must be 1 for bf16 data";
  }
  return std::nullopt;
}

}  // namespace

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP8E4M3FN:
      return "fp8_e4m3fn";
    case DType::kFP8E4M3FNUZ:
      return "fp8_e4m3fnuz";
  }
  return "invalid";
}

std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::kBF16, DType::kFP8E4M3FN, DType::kFP8E4M3FNUZ}) {
    if (s == dtype_name(t)) return t;
  }
  return std::nullopt;
}

size_t dtype_bytes(DType t) {
  switch (t) {
    case DType::kBF16:
      return 2;
    case DType::kFP8E4M3FN:
    case DType::kFP8E4M3FNUZ:
      return 1;
  }
  throw std::invalid_argument("dtype_bytes: unknown dtype " + std::to_string(static_cast<int>(t)));
}

bool is_fp8(DType t) { return t == DType::kFP8E4M3FN || t == DType::kFP8E4M3FNUZ; }

std::string DecodeKey::to_string() const {
  return "heads=" + std::to_string(heads) + " qlen=" + std::to_string(qlen) +
         " q=" + std::string(dtype_name(q_dtype)) + " kv=" + std::string(dtype_name(kv_dtype)) +
         " page=" + std::to_string(page_size) + " lse=" + (lse ? "1" : "0");
}

DecodeKey DecodeShape::key() const {
  return {heads, qlen, q_dtype, kv_dtype, page_size, return_lse};
}

std::optional<std::string> validate(const DecodeShape& s) {
  if (!known(s.q_dtype)) {
    return "q_dtype=" + std::to_string(static_cast<int>(s.q_dtype)) + " unknown";
  }
  if (!known(s.kv_dtype)) {
    return "kv_dtype=" + std::to_string(static_cast<int>(s.kv_dtype)) + " unknown";
  }
  if (s.batch < 1 || s.batch > kMaxBatch) return range_error("batch", s.batch, 1, kMaxBatch);
  if (s.qlen < 1 || s.qlen > kMaxQlen) return range_error("qlen", s.qlen, 1, kMaxQlen);
  if (s.heads < 1 || s.heads > kMaxHeads) return range_error("heads", s.heads, 1, kMaxHeads);
  if (s.page_size < 1 || s.page_size > kMaxPageSize) {
    return range_error("page_size", s.page_size, 1, kMaxPageSize);
  }
  const int64_t max_pages = kMaxKvLen / s.page_size;
  if (s.max_pages_per_seq < 1 || s.max_pages_per_seq > max_pages) {
    return range_error("max_pages_per_seq", s.max_pages_per_seq, 1, max_pages) +
           " (max_pages_per_seq * page_size must be <= " + std::to_string(kMaxKvLen) + ")";
  }
  if (s.num_pages < 1 || s.num_pages > kMaxPoolPages) {
    return range_error("num_pages", s.num_pages, 1, kMaxPoolPages);
  }
  const int64_t capacity = int64_t{s.max_pages_per_seq} * s.page_size;
  if (s.max_kv_len < s.qlen || s.max_kv_len > capacity) {
    return range_error("max_kv_len", s.max_kv_len, s.qlen, capacity) +
           " (qlen .. max_pages_per_seq * page_size)";
  }
  if (!std::isfinite(s.sm_scale) || s.sm_scale <= 0) {
    return "sm_scale=" + std::to_string(s.sm_scale) + " must be finite and > 0";
  }
  if (auto e = check_scale("q_scale", s.q_scale, s.q_dtype)) return e;
  if (auto e = check_scale("kv_scale", s.kv_scale, s.kv_dtype)) return e;

  // Every field is now bounded, but products of them may still be absurd; callers allocate from
  // these sizes, so refuse before anything multiplies them unchecked.
  const int64_t q_bytes = static_cast<int64_t>(dtype_bytes(s.q_dtype));
  const int64_t kv_bytes = static_cast<int64_t>(dtype_bytes(s.kv_dtype));
  const struct {
    const char* what;
    std::optional<int64_t> bytes;
  } sizes[] = {
      {"q", bounded_product({s.batch, s.qlen, s.heads, kHeadDimQK, q_bytes})},
      {"kv", bounded_product({s.num_pages, s.page_size, kHeadDimQK, kv_bytes})},
      {"out", bounded_product({s.batch, s.qlen, s.heads, kHeadDimV, 2})},
      {"block_table", bounded_product({s.batch, s.max_pages_per_seq, 4})},
      // One fp32 score per (row, key): bounds any per-key workspace a variant may size.
      {"scores", bounded_product({s.batch, s.qlen, s.heads, s.max_kv_len, 4})},
  };
  for (const auto& sz : sizes) {
    if (!sz.bytes) {
      return std::string(sz.what) + " buffer of batch=" + std::to_string(s.batch) +
             " qlen=" + std::to_string(s.qlen) + " heads=" + std::to_string(s.heads) +
             " num_pages=" + std::to_string(s.num_pages) +
             " page_size=" + std::to_string(s.page_size) +
             " max_kv_len=" + std::to_string(s.max_kv_len) + " would exceed 2^50 bytes";
    }
  }
  return std::nullopt;
}

std::optional<std::string> validate_sequences(const DecodeShape& s,
                                              const std::vector<int32_t>& kv_lens,
                                              const std::vector<int32_t>& block_table) {
  if (auto e = validate(s)) return "shape: " + *e;
  if (kv_lens.size() != static_cast<size_t>(s.batch)) {
    return "kv_lens has " + std::to_string(kv_lens.size()) +
           " entries, batch=" + std::to_string(s.batch);
  }
  if (static_cast<int64_t>(block_table.size()) != s.block_table_elems()) {
    return "block_table has " + std::to_string(block_table.size()) +
           " entries, batch * max_pages_per_seq=" + std::to_string(s.block_table_elems());
  }
  const int64_t capacity = int64_t{s.max_pages_per_seq} * s.page_size;
  int32_t longest = 0;
  for (int32_t b = 0; b < s.batch; ++b) {
    const int32_t len = kv_lens[b];
    if (len < s.qlen || len > capacity) {
      return range_error(("kv_lens[" + std::to_string(b) + "]").c_str(), len, s.qlen, capacity);
    }
    longest = std::max(longest, len);
    const int64_t used = (int64_t{len} + s.page_size - 1) / s.page_size;
    for (int64_t p = 0; p < used; ++p) {
      const int32_t page = block_table[b * int64_t{s.max_pages_per_seq} + p];
      if (page < 0 || page >= s.num_pages) {
        return "block_table[" + std::to_string(b) + "][" + std::to_string(p) +
               "]=" + std::to_string(page) +
               " outside [0, num_pages=" + std::to_string(s.num_pages) + ")";
      }
    }
  }
  if (longest != s.max_kv_len) {
    return "max_kv_len=" + std::to_string(s.max_kv_len) + " but the longest of kv_lens is " +
           std::to_string(longest);
  }
  return std::nullopt;
}

}  // namespace mlatune
