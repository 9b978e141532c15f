// hip_portable_split_v1: the portable GPU baseline. No matrix cores, fp32 math, one source for
// NVIDIA (nvcc) and AMD (HIP clang).
//
// Work decomposition. The qlen * heads query rows of a sequence are packed into one dimension,
//   packed row r = i * heads + h   (query token i of the sequence, head h),
// which is also their order in q and out ([tokens, heads, ...] with token = b * qlen + i), so a
// group of consecutive packed rows is one contiguous slab of q and of out. A workgroup handles
// block_rows consecutive packed rows (a "head group"; it may span tokens) for one KV split of one
// sequence: grid.x = head group + groups * split (head groups of one split are neighbours in
// launch order and read the same KV tiles through L2), grid.y = sequences (a workgroup loops over
// b += gridDim.y when batch exceeds 65535). Split s of a sequence of length L covers keys
// [s * c, min(L, (s + 1) * c)) with c = ceil(L / kv_splits), as in host_split_kv_v1.
//
// Per workgroup (256 threads; 512 for block_rows 64), for each tile of kv_tile keys of its split:
//   1. the tile's row offsets (from the block table, only slots of keys < L) go to shared memory;
//   2. the tile is staged ONCE into shared memory as bf16 for all rows (fp8 -> bf16 is exact), with
//      16-byte global loads when the pool is 16-byte aligned. Only keys < min(L, split end) are
//      staged and only they are ever read, so poisoned rows past L never enter the arithmetic;
//   3. scores: threads / block_rows lanes per row each hold a slice of the row's q (exact values,
//      in float registers) and compute the slice's partial dot for every key; a butterfly over
//      those lanes completes it, and the lane whose slice index is key % lanes keeps it;
//   4. online softmax per row (max and sum by butterflies over the same lanes), masked keys
//      (past the split end, or causal: key j >= L - qlen + i + 1) get p = 0 exactly; the rescale
//      factor and p go to shared memory;
//   5. P.V: thread (dim group of 8 dims, row group) rescales and accumulates its 8 dims for
//      8 (4 when block_rows is 16) rows over the tile's staged keys.
// Registers (sm_90a): 128 for block_rows 16 (two workgroups per SM), about 225 for 32; 64 rows
// hold 64 * (576 q + 512 accumulators) floats per workgroup, more than a register file, and spill
// (~570 bytes per thread) at the 128-register cap of 512 threads.
// A row that saw no key keeps m = -inf, l = 0: it writes LSE -inf (and zeros when it is final),
// never NaN. Everything is 64-bit where it indexes memory; there are no atomics, and every
// reduction has a fixed order, so results are bitwise reproducible.
//
// Outputs. kv_splits == 1: the split kernel writes the final bf16 out (and LSE) directly, no
// workspace, no combine kernel. kv_splits > 1: it writes partials to the workspace (floats):
//   part_out [batch, kv_splits, qlen * heads, 512]: the split's normalised output (sum p v / sum p)
//       without kv_scale; written only where part_lse is finite.
//   part_lse [batch, kv_splits, qlen * heads]: m + log(sum p), or -inf for a split part with no
//       visible key (empty split, or fully masked for an early query token).
// and the combine kernel (one workgroup per output row) merges them:
//   out = kv_scale * sum_s w_s part_out_s / sum_s w_s, w_s = exp(lse_s - max lse),
//   lse = max lse + log(sum_s w_s); a -inf part contributes exactly 0 and is never read.
//
// Shared memory per workgroup (bytes): kv_tile * 1152 (staged tile; every access pattern reads
// one key row or writes consecutive 16-byte pieces, so rows need no padding against bank
// conflicts) + kv_tile * block_rows * 4 (p) + kv_tile * 8 (row offsets) + block_rows * 12 (row
// statistics): 39,360 / 41,600 / 46,080 for kv_tile 32 and block_rows 16 / 32 / 64, and
// 78,528 / 82,816 / 91,392 for kv_tile 64 (above 48 KiB: needs the device's opt-in limit, H200
// 227 KiB, gfx950 160 KiB; refused on gfx942's 64 KiB).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "gpu/hip_compat.h"
#include "mla_decode/code_identity.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/hip_variants.h"

