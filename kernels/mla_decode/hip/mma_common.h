// Building blocks shared by the matrix-core members of the GPU MLA decode family
// (hip_mma_split_v1, hip_mma_fp8kv_v1): number-format conversions, asynchronous copies, the
// NVIDIA tensor-core primitives (ldmatrix, mma.sync), the online-softmax step of one KV tile, the
// LSE-merge combine kernel of split-KV, and the host-side checks of a launch's arguments.
//
// For GPU sources only (includes gpu/hip_compat.h). Everything lives in an anonymous namespace:
// each including .hip file gets its own copy (no relocatable device code, no symbol clashes).
// Primitives that only exist on NVIDIA sm_80+ are guarded by MLATUNE_MMA_TENSOR_CORES; the other
// passes (host passes that parse kernel bodies, AMD) compile the portable branch, or, for the f16
// helpers that only hip_mma_fp8kv_v1 uses (whose kernels are compiled out there), a stand-in that
// traps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/problem.h"
#include "mla_decode/variant.h"

#if MLATUNE_ARCH_NVIDIA_MMA_BF16
#define MLATUNE_MMA_TENSOR_CORES 1
#else
#define MLATUNE_MMA_TENSOR_CORES 0
#endif

namespace mlatune {
namespace {
namespace mma {

constexpr int kWarpLanes = 32;                  // logical warps of 32 threads, also on wave64
constexpr int kCombineThreads = kHeadDimV / 4;  // 4 output dims per thread
constexpr float kNegInf = -__builtin_huge_valf();
constexpr float kLn2 = 0.6931471805599453f;

__device__ __forceinline__ int imin(int a, int b) { return a < b ? a : b; }

// ---- Number formats ---------------------------------------------------------------------------

// Two fp8 codes (bits 0-7 and 8-15 of `x`) to a bf16 pair (element 0 in the low half), exactly.
template <DType T>
__device__ __forceinline__ uint32_t fp8x2_to_bf16x2(uint32_t x) {
#if MLATUNE_ARCH_NVIDIA_MMA_FP8
  if constexpr (T == DType::kFP8E4M3FN) {
    // Hardware e4m3 -> f16 (exact: every e4m3fn value is a normal f16), then f16 -> f32 -> bf16,
    // exact again. 4 instructions a pair instead of the integer decoder's ~20.
    uint32_t h2;
    const uint16_t in = static_cast<uint16_t>(x);
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(in));
    float lo, hi;
    asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
        : "=f"(lo), "=f"(hi)
        : "r"(h2));
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
  }
#endif
  return uint32_t{gpu::load_as_bf16<T>(&x, 0)} |
         (uint32_t{gpu::load_as_bf16<T>(reinterpret_cast<const uint8_t*>(&x) + 1, 0)} << 16);
}

// 8 fp8 codes to 8 bf16.
template <DType T>
__device__ __forceinline__ uint4 fp8x8_to_bf16x8(uint2 v) {
  uint4 r;
  r.x = fp8x2_to_bf16x2<T>(v.x & 0xffffu);
  r.y = fp8x2_to_bf16x2<T>(v.x >> 16);
  r.z = fp8x2_to_bf16x2<T>(v.y & 0xffffu);
  r.w = fp8x2_to_bf16x2<T>(v.y >> 16);
  return r;
}

// Two floats to a bf16 pair, round to nearest even (a in the low half).
__device__ __forceinline__ uint32_t pack_bf16x2(float a, float b) {
#if MLATUNE_MMA_TENSOR_CORES
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
#else
  return uint32_t{gpu::float_to_bf16(a)} | (uint32_t{gpu::float_to_bf16(b)} << 16);
#endif
}

// Two e4m3fn codes (bits 0-7 and 8-15 of `x`) to an f16 pair, exactly (one instruction).
__device__ __forceinline__ uint32_t e4m3fnx2_to_f16x2(uint32_t x) {
#if MLATUNE_ARCH_NVIDIA_MMA_FP8
  uint32_t h2;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<uint16_t>(x)));
  return h2;
