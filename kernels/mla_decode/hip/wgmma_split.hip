// hip_wgmma_split_v1: split-KV MLA decode on Hopper's warpgroup MMA (wgmma.mma_async, sm_90a),
// bf16 operands read by the tensor cores straight from shared memory, fp32 accumulation, then the
// LSE-merge combine kernel of mma_common.h.
//
// Why: hip_mma_split_v1 feeds mma.sync through ldmatrix, and at 64 query rows its shared-memory
// reads (about 80 bytes per 1000 flops) bound it near 200 TFLOP/s on the H200. wgmma reads each
// operand tile once per warpgroup instruction: about 34 bytes per 1000 flops here.
//
// Grid, split and causal conventions are those of hip_mma_split_v1: one workgroup per (sequence
// b, KV split, group of 64 query rows r = i * heads + h), blockIdx.x = (b * kv_splits + split) *
// groups + group; split s covers keys [s c, min(L, s c + c)) with c = ceil(L / kv_splits), cut
// short at the last key the group's latest token may see. Rows beyond heads * qlen are zero
// padding, computed masked and never written.
//
// Workgroup: two warpgroups (256 threads), 64 keys per KV tile, two tile buffers. Per tile:
//   1. load: the next tile streams into the other buffer with cp.async (8 lanes copy one
//      128-byte block of a row: whole sectors, and conflict-free in the swizzled layout) while
//      this one is computed; rows past the group's last
//      key are zero-filled, so no KV row >= L and no block-table slot past ceil(L / page) is read.
//      Block-table entries are read one tile ahead of the copies that need them.
//   2. S = Q K^T: warpgroup w computes the 64 rows x 32 keys [32 w, 32 w + 32) over 576 dims, 36
//      wgmma m64n32k16 (A = Q, B = K, both K-major in shared memory).
//   3. online softmax in registers (base-2 exponent, scores * sm_scale * q_scale * log2 e, causal
//      and length masks): the row maximum is exchanged between the two warpgroups through shared
//      memory, so both apply the same running maximum; each thread keeps its own share of the
//      row sums l (fp32 p, for the LSE) and lb (bf16-rounded p, which normalises O consistently
//      with the P fed to the tensor cores), summed in a fixed order after the last tile. P (bf16)
//      goes to shared memory in the operand layout.
//   4. O = O * alpha + P V: warpgroup w owns output dims [256 w, 256 w + 256): 4 wgmma
//      m64n256k16 over the tile's keys (A = P K-major, B = V MN-major: the first 512 dims of the
//      same K rows), 128 fp32 accumulators per thread.
// Three barriers a tile: tile landed (and everyone done with the previous one), row maxima, P.
//
// Shared memory (bytes; every tile in wgmma.h's 128-byte swizzle layout: the 576 dims of a row
// are 9 blocks of 64, block k of a 64-row tile is 64 rows x 128 bytes at 8192 k, 16-byte chunk j
// of row r at r * 128 + (j ^ (r % 8)) * 16 within it):
//   kv    [2][64 keys][576] bf16   73728 each
//   q     [64 rows][576] bf16      73728 (bf16 from every q dtype, exactly; padding rows zero)
//   p     [64 rows][64 keys] bf16  8192
//   stats max, l, lb [2 warpgroups][64] fp32
// 225.5 KB (plus up to 1 KB to align the atoms): one workgroup per SM.
//
// Output, workspace and combine: as hip_mma_split_v1 (kv_splits = 1 writes bf16 out and the LSE
// directly; more splits write fp32 partials normalised by their own lb plus natural-log LSEs, or
// zeros and -inf for rows that saw no key, merged by combine_kernel). Deterministic: fixed
// reduction orders, no atomics. NVIDIA sm_90a only: the kernel body is compiled out elsewhere and
// can_implement refuses (also at run time on devices other than compute capability 9.0).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/fast_div.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/mma_common.h"
#include "mla_decode/hip/wgmma.h"
#include "mla_decode/hip/wgmma_split.h"

#if defined(MLATUNE_STANDALONE_CHECK)
namespace mlatune::code_identity {
inline constexpr std::string_view k_hip_wgmma_split_v1 = "standalone-check";
}  // namespace mlatune::code_identity
#else
#include "mla_decode/code_identity.h"
#endif