namespace mlatune {
namespace {

constexpr int kKvStride = kHeadDimQK;           // bf16 elements per staged row (1152 bytes)
constexpr int kDimGroups = kHeadDimV / 8;       // P.V: 64 groups of 8 output dims
constexpr int kCombineThreads = kHeadDimV / 4;  // combine: 4 dims per thread
constexpr int64_t kMaxCombineBlocks = int64_t{1} << 16;
constexpr int64_t kMaxGridY = 65535;
constexpr size_t kDefaultSharedLimit = 48 * 1024;  // usable by every kernel without an opt-in
constexpr float kNegInf = -__builtin_huge_valf();

// Workgroup size: 256 threads, 512 for 64 rows, so that every thread holds at most 72 q values
// and 64 accumulators. 16 rows fit in 128 registers, which lets two workgroups share an SM.
// (Functions of one argument: HIP's __launch_bounds__ is a macro, template commas break it.)
constexpr int threads_for(int rows) { return rows > 32 ? 512 : 256; }
constexpr int min_blocks_for(int rows) { return rows == 16 ? 2 : 1; }

// Compile-time geometry of one (block_rows, kv_tile) instantiation.
template <int kRows, int kTile>
struct Geometry {
  static constexpr int kThreads = threads_for(kRows);
  static constexpr int kRowGroups = kThreads / kDimGroups;  // P.V: groups of rows
  static_assert(kThreads % kDimGroups == 0 && kRows % (4 * kRowGroups) == 0, "P.V layout");
  // Score phase: kTpr threads per row, each owning kChunks chunks of kCw q dims (chunk c of the
  // row belongs to slice c % kTpr, so a wave reads contiguous bytes of a staged key row).
  static constexpr int kTpr = kThreads / kRows;
  static constexpr int kCw = (kHeadDimQK / 8) % kTpr == 0 ? 8 : 4;
  static constexpr int kChunks = kHeadDimQK / kCw / kTpr;
  static constexpr int kQDims = kChunks * kCw;         // q values held in registers per thread
  static constexpr int kKeysPerThread = kTile / kTpr;  // scores each thread keeps per tile
  static constexpr int kRpt = kRows / kRowGroups;      // P.V rows per thread
  static_assert(kHeadDimQK % (kCw * kTpr) == 0 && kTile % kTpr == 0, "score layout");
  static_assert(kTpr <= MLATUNE_WAVE_SIZE, "a row's lanes must share a wave");

