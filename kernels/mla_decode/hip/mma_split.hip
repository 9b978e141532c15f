// hip_mma_split_v1: split-KV MLA decode on tensor cores (NVIDIA mma.sync m16n8k16, bf16 operands,
// fp32 accumulation), then an LSE-merge combine kernel.
//
// Grid: one workgroup of 8 logical warps (256 threads) per (sequence b, KV split, group of
// block_rows query rows); blockIdx.x = (b * kv_splits + split) * groups + group, so the row groups
// of one (sequence, split) are neighbours in launch order and share KV tiles through L2. The query
// rows of one sequence, r = i * heads + h (token i < qlen, head h), are packed into M: a KV tile is
// read from global memory once for all heads and all qlen tokens of the group.
//
// Split s of a sequence of length L covers keys [lo, hi) = [s * c, min(L, s * c + c)) with
// c = ceil(L / kv_splits) (the host split_kv convention). A group additionally stops at the last
// key its latest token may see (causal, right-aligned), so keys no row of it can see are never
// loaded. Per tile of kv_tile keys:
//   1. load: rows of keys < the group's end come from the paged pool with 16-byte copies (cp.async
//      on NVIDIA into a ring of 2-4 stages, issued ahead of the compute); later rows of the tile
//      are zero-filled in shared memory, so no KV row >= L and no block-table slot past
//      ceil(L / page) is ever read, and P = 0 never meets a NaN. fp8 KV lands raw in the staging
//      ring and is dequantised (exactly) to bf16 in one shared K/V buffer; kv_scale is applied at
//      the end. The block-table entries of a tile are read one tile ahead of its copies (their
//      latency, behind a tile of copies in flight, used to stall every tile), and page slots and
//      offsets come from a multiply-high division by the page size (fast_div.h).
//   2. S = Q K^T over 576 dims (Q dequantised to bf16 once per workgroup, kept in shared memory).
//   3. online softmax in fp32 (base-2 exponent, scores * sm_scale * q_scale * kv_scale * log2 e),
//      causal and length masks, P rounded to bf16.
//   4. O = O * alpha + P V over the 512 V dims (V = the first 512 dims of the same K rows, read
//      with ldmatrix.trans).
//
// Warp layout (8 warps, lane = thread % 32, g = lane / 4, t = lane % 4 as in the PTX fragments):
//   S = Q K^T: the 576 dims are cut in two halves of 18 k-steps; warp w takes half w / 4 and, of
//     the (block_rows / 16) x (kv_tile / 8) m16n8 units of the score tile, one m-tile with 1, 2
//     or 4 adjacent n-tiles, so each Q fragment serves several K fragments (0.75 ldmatrix per mma
//     where the tile allows). At least 4 independent accumulator chains per warp. The two fp32
//     partial tiles go to shared memory and are summed in a fixed order by the softmax.
//   softmax: 256 / block_rows consecutive threads per row, kv_tile * block_rows / 256 keys each;
//     row max and sums by xor butterflies, so every thread of a row holds the same m, l (fp32 sum
//     of p, for the LSE) and lb (sum of the bf16-rounded p, which normalises O consistently with
//     the P fed to the tensor cores). The row's alpha goes to shared memory for the P V step.
//   O += P V: warp w owns output dims [64 w, 64 w + 64) for all block_rows rows: 8 n-tiles x
//     block_rows / 16 m-tiles of fp32 accumulators = 32 / 64 / 128 registers per thread.
//
// Shared memory (bytes; R = 1168 = 584 bf16 per row: 576 + 8 padding, which puts the 8 row
// addresses of an ldmatrix in 8 distinct 16-byte bank groups):
//   kv     [stages or 1][kv_tile][R]  bf16 K/V tiles (the cp.async ring for bf16 KV on NVIDIA;
//                                     one buffer for fp8 KV and on AMD)
//   stage  [stages][kv_tile][576]     raw fp8 rows (fp8 KV on NVIDIA only)
//   q      [block_rows][R]            bf16 Q rows; padding rows (beyond heads * qlen) are zero
//   s      [2][block_rows][kv_tile + 4]  fp32 partial scores of the two k-halves
//   p      [block_rows][kv_tile + 8]     bf16 P
//   stats  alpha, m, l, lb [block_rows] fp32
// Stages: as many (2..4) as fit in 227 KB, or in half of it at block_rows 16 so that two
// workgroups share an SM. block_rows 64 with kv_tile 64 needs 263 KB and is refused.
//
// Output. kv_splits = 1: the main kernel writes bf16 out (round to nearest even) and, when asked,
// the natural-log LSE directly; no workspace. kv_splits > 1, workspace (floats):
//   part_out [batch, kv_splits, heads * qlen, 512]: the split's output normalised by its own lb,
//       without kv_scale; zeros for a row that saw no key in the split.
//   part_lse [batch, kv_splits, heads * qlen]: natural-log LSE of the split's scores (from l), or
//       -inf for a row that saw no key in the split (empty split, or only its causal tail).
// The combine kernel (mma_common.h; one workgroup per output row) merges the finite splits in
// split order, weights exp(lse_s - max), and writes out = kv_scale * sum / total and
// LSE = max + log(total).
// Rows of the last group beyond heads * qlen are padding: computed masked, never written.
// Everything is deterministic: fixed reduction orders, no atomics.
//
// AMD: the same kernel structure with a scalar stand-in for ldmatrix + mma (each thread computes
// exactly the fragment elements the NVIDIA lane would own) and synchronous loads. It fits the
// 64 KB LDS only at kv_tile 32, block_rows 16; can_implement refuses the rest there. MFMA is
// future work.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/fast_div.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/mma_common.h"
#include "mla_decode/hip/mma_split.h"

