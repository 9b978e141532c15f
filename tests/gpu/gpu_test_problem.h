// Inputs for the GPU kernel tests (gpu_reference_test.cc, portable_split_test.cc): small decode
// problems built on the host with every byte nobody may read poisoned, their copies in device
// memory, guarded output buffers and the "is there a GPU" probe.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "mla_decode/memory.h"
#include "mla_decode/numformat.h"
#include "mla_decode/problem.h"

namespace mlatune::gpu_test {

struct Config {
  DType q_dtype = DType::kBF16;
  DType kv_dtype = DType::kBF16;
  int32_t heads = 16;
  int32_t qlen = 1;
  int32_t page_size = 16;
  bool lse = true;
  std::vector<int32_t> lens{37, 300, 1};  // values below qlen stand for L = qlen
  float q_amp = 1.0f;                     // q uniform in [-q_amp, q_amp]: larger = peakier
  // Key L-1 of every sequence aligned with q of token 0, head 0, which must not see it when
  // qlen > 1: a causal leak then dominates that row.
  bool adversarial = false;
  uint32_t seed = 1;
};

inline std::string describe(const Config& c) {
  std::string s = std::string(dtype_name(c.q_dtype)) + "/" + std::string(dtype_name(c.kv_dtype)) +
                  " heads=" + std::to_string(c.heads) + " qlen=" + std::to_string(c.qlen) +
                  " page=" + std::to_string(c.page_size) + " lse=" + std::to_string(c.lse) +
                  " amp=" + std::to_string(c.q_amp) + " adv=" + std::to_string(c.adversarial) +
                  " lens=";
  for (int32_t l : c.lens) s += std::to_string(l) + ",";
  return s;
}

// Host inputs of one call.
struct Problem {
  DecodeShape shape;
  std::vector<uint8_t> q, kv;
  std::vector<int32_t> block_table, kv_lens;

  DecodeArgs host_args() const {
    DecodeArgs a;
    a.q = q.data();
    a.kv = kv.data();
    a.block_table = block_table.data();
    a.kv_lens = kv_lens.data();
    return a;
  }
};

inline void poison(std::vector<uint8_t>& buf, DType t) {
  const uint16_t nan = nan_bits(t);
  if (dtype_bytes(t) == 1) {
    std::fill(buf.begin(), buf.end(), static_cast<uint8_t>(nan));
    return;
  }
  for (size_t i = 0; i + 1 < buf.size(); i += 2) std::memcpy(&buf[i], &nan, 2);
}

// Pages of every sequence shuffled over the pool, three pages nobody uses, two spare block-table
// slots per sequence holding INT32_MAX, and NaN in every KV element past each sequence's length
// (unused pages and the tail of each last page).
inline Problem make_problem(const Config& c) {
  std::mt19937 rng(c.seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  Problem p;
  DecodeShape& s = p.shape;
  s.batch = static_cast<int32_t>(c.lens.size());
  s.qlen = c.qlen;
  s.heads = c.heads;
  s.page_size = c.page_size;
  s.q_dtype = c.q_dtype;
  s.kv_dtype = c.kv_dtype;
  s.q_scale = is_fp8(c.q_dtype) ? c.q_amp / dtype_max(c.q_dtype) : 1.0f;
  s.kv_scale = is_fp8(c.kv_dtype) ? 2.0f / dtype_max(c.kv_dtype) : 1.0f;  // kv in [-2, 2]
  s.sm_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDimQK));
  s.return_lse = c.lse;
  for (int32_t len : c.lens) p.kv_lens.push_back(std::max(len, c.qlen));
  s.max_kv_len = *std::max_element(p.kv_lens.begin(), p.kv_lens.end());