  // Shared memory layout, every part 16-byte aligned.
  static constexpr size_t kKvOffset = 0;
  static constexpr size_t kPOffset = kKvOffset + size_t{kTile} * kKvStride * 2;  // [tile][rows]
  static constexpr size_t kRowOffOffset = kPOffset + size_t{kTile} * kRows * 4;  // [tile] int64
  static constexpr size_t kStatOffset = kRowOffOffset + size_t{kTile} * 8;  // alpha, m, l [rows]
  static constexpr size_t kBytes = kStatOffset + size_t{kRows} * 12;
  static_assert(kPOffset % 16 == 0 && kRowOffOffset % 16 == 0 && kStatOffset % 16 == 0);
};

static_assert(Geometry<16, 32>::kBytes == 39360 && Geometry<64, 32>::kBytes == 46080 &&
                  Geometry<16, 64>::kBytes == 78528 && Geometry<64, 64>::kBytes == 91392,
              "the sizes quoted at the top of this file");

size_t shared_bytes(int rows, int tile) {
  if (tile == 32) {
    return rows == 16 ? Geometry<16, 32>::kBytes
                      : (rows == 32 ? Geometry<32, 32>::kBytes : Geometry<64, 32>::kBytes);
  }
  return rows == 16 ? Geometry<16, 64>::kBytes
                    : (rows == 32 ? Geometry<32, 64>::kBytes : Geometry<64, 64>::kBytes);
}

struct SplitParams {
  const void* q;               // [tokens, heads, 576] of q_dtype
  const void* kv;              // [pages, page_size, 576] of the KV dtype
  const int32_t* block_table;  // [batch, max_pages_per_seq]
  const int32_t* kv_lens;      // [batch]
  uint16_t* out;               // [tokens, heads, 512] bf16; written here only when splits == 1
  float* lse;                  // [tokens, heads] or null; written here only when splits == 1
  float* part_out;             // [batch, splits, qlen * heads, 512]; null when splits == 1
  float* part_lse;             // [batch, splits, qlen * heads]; null when splits == 1
  int32_t batch;
  int32_t qlen;
  int32_t heads;
  int32_t page_size;
  int32_t max_pages_per_seq;
  int32_t splits;
  int32_t groups;  // head groups per sequence: ceil(qlen * heads / block_rows)
  DType q_dtype;
  bool kv_vec16;      // the pool is 16-byte aligned: stage tiles with 16-byte loads
  float score_scale;  // sm_scale * q_scale * kv_scale, applied to q.k
  float kv_scale;     // applied once to the normalised output
};

struct CombineParams {
  const float* part_out;
  const float* part_lse;
  uint16_t* out;
  float* lse;    // null unless return_lse
  int64_t rows;  // batch * qlen * heads
  int32_t rows_per_seq;
  int32_t splits;
  float kv_scale;
};

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ __forceinline__ unsigned char* dynamic_shared() {
  extern __shared__ uint4 mlatune_portable_split_smem[];
  return reinterpret_cast<unsigned char*>(mlatune_portable_split_smem);
}

// Two fp8 codes (bytes k and k+1 of w) as a packed pair of bf16.
template <DType kKv>
__device__ __forceinline__ uint32_t fp8x2_to_bf16x2(uint32_t w, int k) {
  const uint8_t lo = static_cast<uint8_t>(w >> (8 * k));
  const uint8_t hi = static_cast<uint8_t>(w >> (8 * k + 8));
  if constexpr (kKv == DType::kFP8E4M3FN) {
    return gpu::e4m3fn_to_bf16(lo) | (uint32_t{gpu::e4m3fn_to_bf16(hi)} << 16);
  } else {
    return gpu::e4m3fnuz_to_bf16(lo) | (uint32_t{gpu::e4m3fnuz_to_bf16(hi)} << 16);
  }
}

// Stages keys [0, n) of the tile (row element offsets in off_s) into kv_s as bf16.
template <DType kKv, class G>
__device__ __forceinline__ void stage_tile(const SplitParams& p, const int64_t* off_s, int n,
                                           uint16_t* kv_s, int tid) {
  if constexpr (kKv == DType::kBF16) {
    const uint16_t* kv = static_cast<const uint16_t*>(p.kv);
    if (p.kv_vec16) {
      constexpr int kVecs = kHeadDimQK / 8;  // 16-byte vectors per row
#pragma unroll 4
      for (int v = tid; v < n * kVecs; v += G::kThreads) {
        const int t = v / kVecs;
        const int c = v % kVecs;
        const uint4 x = *reinterpret_cast<const uint4*>(kv + off_s[t] + c * 8);
        *reinterpret_cast<uint4*>(kv_s + t * kKvStride + c * 8) = x;
      }
    } else {
      for (int v = tid; v < n * kHeadDimQK; v += G::kThreads) {
        const int t = v / kHeadDimQK;
        const int d = v % kHeadDimQK;
        kv_s[t * kKvStride + d] = kv[off_s[t] + d];
      }
    }
  } else {
    const uint8_t* kv = static_cast<const uint8_t*>(p.kv);
    if (p.kv_vec16) {
      constexpr int kVecs = kHeadDimQK / 16;
#pragma unroll 4
      for (int v = tid; v < n * kVecs; v += G::kThreads) {
        const int t = v / kVecs;
        const int c = v % kVecs;
        const uint4 x = *reinterpret_cast<const uint4*>(kv + off_s[t] + c * 16);
        uint4 a, b;
        a.x = fp8x2_to_bf16x2<kKv>(x.x, 0);
        a.y = fp8x2_to_bf16x2<kKv>(x.x, 2);
        a.z = fp8x2_to_bf16x2<kKv>(x.y, 0);
        a.w = fp8x2_to_bf16x2<kKv>(x.y, 2);
        b.x = fp8x2_to_bf16x2<kKv>(x.z, 0);
        b.y = fp8x2_to_bf16x2<kKv>(x.z, 2);
        b.z = fp8x2_to_bf16x2<kKv>(x.w, 0);
        b.w = fp8x2_to_bf16x2<kKv>(x.w, 2);
        uint4* dst = reinterpret_cast<uint4*>(kv_s + t * kKvStride + c * 16);
        dst[0] = a;
        dst[1] = b;
      }
    } else {
      for (int v = tid; v < n * kHeadDimQK; v += G::kThreads) {
        const int t = v / kHeadDimQK;
        const int d = v % kHeadDimQK;
        kv_s[t * kKvStride + d] = gpu::load_as_bf16<kKv>(kv, off_s[t] + d);
      }
    }
  }
}

// This thread's partial q.k over its slice of q (exact bf16 values as floats; chunk k of the
// slice is chunk slice + kTpr * k of the row) for the staged key row `krow`.
template <class G>
__device__ __forceinline__ float partial_dot(const float (&q)[G::kQDims], const uint16_t* krow,
                                             int slice) {
  float acc0 = 0.0f;
  float acc1 = 0.0f;
#pragma unroll
  for (int k = 0; k < G::kChunks; ++k) {
    const int c = slice + G::kTpr * k;
    if constexpr (G::kCw == 8) {
      const uint4 w = *reinterpret_cast<const uint4*>(krow + c * 8);
      acc0 += q[k * 8 + 0] * gpu::bf16_lo(w.x);
      acc1 += q[k * 8 + 1] * gpu::bf16_hi(w.x);
      acc0 += q[k * 8 + 2] * gpu::bf16_lo(w.y);
      acc1 += q[k * 8 + 3] * gpu::bf16_hi(w.y);
      acc0 += q[k * 8 + 4] * gpu::bf16_lo(w.z);
      acc1 += q[k * 8 + 5] * gpu::bf16_hi(w.z);
      acc0 += q[k * 8 + 6] * gpu::bf16_lo(w.w);
      acc1 += q[k * 8 + 7] * gpu::bf16_hi(w.w);
    } else {
      const uint2 w = *reinterpret_cast<const uint2*>(krow + c * 4);
      acc0 += q[k * 4 + 0] * gpu::bf16_lo(w.x);
      acc1 += q[k * 4 + 1] * gpu::bf16_hi(w.x);
      acc0 += q[k * 4 + 2] * gpu::bf16_lo(w.y);
      acc1 += q[k * 4 + 3] * gpu::bf16_hi(w.y);
    }
  }
  return acc0 + acc1;
}

// Butterfly reductions over the kTpr lanes of a row (aligned lane groups inside one wave); every
// lane of the group gets the same bits.
template <int kTpr>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int mask = 1; mask < kTpr; mask *= 2) x += mlatune_shfl_xor(x, mask);
  return x;
}
template <int kTpr>
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
  for (int mask = 1; mask < kTpr; mask *= 2) x = fmaxf(x, mlatune_shfl_xor(x, mask));
  return x;
}