#else
  (void)x;
  __builtin_trap();  // only hip_mma_fp8kv_v1 uses it, and it runs on NVIDIA sm_89+ only
#endif
}

// The same for the two e4m3fn codes in bits 16-31 of `x`. Naming the upper half through a
// register split lets the conversion read it in place (F2FP ... R.H1) instead of after a shift.
__device__ __forceinline__ uint32_t e4m3fnx2_hi_to_f16x2(uint32_t x) {
#if MLATUNE_ARCH_NVIDIA_MMA_FP8
  uint32_t h2;
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %1;\n cvt.rn.f16x2.e4m3x2 %0, h;\n}"
      : "=r"(h2)
      : "r"(x));
  return h2;
#else
  (void)x;
  __builtin_trap();
#endif
}

// Two floats to an f16 pair, round to nearest even (a in the low half).
__device__ __forceinline__ uint32_t pack_f16x2(float a, float b) {
#if MLATUNE_MMA_TENSOR_CORES
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(b), "f"(a));
  return r;
#else
  (void)a;
  (void)b;
  __builtin_trap();
#endif
}

// The two halves of an f16 pair as floats (exact).
__device__ __forceinline__ float2 f16x2_to_float2(uint32_t h2) {
#if MLATUNE_MMA_TENSOR_CORES
  float lo, hi;
  asm("{\n .reg .f16 l, h;\n mov.b32 {l, h}, %2;\n cvt.f32.f16 %0, l;\n cvt.f32.f16 %1, h;\n}"
      : "=f"(lo), "=f"(hi)
      : "r"(h2));
  return float2{lo, hi};
#else
  (void)h2;
  __builtin_trap();
#endif
}

// ---- Copies -----------------------------------------------------------------------------------

#if MLATUNE_MMA_TENSOR_CORES
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

// 16 bytes global -> shared; asynchronous where cp.async exists (completes at async_wait).
__device__ __forceinline__ void copy16(void* dst, const void* src) {
#if MLATUNE_MMA_TENSOR_CORES
  // .cg: through L2 only; KV is streamed, L1 would only evict Q.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src)
               : "memory");
#else
  *static_cast<uint4*>(dst) = *static_cast<const uint4*>(src);
#endif
}

