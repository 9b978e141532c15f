// Asks an mlatune dispatch database, through the C++ wrapper, which validated kernel serves one
// decode call. Usage: cpp_consumer DB [HEADS QLEN Q_DTYPE KV_DTYPE PAGE_SIZE LSE BATCH MAX_KV]
// Exit codes: 0 a selection, 2 bad usage (an unknown dtype, a number that is not decimal or does
// not fit int32, LSE not 0 or 1), 4 the database is refused (as `mlatune lookup`),
// 5 the lookup is refused: untuned, stale, no valid kernel, or an invalid shape.
#include <charconv>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string_view>

#include "mlatune/mlatune.hpp"

namespace {

// The code of dtype `name`; nullopt for a name mlatune does not know.
std::optional<int32_t> parse_dtype(std::string_view name) {
  if (name == "bf16") return MLATUNE_DTYPE_BF16;
  if (name == "fp8_e4m3fn") return MLATUNE_DTYPE_FP8_E4M3FN;
  if (name == "fp8_e4m3fnuz") return MLATUNE_DTYPE_FP8_E4M3FNUZ;
  return std::nullopt;
}

// The decimal number `text` (an optional '-', then digits only) if it fits an int32_t; atoi would
// read "12x" as 12 and overflow silently.
std::optional<int32_t> parse_int32(std::string_view text) {
  int32_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

// Reads the shape arguments argv[2..9] into `key`; on a bad one, says which and returns false. A
// well-formed but invalid shape (say heads 0) is the library's to refuse.
bool parse_key(char** argv, mlatune_decode_key& key) {
  struct Field {
    const char* name;
    int32_t* value;
    bool is_dtype;
  };
  const Field fields[] = {{"HEADS", &key.heads, false},         {"QLEN", &key.qlen, false},
                          {"Q_DTYPE", &key.q_dtype, true},      {"KV_DTYPE", &key.kv_dtype, true},
                          {"PAGE_SIZE", &key.page_size, false}, {"LSE", &key.lse, false},
                          {"BATCH", &key.batch, false},         {"MAX_KV", &key.max_kv_len, false}};
  for (int i = 0; i < 8; ++i) {
    const Field& f = fields[i];
    const char* arg = argv[i + 2];
    const bool is_lse = f.value == &key.lse;
    const std::optional<int32_t> v = f.is_dtype ? parse_dtype(arg) : parse_int32(arg);
    if (!v || (is_lse && *v != 0 && *v != 1)) {
      std::fprintf(stderr, "bad %s '%s': expected %s\n", f.name, arg,
                   f.is_dtype ? "bf16, fp8_e4m3fn or fp8_e4m3fnuz"
                              : (is_lse ? "0 or 1" : "a decimal integer that fits int32"));
      return false;
    }
    *f.value = *v;
  }
  return true;
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
  if (argc == 10 && !parse_key(argv, key)) return 2;

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