template <DType kKv, int kRows, int kTile>
__global__ __launch_bounds__(threads_for(kRows),
                             min_blocks_for(kRows)) void split_kernel(SplitParams p) {
  using G = Geometry<kRows, kTile>;
  unsigned char* smem = dynamic_shared();
  uint16_t* kv_s = reinterpret_cast<uint16_t*>(smem + G::kKvOffset);
  float* p_s = reinterpret_cast<float*>(smem + G::kPOffset);
  int64_t* off_s = reinterpret_cast<int64_t*>(smem + G::kRowOffOffset);
  float* alpha_s = reinterpret_cast<float*>(smem + G::kStatOffset);
  float* m_s = alpha_s + kRows;
  float* l_s = m_s + kRows;

  const int tid = static_cast<int>(threadIdx.x);
  const int group = static_cast<int>(blockIdx.x) % p.groups;
  const int split = static_cast<int>(blockIdx.x) / p.groups;
  const int rows_per_seq = p.qlen * p.heads;
  const int r0 = group * kRows;  // first packed row of this workgroup
  const int nrows = rows_per_seq - r0 < kRows ? rows_per_seq - r0 : kRows;
  const int srow = tid / G::kTpr;  // score phase: row and slice
  const int slice = tid % G::kTpr;
  const int dgroup =
      tid % kDimGroups;  // P.V phase: dims [8 dgroup, +8) of rows [rgroup kRpt, +kRpt)
  const int rgroup = tid / kDimGroups;
  const int64_t max_len = int64_t{p.max_pages_per_seq} * p.page_size;

  for (int64_t b = blockIdx.y; b < p.batch; b += gridDim.y) {
    // The host validates lengths; the clamp only keeps a bad one from reading past the table row.
    int64_t len = p.kv_lens[b];
    len = len < 0 ? 0 : min64(len, max_len);
    const int64_t chunk = (len + p.splits - 1) / p.splits;
    const int64_t lo = min64(len, split * chunk);
    const int64_t hi = min64(len, lo + chunk);
    const int64_t row0 = b * rows_per_seq + r0;  // output row (token * heads + head) of r0
    const int64_t slot0 = (b * p.splits + split) * rows_per_seq + r0;
    const int32_t* pages = p.block_table + b * p.max_pages_per_seq;

    // This thread's q slice; rows past the sequence's packed rows are zero and fully masked.
    const bool row_active = srow < nrows;
    float q[G::kQDims];
    {
      const int64_t qbase = (row0 + srow) * kHeadDimQK;
#pragma unroll
      for (int k = 0; k < G::kChunks; ++k) {
        const int c = slice + G::kTpr * k;
#pragma unroll
        for (int e = 0; e < G::kCw; ++e) {
          q[k * G::kCw + e] =
              row_active ? gpu::load_as_float(p.q_dtype, p.q, qbase + c * G::kCw + e) : 0.0f;
        }
      }
    }
    // Keys j < visible_end are visible to this row (causal, right-aligned).
    const int64_t visible_end = row_active ? len - p.qlen + (r0 + srow) / p.heads + 1 : 0;

    float m = kNegInf;
    float l = 0.0f;
    float acc[G::kRpt][8];
#pragma unroll
    for (int k = 0; k < G::kRpt; ++k) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[k][e] = 0.0f;
    }

    for (int64_t t0 = lo; t0 < hi; t0 += kTile) {
      const int n = static_cast<int>(min64(kTile, hi - t0));
      __syncthreads();  // the previous tile's readers are done with every shared array
      if (tid < n) {
        const int64_t j = t0 + tid;  // < hi <= L: only used block-table slots are read
        off_s[tid] = (int64_t{pages[j / p.page_size]} * p.page_size + j % p.page_size) * kHeadDimQK;
      }
      __syncthreads();
      stage_tile<kKv, G>(p, off_s, n, kv_s, tid);
      __syncthreads();

      // Scores: key t = k * kTpr + slice is kept by this thread as sc[k].
      float sc[G::kKeysPerThread];
#pragma unroll
      for (int k = 0; k < G::kKeysPerThread; ++k) {
        sc[k] = kNegInf;
#pragma unroll 1
        for (int u = 0; u < G::kTpr; ++u) {
          const int t = k * G::kTpr + u;
          if (t < n) {  // uniform over the workgroup: every lane takes part in the butterflies
            const float s = group_sum<G::kTpr>(partial_dot<G>(q, kv_s + t * kKvStride, slice));
            if (u == slice) sc[k] = s;
          }
        }
      }

      // Online softmax. Masked keys get p = 0 exactly; m_ref keeps exp() finite while the row
      // has seen no key (m = -inf, alpha = 0 on a zero accumulator).
      float mt = kNegInf;
#pragma unroll
      for (int k = 0; k < G::kKeysPerThread; ++k) {
        const int t = k * G::kTpr + slice;
        sc[k] = (t < n && t0 + t < visible_end) ? sc[k] * p.score_scale : kNegInf;
        mt = fmaxf(mt, sc[k]);
      }
      mt = group_max<G::kTpr>(mt);
      const float m_new = fmaxf(m, mt);
      const float m_ref = m_new == kNegInf ? 0.0f : m_new;
      const float alpha = expf(m - m_ref);
      float psum = 0.0f;
#pragma unroll
      for (int k = 0; k < G::kKeysPerThread; ++k) {
        const float pk = expf(sc[k] - m_ref);
        psum += pk;
        p_s[(k * G::kTpr + slice) * kRows + srow] = pk;
      }
      l = l * alpha + group_sum<G::kTpr>(psum);
      m = m_new;
      if (slice == 0) alpha_s[srow] = alpha;
      __syncthreads();

      // P.V over the staged keys only (never a row that was not loaded).
      const int rbase = rgroup * G::kRpt;
#pragma unroll
      for (int k = 0; k < G::kRpt; ++k) {
        const float a = alpha_s[rbase + k];
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[k][e] *= a;
      }
      for (int t = 0; t < n; ++t) {
        const uint4 w = *reinterpret_cast<const uint4*>(kv_s + t * kKvStride + dgroup * 8);
        const float v[8] = {gpu::bf16_lo(w.x), gpu::bf16_hi(w.x), gpu::bf16_lo(w.y),
                            gpu::bf16_hi(w.y), gpu::bf16_lo(w.z), gpu::bf16_hi(w.z),
                            gpu::bf16_lo(w.w), gpu::bf16_hi(w.w)};
        const float4* pt = reinterpret_cast<const float4*>(p_s + t * kRows + rbase);
#pragma unroll
        for (int k4 = 0; k4 < G::kRpt / 4; ++k4) {
          const float4 pv = pt[k4];
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            acc[4 * k4 + 0][e] += pv.x * v[e];
            acc[4 * k4 + 1][e] += pv.y * v[e];
            acc[4 * k4 + 2][e] += pv.z * v[e];
            acc[4 * k4 + 3][e] += pv.w * v[e];
          }
        }
      }
    }

    // Epilogue. l == 0 exactly when the row saw no key in this split (its largest score adds
    // exp(0) = 1 otherwise); a NaN l (NaN in the data) is kept so that it cannot pass as empty.
    __syncthreads();
    if (slice == 0) {
      m_s[srow] = m;
      l_s[srow] = l;
    }
    __syncthreads();
    if (slice == 0 && row_active) {
      const float lse = l == 0.0f ? kNegInf : m + logf(l);
      if (p.part_lse) {
        p.part_lse[slot0 + srow] = lse;
      } else if (p.lse) {
        p.lse[row0 + srow] = lse;
      }
    }