// Unused where there are no async copies (AMD), hence maybe_unused.
[[maybe_unused]] __device__ __forceinline__ void async_commit() {
#if MLATUNE_MMA_TENSOR_CORES
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void async_wait() {
#if MLATUNE_MMA_TENSOR_CORES
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

__device__ __forceinline__ void zero16(void* dst) { *static_cast<uint4*>(dst) = uint4{0, 0, 0, 0}; }

// ---- Tensor-core primitives (NVIDIA) ------------------------------------------------------------

#if MLATUNE_MMA_TENSOR_CORES
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// c += a (16x16 row-major bf16) * b (16x8 col-major bf16), fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// c += a (16x16 row-major f16) * b (16x8 col-major f16), fp32 accumulators.
__device__ __forceinline__ void mma_f16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// ---- Online softmax over one KV tile ------------------------------------------------------------

// For this thread's slice of one row: sums the C::kKSplit partial score tiles, masks keys
// >= key_end, updates m (running max, base 2, identical in every thread of the row: an xor
// butterfly over C::kRowThreads consecutive lanes), this thread's share of l (fp32 sum of p, for
// the LSE) and of lb (sum of the p as rounded for the P.V product, which normalises O
// consistently with it), writes P (bf16, or f16 with kF16P) and publishes the row's rescale
// factor alpha. The shares are rescaled with the row's alpha every tile and summed over the row
// once, by row_total, after the last tile: two butterflies per tile fewer.
template <class C, bool kF16P = false>
__device__ __forceinline__ void softmax_tile(const float* s_s, uint16_t* p_s, float* alpha_s,
                                             float scale_log2, int32_t t0, int32_t key_end, int rl,
                                             int sub, float& m, float& l, float& lb) {
  constexpr int kKpt = C::kKeysPerThread;
  constexpr int kPartStride = 16 * C::kMTiles * C::kSStride;
  const int c0 = sub * kKpt;
  // The slice's partial scores, summed over the k-splits in order; 16-byte loads where the slice
  // allows (4 keys), else 8-byte.
  constexpr int kVec = kKpt % 4 == 0 ? 4 : 2;
  float s[kKpt];
#pragma unroll
  for (int k = 0; k < kKpt; k += kVec) {
#pragma unroll
    for (int kg = 0; kg < C::kKSplit; ++kg) {
      const float* src = s_s + kg * kPartStride + rl * C::kSStride + c0 + k;
      float w[kVec];
      if constexpr (kVec == 4) {
        const float4 v = *reinterpret_cast<const float4*>(src);
        w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
      } else {
        const float2 v = *reinterpret_cast<const float2*>(src);
        w[0] = v.x, w[1] = v.y;
      }
#pragma unroll
      for (int e = 0; e < kVec; ++e) s[k + e] = kg == 0 ? w[e] : s[k + e] + w[e];
    }
  }
  float mx = kNegInf;
#pragma unroll
  for (int k = 0; k < kKpt; ++k) {
    s[k] = t0 + c0 + k < key_end ? s[k] * scale_log2 : kNegInf;
    mx = fmaxf(mx, s[k]);
  }
#pragma unroll
  for (int off = C::kRowThreads / 2; off > 0; off /= 2) {
    mx = fmaxf(mx, mlatune_shfl_xor(mx, off));
  }
  const float m_new = fmaxf(m, mx);
  // A row with no visible key so far keeps m = -inf; exponents relative to 0 then give p = 0 and
  // alpha = 0 instead of exp(-inf + inf) = NaN.
  const float m_use = m_new == kNegInf ? 0.0f : m_new;
  const float alpha = exp2f(m - m_use);
  float sum = 0.0f;
  float sumb = 0.0f;
  uint16_t* prow = p_s + rl * C::kPStride + c0;
#pragma unroll
  for (int k = 0; k < kKpt; k += 2) {
    const float e0 = exp2f(s[k] - m_use);
    const float e1 = exp2f(s[k + 1] - m_use);
    uint32_t bits;
    if constexpr (kF16P) {
      bits = pack_f16x2(e0, e1);
      const float2 r = f16x2_to_float2(bits);
      sumb += r.x + r.y;
    } else {
      bits = pack_bf16x2(e0, e1);
      sumb += gpu::bf16_lo(bits) + gpu::bf16_hi(bits);
    }
    sum += e0 + e1;
    *reinterpret_cast<uint32_t*>(prow + k) = bits;
  }
  l = l * alpha + sum;
  lb = lb * alpha + sumb;
  m = m_new;
  if (sub == 0) alpha_s[rl] = alpha;
}

// The row's total of a per-thread share (softmax_tile's l and lb), in every thread of the row.
template <class C>
__device__ __forceinline__ float row_total(float share) {
#pragma unroll
  for (int off = C::kRowThreads / 2; off > 0; off /= 2) share += mlatune_shfl_xor(share, off);
  return share;
}

// O *= alpha for the accumulators of M m-tiles (rows mt * 16 + g and mt * 16 + g + 8 of this
// lane), alpha_s holding the rows' factors. Skipped when they are all 1 in the whole warp (the
// running maxima did not move, most tiles after the first few): x * 1 == x, so the result is the
// same bits either way.
template <int M, int N>
__device__ __forceinline__ void rescale(float (&o)[M][N][4], const float* alpha_s, int g) {
  float a[M][2];
  bool unit = true;
#pragma unroll
  for (int mt = 0; mt < M; ++mt) {
    a[mt][0] = alpha_s[mt * 16 + g];
    a[mt][1] = alpha_s[mt * 16 + g + 8];
    unit = unit && a[mt][0] == 1.0f && a[mt][1] == 1.0f;
  }
  if (mlatune_all(unit)) return;
#pragma unroll
  for (int mt = 0; mt < M; ++mt) {
#pragma unroll
    for (int n = 0; n < N; ++n) {
      o[mt][n][0] *= a[mt][0];
      o[mt][n][1] *= a[mt][0];
      o[mt][n][2] *= a[mt][1];
      o[mt][n][3] *= a[mt][1];
    }
  }
}

// ---- Split-KV combine -------------------------------------------------------------------------

// Layout contract of split-KV partials (every variant):
//   part_out [batch, splits, rows, 512] fp32: a split's output normalised by its own sum of p,
//       without kv_scale; zeros for a row that saw no key in the split.
//   part_lse [batch, splits, rows] fp32: natural-log LSE of the split's scores, or -inf for a row
//       that saw no key in the split (empty split, or only its causal tail).
// Persistent variants lay the same [slot, rows] records out by the slots of their launch plan
// (launch_plan.h): sequence b's partials are slots [seq_first_slot[b], seq_first_slot[b + 1]).
struct CombineParams {
  const float* part_out;
  const float* part_lse;
  uint16_t* out;  // [batch * qlen, heads, 512] bf16
  float* lse;     // [batch * qlen, heads], null unless return_lse
  int32_t rows;   // heads * qlen
  int32_t splits;
  float kv_scale;
  // Plan layout (both set, or both null): the cut sequences to merge, and their slot ranges.
  const int32_t* cut_seqs;
  const int32_t* seq_first_slot;
};

// Merges the partial results of one output row: blockIdx.x = b * rows + r over a fixed split
// grid, or c * rows + r for the c-th cut sequence of a plan. The finite partials in split (= key)
// order, weights exp(lse_s - max); out = kv_scale * sum / total and LSE = max + log(total).
// Deterministic: a fixed order, no atomics. The maximum is a block reduction (exact in any
// order); the sums take the partials in order, kCombineBatch loads in flight per thread, because
// with tens of partials per row a load-use chain per partial was the whole cost.
constexpr int kCombineBatch = 8;

__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const CombineParams c) {
  constexpr int kWarps = kCombineThreads / kWarpLanes;
  __shared__ float warp_max[kWarps];
  const int64_t r = blockIdx.x % c.rows;
  int64_t b = blockIdx.x / c.rows;
  int64_t base = b * c.splits * c.rows + r;  // partial s at base + s * rows
  int32_t splits = c.splits;
  if (c.cut_seqs != nullptr) {
    b = c.cut_seqs[b];
    base = int64_t{c.seq_first_slot[b]} * c.rows + r;
    splits = c.seq_first_slot[b + 1] - c.seq_first_slot[b];
  }
  const int64_t row = b * c.rows + r;
  const int tid = static_cast<int>(threadIdx.x);
  const int d = tid * 4;
  float mx = kNegInf;
  for (int s = tid; s < splits; s += kCombineThreads) {
    mx = fmaxf(mx, c.part_lse[base + int64_t{s} * c.rows]);
  }
  for (int off = kWarpLanes / 2; off > 0; off /= 2) mx = fmaxf(mx, mlatune_shfl_xor(mx, off));
  if (tid % kWarpLanes == 0) warp_max[tid / kWarpLanes] = mx;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, warp_max[w]);
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float total = 0.0f;
  if (mx != kNegInf) {
    for (int s0 = 0; s0 < splits; s0 += kCombineBatch) {
      float ls[kCombineBatch];
      float4 v[kCombineBatch];
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        // Past the last partial: -inf and no load. A partial of -inf may hold anything (a split
        // without keys need not write its output): its bytes are loaded but never used.
        const int64_t slot = base + int64_t{s0 + j} * c.rows;
        ls[j] = s0 + j < splits ? c.part_lse[slot] : kNegInf;
        v[j] = s0 + j < splits ? *reinterpret_cast<const float4*>(c.part_out + slot * kHeadDimV + d)
                               : float4{0.0f, 0.0f, 0.0f, 0.0f};
      }
#pragma unroll
      for (int j = 0; j < kCombineBatch; ++j) {
        if (ls[j] == kNegInf) continue;  // contributes exactly 0
        const float w = expf(ls[j] - mx);
        total += w;
        acc[0] += w * v[j].x;
        acc[1] += w * v[j].y;
        acc[2] += w * v[j].z;
        acc[3] += w * v[j].w;
      }
    }
  }
  // No split saw a key (impossible for valid shapes, L >= qlen): zeros and -inf, never NaN.
  const float scale = total > 0.0f ? c.kv_scale / total : 0.0f;
  *reinterpret_cast<uint2*>(c.out + row * kHeadDimV + d) = uint2{
      pack_bf16x2(acc[0] * scale, acc[1] * scale), pack_bf16x2(acc[2] * scale, acc[3] * scale)};
  if (c.lse != nullptr && tid == 0) {
    c.lse[row] = total > 0.0f ? mx + logf(total) : kNegInf;
  }
}

