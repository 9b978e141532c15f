/* mlatune runtime: strict lookup of validated MLA decode kernels from a dispatch database.
 *
 * Conventions (the contract of every function below):
 *  - Ownership: mlatune_open() and mlatune_live_acquire() return a reference to a database handle
 *    that the caller releases with mlatune_close(); the handle is freed with its last reference.
 *    mlatune_plan_create() and mlatune_live_open() return objects the caller owns and frees with
 *    mlatune_plan_destroy() and mlatune_live_close(). Structs passed in are read during the call
 *    only; structs passed out are written by the call and owned by the caller. Returned
 *    `const char*` strings are static or owned by the handle and live as long as it does
 *    (mlatune_last_error(): until the calling thread's next failing call).
 *  - Nullability: every pointer argument is required unless its comment says "may be NULL"; a NULL
 *    required pointer returns MLATUNE_STATUS_INVALID_ARGUMENT.
 *  - Threads: an open handle is immutable. mlatune_lookup() and mlatune_plan_decode() (on distinct
 * plan objects) may be called from any number of threads at once without locking; lookup allocates
 *    nothing and neither touches the file. A thread must hold a reference to every handle it uses:
 *    releasing the last reference while another thread still uses the handle is undefined. A plan
 *    object is used by one thread at a time. mlatune_live_* functions are thread-safe.
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
  MLATUNE_STATUS_INTERNAL = 10,        /* a bug in mlatune; the message says where */
  MLATUNE_STATUS_BAD_PLAN = 11,        /* run with a missing, foreign, stale or failed plan */
  MLATUNE_STATUS_LAUNCH_FAILED = 12    /* the kernel launch failed; the message has the error */
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
 * marks winners whose variant code identity differs from this build as stale. A database as a
 * finished tune leaves it is loaded from its dispatch snapshot (one sealed row, checked by its own
 * SHA-256 and bound to the digest and to the file's state); any other is loaded from its rows,
 * with the same result. mlatune_db_info() says which. `options` may be NULL (defaults: current
 * device, strict). On failure *out is set to NULL. */
MLATUNE_API mlatune_status mlatune_open(const char* path, const mlatune_open_options* options,
                                        mlatune_db** out);

/* Releases the caller's reference to a handle (from mlatune_open or mlatune_live_acquire); the
 * last one frees it. NULL is a no-op (MLATUNE_STATUS_OK). Every function taking an mlatune_db*
 * refuses with MLATUNE_STATUS_INVALID_ARGUMENT, naming which, a pointer to something else (a plan)
 * or to a handle whose last reference was released within the last 256 closes in this process
 * (a double close, a lookup after close); older closed handles are freed memory, as in C. */
MLATUNE_API mlatune_status mlatune_close(mlatune_db* db);

/* Takes another reference to an open handle, released with its own mlatune_close(). */
MLATUNE_API mlatune_status mlatune_db_retain(mlatune_db* db);

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

/* ---- Plan and run: launching the validated winner ----------------------------------------------
 * mlatune_plan_decode() does everything that needs the host: the lookup, the checks of the call
 * against the winner, the host-side work partition of variants that have one (a persistent kernel's
 * work list) and the workspace size. mlatune_run() only launches what the plan says on the caller's
 * buffers; it never looks up, re-plans or picks another kernel, and refuses
 * (MLATUNE_STATUS_BAD_PLAN) a plan that is missing, not a plan, from another database handle, or
 * whose last mlatune_plan_decode() failed.
 *
 * Backends: a host (CPU) winner runs synchronously on the calling thread (buffers in host memory,
 * stream NULL). A GPU winner enqueues its kernels, in order, on `stream` (a cudaStream_t or
 * hipStream_t; NULL is the default stream), buffers in device memory; mlatune_run() then neither
 * synchronises, allocates, copies from the host nor touches another stream, so it can be captured
 * into a CUDA or HIP graph. A graph replays the launch as planned: its kernels read q, kv,
 * block_table and kv_lens from the buffers at replay, but the grid, the split count and a
 * persistent winner's work partition (mlatune_selection.workers > 0) are the plan's. Replaying
 * with other lengths is therefore sound only for winners without a work partition
 * (workers == 0), and only while the lengths stay in the planned key's bucket; a persistent
 * winner's graph must be captured again (or not used) once the lengths change. */

/* The shape and scalars of one decode call. */
typedef struct mlatune_decode_problem {
  mlatune_decode_key key;    /* what the lookup matches; key.batch sequences */
  float q_scale;             /* per-tensor dequantisation scale of q (1 for bf16 q) */
  float kv_scale;            /* per-tensor dequantisation scale of the KV cache (1 for bf16) */
  float sm_scale;            /* softmax scale applied to q.k (> 0) */
  int32_t max_pages_per_seq; /* row stride of the block table (>= pages of the longest seq) */
  int64_t num_pages;         /* pages in the KV pool */
} mlatune_decode_problem;

/* The buffers of one decode call, dense row-major; host or device memory as the backend says. */
typedef struct mlatune_decode_buffers {
  const void* q;              /* [batch * qlen, heads, 576] of key.q_dtype */
  const void* kv;             /* [num_pages, page_size, 576] of key.kv_dtype */
  const int32_t* block_table; /* [batch, max_pages_per_seq] page ids in [0, num_pages) */
  const int32_t* kv_lens;     /* [batch] the lengths given to mlatune_plan_decode() */
  void* out;                  /* [batch * qlen, heads, 512] bf16 */
  float* lse;                 /* [batch * qlen, heads] natural-log LSE; NULL unless key.lse */
  void* workspace;            /* mlatune_plan_workspace_size() bytes; may be NULL if 0 */
  size_t workspace_bytes;
} mlatune_decode_buffers;

typedef struct mlatune_plan mlatune_plan; /* opaque, owned by the caller, one thread at a time */

/* Creates an empty plan object sized for calls of up to `max_batch` sequences on `db`: every
 * mlatune_plan_decode() within that size on that handle reuses its memory. A plan object outlives
 * any number of plans and handles; planning a larger batch or on a handle whose winners need more
 * memory grows it once. */
MLATUNE_API mlatune_status mlatune_plan_create(const mlatune_db* db, int32_t max_batch,
                                               mlatune_plan** out);

/* Frees a plan object; NULL is a no-op (MLATUNE_STATUS_OK). Like a closed handle, a plan destroyed
 * within the last 256 closes, or a pointer to something else, is refused by every plan function
 * (MLATUNE_STATUS_INVALID_ARGUMENT; mlatune_run: MLATUNE_STATUS_BAD_PLAN) instead of being used. */
MLATUNE_API mlatune_status mlatune_plan_destroy(mlatune_plan* plan);

/* Plans one decode call: looks up the winner of problem->key (refusals as mlatune_lookup), checks
 * the problem (scales, pool, block-table stride) and `kv_lens` (host memory, [key.batch]: each
 * length in [qlen, max_pages_per_seq * page_size], their maximum equal to key.max_kv_len), and
 * writes the launch into `plan`. On failure the plan is marked failed and run refuses it.
 * Allocation: none for a plan object sized by mlatune_plan_create() on this handle, work partition
 * of persistent variants included, except for hip_mma_fp8kv_persistent_v1 winners (their code
 * identity pins the previous planner until the databases that hold them are retuned). */
MLATUNE_API mlatune_status mlatune_plan_decode(const mlatune_db* db,
                                               const mlatune_decode_problem* problem,
                                               const int32_t* kv_lens, mlatune_plan* plan);

/* Bytes of workspace the planned launch needs (0 if none), and the winner it launches. */
MLATUNE_API mlatune_status mlatune_plan_workspace_size(const mlatune_plan* plan, size_t* bytes);
MLATUNE_API mlatune_status mlatune_plan_selection(const mlatune_plan* plan, mlatune_selection* out);

/* Launches the planned call on `buffers` (all required except lse when key.lse == 0 and
 * workspace when its size is 0). `db` must be the handle the plan was made with. The host backend
 * also checks that buffers->kv_lens equals the planned lengths and that every block-table slot
 * in use names a page of the pool (GPU buffers are not read by the host: the caller guarantees
 * the same). `stream`: see "Backends" above (must be NULL for a host winner). Returns
 * MLATUNE_STATUS_OK once the launch has run (host) or been enqueued (GPU); the plan object may be
 * re-planned as soon as this returns. */
MLATUNE_API mlatune_status mlatune_run(const mlatune_db* db, const mlatune_plan* plan,
                                       const mlatune_decode_buffers* buffers, void* stream);

/* ---- Live update: switching a serving process to a new database ---------------------------------
 * An mlatune_live holds the current handle. mlatune_live_update() opens and checks the new file
 * completely before switching, so a refused file leaves the current handle in place; the switch
 * is one atomic step. Threads take the current handle with mlatune_live_acquire() (a short
 * internal lock, never held across I/O: take it once per decode step, not per lookup), use it
 * without locking and release it with mlatune_close(); a replaced handle stays valid until its
 * last reference is released. Plans made with the replaced handle are refused by mlatune_run()
 * with the new one (plan again). */
typedef struct mlatune_live mlatune_live;

MLATUNE_API mlatune_status mlatune_live_open(const char* path, const mlatune_open_options* options,
                                             mlatune_live** out);
MLATUNE_API mlatune_status mlatune_live_update(mlatune_live* live, const char* path,
                                               const mlatune_open_options* options);
MLATUNE_API mlatune_status mlatune_live_acquire(mlatune_live* live, mlatune_db** out);
/* How many switches have happened (0 after open). */
MLATUNE_API mlatune_status mlatune_live_generation(mlatune_live* live, int64_t* out);
/* Releases the live object's reference to its current handle; NULL is a no-op. */
MLATUNE_API void mlatune_live_close(mlatune_live* live);

#ifdef __cplusplus
}
#endif

#endif /* MLATUNE_MLATUNE_H_ */