// Device code for exactly sm_90a; CMake defines MLATUNE_BUILT_FOR_SM90A for the host side when
// the CUDA architectures are exactly that target.
#if MLATUNE_ARCH_NVIDIA_SM90A && MLATUNE_MMA_TENSOR_CORES
#define WGMMA_KERNEL 1
#else
#define WGMMA_KERNEL 0
#endif
#if MLATUNE_GPU_NVIDIA && defined(MLATUNE_BUILT_FOR_SM90A)
#define WGMMA_HOST 1
#else
#define WGMMA_HOST 0
#endif

namespace mlatune {
namespace {

constexpr std::string_view kName = "hip_wgmma_split_v1";

using namespace mma;

constexpr int kRows = 64;  // query rows per workgroup: the M of one wgmma
constexpr int kKeys = 64;  // keys per KV tile
constexpr int kWarpGroups = 2;
constexpr int kThreads = kWarpGroups * 128;
constexpr int kKeysPerWg = kKeys / kWarpGroups;      // S columns of one warpgroup
constexpr int kDimsPerWg = kHeadDimV / kWarpGroups;  // O columns of one warpgroup
constexpr uint32_t kRowBytes = 128;                  // one swizzled row of a 64-dim block
constexpr uint32_t kAtom = 8 * kRowBytes;            // 8 rows: the swizzle atom
constexpr uint32_t kBlockBytes = kRows * kRowBytes;  // 64 rows x 64 dims
constexpr int kBlocks = kHeadDimQK / 64;             // 9 blocks of 64 dims per row
constexpr uint32_t kTileBytes = kKeys * kHeadDimQK * 2;
constexpr uint32_t kQBytes = kRows * kHeadDimQK * 2;
constexpr uint32_t kPBytes = kRows * kKeys * 2;
constexpr uint32_t kKvOff = 0;
constexpr uint32_t kQOff = kKvOff + 2 * kTileBytes;
constexpr uint32_t kPOff = kQOff + kQBytes;
constexpr uint32_t kStatOff = kPOff + kPBytes;
constexpr uint32_t kSmemBytes = kStatOff + 3 * kWarpGroups * kRows * sizeof(float);
constexpr uint32_t kSmemAlloc = kSmemBytes + kAtom;  // room to align the base to an atom

static_assert(kRows == kKeys, "Q, K/V and P blocks share one 64-row layout");
static_assert(kHeadDimQK % 64 == 0 && kThreads / 8 * 2 == kRows, "8 lanes per row block, 2 rows");
static_assert(kTileBytes % kAtom == 0 && kQBytes % kAtom == 0 && kPBytes % kAtom == 0,
              "every region starts on an atom");
static_assert(kSmemAlloc <= 227 * 1024, "one workgroup per SM within Hopper's opt-in limit");

// Kernel arguments (by value).
struct Params {
  const void* q;               // [batch * qlen, heads, 576] of q_dtype
  const uint16_t* kv;          // [num_pages, page_size, 576] bf16
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
  gpu::FastDiv page;  // page size
  int32_t max_pages;
  int32_t max_len;  // min(max_pages * page_size, kMaxKvLen): kv_lens are clamped to it
  DType q_dtype;
  float scale_log2;  // sm_scale * q_scale * kv_scale * log2(e)
  float kv_scale;
};

#if WGMMA_KERNEL

// Byte offset of 16-byte chunk c (of 72) of row r within a swizzled 64-row tile.
__device__ __forceinline__ uint32_t tile_offset(int r, int c) {
  return static_cast<uint32_t>(c >> 3) * kBlockBytes + static_cast<uint32_t>(r) * kRowBytes +
         static_cast<uint32_t>((c & 7) ^ (r & 7)) * 16;
}

// The group's Q rows as bf16 into the swizzled layout (rows beyond heads * qlen zero): thread
// tid takes rows tid / 8 and tid / 8 + 32, chunk tid % 8 of each 64-dim block.
template <DType Q>
__device__ __forceinline__ void load_q_rows(const Params& p, int32_t b, int32_t row0, uint8_t* q_s,
                                            int tid) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int rl = tid / 8 + half * (kRows / 2);
    const int32_t r = row0 + rl;
    const int64_t e0 = (int64_t{b} * p.rows + r) * kHeadDimQK;
#pragma unroll
    for (int blk = 0; blk < kBlocks; ++blk) {
      const int c = blk * 8 + tid % 8;
      uint4 v{0, 0, 0, 0};
      if (r < p.rows) {
        if constexpr (Q == DType::kBF16) {
          v = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p.q) + e0 + c * 8);
        } else {
          v = fp8x8_to_bf16x8<Q>(
              *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.q) + e0 + c * 8));
        }
      }
      *reinterpret_cast<uint4*>(q_s + tile_offset(rl, c)) = v;
    }
  }
}

