/* The public header used from plain C11, as a serving stack written in C would: proves that
 * mlatune.h is valid C and that the library links and behaves without any C++ on the caller's
 * side. Usage: c_api_test DB (the database written by mlatune_make_test_db). Exits non-zero if
 * any check fails, printing each failure. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mlatune/mlatune.h"

static int failures = 0;

#define CHECK(cond)                                                                            \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      fprintf(stderr, "%s:%d: CHECK failed: %s (last error: %s)\n", __FILE__, __LINE__, #cond, \
              mlatune_last_error());                                                           \
      ++failures;                                                                              \
    }                                                                                          \
  } while (0)

static mlatune_decode_key make_key(int32_t batch, int32_t max_kv_len) {
  mlatune_decode_key k;
  k.heads = 16;
  k.qlen = 1;
  k.q_dtype = MLATUNE_DTYPE_BF16;
  k.kv_dtype = MLATUNE_DTYPE_BF16;
  k.page_size = 64;
  k.lse = 0;
  k.batch = batch;
  k.max_kv_len = max_kv_len;
  return k;
}

static void check_static_functions(void) {
  int major = -1, minor = -1, patch = -1;
  const char* v = mlatune_version();
  CHECK(v != NULL && sscanf(v, "%d.%d.%d", &major, &minor, &patch) == 3);
  CHECK(major >= 0 && minor >= 0 && patch >= 0);

  CHECK(strcmp(mlatune_status_string(MLATUNE_STATUS_OK), "ok") == 0);
  CHECK(strcmp(mlatune_status_string(MLATUNE_STATUS_UNTUNED), "untuned") == 0);
  CHECK(strcmp(mlatune_status_string(MLATUNE_STATUS_STALE), "stale") == 0);
  CHECK(strcmp(mlatune_status_string((mlatune_status)42), "unknown status") == 0);
  {
    int s;
    for (s = MLATUNE_STATUS_OK; s <= MLATUNE_STATUS_LAUNCH_FAILED; ++s) {
      const char* name = mlatune_status_string((mlatune_status)s);
      CHECK(name != NULL && name[0] != '\0' && strcmp(name, "unknown status") != 0);
    }
  }
}

static void check_refusals_without_a_database(void) {
  mlatune_db* db = (mlatune_db*)&failures; /* must be reset to NULL */
  mlatune_selection sel;
  mlatune_decode_key key = make_key(1, 1);
  int64_t a, b, c;

  CHECK(mlatune_open("/nonexistent/dir/mlatune.db", NULL, &db) == MLATUNE_STATUS_IO_ERROR);
  CHECK(db == NULL);
  CHECK(strstr(mlatune_last_error(), "/nonexistent/dir/mlatune.db") != NULL);

  CHECK(mlatune_open(NULL, NULL, &db) == MLATUNE_STATUS_INVALID_ARGUMENT);
  CHECK(mlatune_last_error()[0] != '\0');
  CHECK(mlatune_open("x.db", NULL, NULL) == MLATUNE_STATUS_INVALID_ARGUMENT);
  CHECK(mlatune_lookup(NULL, &key, &sel) == MLATUNE_STATUS_INVALID_ARGUMENT);
  CHECK(mlatune_table_stats(NULL, &a, &b, &c) == MLATUNE_STATUS_INVALID_ARGUMENT);
  CHECK(mlatune_db_info(NULL) != NULL);
  mlatune_close(NULL);
}

