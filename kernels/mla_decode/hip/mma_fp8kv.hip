// hip_mma_fp8kv_v1: split-KV MLA decode for fp8 (e4m3fn) KV caches on NVIDIA tensor cores, with
// the KV tile kept as raw fp8 in shared memory and converted in registers, fragment by fragment,
// right before each mma.sync. hip_mma_split_v1 dequantises every staged fp8 tile to a bf16 copy
// first: one more pass over shared memory (576 B read + 1152 B written per key) and a barrier per
// tile, which bounds it at about a third of the memory bandwidth. Here a key costs 576 B of
// cp.async writes and about 1.1 KB of shared-memory reads in all.
//
// Rows: 16 query rows (heads x qlen packed, as in hip_mma_split_v1) per workgroup of 8 warps;
// grid and split conventions, causal end, masks and the split-KV partial layout are those of
// hip_mma_split_v1 (mma_split.hip, mma_common.h).
//
// S = Q K^T (f16 mma.sync m16n8k16, fp32 accumulation): the 576 dims are 36 k-steps of 16; warp
// w takes k-group w / 2 (9 k-steps) and n-group w % 2 (half of the tile's keys). Its Q fragments
// (9 x 4 registers) are loaded once per workgroup and kept in registers. Q enters f16 scaled per
// row by a power of two 2^e that puts the row's largest |q| in [2^14, 2^15): every bf16 (and
// e4m3) value within 2^-28 of that maximum is then exact in f16 and anything smaller contributes
// under 2^-38 of the largest term, so no q in bf16's range overflows or matters when lost; the
// softmax multiplies the row's scores by 2^-e. A K fragment comes from ldmatrix over the raw fp8
// row (16 fp8 dims read as 8 b16 columns): lane (g, t) receives dims 4t..4t+3 of key g, which one
// cvt.rn.f16x2.e4m3x2 per pair turns (exactly) into b0 = dims 4t, 4t+1 and b1 = dims 4t+2, 4t+3:
// the mma's logical k index 2t + j is dim 4t + j and 2t + 8 + j is dim 4t + 2 + j. Q is stored in
// shared memory in that permuted order (once), so its standard ldmatrix fragments match; a dot
// product does not care about the order of its terms. The four k-groups' partial tiles go to
// shared memory and are summed in a fixed order by the softmax.
//
// softmax: mma_common.h's softmax_tile with P rounded to f16 (11 significant bits: 4x finer than
// the bf16 P of hip_mma_split_v1; p in [0, 1] never overflows, p < 2^-14 loses relative precision
// only where its weight is negligible).
//
// O += P V (f16 mma.sync m16n8k16, fp32 accumulation): warp w owns output dims [64w, 64w + 64).
// V fragments come from ldmatrix.trans over the raw fp8 rows read as b16 pairs: lane (g, t)
// receives, for keys 2t and 2t + 1, the two dims 2g and 2g + 1 of a 16-dim block. A byte permute
// splits them into the even-dim pair and the odd-dim pair, each converted to f16x2 by one
// cvt.rn.f16x2.e4m3x2 (exact): the n-tile "E" of a block holds dims 2g (n = g), its twin "O"
// dims 2g + 1. So the accumulators of (E, O) give each lane four consecutive dims 4t..4t+3 of
// its rows, stored as one 8-byte bf16 (or 16-byte fp32 partial) write.
//
// Shared memory (bytes): stage ring [stages][kv_tile][592] raw fp8 rows (576 + 16 padding: the 8
// rows of an ldmatrix fall in 8 distinct 16-byte bank groups), rows past the valid keys zeroed;
// a scratch area holding first Q (f16, scaled, permuted, [16][584]) and then the four fp32 partial
// score tiles [4][16][kv_tile + 8]; P (f16) [16][kv_tile + 8]; row statistics and Q scales.
// Stages: as many (2..4) as fit in half of the 227 KB, so that two workgroups share an SM. The
// block-table entries a thread needs are read one tile ahead of their use, so that their latency
// never stands between a barrier and the next cp.async; page slots and offsets come from a
// multiply-high division by the page size (fast_div.h), not a run-time division. (Prefetching
// the rows of later tiles into L2, per row or per line, measured slower on the H200: the L2,
// not DRAM latency, was the busier side, and kv_tile 32 keeps 3 tiles in flight anyway.)
//
// hip_mma_fp8kv_persistent_v1 runs the same workgroup code (attend_piece) over the pieces of a
// host-side launch plan instead of a split grid: see its section at the end.
//
// Deterministic: fixed reduction orders, no atomics. NVIDIA sm_89+ only (cvt e4m3x2); elsewhere
// can_implement refuses and the kernel body is compiled out.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/fast_div.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/mma_common.h"
#include "mla_decode/hip/mma_fp8kv.h"
#include "mla_decode/hip/persistent_launch.h"

#if defined(MLATUNE_STANDALONE_CHECK)
namespace mlatune::code_identity {
inline constexpr std::string_view k_hip_mma_fp8kv_v1 = "standalone-check";
inline constexpr std::string_view k_hip_mma_fp8kv_persistent_v1 = "standalone-check";
}  // namespace mlatune::code_identity
#else
#include "mla_decode/code_identity.h"
#endif