#if defined(MLATUNE_STANDALONE_CHECK)
// Compile checks outside CMake, which generates the real identity header.
namespace mlatune::code_identity {
inline constexpr std::string_view k_hip_mma_split_v1 = "standalone-check";
}  // namespace mlatune::code_identity
#else
#include "mla_decode/code_identity.h"
#endif

// The tensor-core path: ldmatrix, mma.sync and cp.async exist from sm_80 on
// (MLATUNE_MMA_TENSOR_CORES, mma_common.h). Every other pass (AMD, host passes that parse kernel
// bodies) compiles the scalar path.

namespace mlatune {
namespace {

constexpr std::string_view kName = "hip_mma_split_v1";

using namespace mma;

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpLanes;
constexpr int kRowElems = kHeadDimQK + 8;  // bf16 per shared-memory K/V/Q row
constexpr int kRowBytes = kRowElems * 2;   // 1168
constexpr int kQkSteps = kHeadDimQK / 16;  // k16 steps of S = Q K^T
constexpr int kDimsPerWarp = kHeadDimV / kWarps;

static_assert(kDimsPerWarp == 64, "the P V step assumes 64 output dims (8 n-tiles) per warp");

#if MLATUNE_GPU_NVIDIA
// cp.async rings; a Hopper workgroup may opt in to 227 KB of shared memory.
constexpr bool kAsyncCopy = true;
constexpr size_t kSmemLimit = 227 * 1024;
#else
constexpr bool kAsyncCopy = false;
constexpr size_t kSmemLimit = 64 * 1024;
#endif

template <DType T>
inline constexpr bool kIsFp8 = T != DType::kBF16;

// Tile geometry and shared-memory layout of one (kv_tile, block_rows, fp8 KV) configuration; the
// host sizes launches and refusals from the same numbers the kernel uses.
template <int KT, int BR, bool kFp8Kv>
struct Cfg {
  static constexpr int kMTiles = BR / 16;
  static constexpr int kNTiles = KT / 8;
  // S = Q K^T: the 576 dims are split in two halves (summed in the softmax), so that each warp
  // owns 2 or 4 m16n8 units of one m-tile and reuses each Q fragment for several K fragments:
  // ldmatrix per mma drops from 1 to 0.75 (the shared-memory reads bound this step).
  static constexpr int kKSplit = 2;
  static constexpr int kUnits = kMTiles * kNTiles;
  static constexpr int kTilesPerWarp = kUnits * kKSplit / kWarps;  // n-tiles of one m-tile
  static constexpr int kStepsPerWarp = kQkSteps / kKSplit;
  // Independent mma accumulator chains per warp in S = Q K^T: at least 4 in flight hide the
  // mma.sync latency with two warps per scheduler.
  static constexpr int kChains = kTilesPerWarp >= 4 ? 1 : 4 / kTilesPerWarp;
  static constexpr int kSStride = KT + 4;  // floats; float2 stores of a warp hit 32 banks
  static constexpr int kPStride = KT + 8;  // bf16; ldmatrix rows in distinct bank groups
  static constexpr int kRowThreads = kThreads / BR;
  static constexpr int kKeysPerThread = KT / kRowThreads;

  // Everything but the pipelined buffers; then as many pipeline stages (2..4) as the budget
  // allows. At block_rows 16 the budget is half the limit, so that two workgroups share an SM.
  static constexpr size_t kKvBufBytes = size_t{KT} * kRowBytes;
  static constexpr size_t kStageBufBytes = size_t{KT} * kHeadDimQK;
  static constexpr size_t kFixedBytes = size_t{BR} * kRowBytes +                    // q
                                        size_t{kKSplit} * BR * kSStride * 4 +       // s
                                        size_t{BR} * kPStride * 2 +                 // p
                                        4 * size_t{BR} * 4 +                        // stats
                                        (kFp8Kv || !kAsyncCopy ? kKvBufBytes : 0);  // kv (1)
  static constexpr size_t kBudget = BR == 16 ? kSmemLimit / 2 - 1024 : kSmemLimit;
  static constexpr size_t kPipeBufBytes = kFp8Kv ? kStageBufBytes : kKvBufBytes;
  static constexpr int kStages = !kAsyncCopy                                  ? 0
                                 : kFixedBytes + 4 * kPipeBufBytes <= kBudget ? 4
                                 : kFixedBytes + 3 * kPipeBufBytes <= kBudget ? 3
                                                                              : 2;
  static constexpr int kKvBufs = kAsyncCopy && !kFp8Kv ? kStages : 1;
  static constexpr int kStageBufs = kAsyncCopy && kFp8Kv ? kStages : 0;

  static constexpr size_t kKvOff = 0;
  static constexpr size_t kStageOff = kKvOff + kKvBufs * kKvBufBytes;
  static constexpr size_t kQOff = kStageOff + kStageBufs * kStageBufBytes;
  static constexpr size_t kSOff = kQOff + size_t{BR} * kRowBytes;
  static constexpr size_t kPOff = kSOff + size_t{kKSplit} * BR * kSStride * sizeof(float);
  static constexpr size_t kStatOff = kPOff + size_t{BR} * kPStride * 2;
  static constexpr size_t kSmemBytes = kStatOff + 4 * size_t{BR} * sizeof(float);
  static constexpr bool kFits = kSmemBytes <= kSmemLimit;

