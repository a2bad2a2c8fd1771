// The reference 3D-parallel trainer: one optimizer step of the
// GPT in model.h on this rank's share of the global batch, with
//  - tensor parallelism inside each block (block.h),
//  - pipeline parallelism with the 1F1B schedule over micro-batches
//    (Narayanan et al. SC'21 §2.2: warm-up of p - s - 1 forwards, then one
//    forward / one backward, then the remaining backwards), activations and
//    gradients sent point-to-point between neighbouring stages (paired in
//    one SendRecv where both directions cross, as Megatron batches them),
//  - data parallelism: gradient all-reduce per block ("bucket"), issued
//    while the last micro-batch's backward still runs on earlier blocks, or
//    with ZeRO-1 (Rajbhandari et al. SC'20 stage 1) a reduce-scatter of the
//    flat gradient, Adam on this rank's 1/dp of the parameters and an
//    all-gather of the updated weights,
//  - AdamW (Loshchilov & Hutter 2019) with global-norm gradient clipping,
//  - asynchronous checkpoints of parameters and Adam moments as sharded
//    tensors in global coordinates plus the step, seed and data cursor;
//    Resume() loads them under whatever parallelism this run has,
//  - guards: a step whose loss, gradient norm or updated state is not
//    finite on any rank is never checkpointed and, by policy, stops the run
//    or rolls back to the last committed checkpoint; failed saves are
//    counted and too many in a row stop the run.
// The loss is the mean token cross-entropy of the global batch: every
// rank's gradient is scaled by 1/(B S) and data-parallel reductions sum.
#pragma once

#include <memory>
#include <string>

#include "checkpoint/checkpointer.h"
#include "comm/backend.h"
#include "comm/store.h"
#include "common/status.h"
#include "train/adamw.h"
#include "train/data.h"
#include "train/huge_pages.h"
#include "train/model.h"
#include "train/weight_panels.h"

namespace strata::train {

struct TrainOptions {
  ModelConfig model;
  Parallel par;
  int global_batch = 8;  // sequences per optimizer step
  int micro_batch = 1;   // sequences per pipeline micro-batch
  bool zero1 = false;
  // Pack the weights once per step (weight_panels.h) and run every GEMM of
  // the step on strata's kernels (common/panel_gemm.h), with as many
  // threads as OpenBLAS is given (the rank's BLAS threads); off, or without
  // AVX-512, every GEMM is OpenBLAS's, which repacks the weights per call.
  bool pack_weights = true;
  uint64_t seed = 1234;
  std::string data_file;  // empty: the generated stream
  // AdamW, GPT-3 (Brown et al. 2020) settings except lr for small models.
  float lr = 1e-3f;
  int warmup_steps = 10;  // linear warm-up, then constant
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float weight_decay = 0.1f;
  float clip_norm = 1.0f;
  // Checkpoints (empty uri: none).
  std::string ckpt_uri;
  int ckpt_every = 0;
  int keep_last = 3;  // committed steps kept
  // Step() fails once this many saves in a row failed (on any rank).
  int max_save_failures = 3;
  // The memory tier (docs/checkpoint.md "Memory tier"): a second
  // checkpointer on `mem_uri` (mem://) saving every `mem_every` steps (0:
  // none), keeping `mem_keep` steps. Its failures (a full memory tier, a
  // peer gone) are logged and never stop the run: the durable tier stays
  // the fallback. Resume() takes the newer of the two tiers (memory when
  // equal), agreed by every rank, and falls back to the durable one when
  // the memory tier's step fails to load on any rank.
  std::string mem_uri;
  int mem_every = 0;
  int mem_keep = 2;
  // A step whose loss, gradient norm or updated parameters are not finite:
  // kStop fails Step(); kRollback reloads the newest committed checkpoint
  // (at most max_rollbacks times in a run, then as kStop). Training is
  // deterministic, so a divergence caused by the settings (a learning rate
  // far too high) recurs after each rollback and ends as kStop.
  enum class OnNonFinite { kStop, kRollback };
  OnNonFinite on_nonfinite = OnNonFinite::kStop;
  int max_rollbacks = 3;
};

// The groups this rank belongs to (comm/plan_groups.h); the group rank of
// each must equal the rank's coordinate. `store` is the job's rendezvous
// (checkpoint commits).
struct TrainGroups {
  comm::Backend* tp = nullptr;
  comm::Backend* pp = nullptr;
  comm::Backend* dp = nullptr;
  std::shared_ptr<comm::Store> store;
  int world_rank = 0, world_size = 1;
};

struct StepResult {
  int64_t step = 0;      // steps completed
  double loss = 0;       // global-batch mean, known on every rank
  double grad_norm = 0;  // before clipping
  double seconds = 0;
  int64_t tokens = 0;  // tokens in the global batch
  // Wall seconds of the step's parts: forward, backward (each with the
  // collectives inside it), grad_reduce (the DP reduction and the loss),
  // optimizer, checkpoint (the save's stall). The runtime adds the time
  // spent in collectives separately (docs/runtime.md sections).
  double forward_s = 0, backward_s = 0, grad_reduce_s = 0, optimizer_s = 0,
         checkpoint_s = 0;
  // > 0: the step that went non-finite; the state was rolled back to the
  // checkpoint of `step` (loss and grad_norm are the non-finite values).
  int64_t rolled_back_from = 0;
};

class Trainer {
 public:
  static StatusOr<std::unique_ptr<Trainer>> Create(const TrainOptions& options,
                                                   const TrainGroups& groups);
  ~Trainer();