__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, mlatune_shfl_xor(v, 1));
  return fmaxf(v, mlatune_shfl_xor(v, 2));
}

__device__ __forceinline__ float quad_sum(float v) {
  v += mlatune_shfl_xor(v, 1);
  return v + mlatune_shfl_xor(v, 2);
}

#endif  // WGMMA_KERNEL

__global__ void __launch_bounds__(kThreads, 1) wgmma_split_kernel(const Params p) {
#if WGMMA_KERNEL
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // The swizzle atoms must be 1024-byte aligned in the shared window (kSmemAlloc has the room).
  uint8_t* const smem = smem_raw + ((kAtom - (smem_u32(smem_raw) & (kAtom - 1))) & (kAtom - 1));
  float* const max_s = reinterpret_cast<float*>(smem + kStatOff);  // [2][64]
  float* const l_s = max_s + kWarpGroups * kRows;
  float* const lb_s = l_s + kWarpGroups * kRows;
  const uint32_t kv_base = smem_u32(smem + kKvOff);
  const uint32_t q_base = smem_u32(smem + kQOff);
  const uint32_t p_base = smem_u32(smem + kPOff);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int wg = tid / 128;
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const int32_t group = static_cast<int32_t>(blockIdx.x % p.groups);
  const int32_t split = static_cast<int32_t>(blockIdx.x / p.groups % p.splits);
  const int32_t b = static_cast<int32_t>(blockIdx.x / p.groups / p.splits);

  int32_t len = p.kv_lens[b];
  len = len < 0 ? 0 : imin(len, p.max_len);
  const int32_t chunk = (len + p.splits - 1) / p.splits;
  const int32_t lo = imin(len, split * chunk);
  const int32_t hi = imin(len, lo + chunk);
  const int32_t row0 = group * kRows;
  const int32_t last_token = (imin(p.rows, row0 + kRows) - 1) / p.heads;
  const int32_t end = imin(hi, len - p.qlen + last_token + 1);
  const int32_t n_tiles = end > lo ? (end - lo + kKeys - 1) / kKeys : 0;
  const int32_t* pages = p.block_table + int64_t{b} * p.max_pages;

  // This thread's accumulator rows (of the block) and the first key each may not see.
  const int rl[2] = {(warp % 4) * 16 + g, (warp % 4) * 16 + g + 8};
  int32_t key_end[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int32_t r = row0 + rl[h];
    key_end[h] = r < p.rows ? imin(hi, len - p.qlen + r / p.heads + 1) : lo;
  }
  float m[2] = {kNegInf, kNegInf};
  float l[2] = {0.0f, 0.0f};
  float lb[2] = {0.0f, 0.0f};
  float o[kDimsPerWg / 2];
#pragma unroll
  for (int i = 0; i < kDimsPerWg / 2; ++i) o[i] = 0.0f;

  // Copies: this thread's KV rows of a tile are keys tid / 8 and tid / 8 + 32, its chunks
  // tid % 8 of each 64-dim block: 8 lanes move one 128-byte block of a row per instruction.
  auto page_of = [&](int32_t tile, int half) -> int32_t {
    const int32_t key = lo + tile * kKeys + tid / 8 + half * (kKeys / 2);
    return key < end ? pages[p.page.div(static_cast<uint32_t>(key))] : -1;
  };
  auto load_tile = [&](int32_t tile, const int32_t(&page)[2], uint8_t* buf) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int kl = tid / 8 + half * (kKeys / 2);
      if (page[half] >= 0) {
        const int32_t key = lo + tile * kKeys + kl;
        const int64_t row =
            int64_t{page[half]} * p.page.divisor + p.page.mod(static_cast<uint32_t>(key));
        const uint8_t* src = reinterpret_cast<const uint8_t*>(p.kv + row * kHeadDimQK);
#pragma unroll
        for (int blk = 0; blk < kBlocks; ++blk) {
          const int c = blk * 8 + tid % 8;
          copy16(buf + tile_offset(kl, c), src + c * 16);
        }
      } else {
#pragma unroll
        for (int blk = 0; blk < kBlocks; ++blk) zero16(buf + tile_offset(kl, blk * 8 + tid % 8));
      }
    }
  };
  auto next_pages = [&](int32_t tile, int32_t(&page)[2]) {
    page[0] = page_of(tile, 0);
    page[1] = page_of(tile, 1);
  };

  if (n_tiles > 0) {
    int32_t page[2];
    next_pages(0, page);
    load_tile(0, page, smem + kKvOff);
    async_commit();
    if (n_tiles > 1) next_pages(1, page);
    switch (p.q_dtype) {
      case DType::kBF16:
        load_q_rows<DType::kBF16>(p, b, row0, smem + kQOff, tid);
        break;
      case DType::kFP8E4M3FN:
        load_q_rows<DType::kFP8E4M3FN>(p, b, row0, smem + kQOff, tid);
        break;
      default:
        load_q_rows<DType::kFP8E4M3FNUZ>(p, b, row0, smem + kQOff, tid);
        break;
    }
    for (int32_t t = 0; t < n_tiles; ++t) {
      async_wait<0>();
      wg::fence_proxy_async();  // cp.async and st.shared data -> the tensor cores' reads
      __syncthreads();          // tile t and Q in place; everyone is done with tile t - 1
      if (t + 1 < n_tiles) {
        load_tile(t + 1, page, smem + kKvOff + ((t + 1) & 1) * kTileBytes);
        if (t + 2 < n_tiles) next_pages(t + 2, page);
      }
      async_commit();
      const uint32_t kv_t = kv_base + (t & 1) * kTileBytes;

      // S = Q K^T for this warpgroup's 32 keys.
      float s[kKeysPerWg / 2];
#pragma unroll
      for (int i = 0; i < kKeysPerWg / 2; ++i) s[i] = 0.0f;
      wg::fence_operands(s);
      wg::fence();
      // K step j (dims 16 j..16 j + 15): block j / 4, 32 bytes per step within its rows.
#pragma unroll
      for (int j = 0; j < kHeadDimQK / 16; ++j) {
        const uint32_t k_off = (j / 4) * kBlockBytes + (j % 4) * 32;
        wg::wgmma_m64n32k16_bf16<0>(s, wg::desc(q_base + k_off, 16, kAtom),
                                    wg::desc(kv_t + wg * kKeysPerWg * kRowBytes + k_off, 16, kAtom),
                                    j > 0);
      }
      wg::commit();
      wg::wait<0>();
      wg::fence_operands(s);

      // Online softmax. s[4 j + e]: row rl[e / 2], key 32 wg + 8 j + 2 t4 + (e & 1).
      const int32_t k0 = lo + t * kKeys + wg * kKeysPerWg + 2 * t4;
      float mx[2] = {kNegInf, kNegInf};
#pragma unroll
      for (int j = 0; j < kKeysPerWg / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int h = e >> 1;
          float& v = s[4 * j + e];
          v = k0 + 8 * j + (e & 1) < key_end[h] ? v * p.scale_log2 : kNegInf;
          mx[h] = fmaxf(mx[h], v);
        }
      }
      mx[0] = quad_max(mx[0]);
      mx[1] = quad_max(mx[1]);
      if (t4 == 0) {
        max_s[wg * kRows + rl[0]] = mx[0];
        max_s[wg * kRows + rl[1]] = mx[1];
      }
      __syncthreads();  // both warpgroups' row maxima published
      float alpha[2];
      float m_use[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = fmaxf(m[h], fmaxf(max_s[rl[h]], max_s[kRows + rl[h]]));
        // A row with no visible key so far keeps m = -inf; exponents relative to 0 then give
        // p = 0 and alpha = 0 instead of NaN.
        m_use[h] = m_new == kNegInf ? 0.0f : m_new;
        alpha[h] = exp2f(m[h] - m_use[h]);
        m[h] = m_new;
      }
      float sum[2] = {0.0f, 0.0f};
      float sumb[2] = {0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < kKeysPerWg / 8; ++j) {
        const int key = wg * kKeysPerWg + 8 * j + 2 * t4;  // column within the tile
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const float e0 = exp2f(s[4 * j + 2 * h] - m_use[h]);
          const float e1 = exp2f(s[4 * j + 2 * h + 1] - m_use[h]);
          const uint32_t bits = pack_bf16x2(e0, e1);
          sum[h] += e0 + e1;
          sumb[h] += gpu::bf16_lo(bits) + gpu::bf16_hi(bits);
          *reinterpret_cast<uint32_t*>(smem + kPOff + tile_offset(rl[h], key >> 3) +
                                       (key & 7) * 2) = bits;
        }
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        l[h] = l[h] * alpha[h] + sum[h];
        lb[h] = lb[h] * alpha[h] + sumb[h];
      }
      wg::fence_proxy_async();
      __syncthreads();  // P of both warpgroups in place

      // O = O * alpha + P V over this warpgroup's 256 dims. x * 1 == x: skipping the rescale
      // when a warp's alphas are all 1 gives the same bits.
      if (!mlatune_all(alpha[0] == 1.0f && alpha[1] == 1.0f)) {
#pragma unroll
        for (int i = 0; i < kDimsPerWg / 8; ++i) {
          o[4 * i] *= alpha[0];
          o[4 * i + 1] *= alpha[0];
          o[4 * i + 2] *= alpha[1];
          o[4 * i + 3] *= alpha[1];
        }
      }
      wg::fence_operands(o);
      wg::fence();
      // K step j (keys 16 j..16 j + 15): P's 32 bytes per step within its rows; V's rows 16 j..,
      // blocks 4 wg.. (LBO: the next 64 dims, SBO: the next 8 keys).
