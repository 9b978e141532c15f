// The GPU gate backend (hip_gate.h): cases generated in device memory from case_gen.h, the fp32
// GPU reference of the checked rows, and the comparisons as kernels, so that a case costs a few
// kernel launches and only per-row metrics come back to the host.
//
// Kernels (all on the default stream, grid-stride, 64-bit indices):
//   generate_q       every q element from casegen::q_value
//   generate_kv      the rows keys < L of every sequence from casegen::kv_value (the pool is first
//                    memset to the dtype's NaN byte, so every other row stays poisoned)
//   generate_table   every block-table slot: used ones from casegen::page_id, the rest poisoned
//   scan_nonfinite   the first NaN / Inf of out (bf16) and lse (fp32), by atomicMin of the index
//   compare_rows     one workgroup per checked row: the RowCheck metrics, reduced in a fixed
//                    order (deterministic), accumulated in double like the host comparison
//   first_diff       the first differing byte of two buffers, by atomicMin
#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/hip_compat.h"
#include "mla_decode/case_gen.h"
#include "mla_decode/hip/gpu_formats.h"
#include "mla_decode/hip/hip_check.h"
#include "mla_decode/hip/hip_gate.h"
#include "mla_decode/hip/reference_gpu.h"
#include "mla_decode/memory.h"

namespace mlatune {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 65536;
constexpr int kCompareThreads = 128;  // 4 output dims each
constexpr uint64_t kNone = ~uint64_t{0};

unsigned blocks_for(int64_t items, int per_block = kThreads) {
  return static_cast<unsigned>(
      std::clamp<int64_t>((items + per_block - 1) / per_block, 1, kMaxBlocks));
}

__global__ void __launch_bounds__(kThreads) generate_q(CaseGen g, void* q, int64_t elems) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < elems;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t row = i / kHeadDimQK;
    const int32_t d = static_cast<int32_t>(i - row * kHeadDimQK);
    casegen::store(g.q_dtype, q, i, casegen::q_value(g, row, d) * g.q_inv_scale);
  }
}

// blockIdx.y (strided) = sequence; the workgroup's threads cover kRows rows of it at a time.
constexpr int kGenRows = 4;
constexpr int kGenThreadsPerRow = kThreads / kGenRows;

__global__ void __launch_bounds__(kThreads)
    generate_kv(CaseGen g, void* kv, const int32_t* block_table, const int32_t* kv_lens,
                int32_t batch) {
  const int sub = static_cast<int>(threadIdx.x) % kGenThreadsPerRow;
  const int lr = static_cast<int>(threadIdx.x) / kGenThreadsPerRow;
  for (int32_t b = static_cast<int32_t>(blockIdx.y); b < batch; b += gridDim.y) {
    const int32_t len = kv_lens[b];
    const int32_t* slots = block_table + int64_t{b} * g.max_pages_per_seq;
    for (int64_t j = int64_t{blockIdx.x} * kGenRows + lr; j < len;
         j += int64_t{gridDim.x} * kGenRows) {
      const int32_t jj = static_cast<int32_t>(j);
      const int64_t row = int64_t{slots[jj / g.page_size]} * g.page_size + jj % g.page_size;
      const bool dominant = casegen::dominant(g, b, jj, len);
      for (int32_t d = sub; d < kHeadDimQK; d += kGenThreadsPerRow) {
        casegen::store(g.kv_dtype, kv, row * kHeadDimQK + d,
                       casegen::kv_value(g, b, jj, d, dominant) * g.kv_inv_scale);
      }
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    generate_table(CaseGen g, int32_t* table, const int32_t* kv_lens, const int64_t* page_start,
                   int64_t slots) {
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < slots;
       i += int64_t{gridDim.x} * kThreads) {
    const int64_t b = i / g.max_pages_per_seq;
    const int64_t p = i - b * g.max_pages_per_seq;
    const int64_t pages = (int64_t{kv_lens[b]} + g.page_size - 1) / g.page_size;
    table[i] = p < pages ? casegen::page_id(g, page_start[b] + p) : casegen::unused_slot(p);
  }
}

__global__ void __launch_bounds__(kThreads)
    scan_nonfinite(const uint16_t* out, int64_t out_elems, const float* lse, int64_t lse_elems,
                   unsigned long long* first) {
  const int64_t stride = int64_t{gridDim.x} * kThreads;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < out_elems; i += stride) {
    if ((out[i] & 0x7f80u) == 0x7f80u) {
      atomicMin(&first[0], static_cast<unsigned long long>(i));
      break;  // later elements of this thread are larger
    }
  }
  if (lse == nullptr) return;
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < lse_elems; i += stride) {
    if ((gpu::float_as_bits(lse[i]) & 0x7f800000u) == 0x7f800000u) {
      atomicMin(&first[1], static_cast<unsigned long long>(i));
      break;
    }
  }
}