  static_assert(BR % 16 == 0 && KT % 16 == 0, "tiles are whole mma tiles");
  static_assert(kUnits * kKSplit % kWarps == 0, "score units spread evenly over the warps");
  static_assert(kNTiles % kTilesPerWarp == 0, "a warp's n-tiles lie in one m-tile");
  static_assert(kStepsPerWarp % 2 == 0, "k-steps go in pairs (one ldmatrix.x4 of K)");
  static_assert(kChains >= 1 && kChains <= kStepsPerWarp, "every chain gets k-steps");
  static_assert(kThreads % BR == 0 && KT % kRowThreads == 0 && kKeysPerThread % 2 == 0,
                "softmax threads split rows and keys evenly, keys in bf16 pairs");
  static_assert(kRowThreads <= 16, "softmax butterflies stay inside 16-lane groups");
  static_assert(kSmemBytes == kFixedBytes + kStages * kPipeBufBytes || !kAsyncCopy,
                "layout and stage budget agree");
  static_assert(kStageOff % 16 == 0 && kQOff % 16 == 0 && kSOff % 16 == 0 && kPOff % 16 == 0 &&
                    kStatOff % 16 == 0,
                "16-byte aligned regions");
};

// Kernel arguments (by value).
struct Params {
  const void* q;               // [batch * qlen, heads, 576] of q_dtype
  const void* kv;              // [num_pages, page_size, 576] of the kernel's KV dtype
  const int32_t* block_table;  // [batch, max_pages]
  const int32_t* kv_lens;      // [batch]
  uint16_t* out;               // [batch * qlen, heads, 512] bf16 (kv_splits = 1)
  float* lse;                  // [batch * qlen, heads] or null (kv_splits = 1)
  float* part_out;             // [batch, splits, rows, 512] (kv_splits > 1)
  float* part_lse;             // [batch, splits, rows] (kv_splits > 1)
  int32_t heads;
  int32_t qlen;
  int32_t rows;  // heads * qlen: the M extent of one sequence
  int32_t groups;
  int32_t splits;
  gpu::FastDiv page;  // page size: key j is at offset page.mod(j) of slot page.div(j)
  int32_t max_pages;
  int32_t max_len;  // min(max_pages * page_size, kMaxKvLen): kv_lens are clamped to it
  DType q_dtype;
  float scale_log2;  // sm_scale * q_scale * kv_scale * log2(e)
  float kv_scale;
};

// A tile's rows are copied by kTpr threads each (8 for bf16, 4 for fp8), in passes of
// kThreads / kTpr rows: thread tid copies row tid / kTpr + pass * (kThreads / kTpr).
template <int KT, int kTpr>
inline constexpr int kLoadPasses = (KT + kThreads / kTpr - 1) / (kThreads / kTpr);

// The pages of this thread's rows of the tile starting at key t0 (read from the block table,
// slots of keys < t0 + nvalid only), or -1 for rows past the valid keys. The loops read them one
// tile ahead of the copies that use them, so that the block table's latency never stands between
// a barrier and a tile's cp.async.
template <int KT, int kTpr>
__device__ __forceinline__ void tile_pages(const Params& p, const int32_t* pages, int32_t t0,
                                           int nvalid, int tid,
                                           int32_t (&pg)[kLoadPasses<KT, kTpr>]) {
#pragma unroll
  for (int pass = 0; pass < kLoadPasses<KT, kTpr>; ++pass) {
    const int r = tid / kTpr + pass * (kThreads / kTpr);
    pg[pass] = r < KT && r < nvalid ? pages[p.page.div(static_cast<uint32_t>(t0 + r))] : -1;
  }
}

// Byte offset of key j's row, on page `page`, in the KV pool. j < L <= kMaxKvLen fits int32; the
// row index does not (pools of 2^31 pages), hence the 64-bit product.
__device__ __forceinline__ int64_t kv_row_bytes(const Params& p, int32_t page, int32_t j,
                                                int elem_bytes) {
  const int64_t row = int64_t{page} * p.page.divisor + p.page.mod(static_cast<uint32_t>(j));
  return row * (int64_t{kHeadDimQK} * elem_bytes);
}

// Rows of a tile starting at key t0 with pages `pg` (tile_pages): bf16 KV -> dst rows of
// kRowBytes (async where possible); rows past the valid keys are zeroed. 8 threads per row, 9
// chunks of 16 bytes each, strided so that a warp covers 4 rows x 128 contiguous bytes per
// instruction.
template <int KT>
__device__ __forceinline__ void load_tile_bf16(const Params& p,
                                               const int32_t (&pg)[kLoadPasses<KT, 8>], int32_t t0,
                                               uint8_t* dst, int tid) {
  constexpr int kTpr = 8;
  constexpr int kChunks = kHeadDimQK * 2 / 16 / kTpr;  // 9
  constexpr int kRowsPerPass = kThreads / kTpr;
  const int sub = tid % kTpr;
#pragma unroll
  for (int pass = 0; pass < kLoadPasses<KT, kTpr>; ++pass) {
    const int r = tid / kTpr + pass * kRowsPerPass;
    if (r >= KT) break;
    uint8_t* d = dst + r * kRowBytes;
    if (pg[pass] >= 0) {
      const uint8_t* s = static_cast<const uint8_t*>(p.kv) + kv_row_bytes(p, pg[pass], t0 + r, 2);
#pragma unroll
      for (int c = 0; c < kChunks; ++c)
        copy16(d + (sub + kTpr * c) * 16, s + (sub + kTpr * c) * 16);
    } else {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) zero16(d + (sub + kTpr * c) * 16);
    }
  }
}

// fp8 KV rows of a tile with pages `pg` (tile_pages): raw into the staging buffer (async), or,
// without async copies, dequantised straight into dst rows of kRowBytes (rows past the valid keys
// zeroed). 4 threads per row, 9 chunks of 16 bytes each.
template <int KT, DType KV, bool kStaged>
__device__ __forceinline__ void load_tile_fp8(const Params& p,
                                              const int32_t (&pg)[kLoadPasses<KT, 4>], int32_t t0,
                                              uint8_t* dst, int tid) {
  constexpr int kTpr = 4;
  constexpr int kChunks = kHeadDimQK / 16 / kTpr;  // 9
  constexpr int kRowsPerPass = kThreads / kTpr;
  const int sub = tid % kTpr;
#pragma unroll
  for (int pass = 0; pass < kLoadPasses<KT, kTpr>; ++pass) {
    const int r = tid / kTpr + pass * kRowsPerPass;
    if (r >= KT) break;
    if (pg[pass] >= 0) {
      const uint8_t* s = static_cast<const uint8_t*>(p.kv) + kv_row_bytes(p, pg[pass], t0 + r, 1);
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        const int col = sub + kTpr * c;
        if constexpr (kStaged) {
          copy16(dst + r * kHeadDimQK + col * 16, s + col * 16);
        } else {
          const uint4 v = *reinterpret_cast<const uint4*>(s + col * 16);
          uint4* d = reinterpret_cast<uint4*>(dst + r * kRowBytes + col * 32);
          d[0] = fp8x8_to_bf16x8<KV>(uint2{v.x, v.y});
          d[1] = fp8x8_to_bf16x8<KV>(uint2{v.z, v.w});
        }
      }
    } else if constexpr (!kStaged) {
#pragma unroll
      for (int c = 0; c < kChunks; ++c) {
        uint8_t* d = dst + r * kRowBytes + (sub + kTpr * c) * 32;
        zero16(d);
        zero16(d + 16);
      }
    }
  }
}