// ---- Host side ----------------------------------------------------------------------------------

inline bool misaligned(const void* ptr, uintptr_t alignment) {
  return reinterpret_cast<uintptr_t>(ptr) % alignment != 0;
}

// The checks every matrix-core variant makes before a launch: pointers present, 16-byte q and kv
// (vector loads), 8-byte out and 4-byte lse (stores), a workspace of `ws_bytes`, 16-byte aligned.
// Throws LaunchError("<variant>: ...").
inline void check_launch_args(std::string_view variant, const DecodeShape& s, const DecodeArgs& a,
                              size_t ws_bytes) {
  const auto fail = [&](const std::string& why) {
    throw LaunchError(std::string(variant) + ": " + why);
  };
  if (!a.q || !a.kv || !a.block_table || !a.kv_lens || !a.out) {
    fail("null q, kv, block_table, kv_lens or out pointer");
  }
  if (s.return_lse && !a.lse) fail("return_lse set but lse pointer is null");
  if (misaligned(a.q, 16) || misaligned(a.kv, 16)) fail("q and kv must be 16-byte aligned");
  if (misaligned(a.out, 8) || misaligned(a.lse, 4)) {
    fail("out must be 8-byte aligned and lse 4-byte aligned");
  }
  if (ws_bytes > 0) {
    if (!a.workspace) fail("null workspace (" + std::to_string(ws_bytes) + " bytes needed)");
    if (a.workspace_bytes < ws_bytes) {
      fail("workspace too small: " + std::to_string(a.workspace_bytes) + " bytes given, " +
           std::to_string(ws_bytes) + " needed");
    }
    if (misaligned(a.workspace, 16)) fail("workspace must be 16-byte aligned");
  }
}

