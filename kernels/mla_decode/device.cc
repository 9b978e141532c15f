#include "mla_decode/device.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <thread>

namespace mlatune {
namespace {

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t") - b + 1);
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos || trim(line.substr(0, colon)) != "model name") continue;
    std::string name = trim(line.substr(colon + 1));
    if (!name.empty()) return name;
  }
  return "unknown cpu";  // e.g. many aarch64 kernels list no model name
}

int32_t online_threads() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  if (n >= 1) return static_cast<int32_t>(n);
  const unsigned hc = std::thread::hardware_concurrency();
  return hc >= 1 ? static_cast<int32_t>(hc) : 1;
}

std::string compiler_id() {
#if defined(__clang__)
  return "clang " __clang_version__;
#elif defined(__GNUC__)
  return "gcc " __VERSION__;
#else
  return "unknown compiler";
#endif
}

std::string or_unknown(const char* s) { return (s && *s) ? s : "unknown"; }

}  // namespace

bool DeviceInfo::matches(const DeviceInfo& tuned) const {
  return backend == tuned.backend && arch == tuned.arch && name == tuned.name &&
         compute_units == tuned.compute_units;
}

std::string DeviceInfo::to_string() const {
  return "backend=" + backend + " arch=" + arch + " name=\"" + name +
         "\" compute_units=" + std::to_string(compute_units) + " driver=" + driver_version +
         " runtime=\"" + runtime_version + "\"";
}

DeviceInfo host_device_info() {
  DeviceInfo d;
  d.backend = "host";
  struct utsname u {};
  const bool have_uname = uname(&u) == 0;
  d.arch = have_uname ? or_unknown(u.machine) : "unknown";
  d.driver_version = have_uname ? or_unknown(u.release) : "unknown";
  d.name = cpu_model_name();
  d.compute_units = online_threads();
  d.runtime_version = compiler_id();
  return d;
}

}  // namespace mlatune
