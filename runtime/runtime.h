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

#include <chrono>
#include <memory>
#include <string>

#include "checkpoint/checkpointer.h"
#include "comm/backend.h"
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
  comm::Backend* tp() const { return groups_ ? groups_->tp.get() : nullptr; }
  comm::Backend* pp() const { return groups_ ? groups_->pp.get() : nullptr; }
  comm::Backend* dp() const { return groups_ ? groups_->dp.get() : nullptr; }
  comm::Backend* cp() const { return groups_ ? groups_->cp.get() : nullptr; }
  // The job attempt's namespace of the rendezvous store.
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

 private:
  Runtime() = default;
  RankInfo info_;
  std::shared_ptr<comm::Store> store_;
  std::shared_ptr<comm::FlightRecorder> recorder_;  // null: off
  std::unique_ptr<comm::PlanGroups> groups_;
  std::unique_ptr<StepTimer> timer_;
};

}  // namespace strata
