#include "mla_decode/memory.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(MLATUNE_WITH_HIP)
#include "mla_decode/hip/hip_memory.h"
#endif

namespace mlatune {
namespace {

constexpr size_t kAlignment = 256;

class SteadyTimer final : public IntervalTimer {
 public:
  void start() override {
    start_ = std::chrono::steady_clock::now();
    stopped_ = false;
  }
  void stop() override {
    stop_ = std::chrono::steady_clock::now();
    stopped_ = true;
  }
  double seconds() override {
    if (!stopped_) throw std::logic_error("IntervalTimer::seconds() called before stop()");
    return std::chrono::duration<double>(stop_ - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point stop_;
  bool stopped_ = false;
};

// Host variants run synchronously on the calling thread (and their worker threads, joined before
// run() returns), so "device" memory is ordinary memory and synchronize() has nothing to wait for.
class HostMemorySpace final : public MemorySpace {
 public:
  std::string_view name() const override { return "host"; }

  void* allocate(size_t bytes) override {
    if (bytes == 0) return nullptr;
    // aligned_alloc wants a size that is a multiple of the alignment.
    const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
    if (rounded < bytes) {
      throw LaunchError("host: allocation of " + std::to_string(bytes) + " bytes overflows");
    }
    void* p = std::aligned_alloc(kAlignment, rounded);
    if (!p) throw LaunchError("host: out of memory allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void release(void* p) noexcept override { std::free(p); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  }
  void fill(void* dst, uint8_t byte, size_t bytes) override {
    if (bytes > 0) std::memset(dst, byte, bytes);
  }
  void synchronize() override {}
  std::unique_ptr<IntervalTimer> make_timer() override { return std::make_unique<SteadyTimer>(); }
  void flush_caches(size_t bytes) override {
    // The buffer is kept across calls (allocating and faulting in fresh pages would cost more than
    // the flush) and written with a new value each time, so the stores are never redundant.
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    if (bytes > 0) std::memset(scratch_.data(), flush_value_++, bytes);
  }
  std::string_view timer_description() const override { return "host steady_clock"; }
  std::optional<int64_t> available_bytes() override {
    std::ifstream meminfo("/proc/meminfo");
    for (std::string line; std::getline(meminfo, line);) {
      long long kib = 0;
      if (std::sscanf(line.c_str(), "MemAvailable: %lld kB", &kib) == 1) return kib * 1024;
    }
    return std::nullopt;
  }

 private:
  std::vector<uint8_t> scratch_;
  uint8_t flush_value_ = 1;
};

}  // namespace

MemorySpace& memory_space(Backend b) {
  switch (b) {
    case Backend::kHost: {
      static HostMemorySpace host;
      return host;
    }
    case Backend::kHip:
#if defined(MLATUNE_WITH_HIP)
      return hip_memory_space();
#else
      throw LaunchError(
          "this build has no GPU backend (configure with -DMLATUNE_GPU=nvidia or amd)");
#endif
  }
  throw LaunchError("memory_space: unknown backend " + std::to_string(static_cast<int>(b)));
}

}  // namespace mlatune

namespace mlatune {

void require_backend_built(std::string_view backend) {
  if (backend == "host") return;
  if (backend == "hip") {
#if !defined(MLATUNE_WITH_HIP)
    throw LaunchError("this build has no GPU backend (configure with -DMLATUNE_GPU=nvidia or amd)");
#endif
    return;
  }
  throw LaunchError("unknown backend '" + std::string(backend) + "'");
}

DeviceInfo current_device_info(std::string_view backend) {
  require_backend_built(backend);
#if defined(MLATUNE_WITH_HIP)
  if (backend == "hip") return hip_device_info();
#endif
  return host_device_info();
}

}  // namespace mlatune
