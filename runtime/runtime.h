// libstrata's entry point for a rank (docs/architecture.md):
// Runtime::FromEnv() reads the placement from the environment a strata
// worker (or strata-exec, or srun) set, connects to the rendezvous store,
// builds the TP/CP/DP/PP groups in the tp-cp-dp-pp order over the comm
// backend STRATA_COMM_BACKEND names (comm/backend_factory.h; default hybrid:
// shared memory inside a node, TCP between nodes), and hands out
// checkpointers and the step timer.
//
// The environment is the placement contract (placement/rank_env.h,
// docs/placement.md): RANK/WORLD_SIZE/LOCAL_RANK/LOCAL_WORLD_SIZE (torchrun,
// strata), else OMPI_COMM_WORLD_* (mpirun), else SLURM_* (srun); none of
// them means a single process. STRATA_TP/PP/CP give the sizes (DP takes the
// rest); STRATA_STORE the store URI (tcp://HOST:PORT, strata://HOST:PORT,
// file:///dir); STRATA_NODE_ADDR the address the transport binds when the
// job spans nodes, whose ranks are contiguous blocks of LOCAL_WORLD_SIZE.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "checkpoint/checkpointer.h"
#include "comm/abortable_store.h"
#include "comm/backend.h"
#include "comm/backend_factory.h"
#include "comm/plan_groups.h"
#include "comm/store.h"
#include "common/status.h"
#include "placement/rank_env.h"
#include "runtime/step_timer.h"

namespace strata {

struct RuntimeOptions {
  // 0: from STRATA_TP/PP/CP, else 1; set: must match the variable if it
  // is set.
  int tp = 0, pp = 0, cp = 0;
  // false: no strata transport or groups (ranks that communicate through
  // another library); tp()..cp() are then null.
  bool build_groups = true;
  // comm backend (comm/backend_factory.h); empty: STRATA_COMM_BACKEND, else
  // "hybrid".
  std::string comm_backend;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(120)};
};

// What a rank knows about its placement (placement::RankEnv).
using RankInfo = placement::RankEnv;

// Parses the environment (placement::ParseRankEnv). Sizes in `options`
// fill STRATA_TP/PP/CP; InvalidArgument naming the variable that is
// malformed, missing or inconsistent, including an option that disagrees
// with the variable that is set.
StatusOr<RankInfo> ReadRankEnv(const RuntimeOptions& options = {});

// comm::Store for a URI: tcp://HOST:PORT, strata://HOST:PORT (the
// coordinator's KV), file:///dir.
StatusOr<std::shared_ptr<comm::Store>> ConnectStore(
    const std::string& uri, std::chrono::milliseconds timeout);

// For a rank that fails before (or instead of) Runtime::FromEnv: tells the
// ranks waiting in the rendezvous why this one cannot start
// (runtime/rendezvous.h PublishStartFailure), so they stop within seconds.
// Best effort: at most ~2 s connecting to info.store_uri; a file:// store
// only if its directory exists.
void ReportStartFailure(const RankInfo& info, const std::string& reason);

class Runtime {
 public:
  // Parses the environment, connects to the store, joins the rendezvous
  // (runtime/rendezvous.h: every rank present with the same WORLD_SIZE and
  // job id, no rank twice; an error naming the mismatch, or "rank R failed:
  // reason" when another rank published its failure to start), then builds
  // the groups. A rank that cannot work out its own placement (an address
  // that does not resolve) publishes that before returning it. Waits log
  // progress; each wait ends after options.connect_timeout.
  static StatusOr<std::unique_ptr<Runtime>> FromEnv(
      const RuntimeOptions& options = {});
  ~Runtime();

  const RankInfo& info() const { return info_; }
  // Groups; each is a size-1 group when that dimension is 1. Null without
  // build_groups.
  // The groups of the current generation: after Reform() they are new
  // objects (fetch them again).
  comm::Backend* tp() const { return groups_ ? groups_->tp.get() : nullptr; }
  comm::Backend* pp() const { return groups_ ? groups_->pp.get() : nullptr; }
  comm::Backend* dp() const { return groups_ ? groups_->dp.get() : nullptr; }
  comm::Backend* cp() const { return groups_ ? groups_->cp.get() : nullptr; }
  // The job attempt's namespace of the rendezvous store (of the current
  // in-place restart generation: "<job>/<attempt>", then
  // "<job>/<attempt>/g<generation>").
  std::shared_ptr<comm::Store> store() const { return store_; }
  // A checkpointer for `uri` (default STRATA_CKPT_URI) whose commit spans
  // every rank of the job.
  StatusOr<std::unique_ptr<checkpoint::Checkpointer>> NewCheckpointer(
      std::string uri = "", int keep_last = 3) const;
  StepTimer& timer() { return *timer_; }
  // Called before each training step with the number of steps done. Applies
  // STRATA_FLIGHT_RECORDER_AB (placement/rank_env.h): returns whether the
  // flight recorder records this step (false without a recorder).
  bool BeginStep(int64_t step);

