// Identity of the device a database was tuned on, and of the device the runtime runs on.
#pragma once

#include <cstdint>
#include <string>

namespace mlatune {

struct DeviceInfo {
  std::string backend;          // "host", "hip"
  std::string arch;             // "x86_64", "aarch64", "sm_90", "gfx950", ...
  std::string name;             // CPU model name or GPU product name
  int32_t compute_units = 0;    // hardware threads (host), SMs or CUs (GPU)
  std::string driver_version;   // OS kernel release (host), driver (GPU)
  std::string runtime_version;  // compiler (host), CUDA/HIP runtime (GPU)

  // Whether a database tuned on `tuned` may be trusted on this device: backend, arch, name and
  // compute units must match; versions are informative only.
  bool matches(const DeviceInfo& tuned) const;
  std::string to_string() const;
};

DeviceInfo host_device_info();

}  // namespace mlatune