#if MLATUNE_MMA_TENSOR_CORES && MLATUNE_ARCH_NVIDIA_MMA_FP8
#define FP8KV_KERNEL 1
#else
#define FP8KV_KERNEL 0
#endif

namespace mlatune {
namespace {

using namespace mma;

constexpr std::string_view kName = "hip_mma_fp8kv_v1";

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * kWarpLanes;
constexpr int kRows = 16;                        // query rows per workgroup: one m-tile
constexpr int kStageRowBytes = kHeadDimQK + 16;  // 592
constexpr int kQRowElems = kHeadDimQK + 8;       // bf16 per Q row in shared memory
constexpr int kQRowBytes = kQRowElems * 2;       // 1168
constexpr int kKGroups = 4;
constexpr int kStepsPerGroup = kHeadDimQK / 16 / kKGroups;  // 9
constexpr int kNGroups = kWarps / kKGroups;                 // 2
constexpr int kDimsPerWarp = kHeadDimV / kWarps;            // 64
constexpr size_t kSmemLimit = 227 * 1024;
// Per-row arrays of the statistics region: alpha, m, l, lb, score factor 2^-e.
constexpr int kStats = 5;

static_assert(kStepsPerGroup * 16 * kKGroups == kHeadDimQK, "k-groups cover the 576 dims");
static_assert(kDimsPerWarp == 64, "P V: 4 blocks of 16 dims (8 n-tiles) per warp");

template <int KT>
struct Cfg {
  // The softmax_tile contract (mma_common.h).
  static constexpr int kMTiles = 1;
  static constexpr int kKSplit = kKGroups;
  // floats; = 8 mod 32, so that a half-warp's float2 stores of a partial tile (rows g = 0..3,
  // columns 2t) hit 32 distinct banks.
  static constexpr int kSStride = KT + 8;
  static constexpr int kPStride = KT + 8;                  // f16
  static constexpr int kRowThreads = kThreads / kRows;     // 16
  static constexpr int kKeysPerThread = KT / kRowThreads;  // 2 or 4

  static constexpr int kNTiles = KT / 8;
  static constexpr int kTilesPerWarp = kNTiles / kNGroups;  // 2 or 4 n-tiles of S per warp
  static constexpr int kChains = kTilesPerWarp >= 4 ? 1 : 4 / kTilesPerWarp;

  static constexpr size_t kStageBytes = size_t{KT} * kStageRowBytes;
  static constexpr size_t kScoreBytes = size_t{kKSplit} * kRows * kSStride * sizeof(float);
  static constexpr size_t kQBytes = size_t{kRows} * kQRowBytes;
  static constexpr size_t kScratchBytes = kScoreBytes > kQBytes ? kScoreBytes : kQBytes;
  static constexpr size_t kStatBytes = kStats * size_t{kRows} * sizeof(float);
  static constexpr size_t kFixedBytes = kScratchBytes + size_t{kRows} * kPStride * 2 + kStatBytes;
  static constexpr size_t kBudget = kSmemLimit / 2 - 1024;
  static constexpr int kStages = kFixedBytes + 4 * kStageBytes <= kBudget   ? 4
                                 : kFixedBytes + 3 * kStageBytes <= kBudget ? 3
                                                                            : 2;
  static constexpr size_t kScratchOff = size_t{kStages} * kStageBytes;
  static constexpr size_t kPOff = kScratchOff + kScratchBytes;
  static constexpr size_t kStatOff = kPOff + size_t{kRows} * kPStride * 2;
  static constexpr size_t kSmemBytes = kStatOff + kStatBytes;

