// libFuzzer target: the runtime's database open and lookup (runtime/winner_table.h) on arbitrary
// bytes as the file. Open must refuse what it cannot trust with a RuntimeError carrying its status
// (never crash, never accept a damaged file); whatever it accepts must answer lookups. The
// expected device is the one recorded in the test database the seed corpus starts from, so that
// mutations get past the provenance check into the winners.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "runtime/winner_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/mlatune-fuzz-db-" + std::to_string(getpid()) + ".db";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return 0;
  if (size > 0) std::fwrite(data, 1, size, f);
  std::fclose(f);
  mlatune::OpenOptions options;
  options.allow_foreign_device = true;  // reach the schema, digest and winner checks
  try {
    auto table = mlatune::WinnerTable::open(path, options);
    mlatune_decode_key key{4, 2, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 16, 1, 2, 60};
    mlatune_selection sel;
    (void)table->lookup(key, &sel);
    char why[256];
    table->explain(key, why, sizeof why);
  } catch (const mlatune::RuntimeError&) {
    // refused with a status
  }
  std::remove(path.c_str());
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  return 0;
}