// Staged fp8 rows -> bf16 K/V rows (exact); rows >= nvalid become zeros (stale staging data never
// reaches the products).
template <int KT, DType KV>
__device__ __forceinline__ void convert_stage(const uint8_t* stage, int nvalid, uint8_t* dst,
                                              int tid) {
  constexpr int kChunksPerRow = kHeadDimQK / 16;  // 36
  constexpr int kChunks = KT * kChunksPerRow;
#pragma unroll
  for (int pass = 0; pass < (kChunks + kThreads - 1) / kThreads; ++pass) {
    const int c = tid + pass * kThreads;
    if (c >= kChunks) break;
    const int r = c / kChunksPerRow;
    const int col = c % kChunksPerRow;
    uint4* d = reinterpret_cast<uint4*>(dst + r * kRowBytes + col * 32);
    if (r < nvalid) {
      const uint4 v = *reinterpret_cast<const uint4*>(stage + c * 16);
      d[0] = fp8x8_to_bf16x8<KV>(uint2{v.x, v.y});
      d[1] = fp8x8_to_bf16x8<KV>(uint2{v.z, v.w});
    } else {
      d[0] = uint4{0, 0, 0, 0};
      d[1] = uint4{0, 0, 0, 0};
    }
  }
}

// The group's Q rows as bf16 (exact for every q dtype; the scales are applied to the scores).
// Rows beyond heads * qlen are zero.
template <int BR, DType Q>
__device__ __forceinline__ void load_q_rows(const Params& p, int32_t b, int32_t row0, uint8_t* q_s,
                                            int tid) {
  constexpr int kChunksPerRow = kHeadDimQK / 8;  // 72 chunks of 8 bf16
  for (int c = tid; c < BR * kChunksPerRow; c += kThreads) {
    const int rl = c / kChunksPerRow;
    const int col = c % kChunksPerRow;
    const int32_t r = row0 + rl;
    uint4 v{0, 0, 0, 0};
    if (r < p.rows) {
      const int64_t e = (int64_t{b} * p.rows + r) * kHeadDimQK + col * 8;
      if constexpr (Q == DType::kBF16) {
        v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) + e);
      } else {
        v = fp8x8_to_bf16x8<Q>(
            *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.q) + e));
      }
    }
    *reinterpret_cast<uint4*>(q_s + rl * kRowBytes + col * 16) = v;
  }
}

// ---- Scalar stand-ins for the tensor-core primitives (mma_common.h)
// ------------------------------

#if !MLATUNE_MMA_TENSOR_CORES
__device__ __forceinline__ float smem_bf16(const uint8_t* base, int row_bytes, int row, int col) {
  return gpu::bf16_to_float(*reinterpret_cast<const uint16_t*>(base + row * row_bytes + col * 2));
}
#endif

