// Where a backend's kernels read and write their buffers, and how the host reaches them: the
// validation gate and the timing engine use this to run every backend's variants the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "mla_decode/device.h"
#include "mla_decode/variant.h"

namespace mlatune {

// Measures the time of work launched between start() and stop(): a monotonic clock on the host,
// device events on a GPU.
class IntervalTimer {
 public:
  virtual ~IntervalTimer() = default;
  virtual void start() = 0;
  virtual void stop() = 0;
  virtual double seconds() = 0;  // waits for the stopped work; valid after stop()
};

// Memory of one backend. Errors (allocation failure, a device fault surfacing at a copy or a
// synchronisation) throw LaunchError with the backend's message. Not thread-safe.
class MemorySpace {
 public:
  virtual ~MemorySpace() = default;
  virtual std::string_view name() const = 0;  // "host", "hip"
  virtual void* allocate(size_t bytes) = 0;   // 256-byte aligned; bytes may be 0 (returns null)
  virtual void release(void* p) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Copies between two buffers of this space; on a GPU it is enqueued like a kernel (the copy
  // bandwidth the benchmarks compare kernels with).
  virtual void copy_within(void* dst, const void* src, size_t bytes) = 0;
  virtual void fill(void* dst, uint8_t byte, size_t bytes) = 0;
  // Waits until every launched kernel finished; surfaces asynchronous faults as LaunchError.
  virtual void synchronize() = 0;
  virtual std::unique_ptr<IntervalTimer> make_timer() = 0;
  // Evicts the caches the kernels read through (host: last-level cache, GPU: L2) by passing
  // `bytes` of scratch memory through them (host: written; GPU: read, so that the L2 is left
  // holding clean lines and the next kernel does not pay for writing back the flush's data).
  virtual void flush_caches(size_t bytes) = 0;
  // How the timer measures, for the database's timing_method.
  virtual std::string_view timer_description() const = 0;
  // The bytes this space could still allocate as its runtime reports them (GPU: free device
  // memory; host: the kernel's MemAvailable), or nullopt when it cannot tell. A bound for refusing
  // work that cannot fit, not a promise that an allocation of that size succeeds.
  virtual std::optional<int64_t> available_bytes() = 0;
};

// The memory space of a backend's variants. Throws LaunchError if the backend is not built in or
// has no device.
MemorySpace& memory_space(Backend b);

// Throws LaunchError (as current_device_info does) when this build lacks `backend`; touches no
// device, so a process that must not initialise a GPU runtime (a tuning supervisor) can call it.
void require_backend_built(std::string_view backend);

// The device a backend ("host", "hip") runs on in this process. Throws LaunchError when the
// backend is not built in or has no device.
DeviceInfo current_device_info(std::string_view backend);

// Owns an allocation in a memory space.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(MemorySpace& space, size_t bytes)
      : space_(&space), data_(space.allocate(bytes)), bytes_(bytes) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    reset();
    space_ = o.space_;
    data_ = o.data_;
    bytes_ = o.bytes_;
    o.data_ = nullptr;
    o.bytes_ = 0;
    return *this;
  }
  ~DeviceBuffer() { reset(); }
  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  void reset() {
    if (data_) space_->release(data_);
    data_ = nullptr;
  }
  MemorySpace* space_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace mlatune
