// Trainer's checkpoints (docs/train.md "Checkpoints"): the durable tier
// (--ckpt, every --ckpt-every steps) and the memory tier (--mem-ckpt, every
// --mem-ckpt-every steps), saving, settling saves, resuming from the newest
// step of either tier and loading a given step (in-place restart). The step
// loop itself is trainer.cc.
#include <algorithm>
#include <chrono>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/location.h"
#include "checkpoint/reader.h"
#include "common/logging.h"
#include "train/trainer.h"

namespace strata::train {
namespace {

using comm::DataType;
using comm::ReduceOp;
using SteadyClock = std::chrono::steady_clock;

int SizeOf(comm::Backend* b) { return b == nullptr ? 1 : b->size(); }

}  // namespace

void Trainer::OpenCheckpointer() {
  if (!o_.ckpt_uri.empty()) {
    checkpoint::CheckpointOptions co;
    co.uri = o_.ckpt_uri;
    co.rank = g_.world_rank;
    co.world_size = g_.world_size;
    co.store = comm::NewPrefixStore("ckpt", g_.store);
    co.keep_last = o_.keep_last;
    co.default_catalog = true;
    co.deferred_snapshot = true;  // fenced in ClipAndUpdate
    ckpt_ = std::make_unique<checkpoint::Checkpointer>(co);
  }
  if (o_.mem_every > 0) {
    checkpoint::CheckpointOptions co;
    co.uri = o_.mem_uri;
    co.rank = g_.world_rank;
    co.world_size = g_.world_size;
    co.store = comm::NewPrefixStore("memckpt", g_.store);
    co.keep_last = std::max(1, o_.mem_keep);
    co.deferred_snapshot = true;  // fenced in ClipAndUpdate
    // Every step: a save persists (replica, commit) while the next step
    // computes, instead of holding the next SaveAsync (twice the staging
    // memory).
    co.max_in_flight = 2;
    mem_ckpt_ = std::make_unique<checkpoint::Checkpointer>(co);
  }
}

std::vector<checkpoint::ShardedTensor> Trainer::StateTensors(float* m,
                                                             float* v) {
  std::vector<checkpoint::ShardedTensor> out;
  for (const auto& s : params_.shards) {
    if (s.tied_copy) continue;  // the first stage saves "wte"
    const int replicas = o_.par.dp * (s.tp_replicated ? o_.par.tp : 1);
    const int replica = s.tp_replicated
                            ? o_.par.dp_rank * o_.par.tp + o_.par.tp_rank
                            : o_.par.dp_rank;
    for (auto [prefix, base] :
         {std::pair{"", params_.w.data()}, std::pair{"opt.m.", m},
          std::pair{"opt.v.", v}}) {
      checkpoint::ShardedTensor t;
      t.name = std::string(prefix) + s.name;
      t.dtype = checkpoint::DType::kF32;
      t.global_shape = s.global_shape;
      t.local_shape = s.local_shape;
      t.global_offset = s.offset;
      t.replica_id = replica;
      t.num_replicas = replicas;
      t.data = base + s.start;
      out.push_back(std::move(t));
    }
  }
  return out;
}

Status Trainer::CheckLastSave() {
  if (last_save_.step() < 0 && last_save_error_.ok()) return absl::OkStatus();
  const int64_t step = last_save_step_;
  Status mine = last_save_error_.ok() ? last_save_.Wait() : last_save_error_;
  last_save_ = checkpoint::SaveHandle();
  last_save_error_ = absl::OkStatus();
  bool failed = !mine.ok();
  RETURN_IF_ERROR(AnyRank(&failed));
  if (!failed) {
    save_failures_ = 0;
    committed_step_ = step;
    return absl::OkStatus();
  }
  ++save_failures_;
  // The checkpoint's own error names the file and the free space.
  const std::string error =
      mine.ok() ? absl::StrCat(
                      "the save failed on another rank (",
                      checkpoint::FreeSpace(
                          checkpoint::CheckpointDir(o_.ckpt_uri).value_or("")),
                      ")")
                : std::string(mine.message());
  const std::string& where = o_.ckpt_uri;
  if (save_failures_ >= o_.max_save_failures) {
    return Status(
        mine.ok() ? absl::StatusCode::kAborted : mine.code(),
        absl::StrCat(save_failures_, " checkpoint saves in a row failed at ",
                     where, " (--ckpt-max-failures ", o_.max_save_failures,
                     "); the last: ", error));
  }
  GetLogger("TRAIN")->warn(
      "checkpoint step {} failed at {} ({} in a row, stopping at {}): {}", step,
      where, save_failures_, o_.max_save_failures, error);
  return absl::OkStatus();
}

Status Trainer::SaveCheckpoint() {
  RETURN_IF_ERROR(CheckLastSave());
  StatusOr<checkpoint::SaveHandle> handle;
  RETURN_IF_ERROR(SaveState(*ckpt_, &handle));
  // Counted, like a failure in the background, at the next save.
  last_save_step_ = step_;
  if (handle.ok()) {
    last_save_ = *handle;
  } else {
    last_save_error_ = handle.status();
  }
  return absl::OkStatus();
}

Status Trainer::SaveState(checkpoint::Checkpointer& to,
                          StatusOr<checkpoint::SaveHandle>* handle) {
  const auto t0 = SteadyClock::now();
  ASSIGN_OR_RETURN(auto moments, MomentsForSave());
  auto [m, v] = moments;
  std::vector<checkpoint::Blob> blobs = {
      {"step", false, absl::StrCat(step_)},
      {"seed", false, absl::StrCat(o_.seed)},
      {"data_cursor", false, absl::StrCat(step_ * o_.global_batch)}};
  *handle = to.SaveAsync(step_, StateTensors(m, v), blobs);
  stall_s_ += std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return absl::OkStatus();
}

StatusOr<std::pair<float*, float*>> Trainer::MomentsForSave() {
  if (!o_.zero1 || o_.par.dp == 1) return std::pair{m_.data(), v_.data()};
  // Moments are saved per parameter in global coordinates: gather this
  // rank's partition into the whole local shard first (members: the
  // deferred snapshot reads them after this returns).
  gathered_m_.resize(padded_);
  gathered_v_.resize(padded_);
  RETURN_IF_ERROR(
      g_.dp->AllGather(m_.data(), gathered_m_.data(), padded_, DataType::kF32)
          ->Wait());
  RETURN_IF_ERROR(
      g_.dp->AllGather(v_.data(), gathered_v_.data(), padded_, DataType::kF32)
          ->Wait());
  return std::pair{gathered_m_.data(), gathered_v_.data()};
}

// The memory tier's skip rule (docs/checkpoint.md "Memory tier"): a step's
// memory snapshot is taken iff rank 0's memory checkpointer has a free
// in-flight slot when rank 0 reaches the save; rank 0 publishes that as
// memckpt/go/<step> in the job's store and every other rank waits for it,
// so all ranks take or skip the same steps (a rank that skipped alone
// would leave the step uncommitted until rank 0's commit timeout). Rank
// 0's slot is held until the step commits, which needs every rank's part,
// so a free slot there means no rank is more than max_in_flight - 1 saves
// behind: a rank told to save finds its own slot free (at most the
// microseconds between its report and its slot's release), and a replica
// slower than the step rate costs steps of the memory tier, not step time.
// A rank that cannot read the decision skips (logged): at worst that
// step's save fails on rank 0 at its commit timeout, never a wrong state.
bool Trainer::AgreeMemorySave() {
  const bool free = mem_ckpt_->HasFreeSlot();
  if (g_.world_size == 1 || g_.store == nullptr) return free;
  auto store = comm::NewPrefixStore("memckpt/go", g_.store);
  const std::string key = absl::StrCat(step_);
  if (g_.world_rank == 0) {
    // Every rank read go/<step - 2> before the collectives of step - 1 that
    // rank 0 has passed: safe to drop (bounds the store's keys).
    (void)store->Delete(absl::StrCat(step_ - 2 * o_.mem_every));
    if (Status st = store->Set(key, free ? "1" : "0"); !st.ok()) {
      GetLogger("TRAIN")->warn("memory tier: step {} skipped: {}", step_,
                               std::string(st.message()));
      return false;
    }
    return free;
  }
  auto go = store->Get(key, std::chrono::seconds(60));
  if (!go.ok()) {
    GetLogger("TRAIN")->warn("memory tier: step {} skipped: rank 0's "
                             "decision unreadable: {}",
                             step_, std::string(go.status().message()));
    return false;
  }
  return *go == "1";
}

Status Trainer::SaveMemory() {
  // Settled without blocking or a collective: a failed memory save never
  // stops the run (the durable tier is the fallback), it is logged.
  if (Status failed = mem_ckpt_->Poll(); !failed.ok()) {
    ++mem_failures_;
    GetLogger("TRAIN")->warn(
        "memory tier: a save failed ({} in a row; recovery falls back to the "
        "durable tier{}): {}",
        mem_failures_,
        o_.ckpt_uri.empty() ? ", but there is none: --ckpt/--ckpt-every"
                            : " " + o_.ckpt_uri,
        std::string(failed.message()));
  } else if (mem_save_.done() && mem_save_.step() > 0 &&
             mem_save_.Wait().ok()) {  // done: Wait does not block
    mem_failures_ = 0;
    committed_step_ = std::max(committed_step_, mem_save_.step());
  }
  if (!AgreeMemorySave()) {
    // Logged at 1, 2, 4, 8, ... skips: visible, not a line a step.
    ++mem_skipped_;
    mem_last_skipped_ = step_;
    if ((mem_skipped_ & (mem_skipped_ - 1)) == 0) {
      GetLogger("TRAIN")->warn(
          "memory tier: step {} not snapshotted: the previous saves are "
          "still replicating ({} steps skipped so far; the replica rate is "
          "STRATA_MEM_RATE_MIBS)",
          step_, mem_skipped_);
    }
    return absl::OkStatus();
  }
  StatusOr<checkpoint::SaveHandle> handle;
  RETURN_IF_ERROR(SaveState(*mem_ckpt_, &handle));
  if (handle.ok()) {
    mem_save_ = *handle;
  } else {
    GetLogger("TRAIN")->warn("memory tier: step {} not saved: {}", step_,
                             std::string(handle.status().message()));
  }
  return absl::OkStatus();
}

Status Trainer::MinOverRanks(int64_t* v) {
  double x = static_cast<double>(*v);
  for (comm::Backend* b : {g_.tp, g_.pp, g_.dp}) {
    if (SizeOf(b) == 1) continue;
    RETURN_IF_ERROR(
        b->AllReduce(&x, 1, DataType::kF64, ReduceOp::kMin)->Wait());
  }
  *v = static_cast<int64_t>(x);
  return absl::OkStatus();
}

int64_t Trainer::NewestStep(const std::string& uri) {
  if (uri.empty()) return -1;
  auto latest = checkpoint::LatestStep(uri);
  if (latest.ok()) return *latest;
  if (!absl::IsNotFound(latest.status())) {
    GetLogger("TRAIN")->warn("resume: {} unreadable: {}", uri,
                             std::string(latest.status().message()));
  }
  return -1;
}

StatusOr<int64_t> Trainer::Resume() {
  if (mem_ckpt_ == nullptr) {
    // The durable tier alone: as before the memory tier (no collective).
    if (o_.ckpt_uri.empty()) return 0;
    auto latest = checkpoint::LatestStep(o_.ckpt_uri);
    if (absl::IsNotFound(latest.status())) return 0;
    RETURN_IF_ERROR(latest.status());
    RETURN_IF_ERROR(LoadFrom(o_.ckpt_uri, *latest));
    resumed_tier_ = "durable";
    return step_;
  }
  // Every rank must load the same step: the newest each tier has for every
  // rank (a rank that cannot see a step votes -1).
  int64_t mem = NewestStep(o_.mem_uri), durable = NewestStep(o_.ckpt_uri);
  RETURN_IF_ERROR(MinOverRanks(&mem));
  RETURN_IF_ERROR(MinOverRanks(&durable));
  auto log = GetLogger("TRAIN");
  if (mem >= 0 && mem >= durable) {
    Status loaded = LoadFrom(o_.mem_uri, mem);
    bool failed = !loaded.ok();
    RETURN_IF_ERROR(AnyRank(&failed));
    if (!failed) {
      resumed_tier_ = "memory";
      log->info("resume: step {} from the memory tier {}", mem, o_.mem_uri);
      return step_;
    }
    log->warn(
        "resume: memory tier step {} did not load on every rank (this rank: "
        "{}); falling back to the durable tier ({})",
        mem, loaded.ok() ? "loaded" : std::string(loaded.message()),
        durable >= 0 ? absl::StrCat("step ", durable, " of ", o_.ckpt_uri)
                     : "none");
    if (durable < 0) {
      return absl::DataLossError(
          absl::StrCat("memory tier step ", mem,
                       " failed to load and there is no durable checkpoint",
                       o_.ckpt_uri.empty() ? "" : " at " + o_.ckpt_uri,
                       "; not starting from a wrong state"));
    }
  }
  if (durable < 0) {
    step_ = 0;
    return 0;
  }
  Status loaded = LoadFrom(o_.ckpt_uri, durable);
  bool failed = !loaded.ok();
  RETURN_IF_ERROR(AnyRank(&failed));
  if (failed) {
    return loaded.ok() ? absl::DataLossError(
                             absl::StrCat("durable step ", durable,
                                          " failed to load on another rank"))
                       : loaded;
  }
  resumed_tier_ = "durable";
  return step_;
}

StatusOr<int64_t> Trainer::LoadStep(int64_t at) {
  if (at == 0) {
    params_.Init(o_.seed);
    std::fill(m_.begin(), m_.end(), 0.0f);
    std::fill(v_.begin(), v_.end(), 0.0f);
    step_ = 0;
    mutating_ = false;
    return 0;
  }
  // The nearest tier that has the step: this node's memory (or a peer's),
  // then the durable one. LoadFrom leaves the state alone when it fails.
  if (mem_ckpt_ != nullptr) {
    Status loaded = LoadFrom(o_.mem_uri, at);
    if (loaded.ok()) {
      resumed_tier_ = "memory";
      return step_;
    }
    GetLogger("TRAIN")->warn(
        "load step {}: memory tier {}: {}; trying {}", at, o_.mem_uri,
        std::string(loaded.message()),
        o_.ckpt_uri.empty() ? "nothing else" : o_.ckpt_uri);
  }
  if (o_.ckpt_uri.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load step ", at, ": no checkpoint URI"));
  }
  RETURN_IF_ERROR(LoadFrom(o_.ckpt_uri, at));
  resumed_tier_ = "durable";
  return step_;
}

int64_t Trainer::NewestSavedStep() {
  return std::max(mem_ckpt_ != nullptr ? NewestStep(o_.mem_uri) : -1,
                  NewestStep(o_.ckpt_uri));
}

Status Trainer::LoadFrom(const std::string& uri, int64_t latest) {
  ASSIGN_OR_RETURN(std::string step_blob,
                   checkpoint::LoadBlob(uri, latest, "step"));
  int64_t step = 0;
  if (!absl::SimpleAtoi(step_blob, &step)) {
    return absl::DataLossError(absl::StrCat("checkpoint step ", latest,
                                            ": 'step' blob is not a number"));
  }
  std::vector<float> full_m(padded_, 0.0f), full_v(padded_, 0.0f);
  std::vector<checkpoint::ShardedTensor> targets;
  for (const auto& s : params_.shards) {
    for (auto [prefix, base] :
         {std::pair{"", params_.w.data()}, std::pair{"opt.m.", full_m.data()},
          std::pair{"opt.v.", full_v.data()}}) {
      checkpoint::ShardedTensor t;
      t.name = std::string(prefix) + s.name;  // the tied copy loads "wte"
      t.global_shape = s.global_shape;
      t.local_shape = s.local_shape;
      t.global_offset = s.offset;
      t.data = base + s.start;
      targets.push_back(std::move(t));
    }
  }
  // Loaded into scratch first: a load that fails half-way (a replica
  // failing its checksum) leaves the parameters as they were.
  HugeFloats w(params_.w);
  for (auto& t : targets) {
    if (!t.name.starts_with("opt.")) {
      t.data = w.data() + (static_cast<float*>(t.data) - params_.w.data());
    }
  }
  RETURN_IF_ERROR(checkpoint::Load(uri, latest, targets));
  params_.w.swap(w);
  std::copy_n(full_m.begin() + shard_begin_, shard_size_, m_.begin());
  std::copy_n(full_v.begin() + shard_begin_, shard_size_, v_.begin());
  step_ = step;
  committed_step_ = step;
  mutating_ = false;
  return absl::OkStatus();
}

Status Trainer::Finish(bool completed) {
  if (mem_ckpt_ != nullptr && completed && mem_last_skipped_ == step_) {
    // Every rank skipped this step (the rule is agreed), so every rank
    // saves it here; waiting first frees the slots, so nothing is skipped.
    (void)mem_ckpt_->Wait();  // a failure is logged by the Wait below
    StatusOr<checkpoint::SaveHandle> handle;
    RETURN_IF_ERROR(SaveState(*mem_ckpt_, &handle));
    if (handle.ok()) {
      mem_save_ = *handle;
      --mem_skipped_;
    }
  }
  if (mem_ckpt_ != nullptr) {
    // Memory-tier failures are logged, never fatal.
    if (Status st = mem_ckpt_->Wait(); !st.ok()) {
      GetLogger("TRAIN")->warn("memory tier: a save failed: {}",
                               std::string(st.message()));
    }
  }
  if (ckpt_ == nullptr) return absl::OkStatus();
  Status last = last_save_error_.ok() ? last_save_.Wait() : last_save_error_;
  last_save_ = checkpoint::SaveHandle();
  last_save_error_ = absl::OkStatus();
  (void)ckpt_->Wait();  // earlier failures were counted by CheckLastSave
  return last;
}

}  // namespace strata::train
