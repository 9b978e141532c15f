// hip_mfma_split_v1: split-KV MLA decode on AMD CDNA matrix cores (MFMA), for gfx90a, gfx942 and
// gfx950. Built and registered in AMD builds only (MLATUNE_GPU=amd); its device code is compiled
// for gfx942 by the CI compile check. It has never run: no AMD GPU is reachable from this
// project's machines, so until a tuner on an AMD device has validated it, it wins nothing (the gate
// is what makes an unexecuted kernel safe to ship).
//
// Work: a workgroup of 4 waves (wave64) takes 16 query rows (heads x qlen packed, as in every
// variant of the family) of one KV split of one sequence; splits, causal end, masks, partial
// layout and the combine kernel are those of mma_common.h. Per tile of 32 keys:
//   1. stage: the tile's rows into shared memory as bf16 (fp8 e4m3fn / e4m3fnuz -> bf16 is exact),
//      zeros for keys past the tile's end, so stale bytes never meet a product;
//   2. S = Q K^T with v_mfma_f32_16x16x16bf16_1k: wave w computes key block w % 2 (16 keys) over
//      dims [288 (w / 2), 288 (w / 2) + 288), 18 k-steps; the two dim halves' partial tiles go to
//      shared memory and are summed in a fixed order by the softmax;
//   3. online softmax (fp32, log2 domain): 16 threads per row, 2 keys each; P rounded to bf16, its
//      rounded values summed for the normalisation, the exact ones for the LSE;
//   4. O = O * alpha + P V with the same instruction: wave w owns dims [128 w, 128 w + 128), eight
//      16 x 16 output tiles, 2 k-steps of 16 keys.
// Operand layouts of v_mfma_f32_16x16x16 (lane l of the wave): A[i][k] in lane i + 16 (k / 4),
// element k % 4; B[k][j] in lane j + 16 (k / 4), element k % 4; D[i][j] in lane j + 16 (i / 4),
// element i % 4. So a lane reads 4 consecutive dims of one Q row (A) or of one K row (B of S), 4
// consecutive keys of one P row (A of P V) and one dim of 4 consecutive V rows (B of P V).
//
// Shared memory (bytes): Q [16][584] and the tile [32][584] bf16 (rows padded by 16 bytes), the
// two partial score tiles [2][16][32] fp32, P [16][32] bf16 and per-row statistics: 59 KB, inside
// gfx942's 64 KiB. Deterministic: fixed reduction orders, no atomics.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/mma_common.h"

#if defined(MLATUNE_STANDALONE_CHECK)
namespace mlatune::code_identity {
inline constexpr std::string_view k_hip_mfma_split_v1 = "standalone-check";
}  // namespace mlatune::code_identity
#else
#include "mla_decode/code_identity.h"
#endif

#if defined(__gfx90a__) || defined(__gfx940__) || defined(__gfx941__) || defined(__gfx942__) || \
    defined(__gfx950__)
#define MFMA_KERNEL 1
#else
#define MFMA_KERNEL 0
#endif