#pragma unroll
    for (int k = 0; k < G::kRpt; ++k) {
      const int r = rgroup * G::kRpt + k;
      if (r >= nrows) continue;
      const float lr = l_s[r];
      if (p.part_out) {
        if (lr == 0.0f) continue;  // part_lse is -inf: the combine never reads this row
        const float inv = 1.0f / lr;
        float4* dst = reinterpret_cast<float4*>(p.part_out + (slot0 + r) * kHeadDimV + dgroup * 8);
        dst[0] = make_float4(acc[k][0] * inv, acc[k][1] * inv, acc[k][2] * inv, acc[k][3] * inv);
        dst[1] = make_float4(acc[k][4] * inv, acc[k][5] * inv, acc[k][6] * inv, acc[k][7] * inv);
      } else {
        const float f = lr == 0.0f ? 0.0f : p.kv_scale / lr;
        uint32_t h[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          h[e] = gpu::float_to_bf16(acc[k][2 * e] * f) |
                 (uint32_t{gpu::float_to_bf16(acc[k][2 * e + 1] * f)} << 16);
        }
        *reinterpret_cast<uint4*>(p.out + (row0 + r) * kHeadDimV + dgroup * 8) =
            make_uint4(h[0], h[1], h[2], h[3]);
      }
    }
  }
}