#pragma unroll
      for (int j = 0; j < kKeys / 16; ++j) {
        wg::wgmma_m64n256k16_bf16<1>(
            o, wg::desc(p_base + j * 32, 16, kAtom),
            wg::desc(kv_t + j * 16 * kRowBytes + wg * (kDimsPerWg / 64) * kBlockBytes, kBlockBytes,
                     kAtom),
            1);
      }
      wg::commit();
      wg::wait<0>();
      wg::fence_operands(o);
    }
  }

  // Row totals: the quad's shares, then warpgroup 0's plus warpgroup 1's.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = quad_sum(l[h]);
    lb[h] = quad_sum(lb[h]);
    if (t4 == 0) {
      l_s[wg * kRows + rl[h]] = l[h];
      lb_s[wg * kRows + rl[h]] = lb[h];
    }
  }
  __syncthreads();

  const bool direct = p.splits == 1;
  const int64_t part_row0 = (int64_t{b} * p.splits + split) * p.rows;
  const int d0 = wg * kDimsPerWg + 2 * t4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int32_t r = row0 + rl[h];
    if (r >= p.rows) continue;
    const float lsum = l_s[rl[h]] + l_s[kRows + rl[h]];
    const float bsum = lb_s[rl[h]] + lb_s[kRows + rl[h]];
    const float inv = bsum > 0.0f ? 1.0f / bsum : 0.0f;
    if (direct) {
      const float scale = inv * p.kv_scale;
      uint16_t* dst = p.out + (int64_t{b} * p.rows + r) * kHeadDimV + d0;
#pragma unroll
      for (int i = 0; i < kDimsPerWg / 8; ++i) {
        *reinterpret_cast<uint32_t*>(dst + 8 * i) =
            pack_bf16x2(o[4 * i + 2 * h] * scale, o[4 * i + 2 * h + 1] * scale);
      }
    } else {
      float* dst = p.part_out + (part_row0 + r) * kHeadDimV + d0;
#pragma unroll
      for (int i = 0; i < kDimsPerWg / 8; ++i) {
        *reinterpret_cast<float2*>(dst + 8 * i) =
            float2{o[4 * i + 2 * h] * inv, o[4 * i + 2 * h + 1] * inv};
      }
    }
    if (wg == 0 && t4 == 0) {
      const float lse = lsum > 0.0f ? (m[h] + log2f(lsum)) * kLn2 : kNegInf;
      if (!direct) {
        p.part_lse[part_row0 + r] = lse;
      } else if (p.lse != nullptr) {
        p.lse[int64_t{b} * p.rows + r] = lse;
      }
    }
  }