namespace mlatune {
namespace {

using namespace mma;

constexpr std::string_view kName = "hip_mfma_split_v1";

constexpr int kWave = 64;
constexpr int kWaves = 4;
constexpr int kThreads = kWave * kWaves;
constexpr int kRows = 16;
constexpr int kTile = 32;
constexpr int kRowElems = kHeadDimQK + 8;  // bf16 per staged Q / K row
constexpr int kDimHalf = kHeadDimQK / 2;   // 288: the dims of one S partial
constexpr int kDimsPerWave = kHeadDimV / kWaves;  // 128
constexpr int kRowThreads = kThreads / kRows;     // 16 softmax threads per row
constexpr int kKeysPerThread = kTile / kRowThreads;  // 2
constexpr int kChunks = kHeadDimQK / 4;              // 4-element staging chunks per row

static_assert(kDimHalf % 16 == 0 && kDimsPerWave % 16 == 0 && kTile == 2 * 16, "MFMA blocks");

// Shared memory layout (element offsets in bytes).
constexpr size_t kQOff = 0;
constexpr size_t kKOff = kQOff + size_t{kRows} * kRowElems * 2;
constexpr size_t kSOff = kKOff + size_t{kTile} * kRowElems * 2;
constexpr size_t kPOff = kSOff + size_t{2} * kRows * kTile * 4;
constexpr size_t kStatOff = kPOff + size_t{kRows} * kTile * 2;
constexpr size_t kSmemBytes = kStatOff + size_t{4} * kRows * 4;  // alpha, m, l, lb
static_assert(kSmemBytes <= 64 * 1024, "fits gfx942's LDS");

struct Params {
  const void* q;               // [batch * qlen, heads, 576] of q_dtype
  const void* kv;              // [num_pages, page_size, 576] of kv_dtype
  const int32_t* block_table;  // [batch, max_pages]
  const int32_t* kv_lens;      // [batch]
  uint16_t* out;               // [batch * qlen, heads, 512] bf16 (splits = 1)
  float* lse;                  // [batch * qlen, heads] or null (splits = 1)
  float* part_out;             // [batch, splits, rows, 512] (splits > 1)
  float* part_lse;             // [batch, splits, rows] (splits > 1)
  int32_t heads;
  int32_t qlen;
  int32_t rows;
  int32_t groups;
  int32_t splits;
  int32_t page_size;
  int32_t max_pages;
  int32_t max_len;
  DType q_dtype;
  DType kv_dtype;
  float scale_log2;  // sm_scale * q_scale * kv_scale * log2(e)
  float kv_scale;
};

#if MFMA_KERNEL
typedef short bf16x4 __attribute__((ext_vector_type(4)));
typedef float f32x4 __attribute__((ext_vector_type(4)));

__device__ __forceinline__ f32x4 mfma(bf16x4 a, bf16x4 b, f32x4 c) {
  return __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
}

__device__ __forceinline__ bf16x4 load4(const uint16_t* p) {
  return *reinterpret_cast<const bf16x4*>(p);
}

// Four consecutive elements of `base` (16-byte aligned pool or q) as bf16 into shared memory.
__device__ __forceinline__ void stage4(DType t, const void* base, int64_t e, uint16_t* dst) {
  if (t == DType::kBF16) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(
        static_cast<const uint16_t*>(base) + e);
    return;
  }
  const uint32_t w = *reinterpret_cast<const uint32_t*>(static_cast<const uint8_t*>(base) + e);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint8_t b = static_cast<uint8_t>(w >> (8 * i));
    dst[i] = t == DType::kFP8E4M3FN ? gpu::e4m3fn_to_bf16(b) : gpu::e4m3fnuz_to_bf16(b);
  }
}
#endif  // MFMA_KERNEL