  // Loads the newest committed checkpoint of options.ckpt_uri (or of the
  // memory tier when it is newer); returns the step it resumed at, or 0
  // when there is none. With the memory tier it is collective.
  StatusOr<int64_t> Resume();
  // One optimizer step (collective: every rank of the job calls it), then a
  // checkpoint when the step is a multiple of ckpt_every. Errors:
  // FailedPrecondition when the step is not finite on some rank under
  // kStop (or with no rollback left, or no checkpoint to roll back to);
  // the last save's error, naming the location and its free space, once
  // max_save_failures saves in a row failed; a collective's error.
  StatusOr<StepResult> Step();
  // Waits for the checkpoint in flight; its error if it failed (earlier
  // failures were counted by Step()). Called by every rank after its last
  // step (`completed`), a memory-tier step the agreed rule skipped is then
  // saved after all (waiting for the replicas in flight): a run that ends
  // leaves its last step in memory. After a failure, false: nothing new.
  Status Finish(bool completed = false);
  // Seconds training was blocked by checkpoints (SaveAsync, and waiting for
  // the deferred snapshot before the optimizer step), summed.
  double checkpoint_stall_s() const { return stall_s_; }
  // Steps whose memory snapshot the agreed rule skipped (its replica lagged).
  int64_t mem_skipped() const { return mem_skipped_; }
  // The newest checkpoint every rank agreed was saved (0: none): the one
  // resumed from, then each save once the next save or Finish settled it,
  // so it trails the save in flight by up to ckpt_every steps.
  int64_t committed_step() const { return committed_step_; }
  int64_t step() const { return step_; }
  // "memory" or "durable": the tier the last Resume() loaded from.
  const std::string& resumed_tier() const { return resumed_tier_; }
  const StageParams& params() const { return params_; }

  // In-place restart (docs/fault.md "In-place restart"): a rank whose
  // groups were aborted keeps its state, re-forms its groups and goes on.
  // Whether the state in memory is the state after step(): false from the
  // first write of an optimizer update until the step completes (a failure
  // in between leaves the parameters partly updated) or a load.
  bool state_consistent() const { return !mutating_; }
  // Drops what is tied to the abandoned groups: pending collective handles
  // and the checkpointer, whose save in flight can no longer commit (its
  // store must have been aborted, or closing it waits for that commit).
  void Abandon();
  // Goes on with re-formed groups of the same sizes and coordinates, and
  // their store (a fresh checkpointer over it). InvalidArgument when a
  // group does not match.
  Status Rejoin(const TrainGroups& groups);
  // Loads committed checkpoint step `step` from the nearest tier that has
  // it (the memory tier, then options.ckpt_uri); 0 loads the initial state
  // (the seed's parameters, zero moments). Returns the step. No collective.
  StatusOr<int64_t> LoadStep(int64_t step);
  // The newest committed step of either tier this rank can see (-1: none).
  // No collective.
  int64_t NewestSavedStep();