__global__ __launch_bounds__(kCombineThreads) void combine_kernel(CombineParams p) {
  const int tid = static_cast<int>(threadIdx.x);
  for (int64_t row = blockIdx.x; row < p.rows; row += gridDim.x) {
    const int64_t b = row / p.rows_per_seq;
    const int64_t r = row % p.rows_per_seq;
    const int64_t slot0 = b * p.splits * p.rows_per_seq + r;  // split s: slot0 + s * rows_per_seq
    // The largest partial LSE; a NaN one wins and poisons the row instead of vanishing.
    float mx = kNegInf;
    for (int s = 0; s < p.splits; ++s) {
      const float ls = p.part_lse[slot0 + int64_t{s} * p.rows_per_seq];
      mx = (ls > mx || ls != ls) ? ls : mx;
    }
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float total = 0.0f;
    if (mx != kNegInf) {
      for (int s = 0; s < p.splits; ++s) {
        const int64_t slot = slot0 + int64_t{s} * p.rows_per_seq;
        const float ls = p.part_lse[slot];
        if (ls == kNegInf) continue;  // contributes exactly 0; its part_out was never written
        const float w = expf(ls - mx);
        total += w;
        const float4 v = reinterpret_cast<const float4*>(p.part_out + slot * kHeadDimV)[tid];
        acc.x += w * v.x;
        acc.y += w * v.y;
        acc.z += w * v.z;
        acc.w += w * v.w;
      }
    }
    const bool empty = total == 0.0f;  // only when no split saw a key (invalid lengths)
    const float f = empty ? 0.0f : p.kv_scale / total;
    const uint32_t lo =
        gpu::float_to_bf16(acc.x * f) | (uint32_t{gpu::float_to_bf16(acc.y * f)} << 16);
    const uint32_t hi =
        gpu::float_to_bf16(acc.z * f) | (uint32_t{gpu::float_to_bf16(acc.w * f)} << 16);
    reinterpret_cast<uint2*>(p.out + row * kHeadDimV)[tid] = make_uint2(lo, hi);
    if (tid == 0 && p.lse) p.lse[row] = empty ? kNegInf : mx + logf(total);
  }
}

// ---- Host side ----------------------------------------------------------------------------

// Clears the runtime's sticky last error after a failed query, so that the next
// hip_check_launch does not blame a kernel for it.
std::string query_error(const char* what, hipError_t e) {
  (void)hipGetLastError();
  return std::string(what) + " failed: " + hipGetErrorString(e);
}

