// The MLA decode problem model (absorbed form, one shared latent KV head).
//
// A decode call computes, for every sequence b and query token i < qlen of it, and every head h:
//   scores[j] = dot(q[b*qlen+i, h, :576], k[j, :576]) * sm_scale * q_scale * kv_scale
//   out[b*qlen+i, h, :512] = softmax(scores[0..visible)) . v[0..visible, :512]
// where k[j] and v[j] are row j of the sequence's paged KV (v = first 512 dims of the same row),
// and visible = L - qlen + i + 1 (causal, right-aligned; L = the sequence's kv length).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlatune {

inline constexpr int32_t kHeadDimQK = 576;  // 512 latent ("nope") + 64 rope dims
inline constexpr int32_t kHeadDimV = 512;   // V is the first 512 dims of each KV row

// Limits that make a shape absurd. They are far above any real serving shape and low enough that
// every size computed from a valid shape fits comfortably in 64 bits.
inline constexpr int32_t kMaxBatch = 1 << 16;
inline constexpr int32_t kMaxQlen = 16;
inline constexpr int32_t kMaxHeads = 1024;
inline constexpr int32_t kMaxPageSize = 4096;
inline constexpr int64_t kMaxKvLen = int64_t{1} << 24;      // 16 Mi keys per sequence
inline constexpr int64_t kMaxPoolPages = int64_t{1} << 31;  // page ids are int32

enum class DType : uint8_t {
  kBF16 = 0,
  kFP8E4M3FN = 1,    // OCP e4m3fn: max 448, NaN = 0x7f/0xff, has -0 (NVIDIA, gfx950)
  kFP8E4M3FNUZ = 2,  // e4m3fnuz: max 240, NaN = 0x80, no -0 (gfx942)
};

std::string_view dtype_name(DType t);                  // "bf16", "fp8_e4m3fn", "fp8_e4m3fnuz"
std::optional<DType> parse_dtype(std::string_view s);  // inverse of dtype_name
size_t dtype_bytes(DType t);                           // 2 or 1
bool is_fp8(DType t);

// The discrete part of a tuning key: everything a lookup must match exactly.
struct DecodeKey {
  int32_t heads = 0;
  int32_t qlen = 0;
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  int32_t page_size = 0;
  bool lse = false;

  bool operator==(const DecodeKey&) const = default;
  std::string to_string() const;  // "heads=16 qlen=1 q=bf16 kv=bf16 page=16 lse=0"
};

// Shapes and scalars of one decode call (no data).
struct DecodeShape {
  int32_t batch = 0;      // sequences
  int32_t qlen = 0;       // query tokens per sequence; > 1 is causal (MTP / speculative verify)
  int32_t heads = 0;      // query heads sharing the latent KV head (= gqa ratio)
  int32_t page_size = 0;  // KV rows per page
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  float q_scale = 1.0f;   // per-tensor dequantisation scale of q (must be 1 for bf16 q)
  float kv_scale = 1.0f;  // per-tensor dequantisation scale of the KV cache (1 for bf16 kv)
  float sm_scale = 0.0f;  // softmax scale applied to q.k
  bool return_lse = false;
  int64_t num_pages = 0;          // pages in the KV pool
  int32_t max_pages_per_seq = 0;  // row stride of the block table
  int32_t max_kv_len = 0;         // max over the sequences' kv lengths (what lookup keys on)

  DecodeKey key() const;
  int64_t tokens() const { return int64_t{batch} * qlen; }
  int64_t rows() const { return tokens() * heads; }  // (token, head) output rows
  // Element counts; valid only after validate() succeeded.
  int64_t q_elems() const { return rows() * kHeadDimQK; }
  int64_t kv_elems() const { return num_pages * page_size * kHeadDimQK; }
  int64_t out_elems() const { return rows() * kHeadDimV; }
  int64_t block_table_elems() const { return int64_t{batch} * max_pages_per_seq; }
};

// Checks every field against the limits above and their mutual consistency. Returns an empty
// optional when valid, otherwise a message naming the offending field and value.
std::optional<std::string> validate(const DecodeShape& s);

// Checks per-sequence data against a (valid) shape: qlen <= kv_lens[b] <= max_pages_per_seq *
// page_size, max(kv_lens) == max_kv_len, and every block-table slot a sequence uses holds a page id
// in [0, num_pages). Slots beyond a sequence's used pages are not inspected (they may be poison).
std::optional<std::string> validate_sequences(const DecodeShape& s,
                                              const std::vector<int32_t>& kv_lens,
                                              const std::vector<int32_t>& block_table);

// Pointers of one decode call. All buffers are host memory for the host backend and device memory
// for GPU backends; layouts are dense row-major.
struct DecodeArgs {
  const void* q = nullptr;               // [tokens, heads, 576] of q_dtype
  const void* kv = nullptr;              // [num_pages, page_size, 576] of kv_dtype
  const int32_t* block_table = nullptr;  // [batch, max_pages_per_seq] page ids
  const int32_t* kv_lens = nullptr;      // [batch] keys per sequence
  uint16_t* out = nullptr;               // [tokens, heads, 512] bf16 bit patterns
  float* lse = nullptr;                  // [tokens, heads] natural-log LSE; null unless return_lse
  void* workspace = nullptr;             // variant scratch of workspace_bytes(), may be null if 0
  size_t workspace_bytes = 0;
  // Host memory: the plan Variant::plan wrote for these lengths (variants with plan_words() > 0);
  // a GPU variant passes it to its kernel with the launch (kernel parameters), so it may change as
  // soon as run() returns.
  const int32_t* plan = nullptr;
  size_t plan_words = 0;
  // GPU variants: the stream (hipStream_t / cudaStream_t) every kernel and copy of the launch is
  // enqueued on, in order; null is the default stream. Host variants run synchronously and
  // ignore it. A launch never synchronises, allocates or uses another stream, so it can be
  // captured into a graph.
  void* stream = nullptr;
};

}  // namespace mlatune