__global__ void __launch_bounds__(kThreads) mfma_split_kernel(const Params p) {
#if MFMA_KERNEL
  extern __shared__ __align__(16) uint8_t smem[];
  uint16_t* const q_s = reinterpret_cast<uint16_t*>(smem + kQOff);
  uint16_t* const k_s = reinterpret_cast<uint16_t*>(smem + kKOff);
  float* const s_s = reinterpret_cast<float*>(smem + kSOff);
  uint16_t* const p_s = reinterpret_cast<uint16_t*>(smem + kPOff);
  float* const alpha_s = reinterpret_cast<float*>(smem + kStatOff);
  float* const m_s = alpha_s + kRows;
  float* const l_s = m_s + kRows;
  float* const lb_s = l_s + kRows;

  const int tid = static_cast<int>(threadIdx.x);
  const int wave = tid / kWave;
  const int lane = tid % kWave;
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
  const int32_t* pages = p.block_table + int64_t{b} * p.max_pages;

  // Q rows (zeros past the last row), once.
  for (int c = tid; c < kRows * kChunks; c += kThreads) {
    const int r = c / kChunks;
    const int d = (c % kChunks) * 4;
    uint16_t* dst = q_s + r * kRowElems + d;
    if (row0 + r < p.rows) {
      stage4(p.q_dtype, p.q, (int64_t{b} * p.rows + row0 + r) * kHeadDimQK + d, dst);
    } else {
      dst[0] = dst[1] = dst[2] = dst[3] = 0;
    }
  }

  // Softmax role: row srl, keys 2 ssub, 2 ssub + 1 of each tile.
  const int srl = tid / kRowThreads;
  const int ssub = tid % kRowThreads;
  const int32_t sr = row0 + srl;
  const int32_t key_end = sr < p.rows ? imin(hi, len - p.qlen + sr / p.heads + 1) : lo;
  float m = kNegInf, l = 0.0f, lb = 0.0f;

  // MFMA roles.
  const int li = lane % 16;  // A row / B column / D column
  const int lk = lane / 16;  // k group of 4; D rows 4 lk .. 4 lk + 3
  const int nb = wave % 2;   // S: key block
  const int kh = wave / 2;   // S: dim half
  f32x4 o[kDimsPerWave / 16];
#pragma unroll
  for (int t = 0; t < kDimsPerWave / 16; ++t) o[t] = f32x4{0.0f, 0.0f, 0.0f, 0.0f};

  for (int32_t t0 = lo; t0 < end; t0 += kTile) {
    const int32_t nvalid = imin(kTile, end - t0);
    __syncthreads();  // the previous tile's K, S and P are no longer read
    for (int c = tid; c < kTile * kChunks; c += kThreads) {
      const int r = c / kChunks;
      const int d = (c % kChunks) * 4;
      uint16_t* dst = k_s + r * kRowElems + d;
      if (r < nvalid) {
        const int32_t j = t0 + r;
        const int64_t row = int64_t{pages[j / p.page_size]} * p.page_size + j % p.page_size;
        stage4(p.kv_dtype, p.kv, row * kHeadDimQK + d, dst);
      } else {
        dst[0] = dst[1] = dst[2] = dst[3] = 0;
      }
    }
    __syncthreads();

    // S partial: rows 0..15 x keys 16 nb .. 16 nb + 15 over dims of half kh.
    f32x4 acc = {0.0f, 0.0f, 0.0f, 0.0f};
    const uint16_t* qa = q_s + li * kRowElems + kh * kDimHalf + 4 * lk;
    const uint16_t* kb = k_s + (16 * nb + li) * kRowElems + kh * kDimHalf + 4 * lk;
#pragma unroll 6
    for (int k0 = 0; k0 < kDimHalf; k0 += 16) acc = mfma(load4(qa + k0), load4(kb + k0), acc);
    float* part = s_s + kh * (kRows * kTile);
#pragma unroll
    for (int e = 0; e < 4; ++e) part[(4 * lk + e) * kTile + 16 * nb + li] = acc[e];
    __syncthreads();

    // Online softmax of row srl over this tile's keys.
    float s[kKeysPerThread];
    float mx = kNegInf;
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) {
      const int c = ssub * kKeysPerThread + k;
      const float v = s_s[srl * kTile + c] + s_s[kRows * kTile + srl * kTile + c];
      s[k] = t0 + c < key_end ? v * p.scale_log2 : kNegInf;
      mx = fmaxf(mx, s[k]);
    }
    for (int off = kRowThreads / 2; off > 0; off /= 2) mx = fmaxf(mx, mlatune_shfl_xor(mx, off));
    const float m_new = fmaxf(m, mx);
    const float m_use = m_new == kNegInf ? 0.0f : m_new;  // no key yet: p = 0
    const float alpha = exp2f(m - m_use);                  // 0 while m = -inf (O and l are 0)
    float sum = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int k = 0; k < kKeysPerThread; ++k) {
      const float pe = s[k] == kNegInf ? 0.0f : exp2f(s[k] - m_use);
      const uint16_t pb = gpu::float_to_bf16(pe);
      p_s[srl * kTile + ssub * kKeysPerThread + k] = pb;
      sum += pe;
      sum_b += gpu::bf16_to_float(pb);
    }
    for (int off = kRowThreads / 2; off > 0; off /= 2) {
      sum += mlatune_shfl_xor(sum, off);
      sum_b += mlatune_shfl_xor(sum_b, off);
    }
    l = l * alpha + sum;
    lb = lb * alpha + sum_b;
    m = m_new;
    if (ssub == 0) alpha_s[srl] = alpha;
    __syncthreads();

    // O = O * alpha + P V over dims [128 wave, 128 wave + 128).
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float a = alpha_s[4 * lk + e];
#pragma unroll
      for (int t = 0; t < kDimsPerWave / 16; ++t) o[t][e] *= a;
    }
#pragma unroll
    for (int k0 = 0; k0 < kTile; k0 += 16) {
      const bf16x4 pa = load4(p_s + li * kTile + k0 + 4 * lk);
      const uint16_t* vb = k_s + (k0 + 4 * lk) * kRowElems + wave * kDimsPerWave + li;
#pragma unroll
      for (int t = 0; t < kDimsPerWave / 16; ++t) {
        const uint16_t* v = vb + 16 * t;
        const bf16x4 vv = {static_cast<short>(v[0]), static_cast<short>(v[kRowElems]),
                           static_cast<short>(v[2 * kRowElems]),
                           static_cast<short>(v[3 * kRowElems])};
        o[t] = mfma(pa, vv, o[t]);
      }
    }
  }

  if (ssub == 0) {
    m_s[srl] = m;
    l_s[srl] = l;
    lb_s[srl] = lb;
  }
  __syncthreads();
  const bool direct = p.splits == 1;
  const int64_t part_row0 = (int64_t{b} * p.splits + split) * p.rows;
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int rl = 4 * lk + e;
    const int32_t r = row0 + rl;
    if (r >= p.rows) continue;
    const float inv = lb_s[rl] > 0.0f ? 1.0f / lb_s[rl] : 0.0f;
