// libFuzzer target: the dispatch snapshot's decoder (db/snapshot.h) on arbitrary bytes. The input's
// last 32 bytes are first replaced by the SHA-256 of the rest - what anyone with this code can do -
// so that mutations get past the seal into the field checks. A blob must be refused with
// SnapshotError or accepted; whatever is accepted must encode again (the encoder takes everything
// the decoder takes) into a blob that decodes to the same snapshot.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

#include "common/sha256.h"
#include "db/snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string blob(reinterpret_cast<const char*>(data), size);
  if (blob.size() >= 32) {
    mlatune::Sha256 sha;
    sha.update(blob.data(), blob.size() - 32);
    const std::array<uint8_t, 32> t = sha.finish();
    std::memcpy(blob.data() + blob.size() - 32, t.data(), t.size());
  }
  auto bytes = [](const std::string& s) {
    return std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  mlatune::DispatchSnapshot s;
  try {
    s = mlatune::decode_snapshot(bytes(blob));
  } catch (const mlatune::SnapshotError&) {
    return 0;  // refused
  }
  const std::string again = mlatune::encode_snapshot(s);  // must not throw
  if (!mlatune::decode_snapshot(bytes(again)).same_as(s)) std::abort();
  return 0;
}