static void check_database(const char* path) {
  mlatune_db* db = NULL;
  mlatune_open_options options;
  mlatune_selection sel;
  mlatune_decode_key key;
  int64_t usable = -1, stale = -1, no_valid = -1;

  options.expected_device = "current";
  options.allow_foreign_device = 0;
  CHECK(mlatune_open(path, &options, &db) == MLATUNE_STATUS_OK);
  if (db == NULL) return;
  CHECK(mlatune_table_stats(db, &usable, &stale, &no_valid) == MLATUNE_STATUS_OK);
  CHECK(usable == 2 && stale == 0 && no_valid == 1);
  CHECK(strstr(mlatune_db_info(db), path) != NULL);

  key = make_key(8, 4096); /* corner of the first bucket */
  CHECK(mlatune_lookup(db, &key, &sel) == MLATUNE_STATUS_OK);
  CHECK(strcmp(sel.variant, "host_split_kv_v1") == 0);
  CHECK(sel.batch_lo == 1 && sel.batch_hi == 8 && sel.kv_lo == 1 && sel.kv_hi == 4096);
  CHECK(sel.kv_splits >= 1 && sel.time_median_us == 12.5);

  key = make_key(9, 1);
  CHECK(mlatune_lookup(db, &key, &sel) == MLATUNE_STATUS_OK);
  CHECK(strcmp(sel.variant, "host_online_softmax_v1") == 0);
  CHECK(sel.batch_lo == 9 && sel.batch_hi == 64);

  key = make_key(65, 100);
  CHECK(mlatune_lookup(db, &key, &sel) == MLATUNE_STATUS_UNTUNED);
  CHECK(sel.variant[0] == '\0');
  CHECK(strstr(mlatune_last_error(), "batch=65") != NULL);
  CHECK(strstr(mlatune_last_error(), "nearest") != NULL);

  key = make_key(3, 5000);
  CHECK(mlatune_lookup(db, &key, &sel) == MLATUNE_STATUS_NO_VALID_KERNEL);

  key = make_key(3, 100);
  key.q_dtype = 7;
  CHECK(mlatune_lookup(db, &key, &sel) == MLATUNE_STATUS_INVALID_ARGUMENT);
  CHECK(strstr(mlatune_last_error(), "q_dtype") != NULL);
  CHECK(mlatune_lookup(db, NULL, &sel) == MLATUNE_STATUS_INVALID_ARGUMENT);
  CHECK(mlatune_lookup(db, &key, NULL) == MLATUNE_STATUS_INVALID_ARGUMENT);

  options.expected_device = "some-other-gpu";
  {
    mlatune_db* other = NULL;
    CHECK(mlatune_open(path, &options, &other) == MLATUNE_STATUS_INVALID_ARGUMENT);
    CHECK(other == NULL);
  }
  mlatune_close(db);
}