#else
  (void)p;
  __builtin_trap();  // can_implement refuses every shape where this body is compiled out
#endif
}

// ---- Host side --------------------------------------------------------------------------------

int64_t partial_rows(const DecodeShape& s, const LaunchParams& p) {
  return int64_t{s.batch} * p.kv_splits * s.qlen * s.heads;
}

// Why this process cannot run the kernel, or empty: an sm_90a build and a compute capability 9.0
// current device.
std::string platform_refusal() {
#if !WGMMA_HOST
  return "needs an NVIDIA build for exactly CUDA architecture 90a (wgmma)";
#else
  {
    int device = 0;
    int major = 0;
    int minor = 0;
    if (hipGetDevice(&device) != hipSuccess ||
        hipDeviceGetAttribute(&major, hipDeviceAttributeComputeCapabilityMajor, device) !=
            hipSuccess ||
        hipDeviceGetAttribute(&minor, hipDeviceAttributeComputeCapabilityMinor, device) !=
            hipSuccess) {
      (void)hipGetLastError();  // not sticky; keep later error checks clean
      return "no usable GPU to query for compute capability 9.0 (sm_90a code)";
    }
    if (major != 9 || minor != 0) {
      return "needs a compute capability 9.0 device (sm_90a code), this one is " +
             std::to_string(major) + "." + std::to_string(minor);
    }
    return {};
  }
#endif
}