// Device layout of a RowCheck (host struct order, no padding surprises).
struct DeviceRowCheck {
  double max_abs;
  double worst_ratio;
  double cosine;
  double lse_err;
  int32_t worst_dim;
  int32_t pad;
};

__global__ void __launch_bounds__(kCompareThreads)
    compare_rows(const uint16_t* out, const float* lse, const int64_t* rows, const float* ref_out,
                 const float* ref_lse, double atol, double rtol, DeviceRowCheck* result) {
  __shared__ double ratio_s[kCompareThreads], abs_s[kCompareThreads];
  __shared__ double dot_s[kCompareThreads], no_s[kCompareThreads], nr_s[kCompareThreads];
  __shared__ int32_t dim_s[kCompareThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t k = blockIdx.x;
  const int64_t row = rows[k];
  double worst = 0, max_abs = 0, dot = 0, no = 0, nr = 0;
  int32_t worst_dim = 0;
  for (int e = 0; e < 4; ++e) {
    const int d = tid * 4 + e;  // ascending dims: a tie keeps the lower dim
    const double v = gpu::bf16_to_float(out[row * kHeadDimV + d]);
    const double r = ref_out[k * kHeadDimV + d];
    const double err = fabs(v - r);
    const double ratio = err / (atol + rtol * fabs(r));
    if (ratio > worst) {
      worst = ratio;
      worst_dim = d;
    }
    max_abs = fmax(max_abs, err);
    dot += v * r;
    no += v * v;
    nr += r * r;
  }
  ratio_s[tid] = worst;
  dim_s[tid] = worst_dim;
  abs_s[tid] = max_abs;
  dot_s[tid] = dot;
  no_s[tid] = no;
  nr_s[tid] = nr;
  __syncthreads();
  // Tree reduction in a fixed order; the lower half keeps its value on ties (lower dims).
  for (int half = kCompareThreads / 2; half > 0; half /= 2) {
    if (tid < half) {
      if (ratio_s[tid + half] > ratio_s[tid]) {
        ratio_s[tid] = ratio_s[tid + half];
        dim_s[tid] = dim_s[tid + half];
      }
      abs_s[tid] = fmax(abs_s[tid], abs_s[tid + half]);
      dot_s[tid] += dot_s[tid + half];
      no_s[tid] += no_s[tid + half];
      nr_s[tid] += nr_s[tid + half];
    }
    __syncthreads();
  }
  if (tid == 0) {
    DeviceRowCheck c;
    c.max_abs = abs_s[0];
    c.worst_ratio = ratio_s[0];
    c.worst_dim = dim_s[0];
    const double n2 = no_s[0] * nr_s[0];
    c.cosine = (no_s[0] == 0 && nr_s[0] == 0) ? 1.0 : dot_s[0] / sqrt(n2 > 1e-300 ? n2 : 1e-300);
    c.lse_err = lse ? fabs(double{lse[row]} - double{ref_lse[k]}) : 0.0;
    c.pad = 0;
    result[k] = c;
  }
}

__global__ void __launch_bounds__(kThreads)
    first_diff(const uint8_t* a, const uint8_t* b, int64_t bytes, unsigned long long* first) {
  const int64_t words = bytes / 4;
  const auto* wa = reinterpret_cast<const uint32_t*>(a);
  const auto* wb = reinterpret_cast<const uint32_t*>(b);
  for (int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x; i < words;
       i += int64_t{gridDim.x} * kThreads) {
    const uint32_t x = wa[i] ^ wb[i];
    if (x != 0) {
      const int byte = (__ffs(static_cast<int>(x)) - 1) / 8;  // little endian: lowest set byte
      atomicMin(first, static_cast<unsigned long long>(i * 4 + byte));
      break;
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    for (int64_t i = words * 4; i < bytes; ++i) {
      if (a[i] != b[i]) {
        atomicMin(first, static_cast<unsigned long long>(i));
        break;
      }
    }
  }
}

template <typename T>
DeviceBuffer upload(MemorySpace& m, const std::vector<T>& host) {
  DeviceBuffer b(m, host.size() * sizeof(T));
  m.copy_to_device(b.data(), host.data(), b.size());
  return b;
}

class HipPreparedCase final : public PreparedCase {
 public:
  HipPreparedCase(MemorySpace& m, const CaseSpec& spec, const std::vector<int64_t>& rows)
      : m_(m), spec_(spec), n_rows_(static_cast<int64_t>(rows.size())) {
    const DecodeShape& s = spec_.shape;
    if (auto e = validate(s)) throw LaunchError("hip gate: invalid case shape: " + *e);
    if (spec_.kv_lens.size() != static_cast<size_t>(s.batch) ||
        spec_.page_start.size() != static_cast<size_t>(s.batch)) {
      throw LaunchError("hip gate: kv_lens / page_start do not match batch " +
                        std::to_string(s.batch));
    }
    q_ = DeviceBuffer(m, static_cast<size_t>(s.q_elems()) * dtype_bytes(s.q_dtype));
    kv_ = DeviceBuffer(m, static_cast<size_t>(s.kv_elems()) * dtype_bytes(s.kv_dtype));
    table_ = DeviceBuffer(m, static_cast<size_t>(s.block_table_elems()) * sizeof(int32_t));
    lens_ = upload(m, spec_.kv_lens);
    DeviceBuffer page_start = upload(m, spec_.page_start);
    const CaseGen& g = spec_.gen;
    const auto* lens = static_cast<const int32_t*>(lens_.data());
    generate_q<<<blocks_for(s.q_elems()), kThreads, 0, nullptr>>>(g, q_.data(), s.q_elems());
    hip_check_launch("generate_q");
    generate_table<<<blocks_for(s.block_table_elems()), kThreads, 0, nullptr>>>(
        g, static_cast<int32_t*>(table_.data()), lens,
        static_cast<const int64_t*>(page_start.data()), s.block_table_elems());
    hip_check_launch("generate_table");
    m.fill(kv_.data(), casegen::poison_byte(s.kv_dtype), kv_.size());
    const dim3 kv_grid(blocks_for(s.max_kv_len, kGenRows),
                       static_cast<unsigned>(std::min<int32_t>(s.batch, 65535)));
    generate_kv<<<kv_grid, kThreads, 0, nullptr>>>(
        g, kv_.data(), static_cast<const int32_t*>(table_.data()), lens, s.batch);
    hip_check_launch("generate_kv");
    if (n_rows_ > 0) {
      rows_ = upload(m, rows);
      ref_out_ = DeviceBuffer(m, static_cast<size_t>(n_rows_) * kHeadDimV * sizeof(float));
      ref_lse_ = DeviceBuffer(m, static_cast<size_t>(n_rows_) * sizeof(float));
      results_ = DeviceBuffer(m, static_cast<size_t>(n_rows_) * sizeof(DeviceRowCheck));
      gpu_reference_decode_rows(s, args(), static_cast<const int64_t*>(rows_.data()), n_rows_,
                                static_cast<float*>(ref_out_.data()),
                                static_cast<float*>(ref_lse_.data()));
    }
    first_ = DeviceBuffer(m, 2 * sizeof(unsigned long long));
    m.synchronize();  // page_start is released on return; faults surface here
  }

  const CaseSpec& spec() const override { return spec_; }

  DecodeArgs args() const override {
    DecodeArgs a;
    a.q = q_.data();
    a.kv = kv_.data();
    a.block_table = static_cast<const int32_t*>(table_.data());
    a.kv_lens = static_cast<const int32_t*>(lens_.data());
    return a;
  }

  OutputCheck check(const uint16_t* out, const float* lse, double atol,
                    double rtol) const override {
    const DecodeShape& s = spec_.shape;
    OutputCheck r;
    auto* first = static_cast<unsigned long long*>(first_.data());
    m_.fill(first, 0xff, first_.size());  // kNone
    scan_nonfinite<<<blocks_for(s.out_elems()), kThreads, 0, nullptr>>>(out, s.out_elems(), lse,
                                                                        s.rows(), first);
    hip_check_launch("scan_nonfinite");
    if (n_rows_ > 0) {
      compare_rows<<<static_cast<unsigned>(n_rows_), kCompareThreads, 0, nullptr>>>(
          out, lse, static_cast<const int64_t*>(rows_.data()),
          static_cast<const float*>(ref_out_.data()), static_cast<const float*>(ref_lse_.data()),
          atol, rtol, static_cast<DeviceRowCheck*>(results_.data()));
      hip_check_launch("compare_rows");
    }
    unsigned long long bad[2];
    m_.copy_to_host(bad, first, sizeof bad);
    if (bad[0] != kNone) {
      uint16_t v = 0;
      m_.copy_to_host(&v, out + bad[0], sizeof v);
      r.bad_out = static_cast<int64_t>(bad[0]);
      r.bad_out_value = gpu::bf16_to_float(v);
    }
    if (bad[1] != kNone) {
      m_.copy_to_host(&r.bad_lse_value, lse + bad[1], sizeof(float));
      r.bad_lse = static_cast<int64_t>(bad[1]);
    }
    std::vector<DeviceRowCheck> rows(static_cast<size_t>(n_rows_));
    m_.copy_to_host(rows.data(), results_.data(), rows.size() * sizeof(DeviceRowCheck));
    r.rows.resize(rows.size());
    for (size_t k = 0; k < rows.size(); ++k) {
      r.rows[k] = RowCheck{rows[k].max_abs, rows[k].worst_ratio, rows[k].worst_dim, rows[k].cosine,
                           rows[k].lse_err};
    }
    return r;
  }

 private:
  MemorySpace& m_;
  CaseSpec spec_;
  int64_t n_rows_;
  DeviceBuffer q_, kv_, table_, lens_, rows_, ref_out_, ref_lse_, results_, first_;
};

class HipGateBackend final : public GateBackend {
 public:
  std::unique_ptr<PreparedCase> prepare(const CaseSpec& spec, const std::vector<int64_t>& rows,
                                        int /*threads*/) override {
    return std::make_unique<HipPreparedCase>(memory_space(Backend::kHip), spec, rows);
  }
  int64_t first_difference(const void* a, const void* b, size_t bytes) override {
    if (bytes == 0) return -1;
    MemorySpace& m = memory_space(Backend::kHip);
    if (!first_) first_ = std::make_unique<DeviceBuffer>(m, sizeof(unsigned long long));
    auto* first = static_cast<unsigned long long*>(first_->data());
    m.fill(first, 0xff, sizeof(unsigned long long));
    first_diff<<<blocks_for(static_cast<int64_t>(bytes / 4) + 1), kThreads, 0, nullptr>>>(
        static_cast<const uint8_t*>(a), static_cast<const uint8_t*>(b), static_cast<int64_t>(bytes),
        first);
    hip_check_launch("first_diff");
    unsigned long long r = kNone;
    m.copy_to_host(&r, first, sizeof r);
    return r == kNone ? -1 : static_cast<int64_t>(r);
  }

 private:
  std::unique_ptr<DeviceBuffer> first_;
};

}  // namespace

GateBackend& hip_gate_backend() {
  static HipGateBackend backend;
  return backend;
}

}  // namespace mlatune
