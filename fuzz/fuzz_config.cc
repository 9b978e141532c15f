// libFuzzer target: the YAML config loader (tuner/config.h) on arbitrary text. A malformed config
// must be refused with ConfigError (naming file:line:column, key and value); any other exception,
// a crash, a hang or a sanitizer report is a finding. An accepted config's buckets are expanded,
// as the tuner would.
#include <cstddef>
#include <cstdint>
#include <string>

#include "tuner/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const mlatune::TuneConfig config = mlatune::parse_config(text, "fuzz.yaml");
    (void)config.buckets();
  } catch (const mlatune::ConfigError&) {
    // refused, as a malformed config must be
  }
  return 0;
}
