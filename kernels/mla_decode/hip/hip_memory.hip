#include "mla_decode/hip/hip_memory.h"

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "gpu/hip_compat.h"
#include "mla_decode/hip/hip_check.h"

namespace mlatune {
namespace {

// Throws LaunchError("no GPU device: ...") unless the runtime sees at least one device. A failing
// hipGetDeviceCount also sets the runtime's last error; it is cleared so that the next
// hip_check_launch does not blame a kernel for it.
void require_device() {
  int count = 0;
  const hipError_t e = hipGetDeviceCount(&count);
  if (e != hipSuccess) {
    (void)hipGetLastError();
    throw LaunchError(std::string("no GPU device: hipGetDeviceCount failed: ") +
                      hipGetErrorString(e));
  }
  if (count == 0) throw LaunchError("no GPU device: hipGetDeviceCount reports 0 devices");
}

// Reads `n` 16-byte words through the L2. The XOR of what was read decides whether anything is
// written, so no compiler can drop the loads; `sink` is written only if the XOR equals `never`,
// which is harmless either way (it points into the buffer read).
__global__ void read_through_l2(const uint4* words, int64_t n, uint32_t never, uint32_t* sink) {
  uint32_t acc = 0;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride) {
    const uint4 v = words[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == never) *sink = acc;
}

class HipTimer final : public IntervalTimer {
 public:
  HipTimer() {
    MLATUNE_HIP_CHECK(hipEventCreate(&start_));
    const hipError_t e = hipEventCreate(&stop_);
    if (e != hipSuccess) {
      (void)hipEventDestroy(start_);
      MLATUNE_HIP_CHECK(e);
    }
  }
  ~HipTimer() override {
    (void)hipEventDestroy(start_);
    (void)hipEventDestroy(stop_);
  }
  HipTimer(const HipTimer&) = delete;
  HipTimer& operator=(const HipTimer&) = delete;

  void start() override {
    MLATUNE_HIP_CHECK(hipEventRecord(start_, nullptr));
    stopped_ = false;
  }
  void stop() override {
    MLATUNE_HIP_CHECK(hipEventRecord(stop_, nullptr));
    stopped_ = true;
  }
  double seconds() override {
    if (!stopped_) throw std::logic_error("IntervalTimer::seconds() called before stop()");
    MLATUNE_HIP_CHECK(hipEventSynchronize(stop_));
    float ms = 0.0f;
    MLATUNE_HIP_CHECK(hipEventElapsedTime(&ms, start_, stop_));
    return double{ms} * 1e-3;
  }

 private:
  hipEvent_t start_ = nullptr;
  hipEvent_t stop_ = nullptr;
  bool stopped_ = false;
};

class HipMemorySpace final : public MemorySpace {
 public:
  std::string_view name() const override { return "hip"; }

  void* allocate(size_t bytes) override {
    ensure_device();
    if (bytes == 0) return nullptr;
    void* p = nullptr;  // hipMalloc guarantees at least 256-byte alignment
    MLATUNE_HIP_CHECK(hipMalloc(&p, bytes));
    return p;
  }
  void release(void* p) noexcept override {
    if (p) (void)hipFree(p);
  }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    ensure_device();
    if (bytes > 0) MLATUNE_HIP_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice));
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    ensure_device();
    if (bytes > 0) MLATUNE_HIP_CHECK(hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost));
  }
  void copy_within(void* dst, const void* src, size_t bytes) override {
    ensure_device();
    if (bytes > 0) MLATUNE_HIP_CHECK(hipMemcpyAsync(dst, src, bytes, hipMemcpyDeviceToDevice, 0));
  }
  void fill(void* dst, uint8_t byte, size_t bytes) override {
    ensure_device();
    if (bytes > 0) MLATUNE_HIP_CHECK(hipMemset(dst, byte, bytes));
  }
  void synchronize() override {
    ensure_device();
    MLATUNE_HIP_CHECK(hipDeviceSynchronize());
    // A fault can be reported by either; check both so that none is left for a later caller.
    MLATUNE_HIP_CHECK(hipGetLastError());
  }
  std::unique_ptr<IntervalTimer> make_timer() override {
    ensure_device();
    return std::make_unique<HipTimer>();
  }
  void flush_caches(size_t bytes) override {
    ensure_device();
    if (bytes == 0) return;
    if (scratch_bytes_ < bytes) {
      if (scratch_) {
        (void)hipFree(scratch_);
        scratch_ = nullptr;
        scratch_bytes_ = 0;
      }
      MLATUNE_HIP_CHECK(hipMalloc(&scratch_, bytes));
      scratch_bytes_ = bytes;
      MLATUNE_HIP_CHECK(hipMemset(scratch_, 0, bytes));  // defined contents, written back now
    }
    // Read, not written: a write flush (a memset) leaves up to an L2 of dirty lines, and the timed
    // kernel would pay for their write-back with its own DRAM bandwidth. Enqueued on the default
    // stream: it runs before the next timed launch and is not part of its interval.
    const int64_t words = static_cast<int64_t>(bytes / 16);
    if (words == 0) return;
    read_through_l2<<<1024, 256, 0, nullptr>>>(static_cast<const uint4*>(scratch_), words,
                                              0x9e3779b9u, static_cast<uint32_t*>(scratch_));
    hip_check_launch("read_through_l2 (cache flush)");
  }
  std::string_view timer_description() const override {
    return "device events (hipEventElapsedTime)";
  }
  std::optional<int64_t> available_bytes() override {
    ensure_device();
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    // Called by name: the compat header (part of every GPU variant's code identity) has no
    // mapping for it.
#if MLATUNE_GPU_NVIDIA
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
#else
    if (hipMemGetInfo(&free_bytes, &total_bytes) != hipSuccess) {
      (void)hipGetLastError();
      return std::nullopt;
    }
#endif
    return static_cast<int64_t>(free_bytes);
  }

 private:
  // The device check runs on first use, not at construction: obtaining the space must not fail
  // in a process that has no GPU. A failed check is repeated (and throws) on every use.
  void ensure_device() {
    if (device_ok_) return;
    require_device();
    device_ok_ = true;
  }

  bool device_ok_ = false;
  void* scratch_ = nullptr;
  size_t scratch_bytes_ = 0;
};