// S partial of this warp's units: S[row][key] over its k-steps, into s_s[kgroup].
template <class C>
__device__ __forceinline__ void qk_tile(const uint8_t* q_s, const uint8_t* kv, float* s_s, int warp,
                                        int lane) {
  constexpr int kWarpsPerK = kWarps / C::kKSplit;
  constexpr int kNGroups = C::kNTiles / C::kTilesPerWarp;
  const int kg = warp / kWarpsPerK;
  const int rest = warp % kWarpsPerK;
  const int mt = rest / kNGroups;
  const int n0 = (rest % kNGroups) * C::kTilesPerWarp;
  const int step0 = kg * C::kStepsPerWarp;
  const int g = lane >> 2;
  const int t = lane & 3;
  float acc[C::kTilesPerWarp][4] = {};
#if MLATUNE_MMA_TENSOR_CORES
  // Independent accumulator chains (k-steps round robin, summed in a fixed order at the end):
  // one chain per n-tile would serialise up to 36 dependent mma.sync per tile.
  float chain[C::kChains][C::kTilesPerWarp][4] = {};
  // A (Q rows): lanes 0-7 rows 0-7, 8-15 rows 8-15, at k 0-7; lanes 16-31 the same at k 8-15.
  const uint32_t a_addr =
      smem_u32(q_s + (mt * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * kRowBytes + (lane >> 4) * 16 +
               step0 * 32);
  // B (K rows of one n-tile): lane group q = lane / 8 reads dims 8q..8q+7 of a k32 block, giving
  // b0, b1 of step s and b0, b1 of step s + 1.
  uint32_t b_addr[C::kTilesPerWarp];
#pragma unroll
  for (int j = 0; j < C::kTilesPerWarp; ++j) {
    b_addr[j] =
        smem_u32(kv + ((n0 + j) * 8 + (lane & 7)) * kRowBytes + (lane >> 3) * 16 + step0 * 32);
  }
#pragma unroll
  for (int s = 0; s < C::kStepsPerWarp; s += 2) {
    uint32_t a0[4], a1[4];
    ldmatrix_x4(a0, a_addr + s * 32);
    ldmatrix_x4(a1, a_addr + (s + 1) * 32);
#pragma unroll
    for (int j = 0; j < C::kTilesPerWarp; ++j) {
      uint32_t b[4];
      ldmatrix_x4(b, b_addr[j] + s * 32);
      mma_bf16(chain[s % C::kChains][j], a0, b[0], b[1]);
      mma_bf16(chain[(s + 1) % C::kChains][j], a1, b[2], b[3]);
    }
  }
#pragma unroll
  for (int c = 0; c < C::kChains; ++c) {
#pragma unroll
    for (int j = 0; j < C::kTilesPerWarp; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][e] += chain[c][j][e];
    }
  }
#else
#pragma unroll
  for (int j = 0; j < C::kTilesPerWarp; ++j) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int row = mt * 16 + g + (e >> 1) * 8;
      const int key = (n0 + j) * 8 + 2 * t + (e & 1);
      float sum = 0.0f;
      for (int d = step0 * 16; d < (step0 + C::kStepsPerWarp) * 16; ++d) {
        sum += smem_bf16(q_s, kRowBytes, row, d) * smem_bf16(kv, kRowBytes, key, d);
      }
      acc[j][e] = sum;
    }
  }
#endif
  // Accumulator layout: c0, c1 = (row g, cols 2t, 2t + 1), c2, c3 = (row g + 8, same cols).
  float* part = s_s + kg * (16 * C::kMTiles * C::kSStride);
#pragma unroll
  for (int j = 0; j < C::kTilesPerWarp; ++j) {
    float* d = part + (mt * 16 + g) * C::kSStride + (n0 + j) * 8 + 2 * t;
    *reinterpret_cast<float2*>(d) = float2{acc[j][0], acc[j][1]};
    *reinterpret_cast<float2*>(d + 8 * C::kSStride) = float2{acc[j][2], acc[j][3]};
  }
}

// O = O * alpha + P V for this warp's 64 output dims and all rows.
template <class C>
__device__ __forceinline__ void pv_tile(const uint16_t* p_s, const uint8_t* kv,
                                        const float* alpha_s, float (&o)[C::kMTiles][8][4],
                                        int warp, int lane) {
  const int g = lane >> 2;
  const int d0 = warp * kDimsPerWarp;
  rescale(o, alpha_s, g);
#if MLATUNE_MMA_TENSOR_CORES
  constexpr int kPRowBytes = C::kPStride * 2;
  // A (P rows) as for Q in qk_tile.
  const uint32_t p_addr =
      smem_u32(reinterpret_cast<const uint8_t*>(p_s) +
               ((lane & 7) + ((lane >> 3) & 1) * 8) * kPRowBytes + (lane >> 4) * 16);
  // B (V, transposed on load): lanes 0-7 keys 0-7 and 8-15 keys 8-15 at dims n..n+7, lanes
  // 16-31 the same at dims n+8..n+15: b0, b1 of n-tile n and b0, b1 of n-tile n + 8.
  const uint32_t v_addr =
      smem_u32(kv + ((lane & 7) + ((lane >> 3) & 1) * 8) * kRowBytes + (d0 + (lane >> 4) * 8) * 2);
#pragma unroll
  for (int kk = 0; kk < C::kNTiles / 2; ++kk) {
    uint32_t a[C::kMTiles][4];
#pragma unroll
    for (int mt = 0; mt < C::kMTiles; ++mt) {
      ldmatrix_x4(a[mt], p_addr + mt * 16 * kPRowBytes + kk * 32);
    }
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_addr + kk * 16 * kRowBytes + np * 32);
#pragma unroll
      for (int mt = 0; mt < C::kMTiles; ++mt) {
        mma_bf16(o[mt][2 * np], a[mt], b[0], b[1]);
        mma_bf16(o[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
#else
  const int t = lane & 3;
  const uint8_t* p8 = reinterpret_cast<const uint8_t*>(p_s);
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = mt * 16 + g + (e >> 1) * 8;
        const int dim = d0 + n * 8 + 2 * t + (e & 1);
        float sum = 0.0f;
        for (int key = 0; key < C::kNTiles * 8; ++key) {
          sum += smem_bf16(p8, C::kPStride * 2, row, key) * smem_bf16(kv, kRowBytes, key, dim);
        }
        o[mt][n][e] += sum;
      }
    }
  }
#endif
}

