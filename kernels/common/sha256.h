// SHA-256 (FIPS 180-4), used for config hashes and the database's winners digest.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace mlatune {

// Compresses with the x86 SHA extensions (SHA-NI) where the CPU has them, else in portable C++;
// both give the same bytes (tests/kernels/sha256_test.cc checks one against the other).
class Sha256 {
 public:
  Sha256() : Sha256(false) {}
  explicit Sha256(bool portable_only);  // true: never the CPU extensions (for tests)
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::array<uint8_t, 32> finish();  // the object must not be used afterwards
  std::string finish_hex();          // 64 lowercase hex digits

 private:
  void compress(const uint8_t* blocks, size_t count);
  std::array<uint32_t, 8> state_;
  bool use_cpu_extensions_;
  std::array<uint8_t, 64> buffer_{};
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string sha256_hex(std::string_view data);

// Whether this CPU has the SHA extensions the default Sha256 uses.
bool sha256_cpu_extensions_available();

}  // namespace mlatune