[[noreturn]] void fail(const std::string& why) {
  throw LaunchError(std::string(kName) + ": " + why);
}

class WgmmaSplitVariant final : public Variant {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "GPU Hopper wgmma: split-KV, 64 query rows (heads x qlen) per workgroup of two "
           "warpgroups, bf16 Q K^T and P V from shared memory with fp32 accumulation, fp32 online "
           "softmax, cp.async double buffering, LSE-merge combine kernel; bf16 KV, NVIDIA sm_90a "
           "only";
  }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override { return code_identity::k_hip_wgmma_split_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_splits = {1, 2, 4, 8, 16, 32, 64};
      p.kv_tile = {kKeys};
      p.block_rows = {kRows};
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
    if (s.kv_dtype != DType::kBF16) return Support::no("KV must be bf16");
    if (const std::string why = platform_refusal(); !why.empty()) return Support::no(why);
    return Support::yes();
  }
  size_t workspace_bytes(const DecodeShape& s, const LaunchParams& p) const override {
    if (validate(s) || p.kv_splits <= 1) return 0;
    return static_cast<size_t>(partial_rows(s, p)) * (kHeadDimV + 1) * sizeof(float);
  }
  void run(const DecodeShape& s, const LaunchParams& p, const DecodeArgs& a) const override;
};

void WgmmaSplitVariant::run(const DecodeShape& s, const LaunchParams& lp,
                            const DecodeArgs& a) const {
  const Support sup = can_implement(s, lp);
  if (!sup.ok) fail(sup.reason);
  const size_t ws = workspace_bytes(s, lp);
  check_launch_args(kName, s, a, ws);

  const int32_t rows = s.qlen * s.heads;
  Params p{};
  p.q = a.q;
  p.kv = static_cast<const uint16_t*>(a.kv);
  p.block_table = a.block_table;
  p.kv_lens = a.kv_lens;
  p.out = a.out;
  p.lse = s.return_lse ? a.lse : nullptr;
  p.part_out = static_cast<float*>(a.workspace);
  p.part_lse = ws > 0 ? p.part_out + partial_rows(s, lp) * kHeadDimV : nullptr;
  p.heads = s.heads;
  p.qlen = s.qlen;
  p.rows = rows;
  p.groups = (rows + kRows - 1) / kRows;
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
  MLATUNE_HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(&wgmma_split_kernel),
                                        hipFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmemAlloc)));
  wgmma_split_kernel<<<dim3(static_cast<unsigned>(blocks)), dim3(kThreads), kSmemAlloc,
                       stream_of(a)>>>(p);
  hip_check_launch("wgmma_split_kernel");
  if (lp.kv_splits > 1) {
    launch_combine(s, lp.kv_splits, p.part_out, p.part_lse, a.out, p.lse, stream_of(a),
                   "wgmma_split combine_kernel");
  }
}

}  // namespace

const Variant& hip_wgmma_split_variant() {
  static const WgmmaSplitVariant v;
  return v;
}

}  // namespace mlatune