#pragma unroll
    for (int t = 0; t < kDimsPerWave / 16; ++t) {
      const int dim = wave * kDimsPerWave + 16 * t + li;
      if (direct) {
        p.out[(int64_t{b} * p.rows + r) * kHeadDimV + dim] =
            gpu::float_to_bf16(o[t][e] * inv * p.kv_scale);
      } else {
        p.part_out[(part_row0 + r) * kHeadDimV + dim] = o[t][e] * inv;
      }
    }
  }
  if (tid < kRows && row0 + tid < p.rows) {
    const int32_t r = row0 + tid;
    const float lse = l_s[tid] > 0.0f ? (m_s[tid] + log2f(l_s[tid])) * kLn2 : kNegInf;
    if (!direct) {
      p.part_lse[part_row0 + r] = lse;
    } else if (p.lse != nullptr) {
      p.lse[int64_t{b} * p.rows + r] = lse;
    }
  }
#else
  (void)p;
#endif
}

// ---- Host side --------------------------------------------------------------------------------

// Whether the current device has the MFMA instruction this kernel uses (CDNA2 and later).
bool device_has_mfma() {
  int device = 0;
  hipDeviceProp_t prop{};
  if (hipGetDevice(&device) != hipSuccess || hipGetDeviceProperties(&prop, device) != hipSuccess) {
    return false;
  }
  const std::string_view arch(prop.gcnArchName);
  return arch.rfind("gfx90a", 0) == 0 || arch.rfind("gfx94", 0) == 0 ||
         arch.rfind("gfx95", 0) == 0;
}

class MfmaSplitVariant final : public Variant {
 public:
  std::string_view name() const override { return kName; }
  std::string_view description() const override {
    return "AMD CDNA matrix cores: split-KV, 16 query rows per workgroup of four waves, "
           "v_mfma_f32_16x16x16bf16_1k for Q K^T and P V over a bf16-staged KV tile of 32 keys "
           "(fp8 dequantised exactly), fp32 online softmax, LSE-merge combine kernel; gfx90a, "
           "gfx942, gfx950; never run on hardware yet";
  }
  Backend backend() const override { return Backend::kHip; }
  std::string_view code_identity() const override { return code_identity::k_hip_mfma_split_v1; }
  ParamSpace param_space() const override { return space(); }
  // Built once: can_implement is on the runtime's plan path, which must not allocate.
  static const ParamSpace& space() {
    static const ParamSpace s = [] {
      ParamSpace p;
      p.kv_splits = {1, 2, 4, 8, 16, 32, 64};
      p.kv_tile = {kTile};
      p.block_rows = {kRows};
      return p;
    }();
    return s;
  }
  Support can_implement(const DecodeShape& s, const LaunchParams& p) const override {
    if constexpr (!MLATUNE_GPU_AMD) return Support::no("AMD only (MFMA)");
    if (auto err = validate(s)) return Support::no("invalid shape: " + *err);
    if (!space().contains(p)) {
      return Support::no("launch params " + p.to_string() + " outside the parameter space");
    }
    static const bool has_mfma = device_has_mfma();
    if (!has_mfma) return Support::no("the device has no v_mfma_f32_16x16x16bf16_1k (CDNA2+)");
    return Support::yes();
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

void MfmaSplitVariant::run(const DecodeShape& s, const LaunchParams& lp, const DecodeArgs& a) const {
  const Support sup = can_implement(s, lp);
  if (!sup.ok) throw LaunchError(std::string(kName) + ": " + sup.reason);
  const size_t ws = workspace_bytes(s, lp);
  check_launch_args(kName, s, a, ws);
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
  p.rows = s.qlen * s.heads;
  p.groups = (p.rows + kRows - 1) / kRows;
  p.splits = lp.kv_splits;
  p.page_size = s.page_size;
  p.max_pages = s.max_pages_per_seq;
  p.max_len = static_cast<int32_t>(
      std::min<int64_t>(int64_t{s.max_pages_per_seq} * s.page_size, kMaxKvLen));
  p.q_dtype = s.q_dtype;
  p.kv_dtype = s.kv_dtype;
  p.scale_log2 = static_cast<float>(static_cast<double>(s.sm_scale) * s.q_scale * s.kv_scale *
                                    1.4426950408889634);
  p.kv_scale = s.kv_scale;
  const int64_t blocks = int64_t{s.batch} * lp.kv_splits * p.groups;
  MLATUNE_HIP_CHECK(hipFuncSetAttribute(reinterpret_cast<const void*>(&mfma_split_kernel),
                                        hipFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(kSmemBytes)));
  mfma_split_kernel<<<dim3(static_cast<unsigned>(blocks)), dim3(kThreads), kSmemBytes,
                      stream_of(a)>>>(p);
  hip_check_launch("mfma_split_kernel");
  if (lp.kv_splits > 1) {
    launch_combine(s, lp.kv_splits, p.part_out, p.part_lse, a.out, p.lse, stream_of(a),
                   "mfma_split combine_kernel");
  }
}

}  // namespace

const Variant& hip_mfma_split_variant() {
  static const MfmaSplitVariant v;
  return v;
}

}  // namespace mlatune
