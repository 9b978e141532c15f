/* Asks an mlatune dispatch database, through the C ABI, which validated kernel serves one decode
 * call. Usage: c_consumer DB [HEADS QLEN Q_DTYPE KV_DTYPE PAGE_SIZE LSE BATCH MAX_KV]
 * Exit codes: 0 a selection, 2 bad usage, 4 the database is refused (as `mlatune lookup`),
 * 5 the lookup is refused: untuned, stale, no valid kernel, or an invalid shape.
 * Build: cc -std=c11 main.c $(pkg-config --cflags --libs mlatune) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlatune/mlatune.h"

/* -1 (refused by the lookup as an invalid argument) for a name mlatune does not know. */
static int32_t dtype_code(const char* name) {
  if (strcmp(name, "bf16") == 0) return MLATUNE_DTYPE_BF16;
  if (strcmp(name, "fp8_e4m3fn") == 0) return MLATUNE_DTYPE_FP8_E4M3FN;
  if (strcmp(name, "fp8_e4m3fnuz") == 0) return MLATUNE_DTYPE_FP8_E4M3FNUZ;
  return -1;
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
  if (argc == 10) { /* out-of-range numbers are the library's to refuse */
    key.heads = atoi(argv[2]);
    key.qlen = atoi(argv[3]);
    key.q_dtype = dtype_code(argv[4]);
    key.kv_dtype = dtype_code(argv[5]);
    key.page_size = atoi(argv[6]);
    key.lse = atoi(argv[7]);
    key.batch = atoi(argv[8]);
    key.max_kv_len = atoi(argv[9]);
  }

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