  std::vector<int32_t> used;
  for (int32_t len : p.kv_lens) used.push_back((len + c.page_size - 1) / c.page_size);
  s.num_pages = std::accumulate(used.begin(), used.end(), 0) + 3;
  s.max_pages_per_seq = *std::max_element(used.begin(), used.end()) + 2;
  std::vector<int32_t> ids(s.num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.block_table.assign(s.block_table_elems(), std::numeric_limits<int32_t>::max());

  p.q.resize(s.q_elems() * dtype_bytes(s.q_dtype));
  for (int64_t e = 0; e < s.q_elems(); ++e) {
    encode_element(s.q_dtype, p.q.data(), e, c.q_amp * uni(rng) / s.q_scale);
  }
  p.kv.resize(s.kv_elems() * dtype_bytes(s.kv_dtype));
  poison(p.kv, s.kv_dtype);
  size_t next = 0;
  for (int32_t b = 0; b < s.batch; ++b) {
    int32_t* slots = &p.block_table[int64_t{b} * s.max_pages_per_seq];
    for (int32_t pg = 0; pg < used[b]; ++pg) slots[pg] = ids[next++];
    const int64_t len = p.kv_lens[b];
    const int64_t q0 = int64_t{b} * s.qlen * s.heads * kHeadDimQK;  // token 0, head 0
    for (int64_t j = 0; j < len; ++j) {
      const int64_t row = int64_t{slots[j / s.page_size]} * s.page_size + j % s.page_size;
      for (int d = 0; d < kHeadDimQK; ++d) {
        float x = uni(rng);
        if (c.adversarial && s.qlen > 1 && j == len - 1) {
          x = decode_element(s.q_dtype, p.q.data(), q0 + d) >= 0 ? 2.0f : -2.0f;
        }
        encode_element(s.kv_dtype, p.kv.data(), row * kHeadDimQK + d, x / s.kv_scale);
      }
    }
  }
  EXPECT_EQ(validate(s).value_or(""), "");
  EXPECT_FALSE(validate_sequences(s, p.kv_lens, p.block_table).has_value());
  return p;
}

// The problem's inputs in device memory.
struct DeviceInputs {
  DeviceBuffer q, kv, block_table, kv_lens;

  DeviceInputs(MemorySpace& m, const Problem& p)
      : q(m, p.q.size()),
        kv(m, p.kv.size()),
        block_table(m, p.block_table.size() * 4),
        kv_lens(m, p.kv_lens.size() * 4) {
    m.copy_to_device(q.data(), p.q.data(), p.q.size());
    m.copy_to_device(kv.data(), p.kv.data(), p.kv.size());
    m.copy_to_device(block_table.data(), p.block_table.data(), p.block_table.size() * 4);
    m.copy_to_device(kv_lens.data(), p.kv_lens.data(), p.kv_lens.size() * 4);
  }

  DecodeArgs args() const {
    DecodeArgs a;
    a.q = q.data();
    a.kv = kv.data();
    a.block_table = static_cast<const int32_t*>(block_table.data());
    a.kv_lens = static_cast<const int32_t*>(kv_lens.data());
    return a;
  }
};

// A device buffer of `bytes` between two guard regions of kGuardBytes: data() points past the
// front guard (256 bytes keeps every alignment the kernels rely on). The payload is set to `fill`.
class GuardedBuffer {
 public:
  static constexpr size_t kGuardBytes = 256;
  static constexpr uint8_t kGuardByte = 0xa5;

  GuardedBuffer(MemorySpace& m, size_t bytes, uint8_t fill)
      : m_(&m), buf_(m, bytes + 2 * kGuardBytes), bytes_(bytes) {
    m.fill(buf_.data(), kGuardByte, kGuardBytes);
    m.fill(data(), fill, bytes);
    m.fill(data() + bytes, kGuardByte, kGuardBytes);
  }
  uint8_t* data() const { return static_cast<uint8_t*>(buf_.data()) + kGuardBytes; }
  size_t size() const { return bytes_; }

  template <class T>
  std::vector<T> read() const {
    std::vector<T> v(bytes_ / sizeof(T));
    m_->copy_to_host(v.data(), data(), v.size() * sizeof(T));
    return v;
  }
  // Both guard regions still hold kGuardByte.
  bool guards_intact() const {
    std::vector<uint8_t> all(bytes_ + 2 * kGuardBytes);
    m_->copy_to_host(all.data(), buf_.data(), all.size());
    auto ok = [](uint8_t x) { return x == kGuardByte; };
    return std::all_of(all.begin(), all.begin() + kGuardBytes, ok) &&
           std::all_of(all.end() - kGuardBytes, all.end(), ok);
  }

 private:
  MemorySpace* m_;
  DeviceBuffer buf_;
  size_t bytes_;
};

// The HIP memory space, or null where there is no usable GPU (its first use reaches the device
// and throws "no GPU device: ..." there).
inline MemorySpace* gpu_or_null(std::string* why) {
  try {
    MemorySpace& m = memory_space(Backend::kHip);
    DeviceBuffer probe(m, 256);
    return &m;
  } catch (const LaunchError& e) {
    *why = e.what();
    return nullptr;
  }
}

inline int reference_threads() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u));
}

}  // namespace mlatune::gpu_test

// Skips the current test where there is no GPU; otherwise binds `m` to the HIP memory space.
#define MLATUNE_REQUIRE_GPU(m)                                                                  \
  std::string mlatune_no_gpu_reason_;                                                           \
  ::mlatune::MemorySpace* m##_ptr_ = ::mlatune::gpu_test::gpu_or_null(&mlatune_no_gpu_reason_); \
  if (!m##_ptr_) GTEST_SKIP() << mlatune_no_gpu_reason_;                                        \
  ::mlatune::MemorySpace& m = *m##_ptr_