  static_assert(KT == 32 || KT == 64, "tiles of 32 or 64 keys");
  static_assert(kKeysPerThread % 2 == 0, "softmax keys in f16 pairs");
  static_assert(kTilesPerWarp == 2 || kTilesPerWarp == 4, "ldmatrix .x2 or .x4 per k-step");
  static_assert(kStageBytes % 16 == 0 && kScratchOff % 16 == 0 && kPOff % 16 == 0 &&
                    kStatOff % 16 == 0,
                "16-byte aligned regions");
  static_assert(kSmemBytes <= kSmemLimit / 2, "two workgroups per SM");
};

struct Params {
  const void* q;               // [batch * qlen, heads, 576] of q_dtype (bf16 or e4m3fn)
  const uint8_t* kv;           // [num_pages, page_size, 576] e4m3fn
  const int32_t* block_table;  // [batch, max_pages]
  const int32_t* kv_lens;      // [batch]
  uint16_t* out;               // [batch * qlen, heads, 512] bf16 (kv_splits = 1)
  float* lse;                  // [batch * qlen, heads] or null (kv_splits = 1)
  float* part_out;             // [batch, splits, rows, 512] (kv_splits > 1)
  float* part_lse;             // [batch, splits, rows] (kv_splits > 1)
  int32_t heads;
  int32_t qlen;
  int32_t rows;  // heads * qlen
  int32_t groups;
  int32_t splits;
  gpu::FastDiv page;  // page size: key j is at offset page.mod(j) of slot page.div(j)
  int32_t max_pages;
  int32_t max_len;  // min(max_pages * page_size, kMaxKvLen): kv_lens are clamped to it
  DType q_dtype;
  float scale_log2;  // sm_scale * q_scale * kv_scale * log2(e)
  float kv_scale;
};

// A tile's rows are copied by 4 threads each, 9 chunks of 16 bytes per thread; kv_tile <= 64 rows
// means one row per thread at most: row tid / 4. (8 threads per row, for whole 128-byte lines
// per warp instruction, measured slower on the H200: more registers, spills at kv_tile 64.)
constexpr int kLoadThreadsPerRow = 4;
constexpr int kLoadChunks = kHeadDimQK / 16 / kLoadThreadsPerRow;  // 9
static_assert(kThreads / kLoadThreadsPerRow >= 64, "one pass covers a tile");

// The page holding this thread's row of the tile starting at key t0 (read from the block table:
// slots of keys < t0 + nvalid only), or -1 when the row is past the valid keys.
template <int KT>
__device__ __forceinline__ int32_t tile_page(const Params& p, const int32_t* pages, int32_t t0,
                                             int nvalid, int tid) {
  const int r = tid / kLoadThreadsPerRow;
  if (r >= KT || r >= nvalid) return -1;
  return pages[p.page.div(static_cast<uint32_t>(t0 + r))];
}

// This thread's row of a tile into a stage buffer: raw fp8 by cp.async when `page` >= 0 (from
// tile_page), zeroes otherwise, so that no row past L is read and stale or uninitialised bytes
// never reach a product (0 * NaN). j < L <= kMaxKvLen fits int32; the pool row index does not
// (pools of 2^31 pages), hence the 64-bit product.
template <int KT>
__device__ __forceinline__ void load_tile(const Params& p, int32_t page, int32_t t0, uint8_t* dst,
                                          int tid) {
  const int r = tid / kLoadThreadsPerRow;
  if (r >= KT) return;
  const int sub = tid % kLoadThreadsPerRow;
  uint8_t* d = dst + r * kStageRowBytes;
  if (page >= 0) {
    const int64_t row = int64_t{page} * p.page.divisor + p.page.mod(static_cast<uint32_t>(t0 + r));
    const uint8_t* src = p.kv + row * kHeadDimQK;
#pragma unroll
    for (int c = 0; c < kLoadChunks; ++c) {
      copy16(d + (sub + kLoadThreadsPerRow * c) * 16, src + (sub + kLoadThreadsPerRow * c) * 16);
    }
  } else {
#pragma unroll
    for (int c = 0; c < kLoadChunks; ++c) zero16(d + (sub + kLoadThreadsPerRow * c) * 16);
  }
}

// The raw words of one 16-element chunk of q (16-byte aligned): 8 for bf16, 4 for fp8.
template <DType Q>
inline constexpr int kQChunkWords = Q == DType::kBF16 ? 8 : 4;

template <DType Q>
__device__ __forceinline__ void load_q_chunk(const Params& p, int64_t e,
                                             uint32_t (&w)[kQChunkWords<Q>]) {
  constexpr int64_t kElemBytes = Q == DType::kBF16 ? 2 : 1;
  const uint4* src =
      reinterpret_cast<const uint4*>(static_cast<const uint8_t*>(p.q) + e * kElemBytes);
#pragma unroll
  for (int i = 0; i < kQChunkWords<Q> / 4; ++i) {
    const uint4 v = src[i];
    w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
  }
}

// The chunk's 16 values, exactly (every bf16 and e4m3fn value is a float; e4m3fn goes through
// the exact e4m3 -> f16 conversion).
template <DType Q>
__device__ __forceinline__ void chunk_values(const uint32_t (&w)[kQChunkWords<Q>], float (&v)[16]) {
#if FP8KV_KERNEL
#pragma unroll
  for (int i = 0; i < kQChunkWords<Q>; ++i) {
    if constexpr (Q == DType::kBF16) {
      v[2 * i] = gpu::bf16_lo(w[i]);
      v[2 * i + 1] = gpu::bf16_hi(w[i]);
    } else {
      const float2 lo = f16x2_to_float2(e4m3fnx2_to_f16x2(w[i] & 0xffffu));
      const float2 hi = f16x2_to_float2(e4m3fnx2_hi_to_f16x2(w[i]));
      v[4 * i] = lo.x, v[4 * i + 1] = lo.y, v[4 * i + 2] = hi.x, v[4 * i + 3] = hi.y;
    }
  }
#else
  (void)w;
#pragma unroll
  for (int d = 0; d < 16; ++d) v[d] = 0.0f;
#endif
}

// The group's 16 Q rows as f16, row r scaled by 2^e_r (header comment), each 16-dim block stored
// in the permuted order the K fragments need: f16 pairs [0, 2, 4, 6, 1, 3, 5, 7] of the block.
// Rows beyond heads * qlen are zero. Leaves 2^-e_r in rscale_s[r]. Warp w takes rows w and w + 8,
// lane l chunks l and l + 32 (l < 4) of each: all its 16-byte loads are issued before the first
// use, the row maximum is a butterfly. Ends with a barrier: call it from every thread.
template <DType Q>
__device__ __forceinline__ void load_q_scaled(const Params& p, int32_t b, int32_t row0,
                                              uint8_t* q_s, float* rscale_s, int warp, int lane) {
  constexpr int kChunks = kHeadDimQK / 16;  // 36 per row
  constexpr int kRowsPerWarp = kRows / kWarps;
  constexpr int kW = kQChunkWords<Q>;
  static_assert(kRowsPerWarp == 2 && kChunks <= 2 * kWarpLanes, "two rows, two chunks per lane");
  uint32_t raw[kRowsPerWarp][2][kW] = {};
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int32_t r = row0 + warp + i * kWarps;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = lane + h * kWarpLanes;
      if (r < p.rows && c < kChunks) {
        load_q_chunk<Q>(p, (int64_t{b} * p.rows + r) * kHeadDimQK + c * 16, raw[i][h]);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int rl = warp + i * kWarps;
    float v[2][16];
    float mx = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      chunk_values<Q>(raw[i][h], v[h]);  // zeros where nothing was loaded
#pragma unroll
      for (int d = 0; d < 16; ++d) mx = fmaxf(mx, fabsf(v[h][d]));
    }
#pragma unroll
    for (int off = kWarpLanes / 2; off > 0; off /= 2) mx = fmaxf(mx, mlatune_shfl_xor(mx, off));
    // 2^e with the row maximum's exponent E: e = 14 - E, kept where 2^e and 2^-e are normal.
    const uint32_t mbits = gpu::float_as_bits(mx);
    int32_t ex = mbits == 0 ? 0 : 14 - (static_cast<int32_t>(mbits >> 23) - 127);
    ex = ex < -126 ? -126 : (ex > 126 ? 126 : ex);
    const float scale = gpu::bits_as_float(static_cast<uint32_t>(ex + 127) << 23);
    if (lane == 0) rscale_s[rl] = gpu::bits_as_float(static_cast<uint32_t>(127 - ex) << 23);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int c = lane + h * kWarpLanes;
      if (c >= kChunks) continue;
      uint32_t pair[8];
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        pair[w] = pack_f16x2(v[h][4 * w] * scale, v[h][4 * w + 1] * scale);  // dims 4w, 4w + 1
        pair[w + 4] = pack_f16x2(v[h][4 * w + 2] * scale, v[h][4 * w + 3] * scale);  // 4w + 2, 3
      }
      uint4* dst = reinterpret_cast<uint4*>(q_s + rl * kQRowBytes + c * 32);
      dst[0] = uint4{pair[0], pair[1], pair[2], pair[3]};
      dst[1] = uint4{pair[4], pair[5], pair[6], pair[7]};
    }
  }
  __syncthreads();
}

