// Asks an mlatune dispatch database, through the C++ wrapper, which validated kernel serves one
// decode call. Usage: cpp_consumer DB [HEADS QLEN Q_DTYPE KV_DTYPE PAGE_SIZE LSE BATCH MAX_KV]
// Exit codes: 0 a selection, 2 bad usage, 4 the database is refused (as `mlatune lookup`),
// 5 the lookup is refused: untuned, stale, no valid kernel, or an invalid shape.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "mlatune/mlatune.hpp"

namespace {

// -1 (refused by the lookup as an invalid argument) for a name mlatune does not know.
int32_t dtype_code(const char* name) {
  if (std::strcmp(name, "bf16") == 0) return MLATUNE_DTYPE_BF16;
  if (std::strcmp(name, "fp8_e4m3fn") == 0) return MLATUNE_DTYPE_FP8_E4M3FN;
  if (std::strcmp(name, "fp8_e4m3fnuz") == 0) return MLATUNE_DTYPE_FP8_E4M3FNUZ;
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 10) {
    std::fprintf(stderr, "usage: %s DB [HEADS QLEN Q_DTYPE KV_DTYPE PAGE_SIZE LSE BATCH MAX_KV]\n",
                 argv[0]);
    return 2;
  }
  // Without a shape: a decode step of DeepSeek-V3 at TP8 (16 query heads, one token per sequence),
  // bf16 q and KV cache in 16-row pages, no LSE, 2 sequences of at most 100 KV rows.
  mlatune_decode_key key{16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 16, 0, 2, 100};
  if (argc == 10) {  // out-of-range numbers are the library's to refuse
    key = {std::atoi(argv[2]), std::atoi(argv[3]), dtype_code(argv[4]), dtype_code(argv[5]),
           std::atoi(argv[6]), std::atoi(argv[7]), std::atoi(argv[8]),  std::atoi(argv[9])};
  }

  // open() checks integrity, schema and device once; every refusal throws with status and reason.
  mlatune::client::Database db{nullptr};
  try {
    db = mlatune::client::Database::open(argv[1]);
  } catch (const mlatune::client::Error& e) {
    std::fprintf(stderr, "cannot open %s: %s\n", argv[1], e.what());
    return 4;
  }

  // lookup() is the per-call path: no exception, no allocation; a miss is a status, never a guess.
  mlatune_selection s;
  const mlatune_status status = db.lookup(key, &s);
  if (status != MLATUNE_STATUS_OK) {
    std::fprintf(stderr, "lookup refused (%s): %s\n", mlatune_status_string(status),
                 mlatune_last_error());
    return 5;
  }
  std::printf(
      "selected %s (kv_splits=%d kv_tile=%d block_rows=%d workers=%d) from bucket "
      "batch %d-%d, kv %d-%d; median %.2f us on the tuning device\n",
      s.variant, s.kv_splits, s.kv_tile, s.block_rows, s.workers, s.batch_lo, s.batch_hi, s.kv_lo,
      s.kv_hi, s.time_median_us);
  return 0;
}
