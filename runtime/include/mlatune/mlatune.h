/* mlatune runtime: strict lookup of validated MLA decode kernels from a dispatch database.
 *
 * Conventions (the contract of every function below):
 *  - Ownership: mlatune_open() returns a handle the caller owns and releases with mlatune_close().
 *    Structs passed in are read during the call only; structs passed out are written by the call
 *    and owned by the caller. Returned `const char*` strings are static or owned by the handle and
 *    live as long as it does (mlatune_last_error(): until the calling thread's next failing call).
 *  - Nullability: every pointer argument is required unless its comment says "may be NULL"; a NULL
 *    required pointer returns MLATUNE_STATUS_INVALID_ARGUMENT.
 *  - Threads: an open handle is immutable. mlatune_lookup() may be called from any number of
 *    threads at once without locking; it allocates nothing and never touches the file. Opening and
 *    closing are not synchronised with lookups on the same handle: do not close a handle while
 *    another thread still uses it.
 *  - Errors: every function returns an mlatune_status. On failure a human-readable message naming
 *    what and where is kept per thread and returned by mlatune_last_error(). No C++ exception, no
 *    abort() and no exit() crosses this interface.
 *  - Strictness: a shape that the database does not cover is refused (MLATUNE_STATUS_UNTUNED); the
 *    runtime never falls back to a default kernel.
 */
#ifndef MLATUNE_MLATUNE_H_
#define MLATUNE_MLATUNE_H_

#include <stddef.h>
#include <stdint.h>

#if defined(MLATUNE_BUILDING_RUNTIME)
#define MLATUNE_API __attribute__((visibility("default")))
#else
#define MLATUNE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mlatune_status {
  MLATUNE_STATUS_OK = 0,               /* success */
  MLATUNE_STATUS_INVALID_ARGUMENT = 1, /* NULL, out-of-range or inconsistent argument */
  MLATUNE_STATUS_IO_ERROR = 2,         /* the file is missing or cannot be read */
  MLATUNE_STATUS_CORRUPT = 3,          /* not an mlatune database, damaged, or fails integrity */
  MLATUNE_STATUS_SCHEMA_MISMATCH = 4,  /* schema version from the past or the future */
  MLATUNE_STATUS_FOREIGN_DEVICE = 5,   /* tuned on another backend, arch, device or CU count */
  MLATUNE_STATUS_UNTUNED = 6,          /* no bucket covers the shape; message names nearest keys */
  MLATUNE_STATUS_STALE = 7,            /* the winner's variant code differs from this build's */
  MLATUNE_STATUS_NO_VALID_KERNEL = 8,  /* bucket tuned, but no candidate passed validation */
  MLATUNE_STATUS_OUT_OF_MEMORY = 9,    /* an allocation failed during open */
  MLATUNE_STATUS_INTERNAL = 10         /* a bug in mlatune; the message says where */
} mlatune_status;

/* dtype codes (as mlatune_variant_abi.h). */
#define MLATUNE_DTYPE_BF16 0
#define MLATUNE_DTYPE_FP8_E4M3FN 1
#define MLATUNE_DTYPE_FP8_E4M3FNUZ 2

typedef struct mlatune_db mlatune_db; /* opaque, immutable once open */

typedef struct mlatune_open_options {
  /* Device the winners must have been tuned on. NULL or "current": this process's device (the
   * host CPU in this build). Any other value is refused with MLATUNE_STATUS_INVALID_ARGUMENT for
   * now; naming another device is reserved for a later release. */
  const char* expected_device; /* may be NULL */
  /* Non-zero: accept a database tuned on another device (logged in the handle's info string).
   * Stale winners are refused regardless. */
  int32_t allow_foreign_device;
} mlatune_open_options;

/* A concrete decode call, as a serving stack sees it. */
typedef struct mlatune_decode_key {
  int32_t heads;      /* query heads per KV head */
  int32_t qlen;       /* query tokens per sequence (1..16) */
  int32_t q_dtype;    /* MLATUNE_DTYPE_* */
  int32_t kv_dtype;   /* MLATUNE_DTYPE_* */
  int32_t page_size;  /* KV rows per page */
  int32_t lse;        /* 1 if the LSE is returned, else 0 */
  int32_t batch;      /* sequences in the call */
  int32_t max_kv_len; /* longest sequence's KV length (>= qlen) */
} mlatune_decode_key;

#define MLATUNE_VARIANT_NAME_MAX 64

/* The validated winner for a key. */
typedef struct mlatune_selection {
  char variant[MLATUNE_VARIANT_NAME_MAX]; /* NUL-terminated stable variant name */
  int32_t kv_splits;                      /* launch parameters validated with it */
  int32_t kv_tile;
  int32_t block_rows;
  int32_t workers;
  int32_t batch_lo, batch_hi; /* the bucket that matched (inclusive) */
  int32_t kv_lo, kv_hi;
  double time_median_us; /* measured median of the winner on the tuning device */
} mlatune_selection;

/* Opens `path` read-only and loads its winners. Checks the schema version, the file's integrity
 * (SQLite quick_check and the winners digest), the provenance against the expected device, and
 * marks winners whose variant code identity differs from this build as stale. `options` may be
 * NULL (defaults: current device, strict). On failure *out is set to NULL. */
MLATUNE_API mlatune_status mlatune_open(const char* path, const mlatune_open_options* options,
                                        mlatune_db** out);

/* Releases a handle; NULL is a no-op. */
MLATUNE_API void mlatune_close(mlatune_db* db);

/* Finds the validated winner for `key`. Lock-free, allocation-free, thread-safe. On any status
 * other than MLATUNE_STATUS_OK, *out (when not NULL) is zero-filled, so that a refused lookup never
 * leaves a launchable-looking selection behind; the reason is in mlatune_last_error(). */
MLATUNE_API mlatune_status mlatune_lookup(const mlatune_db* db, const mlatune_decode_key* key,
                                          mlatune_selection* out);

/* Counts of the loaded table: usable winners, stale winners, buckets without a valid kernel. */
MLATUNE_API mlatune_status mlatune_table_stats(const mlatune_db* db, int64_t* usable,
                                               int64_t* stale, int64_t* no_valid);

/* Description of the database's provenance (device, build, config); owned by the handle. Returns
 * "" (and sets the last error) when db is NULL. */
MLATUNE_API const char* mlatune_db_info(const mlatune_db* db);

/* Static name of a status, e.g. "untuned"; "unknown status" for values not listed above. */
MLATUNE_API const char* mlatune_status_string(mlatune_status status);

/* The message of the calling thread's most recent failed call ("" if none yet). Successful calls
 * leave it unchanged, so that hits on the lookup path never touch it. */
MLATUNE_API const char* mlatune_last_error(void);

/* "major.minor.patch" of the runtime library. */
MLATUNE_API const char* mlatune_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MLATUNE_MLATUNE_H_ */
