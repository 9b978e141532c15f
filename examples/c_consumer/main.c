/* Asks an mlatune dispatch database, through the C ABI, which validated kernel serves one decode
 * call. Usage: c_consumer DB [HEADS QLEN Q_DTYPE KV_DTYPE PAGE_SIZE LSE BATCH MAX_KV]
 * Exit codes: 0 a selection, 2 bad usage (an unknown dtype, a number that is not decimal or does
 * not fit int32, LSE not 0 or 1), 4 the database is refused (as `mlatune lookup`),
 * 5 the lookup is refused: untuned, stale, no valid kernel, or an invalid shape.
 * Build: cc -std=c11 main.c $(pkg-config --cflags --libs mlatune) */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlatune/mlatune.h"

/* Sets *code to the code of dtype `name`; 0 for a name mlatune does not know. */
static int parse_dtype(const char* name, int32_t* code) {
  static const struct {
    const char* name;
    int32_t code;
  } dtypes[] = {{"bf16", MLATUNE_DTYPE_BF16},
                {"fp8_e4m3fn", MLATUNE_DTYPE_FP8_E4M3FN},
                {"fp8_e4m3fnuz", MLATUNE_DTYPE_FP8_E4M3FNUZ}};
  for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; ++i) {
    if (strcmp(name, dtypes[i].name) == 0) {
      *code = dtypes[i].code;
      return 1;
    }
  }
  return 0;
}

/* Sets *value to the decimal number `text`; 0 unless it is all decimal digits (an optional '-'
 * first) and fits an int32_t. atoi would read "12x" as 12 and overflow silently. */
static int parse_int32(const char* text, int32_t* value) {
  if (text[0] == '\0' || !(isdigit((unsigned char)text[0]) || text[0] == '-')) return 0;
  char* end = NULL;
  errno = 0;
  const long v = strtol(text, &end, 10);
  if (errno != 0 || *end != '\0' || end == text || v < INT32_MIN || v > INT32_MAX) return 0;
  *value = (int32_t)v;
  return 1;
}

/* Reads the shape arguments argv[2..9] into *key; on a bad one, says which and returns 0. A
 * well-formed but invalid shape (say heads 0) is the library's to refuse. */
static int parse_key(char** argv, mlatune_decode_key* key) {
  static const char* const names[] = {"HEADS",     "QLEN", "Q_DTYPE", "KV_DTYPE",
                                      "PAGE_SIZE", "LSE",  "BATCH",   "MAX_KV"};
  int32_t* const fields[] = {&key->heads,     &key->qlen, &key->q_dtype, &key->kv_dtype,
                             &key->page_size, &key->lse,  &key->batch,   &key->max_kv_len};
  for (int i = 0; i < 8; ++i) {
    const char* arg = argv[i + 2];
    const int is_dtype = fields[i] == &key->q_dtype || fields[i] == &key->kv_dtype;
    const int is_lse = fields[i] == &key->lse;
    const int ok = is_dtype ? parse_dtype(arg, fields[i]) : parse_int32(arg, fields[i]);
    if (!ok || (is_lse && *fields[i] != 0 && *fields[i] != 1)) {
      fprintf(stderr, "bad %s '%s': expected %s\n", names[i], arg,
              is_dtype ? "bf16, fp8_e4m3fn or fp8_e4m3fnuz"
                       : (is_lse ? "0 or 1" : "a decimal integer that fits int32"));
      return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 2 && argc != 10) {
    fprintf(stderr, "usage: %s DB [HEADS QLEN Q_DTYPE KV_DTYPE PAGE_SIZE LSE BATCH MAX_KV]\n",
            argv[0]);
    return 2;
  }
  /* Without a shape: a decode step of DeepSeek-V3 at TP8 (16 query heads, one token per sequence),
   * bf16 q and KV cache in 16-row pages, no LSE, 2 sequences of at most 100 KV rows. */
  mlatune_decode_key key = {16, 1, MLATUNE_DTYPE_BF16, MLATUNE_DTYPE_BF16, 16, 0, 2, 100};
  if (argc == 10 && !parse_key(argv, &key)) return 2;

  /* NULL options: the winners must have been tuned on this process's device. */
  mlatune_db* db = NULL;
  mlatune_status status = mlatune_open(argv[1], NULL, &db);
  if (status != MLATUNE_STATUS_OK) {
    fprintf(stderr, "cannot open %s: %s: %s\n", argv[1], mlatune_status_string(status),
            mlatune_last_error());
    return 4;
  }

  /* The per-call path: lock-free and allocation-free; a miss is a status, never a guess. */
  mlatune_selection s;
  status = mlatune_lookup(db, &key, &s);
  int exit_code = 0;
  if (status == MLATUNE_STATUS_OK) {
    printf(
        "selected %s (kv_splits=%d kv_tile=%d block_rows=%d workers=%d) from bucket "
        "batch %d-%d, kv %d-%d; median %.2f us on the tuning device\n",
        s.variant, s.kv_splits, s.kv_tile, s.block_rows, s.workers, s.batch_lo, s.batch_hi, s.kv_lo,
        s.kv_hi, s.time_median_us);
  } else {
    fprintf(stderr, "lookup refused (%s): %s\n", mlatune_status_string(status),
            mlatune_last_error());
    exit_code = 5;
  }
  mlatune_close(db);
  return exit_code;
}