/* bf16 <-> float by bit patterns (round to nearest even), as a C serving stack would. */
static uint16_t to_bf16(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return (uint16_t)((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}
static float from_bf16(uint16_t b) {
  const uint32_t bits = (uint32_t)b << 16;
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

/* Plans and runs a batch-2 call (lengths 100 and 37, pages reversed in the pool) through the host
 * winner and compares every output with a double-precision softmax(q.k) . v. */
static void check_plan_and_run(const char* path) {
  enum { kBatch = 2, kHeads = 16, kPage = 64, kPagesPerSeq = 2, kPool = 4 };
  static uint16_t q[kBatch * kHeads * 576], kv[kPool * kPage * 576], out[kBatch * kHeads * 512];
  const int32_t lens[kBatch] = {100, 37};
  const int32_t table[kBatch * kPagesPerSeq] = {3, 2, 1, 0};
  mlatune_db* db = NULL;
  mlatune_plan* plan = NULL;
  mlatune_decode_problem problem;
  mlatune_decode_buffers buffers;
  mlatune_selection sel;
  size_t workspace_bytes = 0, i;
  void* workspace = NULL;
  double worst = 0;
  int b, h, d;
  unsigned seed = 12345;

  for (i = 0; i < sizeof q / sizeof q[0]; ++i) {
    seed = seed * 1103515245u + 12345u;
    q[i] = to_bf16((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f);
  }
  for (i = 0; i < sizeof kv / sizeof kv[0]; ++i) {
    seed = seed * 1103515245u + 12345u;
    kv[i] = to_bf16((float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f);
  }
  memset(&problem, 0, sizeof problem);
  problem.key = make_key(kBatch, 100);
  problem.q_scale = problem.kv_scale = 1.0f;
  problem.sm_scale = 1.0f / 24.0f; /* 1 / sqrt(576) */
  problem.max_pages_per_seq = kPagesPerSeq;
  problem.num_pages = kPool;

  CHECK(mlatune_open(path, NULL, &db) == MLATUNE_STATUS_OK);
  if (!db) return;
  CHECK(mlatune_plan_create(db, 8, &plan) == MLATUNE_STATUS_OK);
  CHECK(mlatune_plan_decode(db, &problem, lens, plan) == MLATUNE_STATUS_OK);
  CHECK(mlatune_plan_selection(plan, &sel) == MLATUNE_STATUS_OK);
  CHECK(strcmp(sel.variant, "host_split_kv_v1") == 0);
  CHECK(mlatune_plan_workspace_size(plan, &workspace_bytes) == MLATUNE_STATUS_OK);
  workspace = workspace_bytes ? malloc(workspace_bytes) : NULL;
  memset(&buffers, 0, sizeof buffers);
  buffers.q = q;
  buffers.kv = kv;
  buffers.block_table = table;
  buffers.kv_lens = lens;
  buffers.out = out;
  buffers.workspace = workspace;
  buffers.workspace_bytes = workspace_bytes;
  CHECK(mlatune_run(db, plan, &buffers, NULL) == MLATUNE_STATUS_OK);

  for (b = 0; b < kBatch; ++b) {
    for (h = 0; h < kHeads; ++h) {
      double scores[100], max = -1e300, sum = 0, acc[512];
      const uint16_t* qr = q + ((size_t)b * kHeads + (size_t)h) * 576;
      int j;
      for (j = 0; j < lens[b]; ++j) {
        const uint16_t* k = kv + ((size_t)table[b * kPagesPerSeq + j / kPage] * kPage +
                                  (size_t)(j % kPage)) * 576;
        double dot = 0;
        for (d = 0; d < 576; ++d) dot += (double)from_bf16(qr[d]) * from_bf16(k[d]);
        scores[j] = dot / 24.0;
        if (scores[j] > max) max = scores[j];
      }
      for (d = 0; d < 512; ++d) acc[d] = 0;
      for (j = 0; j < lens[b]; ++j) {
        const uint16_t* v = kv + ((size_t)table[b * kPagesPerSeq + j / kPage] * kPage +
                                  (size_t)(j % kPage)) * 576;
        const double p = exp(scores[j] - max);
        sum += p;
        for (d = 0; d < 512; ++d) acc[d] += p * from_bf16(v[d]);
      }
      for (d = 0; d < 512; ++d) {
        const double got = from_bf16(out[((size_t)b * kHeads + (size_t)h) * 512 + (size_t)d]);
        const double err = fabs(got - acc[d] / sum);
        if (!(err <= worst)) worst = err; /* a NaN output makes worst NaN: the check fails */
      }
    }
  }
  CHECK(worst < 4e-3);

  /* A call outside the table is refused at plan time, and the refused plan does not run. */
  problem.key.heads = 32;
  CHECK(mlatune_plan_decode(db, &problem, lens, plan) == MLATUNE_STATUS_UNTUNED);
  CHECK(strstr(mlatune_last_error(), "nearest") != NULL);
  CHECK(mlatune_run(db, plan, &buffers, NULL) == MLATUNE_STATUS_BAD_PLAN);
  CHECK(mlatune_run(db, NULL, &buffers, NULL) == MLATUNE_STATUS_BAD_PLAN);
  CHECK(strcmp(mlatune_status_string(MLATUNE_STATUS_BAD_PLAN), "bad plan") == 0);

  free(workspace);
  mlatune_plan_destroy(plan);
  mlatune_close(db);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DB\n", argv[0]);
    return 2;
  }
  check_static_functions();
  check_refusals_without_a_database();
  check_database(argv[1]);
  check_plan_and_run(argv[1]);
  if (failures != 0) {
    fprintf(stderr, "c_api_test: %d check(s) failed\n", failures);
    return EXIT_FAILURE;
  }
  printf("c_api_test: all checks passed\n");
  return EXIT_SUCCESS;
}
