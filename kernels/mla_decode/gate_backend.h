// The validation gate's work in a backend's memory: generating a case's inputs where the variant
// runs (case_gen.h), computing the reference of the rows the gate checks, and comparing outputs
// there, so that only per-row metrics and a few indices cross to the host. The host backend does
// all of it in host memory with the float64 reference; a GPU backend with kernels and its fp32
// reference (itself checked against the float64 one in tests), so that cases of tens of GB cost
// milliseconds instead of minutes of host generation and copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "mla_decode/case_gen.h"
#include "mla_decode/problem.h"
#include "mla_decode/variant.h"

namespace mlatune {

// A generated case: the shape and everything that determines its bytes.
struct CaseSpec {
  DecodeShape shape;  // num_pages, max_pages_per_seq and the fp8 scales included
  CaseGen gen;
  std::vector<int32_t> kv_lens;     // [batch], each in [qlen, max_kv_len]
  std::vector<int64_t> page_start;  // [batch] index of each sequence's first used page
};

// Builds a spec: `kv_lens` as given, pages assigned in sequence order through a permutation of
// the pool drawn from `seed`, fp8 scales from the pattern's bounds. Throws std::invalid_argument
// when the resulting shape is invalid.
CaseSpec make_case_spec(const DecodeShape& shape, std::vector<int32_t> kv_lens, uint64_t seed,
                        InputPattern pattern);

// A case's bytes in host memory.
struct HostCase {
  std::vector<uint8_t> q;            // [tokens, heads, 576] raw q_dtype elements
  std::vector<uint8_t> kv;           // [num_pages, page_size, 576], unused rows NaN
  std::vector<int32_t> block_table;  // [batch, max_pages_per_seq], unused slots poisoned
  std::vector<int32_t> kv_lens;      // [batch]
  DecodeArgs args() const;           // inputs set; outputs and workspace left null
};
HostCase generate_host_case(const CaseSpec& spec);

// How one checked row compares with the reference.
struct RowCheck {
  double max_abs = 0;      // max |out - ref|
  double worst_ratio = 0;  // max |out - ref| / (atol + rtol |ref|) over the row's dims
  int32_t worst_dim = 0;   // where (the lowest such dim)
  double cosine = 1;       // of the row with the reference row (1 when both are zero)
  double lse_err = 0;      // |lse - ref lse|, 0 when no LSE was given
};

struct OutputCheck {
  int64_t bad_out = -1;  // first non-finite element of out, or -1
  float bad_out_value = 0;
  int64_t bad_lse = -1;  // first non-finite LSE, or -1
  float bad_lse_value = 0;
  std::vector<RowCheck> rows;  // one per checked row, in the order they were given
};

// A case's inputs and the reference of its checked rows, in one backend's memory.
class PreparedCase {
 public:
  virtual ~PreparedCase() = default;
  virtual const CaseSpec& spec() const = 0;
  virtual DecodeArgs args() const = 0;  // inputs set; outputs and workspace left null
  // Scans every element of out ([tokens, heads, 512] bf16) and lse ([tokens, heads], may be null)
  // in this backend's memory for NaN / Inf and compares the checked rows with the reference.
  // Throws LaunchError on a device failure.
  virtual OutputCheck check(const uint16_t* out, const float* lse, double atol,
                            double rtol) const = 0;
};

class GateBackend {
 public:
  virtual ~GateBackend() = default;
  // Generates the case in this backend's memory and the reference of `checked_rows`
  // (token * heads + head each; may be empty: timing inputs). `threads` bounds host threads.
  // Throws LaunchError (device failure, out of memory) or std::invalid_argument (bad spec).
  virtual std::unique_ptr<PreparedCase> prepare(const CaseSpec& spec,
                                                const std::vector<int64_t>& checked_rows,
                                                int threads) = 0;
  // Index of the first byte at which two buffers of this backend's memory differ, or -1.
  virtual int64_t first_difference(const void* a, const void* b, size_t bytes) = 0;
};

// The gate backend of a backend's variants. Throws LaunchError if the backend is not built in.
GateBackend& gate_backend(Backend b);

// The host implementation's row comparison, shared with tests: `ref_out` [rows, 512] and
// `ref_lse` [rows] laid out by `checked_rows`.
OutputCheck compare_host(const DecodeShape& s, const std::vector<int64_t>& checked_rows,
                         const double* ref_out, const double* ref_lse, const uint16_t* out,
                         const float* lse, double atol, double rtol);

}  // namespace mlatune