// ---- Kernels ----------------------------------------------------------------------------------

// Two workgroups per SM fit only at block_rows 16 (32 accumulator registers).
#if MLATUNE_GPU_NVIDIA
#define MMA_SPLIT_BOUNDS(BR) __launch_bounds__(kThreads, (BR) == 16 ? 2 : 1)
#else
#define MMA_SPLIT_BOUNDS(BR) __launch_bounds__(kThreads)
#endif

template <int KT, int BR, DType KV>
__global__ void MMA_SPLIT_BOUNDS(BR) mma_split_kernel(const Params p) {
  using C = Cfg<KT, BR, kIsFp8<KV>>;
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const kv_s = smem + C::kKvOff;
  uint8_t* const stage_s = smem + C::kStageOff;
  uint8_t* const q_s = smem + C::kQOff;
  float* const s_s = reinterpret_cast<float*>(smem + C::kSOff);
  uint16_t* const p_s = reinterpret_cast<uint16_t*>(smem + C::kPOff);
  float* const alpha_s = reinterpret_cast<float*>(smem + C::kStatOff);
  float* const m_s = alpha_s + BR;
  float* const l_s = m_s + BR;
  float* const lb_s = l_s + BR;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpLanes;
  const int lane = tid % kWarpLanes;
  const int32_t group = static_cast<int32_t>(blockIdx.x % p.groups);
  const int32_t split = static_cast<int32_t>(blockIdx.x / p.groups % p.splits);
  const int32_t b = static_cast<int32_t>(blockIdx.x / p.groups / p.splits);

  // Key range of this split, cut short at the last key the group's latest token may see.
  int32_t len = p.kv_lens[b];
  len = len < 0 ? 0 : imin(len, p.max_len);
  const int32_t chunk = (len + p.splits - 1) / p.splits;
  const int32_t lo = imin(len, split * chunk);
  const int32_t hi = imin(len, lo + chunk);
  const int32_t row0 = group * BR;
  const int32_t last_token = (imin(p.rows, row0 + BR) - 1) / p.heads;
  const int32_t end = imin(hi, len - p.qlen + last_token + 1);
  const int32_t n_tiles = end > lo ? (end - lo + KT - 1) / KT : 0;
  const int32_t* pages = p.block_table + int64_t{b} * p.max_pages;

  // This thread's softmax row and the first key that row may not see.
  const int srl = tid / C::kRowThreads;
  const int ssub = tid % C::kRowThreads;
  const int32_t sr = row0 + srl;
  const int32_t key_end = sr < p.rows ? imin(hi, len - p.qlen + sr / p.heads + 1) : lo;
  float m = kNegInf;
  float l = 0.0f;
  float lb = 0.0f;
  float o[C::kMTiles][8][4];
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int n = 0; n < 8; ++n) {
      o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.0f;
    }
  }

  auto tile_keys = [&](int32_t t) { return imin(KT, end - (lo + t * KT)); };
  auto compute = [&](const uint8_t* kv, int32_t t) {
    qk_tile<C>(q_s, kv, s_s, warp, lane);
    __syncthreads();
    softmax_tile<C>(s_s, p_s, alpha_s, p.scale_log2, lo + t * KT, key_end, srl, ssub, m, l, lb);
    __syncthreads();
    pv_tile<C>(p_s, kv, alpha_s, o, warp, lane);
  };
  auto load_q = [&] {
    switch (p.q_dtype) {
      case DType::kBF16:
        load_q_rows<BR, DType::kBF16>(p, b, row0, q_s, tid);
        break;
      case DType::kFP8E4M3FN:
        load_q_rows<BR, DType::kFP8E4M3FN>(p, b, row0, q_s, tid);
        break;
      default:
        load_q_rows<BR, DType::kFP8E4M3FNUZ>(p, b, row0, q_s, tid);
        break;
    }
  };

  if (n_tiles > 0) {
    if constexpr (!kAsyncCopy) {
      // Synchronous loads: one buffer, loaded between two barriers.
      load_q();
      for (int32_t t = 0; t < n_tiles; ++t) {
        __syncthreads();  // the previous tile's P V is done with kv_s
        if constexpr (kIsFp8<KV>) {
          int32_t pg[kLoadPasses<KT, 4>];
          tile_pages<KT, 4>(p, pages, lo + t * KT, tile_keys(t), tid, pg);
          load_tile_fp8<KT, KV, false>(p, pg, lo + t * KT, kv_s, tid);
        } else {
          int32_t pg[kLoadPasses<KT, 8>];
          tile_pages<KT, 8>(p, pages, lo + t * KT, tile_keys(t), tid, pg);
          load_tile_bf16<KT>(p, pg, lo + t * KT, kv_s, tid);
        }
        __syncthreads();
        compute(kv_s, t);
      }
    } else if constexpr (!kIsFp8<KV>) {
      // bf16: kStages - 1 tiles stream into the ring while tile t is computed.
      constexpr int kS = C::kStages;
      int32_t pg[kLoadPasses<KT, 8>];
#pragma unroll
      for (int st = 0; st < kS - 1; ++st) {
        if (st < n_tiles) {
          tile_pages<KT, 8>(p, pages, lo + st * KT, tile_keys(st), tid, pg);
          load_tile_bf16<KT>(p, pg, lo + st * KT, kv_s + st * C::kKvBufBytes, tid);
        }
        async_commit();
      }
      // The pages of the first tile the loop loads, then always those of the next one.
      if (kS - 1 < n_tiles)
        tile_pages<KT, 8>(p, pages, lo + (kS - 1) * KT, tile_keys(kS - 1), tid, pg);
      load_q();
      int buf = 0;  // t % kS
      for (int32_t t = 0; t < n_tiles; ++t) {
        async_wait<kS - 2>();
        __syncthreads();  // tile t visible to all; everyone is done with tile t - 1's buffer
        const int32_t ahead = t + kS - 1;
        if (ahead < n_tiles) {
          const int ahead_buf = buf == 0 ? kS - 1 : buf - 1;  // tile t - 1's buffer
          load_tile_bf16<KT>(p, pg, lo + ahead * KT, kv_s + ahead_buf * C::kKvBufBytes, tid);
          if (ahead + 1 < n_tiles) {
            tile_pages<KT, 8>(p, pages, lo + (ahead + 1) * KT, tile_keys(ahead + 1), tid, pg);
          }
        }
        async_commit();
        compute(kv_s + buf * C::kKvBufBytes, t);
        buf = buf + 1 == kS ? 0 : buf + 1;
      }
    } else {
      // fp8: raw tiles t + 1 .. t + kStages in flight in the staging ring while tile t,
      // converted to bf16, is computed.
      constexpr int kS = C::kStages;
      int32_t pg[kLoadPasses<KT, 4>];
#pragma unroll
      for (int st = 0; st < kS; ++st) {
        if (st < n_tiles) {
          tile_pages<KT, 4>(p, pages, lo + st * KT, tile_keys(st), tid, pg);
          load_tile_fp8<KT, KV, true>(p, pg, lo + st * KT, stage_s + st * C::kStageBufBytes, tid);
        }
        async_commit();
      }
      // The pages of the first tile the loop loads, then always those of the next one.
      if (kS < n_tiles) tile_pages<KT, 4>(p, pages, lo + kS * KT, tile_keys(kS), tid, pg);
      load_q();
      int buf = 0;  // t % kS
      for (int32_t t = 0; t < n_tiles; ++t) {
        async_wait<kS - 1>();
        __syncthreads();  // staged tile t visible; everyone is done with kv_s
        convert_stage<KT, KV>(stage_s + buf * C::kStageBufBytes, tile_keys(t), kv_s, tid);
        __syncthreads();  // kv_s ready; staging buffer `buf` free
        if (t + kS < n_tiles) {
          load_tile_fp8<KT, KV, true>(p, pg, lo + (t + kS) * KT, stage_s + buf * C::kStageBufBytes,
                                      tid);
          if (t + kS + 1 < n_tiles) {
            tile_pages<KT, 4>(p, pages, lo + (t + kS + 1) * KT, tile_keys(t + kS + 1), tid, pg);
          }
        }
        async_commit();
        compute(kv_s, t);
        buf = buf + 1 == kS ? 0 : buf + 1;
      }
    }
  }

  l = row_total<C>(l);
  lb = row_total<C>(lb);
  if (ssub == 0) {
    m_s[srl] = m;
    l_s[srl] = l;
    lb_s[srl] = lb;
  }
  __syncthreads();

  // Epilogue: this thread's accumulators are rows mt * 16 + g (+ 8), dims d0 + 8 n + 2 t (+ 1).
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const int d0 = warp * kDimsPerWarp;
  const bool direct = p.splits == 1;
  const int64_t part_row0 = (int64_t{b} * p.splits + split) * p.rows;
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int rl = mt * 16 + g + half * 8;
      const int32_t r = row0 + rl;
      if (r >= p.rows) continue;
      const float sum = lb_s[rl];
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      if (direct) {
        const float scale = inv * p.kv_scale;
        uint16_t* dst = p.out + (int64_t{b} * p.rows + r) * kHeadDimV + d0 + 2 * t4;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          *reinterpret_cast<uint32_t*>(dst + n * 8) =
              pack_bf16x2(o[mt][n][2 * half] * scale, o[mt][n][2 * half + 1] * scale);
        }
      } else {
        float* dst = p.part_out + (part_row0 + r) * kHeadDimV + d0 + 2 * t4;
#pragma unroll
        for (int n = 0; n < 8; ++n) {
          *reinterpret_cast<float2*>(dst + n * 8) =
              float2{o[mt][n][2 * half] * inv, o[mt][n][2 * half + 1] * inv};
        }
      }
    }
  }
  if (tid < BR && row0 + tid < p.rows) {
    const int32_t r = row0 + tid;
    const float lsum = l_s[tid];
    const float lse = lsum > 0.0f ? (m_s[tid] + log2f(lsum)) * kLn2 : kNegInf;
    if (!direct) {
      p.part_lse[part_row0 + r] = lse;
    } else if (p.lse != nullptr) {
      p.lse[int64_t{b} * p.rows + r] = lse;
    }
  }
}

