#include "tuner/device_case.h"

namespace mlatune {
namespace {
template <typename T>
DeviceBuffer upload(MemorySpace& m, const std::vector<T>& host) {
  DeviceBuffer b(m, host.size() * sizeof(T));
  m.copy_to_device(b.data(), host.data(), b.size());
  return b;
}
}  // namespace

DeviceCase::DeviceCase(MemorySpace& m, const ValidationCase& c)
    : memory(&m),
      q(upload(m, c.q)),
      kv(upload(m, c.kv)),
      block_table(upload(m, c.block_table)),
      kv_lens(upload(m, c.kv_lens)) {}

DecodeArgs DeviceCase::args() const {
  DecodeArgs a;
  a.q = q.data();
  a.kv = kv.data();
  a.block_table = static_cast<const int32_t*>(block_table.data());
  a.kv_lens = static_cast<const int32_t*>(kv_lens.data());
  return a;
}

}  // namespace mlatune