  // In-place restart (runtime/in_place.cc, docs/fault.md "In-place
  // restart"). The coordinator replaces a rank that died or hung without
  // restarting the others when every rank of the attempt opted in: it
  // raises the attempt's generation (the store key
  // "<job>/<attempt>/inplace/generation") and starts the replacement with
  // it (STRATA_RESTART_GENERATION).
  //
  // Opts in: every step report says so from now on, and a thread watches
  // the generation key (every kInPlacePoll); a newer generation aborts this
  // rank's groups and store at once, so a collective blocked on a hung
  // peer returns Aborted. FailedPrecondition when the groups cannot be
  // aborted (mpi, nccl: such a job gets a full restart) or the store is not
  // a strata coordinator's (no one announces generations there).
  static constexpr std::chrono::milliseconds kInPlacePoll{100};
  Status EnableInPlace();
  bool in_place() const { return in_place_; }
  // The generation of the current groups (info().generation).
  int generation() const { return info_.generation; }
  // The newest generation announced (>= generation()); greater: the groups
  // were aborted and Reform() must follow.
  int announced_generation() const { return announced_.load(); }
  // After a collective failed (a peer died, or the groups were aborted):
  // waits up to `timeout` for a generation newer than generation() (a peer
  // may notice a death before the coordinator announces it), aborts what
  // is left of the old groups and store, and returns it. DeadlineExceeded
  // when none comes (the coordinator restarts the whole attempt then).
  StatusOr<int> AwaitGeneration(std::chrono::milliseconds timeout);
  // Re-forms under the announced generation: drops the old groups, joins
  // the generation's rendezvous (with the replacement) and builds the
  // groups again. Call AwaitGeneration first, and drop everything that
  // holds the old groups' Work handles before. When the generation
  // replaces a lost node, a rank the coordinator started on the spare
  // instead of this one gets FailedPrecondition (it must exit), and the
  // memory tier's new replica endpoints become STRATA_MEM_PEERS (read by
  // the next mem:// storage the process opens).
  Status Reform();
  // Agreement on the step every rank continues from, over the new
  // generation's store: each rank gives the step its memory holds
  // (`memory_step`, -1: none usable, e.g. the replacement) and the newest
  // committed checkpoint it can load (`checkpoint_step`, 0: none); the
  // result, the same on every rank, is the smallest of each rank's memory
  // step, or its checkpoint step when it has none. A rank whose memory
  // holds another step loads the result's checkpoint (0: the initial state).
  StatusOr<int64_t> AgreeStep(int64_t memory_step, int64_t checkpoint_step);

 private:
  Runtime() = default;
  // The groups over bo_/pl_ under store_, the timer's sources on them.
  Status BuildGroups();
  // Aborts the groups and the store of the current generation when `newer`
  // is a newer one (any thread).
  // Reform's reading of the coordinator's keys for generation `g`.
  Status ApplyGenerationKeys(int g);
  void AbortCurrent(int newer);
  void Watch();  // the in-place watcher thread
  StatusOr<int> ReadGeneration();

  RankInfo info_;
  std::shared_ptr<comm::Store> base_;  // the store as connected
  std::shared_ptr<comm::Store> attempt_store_;  // "<job>/<attempt>"
  std::shared_ptr<comm::AbortableStore> store_;  // ... of the generation
  comm::BackendOptions bo_;
  Placement pl_;
  std::chrono::milliseconds connect_timeout_{0};
  std::shared_ptr<comm::FlightRecorder> recorder_;  // null: off
  std::unique_ptr<comm::PlanGroups> groups_;
  std::unique_ptr<StepTimer> timer_;
  // In place: mu_ guards groups_, store_ and info_.generation against the
  // watcher's abort.
  bool in_place_ = false;
  std::mutex mu_;
  std::atomic<int> announced_{0};
  std::thread watcher_;
  std::mutex watch_mu_;
  std::condition_variable watch_cv_;
  bool watch_stop_ = false;  // guarded by watch_mu_
};

}  // namespace strata