// ---- Host side --------------------------------------------------------------------------------

using KernelFn = void (*)(Params);

struct KernelInfo {
  KernelFn fn = nullptr;  // null: this configuration does not fit this platform
  size_t smem = 0;        // dynamic shared memory it needs (also when it does not fit)
};

template <int KT, int BR, DType KV>
KernelInfo kernel_info() {
  using C = Cfg<KT, BR, kIsFp8<KV>>;
  KernelInfo k;
  k.smem = C::kSmemBytes;
  if constexpr (C::kFits) k.fn = &mma_split_kernel<KT, BR, KV>;
  return k;
}

template <int KT, int BR>
KernelInfo kernel_info(DType kv) {
  switch (kv) {
    case DType::kBF16:
      return kernel_info<KT, BR, DType::kBF16>();
    case DType::kFP8E4M3FN:
      return kernel_info<KT, BR, DType::kFP8E4M3FN>();
    default:
      return kernel_info<KT, BR, DType::kFP8E4M3FNUZ>();
  }
}

template <int KT>
KernelInfo kernel_info(int32_t block_rows, DType kv) {
  switch (block_rows) {
    case 16:
      return kernel_info<KT, 16>(kv);
    case 32:
      return kernel_info<KT, 32>(kv);
    case 64:
      return kernel_info<KT, 64>(kv);
    default:
      return {};
  }
}