#if FP8KV_KERNEL
// This warp's k-group of Q fragments (standard m16n8k16 A layout over the permuted rows).
__device__ __forceinline__ void load_q_fragments(const uint8_t* q_s,
                                                 uint32_t (&qf)[kStepsPerGroup][4], int kg,
                                                 int lane) {
  const uint32_t base = smem_u32(q_s + ((lane & 7) + ((lane >> 3) & 1) * 8) * kQRowBytes +
                                 (lane >> 4) * 16 + kg * kStepsPerGroup * 32);
#pragma unroll
  for (int s = 0; s < kStepsPerGroup; ++s) ldmatrix_x4(qf[s], base + s * 32);
}

// S partial of this warp: rows 0..15 x its n-tiles, over its k-group, into s_s[kg].
template <class C>
__device__ __forceinline__ void qk_tile(const uint32_t (&qf)[kStepsPerGroup][4],
                                        const uint8_t* stage, float* s_s, int warp, int lane) {
  constexpr int kT = C::kTilesPerWarp;
  const int kg = warp / kNGroups;
  const int n0 = (warp % kNGroups) * kT;
  float chain[C::kChains][kT][4] = {};
  // Lane l addresses row l % 8 of matrix l / 8: matrix j is n-tile n0 + j (x2: lanes 0-15).
  const uint32_t k_addr =
      smem_u32(stage + ((n0 + ((lane >> 3) & (kT - 1))) * 8 + (lane & 7)) * kStageRowBytes +
               kg * kStepsPerGroup * 16);
#pragma unroll
  for (int s = 0; s < kStepsPerGroup; ++s) {
    uint32_t k8[kT];
    if constexpr (kT == 4) {
      ldmatrix_x4(reinterpret_cast<uint32_t(&)[4]>(k8), k_addr + s * 16);
    } else {
      ldmatrix_x2(reinterpret_cast<uint32_t(&)[2]>(k8), k_addr + s * 16);
    }
#pragma unroll
    for (int j = 0; j < kT; ++j) {
      mma_f16(chain[s % C::kChains][j], qf[s], e4m3fnx2_to_f16x2(k8[j] & 0xffffu),
              e4m3fnx2_hi_to_f16x2(k8[j]));
    }
  }
  const int g = lane >> 2;
  const int t = lane & 3;
  float* part = s_s + kg * (kRows * C::kSStride);
#pragma unroll
  for (int j = 0; j < kT; ++j) {
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int c = 0; c < C::kChains; ++c) {
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[e] += chain[c][j][e];
    }
    float* d = part + g * C::kSStride + (n0 + j) * 8 + 2 * t;
    *reinterpret_cast<float2*>(d) = float2{acc[0], acc[1]};
    *reinterpret_cast<float2*>(d + 8 * C::kSStride) = float2{acc[2], acc[3]};
  }
}