 private:
  Trainer(const TrainOptions& options, const TrainGroups& groups,
          DataSource data);
  struct MicroBatch;
  Status Forward(MicroBatch& mb, int index, double* loss_sum);
  Status Backward(MicroBatch& mb, bool last,
                  std::vector<std::shared_ptr<comm::Work>>* dp_work);
  Status ReduceGradients(std::vector<std::shared_ptr<comm::Work>>& dp_work);
  // Clips and applies AdamW; `finite` is in: this rank's loss is finite,
  // out: every rank's loss, gradient norm and updated state are finite.
  StatusOr<double> ClipAndUpdate(bool* finite);
  // ORs `flag` over every rank of the job (tp, then pp, then dp).
  Status AnyRank(bool* flag);
  StatusOr<StepResult> HandleNonFinite(int64_t step, double loss, double norm);
  Status SaveCheckpoint();
  // The memory tier's save of this step (non-blocking settle of the last).
  bool AgreeMemorySave();
  Status SaveMemory();
  // Starts a save of this step's state (parameters, moments, step, seed,
  // data cursor) into `to`, counting the time as stall; SaveAsync's result
  // in *handle. The status returned is the moments' gather (a collective:
  // its failure ends the step).
  Status SaveState(checkpoint::Checkpointer& to,
                   StatusOr<checkpoint::SaveHandle>* handle);
  // Moments in global coordinates for a save (ZeRO-1: gathered).
  StatusOr<std::pair<float*, float*>> MomentsForSave();
  // Loads step `step` of `uri` into the parameters and moments.
  Status LoadFrom(const std::string& uri, int64_t step);
  // The newest usable step of `uri` (-1: none or unreadable, logged).
  int64_t NewestStep(const std::string& uri);
  // The minimum of *v over every rank of the job.
  Status MinOverRanks(int64_t* v);
  // Settles the previous save: waits for it, agrees over every rank
  // whether it failed, and counts consecutive failures.
  Status CheckLastSave();
  static Status CheckGroups(const TrainOptions& o, const TrainGroups& g);
  void OpenCheckpointer();
  std::vector<checkpoint::ShardedTensor> StateTensors(float* m, float* v);

  TrainOptions o_;
  TrainGroups g_;
  DataSource data_;
  StageParams params_;
  WeightPanels panels_;  // packed at the start of every Step()
  bool first_, last_;
  int micro_batches_ = 0;
  // Adam moments: the whole local shard, or this rank's ZeRO-1 partition.
  HugeFloats m_, v_;
  size_t shard_begin_ = 0, shard_size_ = 0, padded_ = 0;
  HugeFloats grad_shard_;
  // ZeRO-1: the whole local shard's moments, gathered for a checkpoint.
  std::vector<float> gathered_m_, gathered_v_;
  // The optimizer's runs of this rank's range (adamw.h).
  std::vector<AdamSegment> segments_;
  // Buffers kept from step to step, so that a steady-state step allocates
  // nothing here: live micro-batches (1F1B slots), the backward's
  // ping-pong gradients, targets, the tied-embedding and ZeRO-1 gather
  // buffers, the DP bucket handles.
  std::vector<MicroBatch> slots_;
  std::vector<float> bwd_dy_, bwd_dx_, tied_buf_, gather_buf_;
  std::vector<int32_t> targets_;
  std::vector<std::shared_ptr<comm::Work>> dp_work_;
  int64_t step_ = 0;
  double stall_s_ = 0;
  std::unique_ptr<checkpoint::Checkpointer> ckpt_;
  checkpoint::SaveHandle last_save_;
  int64_t last_save_step_ = 0;
  int64_t committed_step_ = 0;
  Status last_save_error_;  // SaveAsync's own error for last_save_step_
  int save_failures_ = 0;   // consecutive
  std::unique_ptr<checkpoint::Checkpointer> mem_ckpt_;
  checkpoint::SaveHandle mem_save_;
  int mem_failures_ = 0;  // consecutive, logged
  int64_t mem_skipped_ = 0;  // steps the memory tier skipped (lagging)
  int64_t mem_last_skipped_ = 0;  // the newest of them
  int rollbacks_ = 0;
  bool mutating_ = false;  // an optimizer update is being applied
  std::string resumed_tier_;
};

}  // namespace strata::train