// "13.0" from CUDA's 13000; "6.2.41133" from HIP's 60241133 (major·10⁷ + minor·10⁵ + patch).
std::string format_version(int v) {
#if MLATUNE_GPU_NVIDIA
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
#else
  return std::to_string(v / 10000000) + "." + std::to_string((v / 100000) % 100) + "." +
         std::to_string(v % 100000);
#endif
}

}  // namespace

HipStream::HipStream() {
  require_device();
  hipStream_t s = nullptr;
  MLATUNE_HIP_CHECK(hipStreamCreate(&s));
  stream_ = s;
}

HipStream::~HipStream() { (void)hipStreamDestroy(static_cast<hipStream_t>(stream_)); }

void HipStream::synchronize() {
  MLATUNE_HIP_CHECK(hipStreamSynchronize(static_cast<hipStream_t>(stream_)));
}

void HipStream::run_captured(void (*enqueue)(void* context), void* context) {
  const hipStream_t s = static_cast<hipStream_t>(stream_);
  MLATUNE_HIP_CHECK(hipStreamBeginCapture(s, hipStreamCaptureModeGlobal));
  hipGraph_t graph = nullptr;
  try {
    enqueue(context);
  } catch (...) {
    if (hipStreamEndCapture(s, &graph) == hipSuccess && graph) (void)hipGraphDestroy(graph);
    (void)hipGetLastError();
    throw;
  }
  MLATUNE_HIP_CHECK(hipStreamEndCapture(s, &graph));
  hipGraphExec_t exec = nullptr;
  const hipError_t made = hipGraphInstantiateWithFlags(&exec, graph, 0);
  hipError_t ran = made;
  if (made == hipSuccess) {
    ran = hipGraphLaunch(exec, s);
    if (ran == hipSuccess) ran = hipStreamSynchronize(s);
    (void)hipGraphExecDestroy(exec);
  }
  (void)hipGraphDestroy(graph);
  MLATUNE_HIP_CHECK(ran);
}

MemorySpace& hip_memory_space() {
  // Deliberately never destroyed: at process exit the GPU runtime may already be torn down, and
  // freeing the scratch buffer then would fail or crash.
  static HipMemorySpace* const space = new HipMemorySpace();
  return *space;
}

DeviceInfo hip_device_info() {
  require_device();
  int device = 0;
  MLATUNE_HIP_CHECK(hipGetDevice(&device));
  hipDeviceProp_t prop{};
  MLATUNE_HIP_CHECK(hipGetDeviceProperties(&prop, device));
  int driver = 0;
  int runtime = 0;
  MLATUNE_HIP_CHECK(hipDriverGetVersion(&driver));
  MLATUNE_HIP_CHECK(hipRuntimeGetVersion(&runtime));

  DeviceInfo d;
  d.backend = "hip";
#if MLATUNE_GPU_NVIDIA
  d.arch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
#else
  const std::string gcn = prop.gcnArchName;  // "gfx942:sramecc+:xnack-"
  d.arch = gcn.substr(0, gcn.find(':'));
#endif
  d.name = prop.name;
  d.compute_units = prop.multiProcessorCount;
  d.driver_version = format_version(driver);
  d.runtime_version = format_version(runtime);
  return d;
}

}  // namespace mlatune
