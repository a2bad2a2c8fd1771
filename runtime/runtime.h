// libstrata's entry point for a rank (docs/architecture.md):
// Runtime::FromEnv() reads the placement from the environment a strata
// worker (or strata-exec, or srun) set, connects to the rendezvous store,
// builds the TP/CP/DP/PP groups in the tp-cp-dp-pp order over the comm
// backend STRATA_COMM_BACKEND names (comm/backend_factory.h; default hybrid:
// shared memory inside a node, TCP between nodes), and hands out
// checkpointers and the step timer.
//
// Environment, in order of precedence: RANK/WORLD_SIZE/LOCAL_RANK/
// LOCAL_WORLD_SIZE (torchrun, strata), then OMPI_COMM_WORLD_RANK/SIZE/
// LOCAL_RANK/LOCAL_SIZE (mpirun), then SLURM_PROCID/NTASKS/LOCALID and
// SLURM_NTASKS_PER_NODE (srun); none of them means a single process.
// STRATA_TP/PP/CP give the sizes (RuntimeOptions overrides; DP takes the
// rest); STRATA_STORE the store URI (tcp://HOST:PORT, strata://HOST:PORT,
// file:///dir); ranks of one node are contiguous (LOCAL_WORLD_SIZE each).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "checkpoint/checkpointer.h"
#include "comm/backend.h"
#include "comm/plan_groups.h"
#include "comm/store.h"
#include "common/status.h"
#include "runtime/step_timer.h"

namespace strata {

struct RuntimeOptions {
  int tp = 0, pp = 0, cp = 0;  // 0: from STRATA_TP/PP/CP, else 1
  // false: no strata transport or groups (ranks that communicate through
  // another library); tp()..cp() are then null.
  bool build_groups = true;
  // comm backend (comm/backend_factory.h); empty: STRATA_COMM_BACKEND, else
  // "hybrid".
  std::string comm_backend;
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(120)};
};

struct RankInfo {
  int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
  int tp = 1, pp = 1, dp = 1, cp = 1;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0, cp_rank = 0;
  std::string job_id = "local";
  int restart_count = 0;
  std::string store_uri, ckpt_uri, telemetry, node_addr;
};

// Parses the environment (see above). InvalidArgument naming the variable
// that is malformed or inconsistent (e.g. tp*pp*cp not dividing the world).
StatusOr<RankInfo> ReadRankEnv(const RuntimeOptions& options = {});

// comm::Store for a URI: tcp://HOST:PORT, strata://HOST:PORT (the
// coordinator's KV), file:///dir.
StatusOr<std::shared_ptr<comm::Store>> ConnectStore(
    const std::string& uri, std::chrono::milliseconds timeout);

// Ranks in tp-cp-dp-pp order (tp fastest) on nodes of `ranks_per_node`
// consecutive ranks, with every group listed (comm/plan_groups.h input).
Placement PlacementFromSizes(int tp, int cp, int dp, int pp,
                             int ranks_per_node);

class Runtime {
 public:
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

 private:
  Runtime() = default;
  RankInfo info_;
  std::shared_ptr<comm::Store> store_;
  std::unique_ptr<comm::PlanGroups> groups_;
  std::unique_ptr<StepTimer> timer_;
};

}  // namespace strata
