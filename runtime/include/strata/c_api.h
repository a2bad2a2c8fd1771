/* The C API of libstrata: what other languages use — the Python
 * package in python/strata wraps it with ctypes. Every function returns
 * STRATA_OK (0) or an error code (absl::StatusCode values: 3 invalid
 * argument, 5 not found, 14 unavailable, 15 data loss, ...) and leaves a
 * message for strata_last_error() in the calling thread. Handles are
 * opaque; a runtime and its checkpointers are used from one thread. */
#ifndef STRATA_C_API_H_
#define STRATA_C_API_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_OK 0

typedef struct strata_runtime strata_runtime;
typedef struct strata_checkpointer strata_checkpointer;

/* The calling thread's last error message ("" after success). */
const char* strata_last_error(void);

/* Runtime::FromEnv. With build_groups = 0 only the placement, the
 * rendezvous store and the step timer are set up (no strata transport:
 * for ranks that communicate with another library, e.g. torch). */
int strata_init(int build_groups, strata_runtime** out);
void strata_finalize(strata_runtime* rt);

typedef struct {
  int rank, world_size, local_rank, local_world_size;
  int tp, pp, dp, cp, tp_rank, pp_rank, dp_rank, cp_rank;
  int restart_count;
} strata_placement;
int strata_get_placement(const strata_runtime* rt, strata_placement* out);
/* Valid until strata_finalize. */
const char* strata_job_id(const strata_runtime* rt);
const char* strata_ckpt_uri(const strata_runtime* rt);

/* Step telemetry (runtime/step_timer.h). A section name is 1-64 printable
 * bytes and its seconds finite and >= 0; a step has at most 128 distinct
 * sections (so its report fits the worker's 64 KiB frame). end_step needs
 * step >= 0, tokens >= 0 and a loss that is not infinite (NaN: none).
 * Anything else is rejected (3, invalid argument) naming the value. */
int strata_timer_add(strata_runtime* rt, const char* section, double seconds);
int strata_timer_end_step(strata_runtime* rt, int64_t step, int64_t tokens,
                          double loss);
/* Work outside the step loop (evaluation, checkpoint save or load, data
 * loading): between phase_begin and phase_end (or the next end_step) the
 * rank's hang deadline is `deadline_seconds` (0: the job policy's
 * `hang_phase_s`, 600 s by default) instead of the step deadline, so a long
 * evaluation is not taken for a hang. The name is 1-64 printable bytes.
 * strata_ckpt_wait and strata_ckpt_close are a phase ("checkpoint_wait")
 * of their own when the rank is in none. */
int strata_phase_begin(strata_runtime* rt, const char* name,
                       double deadline_seconds);
int strata_phase_end(strata_runtime* rt);
/* The run's last step (progress, remaining-time estimates); 0: unknown. */
int strata_timer_set_total_steps(strata_runtime* rt, int64_t total);

/* In-place restart (docs/fault.md "In-place restart"), for ranks whose
 * groups are strata's (strata_init with build_groups = 1, backend hybrid,
 * shm or tcp, started by a strata worker). A rank that opts in is not
 * restarted when another rank dies or hangs: its collectives return an
 * error (10, aborted; or 14, unavailable) and the training loop calls
 * strata_inplace_rejoin, then reloads the agreed step when its memory does
 * not hold it. Without opting in, every rank is restarted (a full
 * restart).
 *  - enable: opts in (9, failed precondition, naming why it cannot: mpi or
 *    nccl groups, no coordinator store, no groups).
 *  - generation: the generation of the current groups (0 at launch; a
 *    replacement starts with the new one, STRATA_RESTART_GENERATION).
 *  - rejoin: waits up to `timeout_ms` for the coordinator's new generation
 *    (4, deadline exceeded, when none comes), re-forms the groups with the
 *    replacement and agrees on the step: `memory_step` is the step this
 *    rank's memory holds (-1: none; the replacement passes -1),
 *    `checkpoint_step` the newest committed checkpoint it can load (0:
 *    none). *agreed_step, the same on every rank, is the step to go on
 *    from. A replacement (generation > 0 at start) calls rejoin too: it
 *    only agrees (no wait, no re-form). */
int strata_inplace_enable(strata_runtime* rt);
int strata_inplace_generation(strata_runtime* rt, int* generation);
int strata_inplace_rejoin(strata_runtime* rt, int64_t timeout_ms,
                          int64_t memory_step, int64_t checkpoint_step,
                          int64_t* agreed_step);

/* dtype codes: 0 f32, 1 f64, 2 f16, 3 bf16, 4 i32, 5 i64, 6 u8. */
typedef struct {
  const char* name;
  int dtype;
  int ndim;
  const int64_t* global_shape;
  const int64_t* local_shape;
  const int64_t* global_offset;
  int replica_id;
  int num_replicas;
  void* data;
} strata_tensor;

typedef struct {
  const char* name;
  int per_rank; /* stored as "<rank>/<name>" */
  const void* data;
  size_t size;
} strata_blob;

/* A checkpointer whose commits span every rank (uri NULL or "": the job's
 * STRATA_CKPT_URI). */
int strata_ckpt_open(strata_runtime* rt, const char* uri, int keep_last,
                     strata_checkpointer** out);
/* Copies the tensors and blobs and returns; persisting continues in the
 * background. step must be >= 0 and newer than both the newest step
 * committed when this checkpointer first saved and every step it saved
 * (6, already exists, otherwise: a committed step is never replaced).
 * Tensor and blob names are non-empty printable strings; a tensor needs
 * num_replicas >= 1 and 0 <= replica_id < num_replicas. */
int strata_ckpt_save(strata_checkpointer* ck, int64_t step,
                     const strata_tensor* tensors, int num_tensors,
                     const strata_blob* blobs, int num_blobs);
/* strata_ckpt_save without copying the tensors: they are written from their
 * own memory, which must stay valid and unchanged until strata_ckpt_wait
 * (or strata_ckpt_close) returns. For callers that hand over a snapshot
 * they own or wait for the save (strata.torch's DCP writer). */
int strata_ckpt_save_borrowed(strata_checkpointer* ck, int64_t step,
                              const strata_tensor* tensors, int num_tensors,
                              const strata_blob* blobs, int num_blobs);
int strata_ckpt_wait(strata_checkpointer* ck);
/* Waits, then frees. */
int strata_ckpt_close(strata_checkpointer* ck);

/* The newest committed step, or STRATA_OK with *step = -1 when none. */
int strata_ckpt_latest(const char* uri, int64_t* step);
/* Fills each tensor's data with its box (any sharding of the saved one). */
int strata_ckpt_load(const char* uri, int64_t step, strata_tensor* tensors,
                     int num_tensors);
/* Copies up to `capacity` bytes; *size is the blob's full size. */
int strata_ckpt_load_blob(const char* uri, int64_t step, const char* name,
                          void* buf, size_t capacity, size_t* size);

#ifdef __cplusplus
}
#endif
#endif /* STRATA_C_API_H_ */
