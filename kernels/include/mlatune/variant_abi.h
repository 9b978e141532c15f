/* mlatune external variant ABI, version 1.
 *
 * Lets kernels built outside the project (for instance a shared library wrapping a vendor's
 * assembly kernels) join the variant registry and be tuned through the same validation gate.
 *
 * Conventions:
 *  - Every struct is plain C, passed by pointer, owned by the caller for the duration of the call.
 *  - A provider fills one mlatune_variant_v1 per variant; the strings and the param-space arrays it
 *    points at must stay valid and unchanged for as long as the variant is registered.
 *  - Callbacks may be called from several threads at once, never re-entrantly for one call.
 *  - Callbacks report failure by return value and a NUL-terminated message written into the
 *    caller's buffer (truncated to its size); they must not throw, longjmp or exit.
 */
#ifndef MLATUNE_VARIANT_ABI_H_
#define MLATUNE_VARIANT_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLATUNE_VARIANT_ABI_VERSION 1

/* dtype codes, as in the database: 0 bf16, 1 fp8 e4m3fn, 2 fp8 e4m3fnuz. */
typedef struct mlatune_decode_shape_v1 {
  int32_t batch, qlen, heads, page_size;
  int32_t q_dtype, kv_dtype;
  float q_scale, kv_scale, sm_scale;
  int32_t return_lse; /* 0 or 1 */
  int64_t num_pages;
  int32_t max_pages_per_seq;
  int32_t max_kv_len;
} mlatune_decode_shape_v1;

typedef struct mlatune_launch_params_v1 {
  int32_t kv_splits, kv_tile, block_rows, workers;
} mlatune_launch_params_v1;

typedef struct mlatune_decode_args_v1 {
  const void* q;              /* [tokens, heads, 576] */
  const void* kv;             /* [num_pages, page_size, 576] */
  const int32_t* block_table; /* [batch, max_pages_per_seq] */
  const int32_t* kv_lens;     /* [batch] */
  uint16_t* out;              /* [tokens, heads, 512] bf16 */
  float* lse;                 /* [tokens, heads] or NULL */
  void* workspace;
  size_t workspace_bytes;
} mlatune_decode_args_v1;

typedef struct mlatune_variant_v1 {
  uint32_t abi_version; /* MLATUNE_VARIANT_ABI_VERSION */
  uint32_t struct_size; /* sizeof(mlatune_variant_v1) */
  const char* name;     /* stable, never reused; [a-z0-9_]+ */
  const char* description;
  const char* backend;       /* "host" or "hip" */
  const char* code_identity; /* changes whenever the code or its build flags change */
  /* Parameter space: each array lists the accepted values of one launch parameter. */
  const int32_t* kv_splits;
  size_t kv_splits_count;
  const int32_t* kv_tile;
  size_t kv_tile_count;
  const int32_t* block_rows;
  size_t block_rows_count;
  const int32_t* workers;
  size_t workers_count;
  void* user; /* passed back to every callback */
  /* 1 if the variant computes the shape correctly with these params; else 0 and a reason. */
  int (*can_implement)(void* user, const mlatune_decode_shape_v1* shape,
                       const mlatune_launch_params_v1* params, char* why, size_t why_size);
  uint64_t (*workspace_bytes)(void* user, const mlatune_decode_shape_v1* shape,
                              const mlatune_launch_params_v1* params);
  /* 0 on success; non-zero and a message on a launch failure. */
  int (*run)(void* user, const mlatune_decode_shape_v1* shape,
             const mlatune_launch_params_v1* params, const mlatune_decode_args_v1* args,
             char* error, size_t error_size);
} mlatune_variant_v1;

#ifdef __cplusplus
}
#endif

#endif /* MLATUNE_VARIANT_ABI_H_ */
