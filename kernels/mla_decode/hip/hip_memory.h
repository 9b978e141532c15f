// The GPU (HIP) memory space and device identity. Plain C++ header: callers need no GPU compiler;
// the definitions live in hip_memory.hip, built only when MLATUNE_WITH_HIP is defined.
#pragma once

#include "mla_decode/device.h"
#include "mla_decode/memory.h"

namespace mlatune {

// The process-wide memory space of the current HIP device (hipMalloc / hipMemcpy / hipMemset on
// the default stream; hipEvent timers; L2 flush by a read kernel over a scratch buffer kept
// across calls). Obtaining it never touches the device, so a process without a GPU can hold it;
// its first use throws LaunchError("no GPU device: ...") there, and every later use too. Not
// thread-safe, like every MemorySpace.
MemorySpace& hip_memory_space();

// Identity of the current HIP device: backend "hip"; arch "sm_90" (NVIDIA, from the compute
// capability) or "gfx942" (AMD, gcnArchName without its ":feature" suffixes); the product name;
// SMs or CUs; driver and runtime versions ("13.0" on NVIDIA, "6.2.41133" on AMD). Throws
// LaunchError("no GPU device: ...") when there is none, LaunchError on any other runtime failure.
DeviceInfo hip_device_info();

// A stream of the current HIP device, for callers without a GPU compiler (tests, examples): the
// handle is what DecodeArgs::stream takes. Throws LaunchError when it cannot be created.
class HipStream {
 public:
  HipStream();
  ~HipStream();
  HipStream(const HipStream&) = delete;
  HipStream& operator=(const HipStream&) = delete;
  void* handle() const { return stream_; }
  // Waits for the stream's work; throws LaunchError on a failure reported there.
  void synchronize();
  // Captures what `enqueue` puts on this stream into a graph, in the global capture mode (where a
  // synchronising call or work on the legacy default stream during the capture invalidates it),
  // launches the graph once on the stream and waits. Throws LaunchError when the capture, the
  // instantiation or the launch fails, or rethrows what `enqueue` threw.
  void run_captured(void (*enqueue)(void* context), void* context);

 private:
  void* stream_ = nullptr;
};

}  // namespace mlatune