// O = O * alpha + P V for this warp's 64 dims: o[2 * blk] = block blk's even dims (n-tile E),
// o[2 * blk + 1] its odd dims (n-tile O).
template <class C>
__device__ __forceinline__ void pv_tile(const uint16_t* p_s, const uint8_t* stage,
                                        const float* alpha_s, float (&o)[8][4], int warp,
                                        int lane) {
  const int g = lane >> 2;
  rescale(reinterpret_cast<float(&)[1][8][4]>(o), alpha_s, g);
  constexpr int kPRowBytes = C::kPStride * 2;
  const uint32_t p_addr =
      smem_u32(reinterpret_cast<const uint8_t*>(p_s) +
               ((lane & 7) + ((lane >> 3) & 1) * 8) * kPRowBytes + (lane >> 4) * 16);
  // Matrices: keys 0-7 / 8-15 of the k-step at bytes d..d+15, then the same at d+16..d+31.
  const uint32_t v_addr = smem_u32(stage + ((lane & 7) + ((lane >> 3) & 1) * 8) * kStageRowBytes +
                                   warp * kDimsPerWarp + (lane >> 4) * 16);
#pragma unroll
  for (int kk = 0; kk < C::kNTiles / 2; ++kk) {
    uint32_t a[4];
    ldmatrix_x4(a, p_addr + kk * 32);
#pragma unroll
    for (int bp = 0; bp < 2; ++bp) {
      uint32_t v[4];
      ldmatrix_x4_trans(v, v_addr + kk * 16 * kStageRowBytes + bp * 32);
      // v[0], v[1]: keys (2t, 2t+1) and (2t+8, 2t+9) of block 2 bp; v[2], v[3]: block 2 bp + 1.
      // Bytes [x0, x1, x2, x3] = (key 2t: dim 2g, 2g+1), (key 2t+1: dim 2g, 2g+1).
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const uint32_t lo = __byte_perm(v[2 * h], 0u, 0x3120);  // even pair | odd pair
        const uint32_t hi = __byte_perm(v[2 * h + 1], 0u, 0x3120);
        const int blk = 2 * bp + h;
        mma_f16(o[2 * blk], a, e4m3fnx2_to_f16x2(lo & 0xffffu), e4m3fnx2_to_f16x2(hi & 0xffffu));
        mma_f16(o[2 * blk + 1], a, e4m3fnx2_hi_to_f16x2(lo), e4m3fnx2_hi_to_f16x2(hi));
      }
    }
  }
}
#endif  // FP8KV_KERNEL

// Two workgroups per SM (about 96 KB of shared memory and at most 128 registers each).
#if MLATUNE_GPU_NVIDIA
#define FP8KV_BOUNDS __launch_bounds__(kThreads, 2)
#else
#define FP8KV_BOUNDS __launch_bounds__(kThreads)
#endif

