// The GPU reference: one workgroup per (token, head) row, a textbook two-pass softmax; fp32
// scores and probabilities, their sums and the P.V accumulation in double.
//
//   pass A: every wave takes keys round-robin, computes q.k with its lanes splitting the 576 dims
//           and a butterfly sum, and keeps the running maximum; a block reduction gives m.
//   pass B: keys in chunks of kChunk: the scores are recomputed, p = exp(s - m) goes to shared
//           memory with the key's row offset, then every thread accumulates p * v for its dims,
//           and the sum of p, over the chunk in key order.
//
// Nothing is kept per key beyond one chunk, so any length works with a fixed 3 KiB of shared
// memory; the price is computing every score twice, which is cheap next to a validation run.
// Only visible keys (j < L - qlen + i + 1) are touched, so neither block-table slots past the
// used pages nor KV rows past L are ever read. Offsets are 64-bit throughout.
//
// This file deliberately shares nothing with the variants but gpu_formats.h (exact decoders).
#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/reference_gpu.h"
#include "mla_decode/variant.h"

namespace mlatune {
namespace {

constexpr int kThreads = 256;
constexpr int kWave = MLATUNE_WAVE_SIZE;
constexpr int kWaves = kThreads / kWave;
constexpr int kChunk = 256;                           // keys whose probabilities are staged at once
constexpr int kDimsPerThread = kHeadDimV / kThreads;  // output dims each thread accumulates
constexpr int64_t kMaxBlocks = int64_t{1} << 18;      // grid cap; blocks loop over the rows
static_assert(kHeadDimV % kThreads == 0, "every thread owns the same number of output dims");

struct RefParams {
  const void* q;               // [tokens, heads, 576] of q_dtype
  const void* kv;              // [pages, page_size, 576] of KV dtype
  const int32_t* block_table;  // [batch, max_pages_per_seq]
  const int32_t* kv_lens;      // [batch]
  const int64_t* row_ids;      // [rows] the (token * heads + head) rows computed, or null: all
  float* out;                  // [rows, 512]
  float* lse;                  // [rows]
  int64_t rows;                // rows computed
  int32_t qlen;
  int32_t heads;
  int32_t page_size;
  int32_t max_pages_per_seq;
  DType q_dtype;
  float score_scale;  // sm_scale * q_scale * kv_scale, folded into q
  float kv_scale;     // applied to the normalised output
};

// Element offset of key j's row in the pool.
__device__ __forceinline__ int64_t key_row_offset(const RefParams& p, const int32_t* pages,
                                                  int64_t j) {
  const int64_t page = pages[j / p.page_size];
  return (page * p.page_size + j % p.page_size) * kHeadDimQK;
}

// q.k for key j by one whole wave; every lane returns the same sum (butterfly all-reduce, whose
// additions are commutative pairs and hence bitwise equal in all lanes).
template <DType kKv>
__device__ __forceinline__ float wave_score(const float* q_s, const void* kv, int64_t row_offset,
                                            int lane) {
  float acc = 0.0f;
  for (int d = lane; d < kHeadDimQK; d += kWave) {
    acc += q_s[d] * gpu::load_as_float<kKv>(kv, row_offset + d);
  }
  for (int mask = kWave / 2; mask > 0; mask /= 2) acc += mlatune_shfl_xor(acc, mask);
  return acc;
}

template <DType kKv>
__global__ __launch_bounds__(kThreads) void reference_kernel(RefParams p) {
  __shared__ float q_s[kHeadDimQK];
  __shared__ float p_s[kChunk];
  __shared__ int64_t off_s[kChunk];
  __shared__ float max_s[kWaves];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid % kWave;
  const int wave = tid / kWave;
  const int64_t max_len = int64_t{p.max_pages_per_seq} * p.page_size;

  for (int64_t slot = blockIdx.x; slot < p.rows; slot += gridDim.x) {
    const int64_t row = p.row_ids ? p.row_ids[slot] : slot;
    const int64_t token = row / p.heads;
    const int64_t b = token / p.qlen;
    const int64_t i = token % p.qlen;
    // A length beyond the block table cannot be honoured without reading past it; the callers
    // validate lengths on the host, so the clamp only keeps a bad input from faulting.
    int64_t len = p.kv_lens[b];
    len = len < 0 ? 0 : (len > max_len ? max_len : len);
    int64_t visible = len - p.qlen + i + 1;
    if (visible < 0) visible = 0;
    const int32_t* pages = p.block_table + b * p.max_pages_per_seq;

    __syncthreads();  // the previous row is done with every shared array
    for (int d = tid; d < kHeadDimQK; d += kThreads) {
      q_s[d] = gpu::load_as_float(p.q_dtype, p.q, row * kHeadDimQK + d) * p.score_scale;
    }
    __syncthreads();

    // Pass A: the maximum score.
    float m = -__builtin_huge_valf();
    for (int64_t j = wave; j < visible; j += kWaves) {
      m = fmaxf(m, wave_score<kKv>(q_s, p.kv, key_row_offset(p, pages, j), lane));
    }
    if (lane == 0) max_s[wave] = m;
    __syncthreads();
    m = max_s[0];
    for (int w = 1; w < kWaves; ++w) m = fmaxf(m, max_s[w]);

    // Pass B: sum of exp(s - m) and the P.V accumulation, chunk by chunk, in double: an fp32
    // running sum over 128k keys drifts by ~1e-3 relative (an LSE error of ~8e-4 was measured at
    // 131072 keys, beyond the kernels' own error), and a reference must not be the least accurate
    // party.
    double acc[kDimsPerThread] = {};
    double l = 0.0;
    for (int64_t c0 = 0; c0 < visible; c0 += kChunk) {
      const int n = static_cast<int>(visible - c0 < kChunk ? visible - c0 : kChunk);
      __syncthreads();  // the previous chunk's readers are done with p_s / off_s
      for (int c = wave; c < n; c += kWaves) {
        const int64_t off = key_row_offset(p, pages, c0 + c);
        const float s = wave_score<kKv>(q_s, p.kv, off, lane);
        if (lane == 0) {
          p_s[c] = expf(s - m);
          off_s[c] = off;
        }
      }
      __syncthreads();
      for (int c = 0; c < n; ++c) {
        const double pc = p_s[c];
        l += pc;
#pragma unroll
        for (int k = 0; k < kDimsPerThread; ++k) {
          acc[k] += pc * gpu::load_as_float<kKv>(p.kv, off_s[c] + tid + k * kThreads);
        }
      }
    }

    // l == 0 only when no key is visible (the largest score contributes exp(0) = 1 otherwise); a
    // NaN l (NaN in the data) is kept and propagates, so that it cannot pass as an empty row.
    float* out = p.out + slot * kHeadDimV;
    const bool empty = l == 0.0;
    const double f = empty ? 0.0 : p.kv_scale / l;
#pragma unroll
    for (int k = 0; k < kDimsPerThread; ++k) {
      out[tid + k * kThreads] = static_cast<float>(acc[k] * f);
    }
    if (tid == 0) {
      p.lse[slot] = empty ? -__builtin_huge_valf() : static_cast<float>(m + log(l));
    }
  }
}

}  // namespace

void gpu_reference_decode_rows(const DecodeShape& s, const DecodeArgs& a, const int64_t* rows,
                               int64_t n_rows, float* out_f32, float* lse_f32) {
  if (auto err = validate(s)) throw LaunchError("gpu_reference_decode: invalid shape: " + *err);
  if (!a.q || !a.kv || !a.block_table || !a.kv_lens || !out_f32 || !lse_f32) {
    throw LaunchError("gpu_reference_decode: null q, kv, block_table, kv_lens, out or lse pointer");
  }
  if (n_rows < 0 || n_rows > s.rows() || (rows == nullptr && n_rows != s.rows())) {
    throw LaunchError("gpu_reference_decode: " + std::to_string(n_rows) + " rows of a shape with " +
                      std::to_string(s.rows()));
  }
  if (n_rows == 0) return;
  RefParams p{};
  p.q = a.q;
  p.kv = a.kv;
  p.block_table = a.block_table;
  p.kv_lens = a.kv_lens;
  p.row_ids = rows;
  p.out = out_f32;
  p.lse = lse_f32;
  p.rows = n_rows;
  p.qlen = s.qlen;
  p.heads = s.heads;
  p.page_size = s.page_size;
  p.max_pages_per_seq = s.max_pages_per_seq;
  p.q_dtype = s.q_dtype;
  p.score_scale = s.sm_scale * s.q_scale * s.kv_scale;
  p.kv_scale = s.kv_scale;
  const dim3 grid(static_cast<unsigned>(std::min(p.rows, kMaxBlocks)));
  switch (s.kv_dtype) {
    case DType::kBF16:
      reference_kernel<DType::kBF16><<<grid, kThreads, 0, nullptr>>>(p);
      break;
    case DType::kFP8E4M3FN:
      reference_kernel<DType::kFP8E4M3FN><<<grid, kThreads, 0, nullptr>>>(p);
      break;
    case DType::kFP8E4M3FNUZ:
      reference_kernel<DType::kFP8E4M3FNUZ><<<grid, kThreads, 0, nullptr>>>(p);
      break;
  }
  hip_check_launch("gpu_reference_decode");
}

void gpu_reference_decode(const DecodeShape& s, const DecodeArgs& a, float* out_f32,
                          float* lse_f32) {
  gpu_reference_decode_rows(s, a, nullptr, s.rows(), out_f32, lse_f32);
}

}  // namespace mlatune