// The largest dynamic shared memory a workgroup may use on the current device (NVIDIA: the opt-in
// limit; AMD: the LDS size, no opt-in), cached per device. 0 and `error` set when unknown.
size_t device_shared_limit(std::string* error) {
  int device = 0;
  if (const hipError_t e = hipGetDevice(&device); e != hipSuccess) {
    *error = query_error("hipGetDevice", e);
    return 0;
  }
  static std::mutex mu;
  static std::map<int, size_t> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(device); it != cache.end()) return it->second;
  hipDeviceProp_t prop{};
  if (const hipError_t e = hipGetDeviceProperties(&prop, device); e != hipSuccess) {
    *error = query_error("hipGetDeviceProperties", e);
    return 0;
  }
#if MLATUNE_GPU_NVIDIA
  const size_t limit = prop.sharedMemPerBlockOptin;
#else
  const size_t limit = prop.sharedMemPerBlock;
#endif
  cache.emplace(device, limit);
  return limit;
}

// Raises the kernel's dynamic shared memory limit when it needs more than the default, once per
// device (CUDA requires the opt-in; HIP on AMD has none).
template <DType kKv, int kRows, int kTile>
void prepare_shared(size_t bytes) {
#if MLATUNE_GPU_NVIDIA
  if (bytes <= kDefaultSharedLimit) return;
  static std::atomic<uint64_t> done{0};  // bit d: set on device d (devices >= 64: every time)
  int device = 0;
  MLATUNE_HIP_CHECK(hipGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  auto* kernel = &split_kernel<kKv, kRows, kTile>;
  MLATUNE_HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(kernel),
                                        hipFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
  done.fetch_or(bit, std::memory_order_acq_rel);
#else
  (void)bytes;
#endif
}

template <DType kKv, int kRows, int kTile>
void launch_split(const SplitParams& params, dim3 grid, hipStream_t stream) {
  constexpr size_t bytes = Geometry<kRows, kTile>::kBytes;
  prepare_shared<kKv, kRows, kTile>(bytes);
  split_kernel<kKv, kRows, kTile>
      <<<grid, Geometry<kRows, kTile>::kThreads, bytes, stream>>>(params);
  hip_check_launch("hip_portable_split_v1 split_kernel");
}

template <DType kKv>
void launch_split(const SplitParams& params, dim3 grid, int rows, int tile, hipStream_t stream) {
  if (tile == 32) {
    if (rows == 16) return launch_split<kKv, 16, 32>(params, grid, stream);
    if (rows == 32) return launch_split<kKv, 32, 32>(params, grid, stream);
    return launch_split<kKv, 64, 32>(params, grid, stream);
  }
  if (rows == 16) return launch_split<kKv, 16, 64>(params, grid, stream);
  if (rows == 32) return launch_split<kKv, 32, 64>(params, grid, stream);
  return launch_split<kKv, 64, 64>(params, grid, stream);
}

bool aligned(const void* ptr, size_t to) { return reinterpret_cast<uintptr_t>(ptr) % to == 0; }

int64_t partial_rows(const DecodeShape& s, const LaunchParams& p) { return s.rows() * p.kv_splits; }

class PortableSplitVariant final : public Variant {
 public:
  std::string_view name() const override { return "hip_portable_split_v1"; }
  std::string_view description() const override {
    return "HIP, no matrix cores: workgroups of block_rows packed (token, head) rows per KV split "
           "share each kv_tile-key tile staged once in shared memory; fp32 online softmax; "
           "LSE-merge combine kernel when kv_splits > 1";
  }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override { return code_identity::k_hip_portable_split_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_splits = {1, 2, 4, 8, 16, 32};
      p.kv_tile = {32, 64};
      p.block_rows = {16, 32, 64};
      p.workers = {0};
      return p;
    }();
    return s;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    if (auto err = validate(s)) return Support::no("invalid shape: " + *err);
    if (!space().contains(p)) {
      return Support::no("launch params " + p.to_string() + " not in the parameter space");
    }
    const size_t need = shared_bytes(p.block_rows, p.kv_tile);
    if (need <= kDefaultSharedLimit) return Support::yes();
    std::string error;
    const size_t limit = device_shared_limit(&error);
    if (limit == 0) {
      return Support::no(
          "needs " + std::to_string(need) +
          " bytes of shared memory per workgroup and the device limit is unknown: " + error);
    }
    if (need > limit) {
      return Support::no("needs " + std::to_string(need) +
                         " bytes of shared memory per workgroup; the device allows " +
                         std::to_string(limit));
    }
    return Support::yes();
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.kv_splits <= 1) return 0;  // one split writes out directly
    return static_cast<size_t>(partial_rows(s, p)) * (kHeadDimV + 1) * sizeof(float);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

void PortableSplitVariant::run(const DecodeShape& s, const LaunchParams& p,
                               const DecodeArgs& a) const {
  const std::string who = "hip_portable_split_v1: ";
  if (const Support sup = can_implement(s, p); !sup.ok) throw LaunchError(who + sup.reason);
  if (!a.q || !a.kv || !a.block_table || !a.kv_lens || !a.out) {
    throw LaunchError(who + "null q, kv, block_table, kv_lens or out pointer");
  }
  if (s.return_lse && !a.lse) throw LaunchError(who + "return_lse set but lse pointer is null");
  // Element alignment is required; 16 bytes where the kernels store vectors.
  if (!aligned(a.q, dtype_bytes(s.q_dtype)) || !aligned(a.kv, dtype_bytes(s.kv_dtype)) ||
      !aligned(a.block_table, 4) || !aligned(a.kv_lens, 4) || !aligned(a.lse, 4)) {
    throw LaunchError(who + "q, kv, block_table, kv_lens or lse not aligned to its element size");
  }
  if (!aligned(a.out, 16)) throw LaunchError(who + "out must be 16-byte aligned");
  const size_t need = workspace_bytes(s, p);
  if (need > 0) {
    if (!a.workspace)
      throw LaunchError(who + "null workspace (" + std::to_string(need) + " bytes needed)");
    if (a.workspace_bytes < need) {
      throw LaunchError(who + "workspace too small: " + std::to_string(a.workspace_bytes) +
                        " bytes given, " + std::to_string(need) + " needed");
    }
    if (!aligned(a.workspace, 16)) throw LaunchError(who + "workspace must be 16-byte aligned");
  }

  const int32_t rows_per_seq = s.qlen * s.heads;
  SplitParams sp{};
  sp.q = a.q;
  sp.kv = a.kv;
  sp.block_table = a.block_table;
  sp.kv_lens = a.kv_lens;
  sp.batch = s.batch;
  sp.qlen = s.qlen;
  sp.heads = s.heads;
  sp.page_size = s.page_size;
  sp.max_pages_per_seq = s.max_pages_per_seq;
  sp.splits = p.kv_splits;
  sp.groups = (rows_per_seq + p.block_rows - 1) / p.block_rows;
  sp.q_dtype = s.q_dtype;
  sp.kv_vec16 = aligned(a.kv, 16);
  sp.score_scale = s.sm_scale * s.q_scale * s.kv_scale;
  sp.kv_scale = s.kv_scale;
  float* part_out = static_cast<float*>(a.workspace);
  float* part_lse = need > 0 ? part_out + partial_rows(s, p) * kHeadDimV : nullptr;
  if (need > 0) {
    sp.part_out = part_out;
    sp.part_lse = part_lse;
  } else {
    sp.out = a.out;
    sp.lse = s.return_lse ? a.lse : nullptr;
  }

  const dim3 grid(static_cast<unsigned>(sp.groups * p.kv_splits),
                  static_cast<unsigned>(std::min<int64_t>(s.batch, kMaxGridY)));
  switch (s.kv_dtype) {
    case DType::kBF16:
      launch_split<DType::kBF16>(sp, grid, p.block_rows, p.kv_tile, stream_of(a));
      break;
    case DType::kFP8E4M3FN:
      launch_split<DType::kFP8E4M3FN>(sp, grid, p.block_rows, p.kv_tile, stream_of(a));
      break;
    case DType::kFP8E4M3FNUZ:
      launch_split<DType::kFP8E4M3FNUZ>(sp, grid, p.block_rows, p.kv_tile, stream_of(a));
      break;
  }
  if (need == 0) return;

  CombineParams cp{};
  cp.part_out = part_out;
  cp.part_lse = part_lse;
  cp.out = a.out;
  cp.lse = s.return_lse ? a.lse : nullptr;
  cp.rows = s.rows();
  cp.rows_per_seq = rows_per_seq;
  cp.splits = p.kv_splits;
  cp.kv_scale = s.kv_scale;
  const dim3 cgrid(static_cast<unsigned>(std::min(cp.rows, kMaxCombineBlocks)));
  combine_kernel<<<cgrid, kCombineThreads, 0, stream_of(a)>>>(cp);
  hip_check_launch("hip_portable_split_v1 combine_kernel");
}

}  // namespace

const Variant& hip_portable_split_variant() {
  static const PortableSplitVariant v;
  return v;
}

}  // namespace mlatune