// Enqueues the combine kernel over every output row of `s` (after a split kernel wrote the
// partials). Throws LaunchError.
inline void launch_combine(const DecodeShape& s, int32_t splits, const float* part_out,
                           const float* part_lse, uint16_t* out, float* lse, hipStream_t stream,
                           const char* what) {
  CombineParams c{};
  c.part_out = part_out;
  c.part_lse = part_lse;
  c.out = out;
  c.lse = lse;
  c.rows = s.qlen * s.heads;
  c.splits = splits;
  c.kv_scale = s.kv_scale;
  combine_kernel<<<dim3(static_cast<unsigned>(s.rows())), dim3(kCombineThreads), 0, stream>>>(c);
  hip_check_launch(what);
}

// Enqueues the combine kernel over the rows of a plan's `cut_count` cut sequences (device copies
// of the plan's cut list and slot ranges). Throws LaunchError.
inline void launch_plan_combine(const DecodeShape& s, int32_t cut_count, const int32_t* cut_seqs,
                                const int32_t* seq_first_slot, const float* part_out,
                                const float* part_lse, uint16_t* out, float* lse,
                                hipStream_t stream, const char* what) {
  CombineParams c{};
  c.part_out = part_out;
  c.part_lse = part_lse;
  c.out = out;
  c.lse = lse;
  c.rows = s.qlen * s.heads;
  c.kv_scale = s.kv_scale;
  c.cut_seqs = cut_seqs;
  c.seq_first_slot = seq_first_slot;
  const int64_t blocks = int64_t{cut_count} * c.rows;
  combine_kernel<<<dim3(static_cast<unsigned>(blocks)), dim3(kCombineThreads), 0, stream>>>(c);
  hip_check_launch(what);
}

}  // namespace mma
}  // namespace
}  // namespace mlatune