#if FP8KV_KERNEL
// One work item: query rows [16 group, 16 group + 16) over keys [key_lo, key_hi) of sequence b
// (both clamped to its length), written straight to out (slot < 0) or as the partial record of
// `slot` (mma_common.h's layout, slot = b * splits + split for a split grid). Leaves shared memory
// and the cp.async groups free for the next item once every thread has passed a barrier.
template <int KT>
__device__ __forceinline__ void attend_piece(const Params& p, int32_t group, int32_t b,
                                             int32_t key_lo, int32_t key_hi, int32_t slot) {
  using C = Cfg<KT>;
  // Declared here, not passed in: a pointer parameter would lose the shared address space.
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* const stage_s = smem;
  uint8_t* const q_s = smem + C::kScratchOff;  // Q first, then the partial scores
  float* const s_s = reinterpret_cast<float*>(smem + C::kScratchOff);
  uint16_t* const p_s = reinterpret_cast<uint16_t*>(smem + C::kPOff);
  float* const alpha_s = reinterpret_cast<float*>(smem + C::kStatOff);
  float* const m_s = alpha_s + kRows;
  float* const l_s = m_s + kRows;
  float* const lb_s = l_s + kRows;
  float* const rscale_s = lb_s + kRows;

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / kWarpLanes;
  const int lane = tid % kWarpLanes;
  int32_t len = p.kv_lens[b];
  len = len < 0 ? 0 : imin(len, p.max_len);
  const int32_t lo = imin(len, key_lo);
  const int32_t hi = imin(len, key_hi);
  const int32_t row0 = group * kRows;
  const int32_t last_token = (imin(p.rows, row0 + kRows) - 1) / p.heads;
  const int32_t end = imin(hi, len - p.qlen + last_token + 1);
  const int32_t n_tiles = end > lo ? (end - lo + KT - 1) / KT : 0;
  const int32_t* pages = p.block_table + int64_t{b} * p.max_pages;

  const int srl = tid / C::kRowThreads;
  const int ssub = tid % C::kRowThreads;
  const int32_t sr = row0 + srl;
  const int32_t key_end = sr < p.rows ? imin(hi, len - p.qlen + sr / p.heads + 1) : lo;
  float m = kNegInf;
  float l = 0.0f;
  float lb = 0.0f;
  float o[8][4];
#pragma unroll
  for (int n = 0; n < 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;

  if (n_tiles > 0) {
    auto tile_keys = [&](int32_t t) { return imin(KT, end - (lo + t * KT)); };
    auto page_of = [&](int32_t t) {
      return t < n_tiles ? tile_page<KT>(p, pages, lo + t * KT, tile_keys(t), tid) : -1;
    };
    constexpr int kS = C::kStages;
#pragma unroll
    for (int st = 0; st < kS - 1; ++st) {
      if (st < n_tiles)
        load_tile<KT>(p, page_of(st), lo + st * KT, stage_s + st * C::kStageBytes, tid);
      async_commit();
    }
    int32_t next_page = page_of(kS - 1);  // the page of the first tile the loop loads
    if (p.q_dtype == DType::kBF16) {
      load_q_scaled<DType::kBF16>(p, b, row0, q_s, rscale_s, warp, lane);
    } else {
      load_q_scaled<DType::kFP8E4M3FN>(p, b, row0, q_s, rscale_s, warp, lane);
    }
    uint32_t qf[kStepsPerGroup][4];
    load_q_fragments(q_s, qf, warp / kNGroups, lane);
    const float row_scale_log2 = p.scale_log2 * rscale_s[srl];
    int buf = 0;  // t % kS
    for (int32_t t = 0; t < n_tiles; ++t) {
      async_wait<kS - 2>();
      __syncthreads();  // tile t landed for all; tile t - 1's buffer, S, P and Q are free
      const int32_t ahead = t + kS - 1;
      if (ahead < n_tiles) {
        const int ahead_buf = buf == 0 ? kS - 1 : buf - 1;
        load_tile<KT>(p, next_page, lo + ahead * KT, stage_s + ahead_buf * C::kStageBytes, tid);
        next_page = page_of(ahead + 1);  // in flight while this tile is computed
      }
      async_commit();
      const uint8_t* tile = stage_s + buf * C::kStageBytes;
      qk_tile<C>(qf, tile, s_s, warp, lane);
      __syncthreads();
      softmax_tile<C, true>(s_s, p_s, alpha_s, row_scale_log2, lo + t * KT, key_end, srl, ssub, m,
                            l, lb);
      __syncthreads();
      pv_tile<C>(p_s, tile, alpha_s, o, warp, lane);
      buf = buf + 1 == kS ? 0 : buf + 1;
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

  // Epilogue: rows g and g + 8; dims d0 + 4t .. 4t + 3 of each 16-dim block = (E.c0, O.c0,
  // E.c1, O.c1) for row g and (E.c2, O.c2, E.c3, O.c3) for row g + 8.
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const bool direct = slot < 0;
  const int64_t part_row0 = int64_t{slot} * p.rows;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int rl = g + half * 8;
    const int32_t r = row0 + rl;
    if (r >= p.rows) continue;
    const float sum = lb_s[rl];
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int blk = 0; blk < 4; ++blk) {
      const float* e = o[2 * blk];
      const float* od = o[2 * blk + 1];
      const int dim = warp * kDimsPerWarp + blk * 16 + 4 * t4;
      const float v0 = e[2 * half], v1 = od[2 * half], v2 = e[2 * half + 1], v3 = od[2 * half + 1];
      if (direct) {
        const float sc = inv * p.kv_scale;
        *reinterpret_cast<uint2*>(p.out + (int64_t{b} * p.rows + r) * kHeadDimV + dim) =
            uint2{pack_bf16x2(v0 * sc, v1 * sc), pack_bf16x2(v2 * sc, v3 * sc)};
      } else {
        *reinterpret_cast<float4*>(p.part_out + (part_row0 + r) * kHeadDimV + dim) =
            float4{v0 * inv, v1 * inv, v2 * inv, v3 * inv};
      }
    }
  }
  if (tid < kRows && row0 + tid < p.rows) {
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
#endif  // FP8KV_KERNEL

// A split grid: workgroup (b, split, group) in blockIdx.x order group-fastest.
template <int KT>
__global__ void FP8KV_BOUNDS fp8kv_kernel(const Params p) {
#if FP8KV_KERNEL
  const int32_t group = static_cast<int32_t>(blockIdx.x % p.groups);
  const int32_t split = static_cast<int32_t>(blockIdx.x / p.groups % p.splits);
  const int32_t b = static_cast<int32_t>(blockIdx.x / p.groups / p.splits);
  int32_t len = p.kv_lens[b];
  len = len < 0 ? 0 : imin(len, p.max_len);
  const int32_t chunk = (len + p.splits - 1) / p.splits;
  const int32_t lo = imin(len, split * chunk);
  attend_piece<KT>(p, group, b, lo, lo + chunk, p.splits == 1 ? -1 : b * p.splits + split);
#else
  (void)p;
#endif
}

using persistent::PlanRef;
using persistent::PlanWords;

// Persistent: workgroup (worker, group) runs the worker's pieces of the launch plan in order
// (partials are laid out by the plan's slots). The plan is a parameter of its own: a larger
// Params made ptxas spill in the split kernel. __grid_constant__: indexed in place, never copied.
template <int KT, int kWords>
__global__ void FP8KV_BOUNDS fp8kv_persistent_kernel(
    const Params p, const MLATUNE_GRID_CONSTANT PlanWords<kWords> plan, const PlanRef ref) {
#if FP8KV_KERNEL
  persistent::publish_tail(plan, ref, kThreads);
  // Only the piece index lives across a piece: the rest is re-read (registers are at the limit).
  const auto worker = [&] { return static_cast<int32_t>(blockIdx.x / p.groups); };
  const int32_t* first = plan.w + ref.worker_first;
  const int4* pieces = reinterpret_cast<const int4*>(plan.w + ref.pieces);
  for (int32_t i = first[worker()]; i < first[worker() + 1]; ++i) {
    const int4 piece = pieces[i];  // seq, key_begin, key_end, slot
    attend_piece<KT>(p, static_cast<int32_t>(blockIdx.x % p.groups), piece.x, piece.y, piece.z,
                     piece.w);
    async_wait<0>();
    __syncthreads();  // the next piece reuses the stage ring, Q and the row statistics
  }
#else
  (void)p, (void)plan, (void)ref;
#endif
}

// ---- Host side --------------------------------------------------------------------------------

// The split-grid kernel of a kv_tile and its shared memory.
struct Kernels {
  void (*split)(Params) = nullptr;
  size_t smem = 0;
};

Kernels find_kernels(int32_t kv_tile) {
  switch (kv_tile) {
    case 32:
      return {&fp8kv_kernel<32>, Cfg<32>::kSmemBytes};
    case 64:
      return {&fp8kv_kernel<64>, Cfg<64>::kSmemBytes};
    default:
      return {};
  }
}

void allow_smem(const void* fn, size_t smem) {
  MLATUNE_HIP_CHECK(hipFuncSetAttribute(fn, hipFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
}

int32_t row_groups(const DecodeShape& s) { return (s.qlen * s.heads + kRows - 1) / kRows; }

// What both variants refuse alike (after their own parameter space check).
Support check_shape(const DecodeShape& s) {
  if constexpr (!MLATUNE_GPU_NVIDIA) {
    return Support::no("NVIDIA only (cvt.rn.f16x2.e4m3x2, mma.sync)");
  }
  if (auto err = validate(s)) return Support::no("invalid shape: " + *err);
  if (s.kv_dtype != DType::kFP8E4M3FN) return Support::no("KV must be fp8_e4m3fn");
  if (s.q_dtype != DType::kBF16 && s.q_dtype != DType::kFP8E4M3FN) {
    return Support::no("q must be bf16 or fp8_e4m3fn");
  }
  return Support::yes();
}

// The launch's kernel parameters but for the split grid / plan fields.
Params make_params(const DecodeShape& s, const DecodeArgs& a, float* part_out) {
  Params p{};
  p.q = a.q;
  p.kv = static_cast<const uint8_t*>(a.kv);
  p.block_table = a.block_table;
  p.kv_lens = a.kv_lens;
  p.out = a.out;
  p.lse = s.return_lse ? a.lse : nullptr;
  p.part_out = part_out;
  p.heads = s.heads;
  p.qlen = s.qlen;
  p.rows = s.qlen * s.heads;
  p.groups = row_groups(s);
  p.splits = 1;
  p.page = gpu::FastDiv(static_cast<uint32_t>(s.page_size));
  p.max_pages = s.max_pages_per_seq;
  p.max_len = persistent::max_len_of(s);
  p.q_dtype = s.q_dtype;
  p.scale_log2 = static_cast<float>(static_cast<double>(s.sm_scale) * s.q_scale * s.kv_scale *
                                    1.4426950408889634);
  p.kv_scale = s.kv_scale;
  return p;
}

constexpr std::string_view kDescription =
    "the KV tile kept as raw fp8 in shared memory and converted to f16 in registers per "
    "fragment: f16 mma.sync for Q K^T (Q scaled per row by a power of two, its fragments held in "
    "registers) and for P V (f16 P), LSE-merge combine kernel; NVIDIA sm_89+ only";

class MmaFp8KvVariant final : public Variant {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    static const std::string d = "GPU tensor cores for fp8 (e4m3fn) KV: split-KV, 16 query rows "
                                 "per workgroup, " + std::string(kDescription);
    return d;
  }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override { return code_identity::k_hip_mma_fp8kv_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_splits = {1, 2, 4, 8, 16, 32, 64};
      p.kv_tile = {32, 64};
      p.block_rows = {16};
      p.workers = {0};
      return p;
    }();
    return s;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    if (!space().contains(p)) {
      return Support::no("launch params " + p.to_string() + " outside the parameter space");
    }
    return check_shape(s);
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.kv_splits <= 1) return 0;
    return static_cast<size_t>(partial_rows(s, p)) * (kHeadDimV + 1) * sizeof(float);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;

 private:
  static int64_t partial_rows(const DecodeShape& s, const LaunchParams& p) {
    return int64_t{s.batch} * p.kv_splits * s.qlen * s.heads;
  }
};

void MmaFp8KvVariant::run(const DecodeShape& s, const LaunchParams& lp, const DecodeArgs& a) const {
  const Support sup = can_implement(s, lp);
  if (!sup.ok) throw LaunchError(std::string(kName) + ": " + sup.reason);
  const size_t ws = workspace_bytes(s, lp);
  check_launch_args(kName, s, a, ws);
  Params p = make_params(s, a, static_cast<float*>(a.workspace));
  p.splits = lp.kv_splits;
  p.part_lse = ws > 0 ? p.part_out + partial_rows(s, lp) * kHeadDimV : nullptr;
  const Kernels k = find_kernels(lp.kv_tile);
  allow_smem(reinterpret_cast<const void*>(k.split), k.smem);
  const int64_t blocks = int64_t{s.batch} * lp.kv_splits * p.groups;
  k.split<<<dim3(static_cast<unsigned>(blocks)), dim3(kThreads), k.smem, stream_of(a)>>>(p);
  hip_check_launch("fp8kv_kernel");
  if (lp.kv_splits > 1) {
    launch_combine(s, lp.kv_splits, p.part_out, p.part_lse, a.out, p.lse, stream_of(a),
                   "mma_fp8kv combine_kernel");
  }
}

// ---- hip_mma_fp8kv_persistent_v1 ----------------------------------------------------------------
//
// The same workgroup code over a host-side launch plan (launch_plan.h, persistent_launch.h):
// `workers` resident workgroups per SM, i.e. W = max(1, workers x SMs / row groups) plan workers,
// each run by one workgroup per row group, deal the batch's tiles among themselves (long
// sequences cut, short ones shared); the combine kernel merges the cut sequences only. The plan
// travels in the kernel parameters (PlanWords), so batches whose largest plan exceeds
// kLargePlanWords words are refused (batch 256 at 264 workers takes 2868).

constexpr std::string_view kPersistentName = "hip_mma_fp8kv_persistent_v1";

class MmaFp8KvPersistentVariant final : public Variant {
 public:
  std::string_view name() const override { return kPersistentName; }
  std::string_view description() const override {
    static const std::string d = "GPU tensor cores for fp8 (e4m3fn) KV: persistent workgroups "
                                 "over a host-side plan (cut and shared sequences), " +
                                 std::string(kDescription);
    return d;
  }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override {
    return code_identity::k_hip_mma_fp8kv_persistent_v1;
  }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_tile = {64};
      p.block_rows = {16};
      p.workers = {2};  // two workgroups fit an SM (__launch_bounds__, shared memory)
      return p;
    }();
    return s;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    if (!space().contains(p)) {
      return Support::no("launch params " + p.to_string() + " outside the parameter space");
    }
    if (Support sup = check_shape(s); !sup.ok) return sup;
    try {
      return persistent::check_plan_room(s, layout(s, p));
    } catch (const LaunchError& e) {  // no device to count SMs on
      return Support::no(e.what());
    }
  }
  size_t plan_words(const DecodeShape& s, const LaunchParams& p) const override {
    if (!can_implement(s, p).ok) return 0;
    return static_cast<size_t>(layout(s, p).max_words);
  }
  size_t plan(const DecodeShape& s, const LaunchParams& p, std::span<const int32_t> kv_lens,
              std::span<int32_t> out) const override {
    const Support sup = can_implement(s, p);
    if (!sup.ok) throw LaunchError(std::string(kPersistentName) + ": " + sup.reason);
    return persistent::write_plan(kPersistentName, s, p.kv_tile, layout(s, p), kv_lens, out);
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (!can_implement(s, p).ok) return 0;
    return layout(s, p).workspace_bytes();
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;

 private:
  static persistent::Layout layout(const DecodeShape& s, const LaunchParams& p) {
    return persistent::layout_of(s, p.workers, kRows);
  }
};

// The persistent kernel (kv_tile 64 only: at 32 it spilled registers) with the plan's words
// (checked: at most kWords) in its parameters.
template <int kWords>
void launch_persistent(const Params& p, const DecodeArgs& a, const persistent::Launch& x) {
  auto* kernel = &fp8kv_persistent_kernel<64, kWords>;
  allow_smem(reinterpret_cast<const void*>(kernel), Cfg<64>::kSmemBytes);
  kernel<<<x.grid, dim3(kThreads), Cfg<64>::kSmemBytes, stream_of(a)>>>(
      p, persistent::plan_words_of<kWords>(a, x), x.ref);
  hip_check_launch("fp8kv_persistent_kernel");
}

void MmaFp8KvPersistentVariant::run(const DecodeShape& s, const LaunchParams& lp,
                                    const DecodeArgs& a) const {
  const Support sup = can_implement(s, lp);
  if (!sup.ok) throw LaunchError(std::string(kPersistentName) + ": " + sup.reason);
  const persistent::Layout l = layout(s, lp);
  check_launch_args(kPersistentName, s, a, l.workspace_bytes());
  const persistent::Launch x = persistent::prepare(kPersistentName, s, lp.kv_tile, l, a);
  Params p = make_params(s, a, x.part_out);
  p.part_lse = x.part_lse;
  if (x.plan.layout.words <= persistent::kSmallPlanWords) {
    launch_persistent<persistent::kSmallPlanWords>(p, a, x);
  } else {
    launch_persistent<persistent::kLargePlanWords>(p, a, x);
  }
  persistent::combine_cut(s, x, a.out, p.lse, stream_of(a), "mma_fp8kv_persistent combine_kernel");
}

}  // namespace

const Variant& hip_mma_fp8kv_variant() {
  static const MmaFp8KvVariant v;
  return v;
}

const Variant& hip_mma_fp8kv_persistent_variant() {
  static const MmaFp8KvPersistentVariant v;
  return v;
}

}  // namespace mlatune