// Kernel and shared memory of (kv_tile, block_rows, kv dtype); fn null when unsupported.
KernelInfo find_kernel(int32_t kv_tile, int32_t block_rows, DType kv) {
  switch (kv_tile) {
    case 32:
      return kernel_info<32>(block_rows, kv);
    case 64:
      return kernel_info<64>(block_rows, kv);
    default:
      return {};
  }
}

int64_t partial_rows(const DecodeShape& s, const LaunchParams& p) {
  return int64_t{s.batch} * p.kv_splits * s.qlen * s.heads;
}

[[noreturn]] void fail(const std::string& why) {
  throw LaunchError(std::string(kName) + ": " + why);
}

class MmaSplitVariant final : public Variant {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "GPU tensor cores: split-KV, heads x qlen of one sequence packed into M, bf16 "
           "mma.sync m16n8k16 for Q K^T and P V with fp32 online softmax (fp8 KV dequantised to "
           "bf16 in shared memory), cp.async double buffering, LSE-merge combine kernel; AMD: "
           "scalar stand-in for the matrix instructions";
  }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override { return code_identity::k_hip_mma_split_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_splits = {1, 2, 4, 8, 16, 32, 64};
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
      return Support::no("launch params " + p.to_string() + " outside the parameter space");
    }
    if (p.block_rows % 16 != 0) return Support::no("block_rows must be a multiple of 16");
    const KernelInfo k = find_kernel(p.kv_tile, p.block_rows, s.kv_dtype);
    if (k.fn == nullptr) {
      return Support::no("kv_tile " + std::to_string(p.kv_tile) + " x block_rows " +
                         std::to_string(p.block_rows) + " with " +
                         std::string(dtype_name(s.kv_dtype)) + " KV needs " +
                         std::to_string(k.smem) + " bytes of shared memory, more than the " +
                         std::to_string(kSmemLimit) + " a workgroup gets on this platform");
    }
    return Support::yes();
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.kv_splits <= 1) return 0;
    return static_cast<size_t>(partial_rows(s, p)) * (kHeadDimV + 1) * sizeof(float);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

void MmaSplitVariant::run(const DecodeShape& s, const LaunchParams& lp, const DecodeArgs& a) const {
  const Support sup = can_implement(s, lp);
  if (!sup.ok) fail(sup.reason);
  const size_t ws = workspace_bytes(s, lp);
  check_launch_args(kName, s, a, ws);

  const KernelInfo k = find_kernel(lp.kv_tile, lp.block_rows, s.kv_dtype);
  const int32_t rows = s.qlen * s.heads;
  Params p{};
  p.q = a.q;
  p.kv = a.kv;
  p.block_table = a.block_table;
  p.kv_lens = a.kv_lens;
  p.out = a.out;
  p.lse = s.return_lse ? a.lse : nullptr;
  p.part_out = static_cast<float*>(a.workspace);
  p.part_lse = ws > 0 ? p.part_out + partial_rows(s, lp) * kHeadDimV : nullptr;
  p.heads = s.heads;
  p.qlen = s.qlen;
  p.rows = rows;
  p.groups = (rows + lp.block_rows - 1) / lp.block_rows;
  p.splits = lp.kv_splits;
  p.page = gpu::FastDiv(static_cast<uint32_t>(s.page_size));
  p.max_pages = s.max_pages_per_seq;
  p.max_len = static_cast<int32_t>(
      std::min<int64_t>(int64_t{s.max_pages_per_seq} * s.page_size, kMaxKvLen));
  p.q_dtype = s.q_dtype;
  p.scale_log2 = static_cast<float>(static_cast<double>(s.sm_scale) * s.q_scale * s.kv_scale *
                                    1.4426950408889634);
  p.kv_scale = s.kv_scale;

  const int64_t blocks = int64_t{s.batch} * lp.kv_splits * p.groups;
  MLATUNE_HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(k.fn),
                                        hipFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(k.smem)));
  k.fn<<<dim3(static_cast<unsigned>(blocks)), dim3(kThreads), k.smem, stream_of(a)>>>(p);
  hip_check_launch("mma_split_kernel");
  if (lp.kv_splits > 1) {
    launch_combine(s, lp.kv_splits, p.part_out, p.part_lse, a.out, p.lse, stream_of(a),
                   "mma_split combine_kernel");
  }
}

}  // namespace

const Variant& hip_mma_split_variant() {
  static const MmaSplitVariant v;
  return v;
}

}  // namespace mlatune
