// The rank environment: the variables a rank process gets (the placement
// contract, docs/placement.md). This is the only code that writes them
// (coordinator launch orders, strata-exec under mpirun, the worker's
// endpoints) and reads them (the runtime): BuildRankEnv/Variables write,
// ParseRankEnv reads, and a variable written by one parses back to the same
// RankEnv. Pure functions over maps, so the whole contract is unit-tested;
// ProcessEnvironment() reads environ.
//
// Coordinates follow the tp-cp-dp-pp order of placement/order.h (CoordOf),
// and DP takes the ranks TP x PP x CP leave (DataParallelSize), the order
// every Placement carries and comm::BuildPlanGroups groups by.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "placement/order.h"
#include "proto/plan.pb.h"

namespace strata::placement {

using EnvMap = std::map<std::string, std::string>;

// torchrun's variables (torch.distributed.run), so unmodified scripts using
// env:// initialisation work.
inline constexpr char kRank[] = "RANK";
inline constexpr char kWorldSize[] = "WORLD_SIZE";
inline constexpr char kLocalRank[] = "LOCAL_RANK";
inline constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
inline constexpr char kGroupRank[] = "GROUP_RANK";
inline constexpr char kNodeRank[] = "NODE_RANK";
inline constexpr char kGroupWorldSize[] = "GROUP_WORLD_SIZE";
inline constexpr char kRoleName[] = "ROLE_NAME";
inline constexpr char kRoleRank[] = "ROLE_RANK";
inline constexpr char kRoleWorldSize[] = "ROLE_WORLD_SIZE";
inline constexpr char kMasterAddr[] = "MASTER_ADDR";
inline constexpr char kMasterPort[] = "MASTER_PORT";
inline constexpr char kRunId[] = "TORCHELASTIC_RUN_ID";
inline constexpr char kTorchRestartCount[] = "TORCHELASTIC_RESTART_COUNT";
inline constexpr char kMaxRestarts[] = "TORCHELASTIC_MAX_RESTARTS";
inline constexpr char kCudaVisibleDevices[] = "CUDA_VISIBLE_DEVICES";
// strata's own.
inline constexpr char kJobId[] = "STRATA_JOB_ID";
inline constexpr char kStore[] = "STRATA_STORE";
inline constexpr char kPlan[] = "STRATA_PLAN";
inline constexpr char kTp[] = "STRATA_TP";
inline constexpr char kPp[] = "STRATA_PP";
inline constexpr char kDp[] = "STRATA_DP";
inline constexpr char kCp[] = "STRATA_CP";
inline constexpr char kTpRank[] = "STRATA_TP_RANK";
inline constexpr char kPpRank[] = "STRATA_PP_RANK";
inline constexpr char kDpRank[] = "STRATA_DP_RANK";
inline constexpr char kCpRank[] = "STRATA_CP_RANK";
inline constexpr char kRestartCount[] = "STRATA_RESTART_COUNT";
// The in-place restart generation of the attempt (docs/fault.md "In-place
// restart"): 0 at launch, raised by the coordinator each time it replaces
// one rank of the attempt without restarting the others. A replacement rank
// starts with the new generation; survivors learn it from the store.
inline constexpr char kRestartGeneration[] = "STRATA_RESTART_GENERATION";
inline constexpr char kCkptUri[] = "STRATA_CKPT_URI";
inline constexpr char kTelemetry[] = "STRATA_TELEMETRY";
inline constexpr char kNodeName[] = "STRATA_NODE_NAME";
inline constexpr char kNodeAddr[] = "STRATA_NODE_ADDR";
// The comm backend the runtime builds its groups on (docs/comm.md); empty:
// the runtime's default (hybrid).
inline constexpr char kCommBackend[] = "STRATA_COMM_BACKEND";
// Records in the rank's collective flight recorder (comm/flight_recorder.h);
// 0 turns it off. Default kDefaultFlightRecords.
inline constexpr char kFlightRecorder[] = "STRATA_FLIGHT_RECORDER";
inline constexpr int kDefaultFlightRecords = 2048;
inline constexpr int kMaxFlightRecords = 1 << 20;
// A measuring knob (strata-bench observe): K > 0 pauses the flight recorder
// in every other block of K steps (steps [K, 2K), [3K, 4K), ...), so one
// run holds steps with and without it. 0 (default): always on.
inline constexpr char kFlightRecorderAb[] = "STRATA_FLIGHT_RECORDER_AB";
inline constexpr int kMaxFlightRecorderAb = 1 << 20;
// The rule of STRATA_FLIGHT_RECORDER_AB=k: whether the recorder records the
// step that follows `steps_done` steps (the runtime applies it, strata-bench
// observe follows it).
inline bool FlightRecorderRecords(int64_t steps_done, int k) {
  return k <= 0 || (steps_done / k) % 2 == 0;
}

// Upper bounds of the sizes a rank environment may give. Sizes drive
// allocation (a placement entry per rank, a shared-memory ring per ordered
// pair of a node's ranks: LOCAL_WORLD_SIZE^2 x 512 KiB), so values beyond
// any real job are refused instead of allocated. 2^20 ranks is 64x the
// largest published training runs (16,384 GPUs, Llama 3); 1,024 ranks on
// one node is 128x an 8-GPU node.
inline constexpr int kMaxWorldSize = 1 << 20;
inline constexpr int kMaxLocalWorldSize = 1024;

// Everything a rank knows about where it runs. Defaults are a single
// process.
struct RankEnv {
  int rank = 0, world_size = 1;
  int local_rank = 0, local_world_size = 1;  // among the ranks of its node
  int node_rank = 0, num_nodes = 1;
  std::string node_name;  // empty: unknown
  // The address this rank's transport binds and advertises to its peers;
  // loopback only when every rank runs on one host. Required when the job
  // spans nodes.
  std::string node_addr;
  int tp = 1, pp = 1, dp = 1, cp = 1;
  int tp_rank = 0, pp_rank = 0, dp_rank = 0, cp_rank = 0;
  std::string job_id = "local";
  int restart_count = 0;  // attempt number, 0 for the first
  int generation = 0;     // in-place restart generation (kRestartGeneration)
  int max_restarts = 0;
  std::string master_addr;  // torch's own TCPStore (rank 0's host)
  int master_port = 0;      // 0: not set
  std::string store_uri;    // rendezvous store URI; required for > 1 rank
  std::string plan_path;    // the plan JSON file; empty without a plan
  std::string ckpt_uri;
  std::string telemetry;        // the worker's ipc:// endpoint; may be empty
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES; empty: not set
  std::string comm_backend;     // STRATA_COMM_BACKEND; empty: default
  int flight_records = kDefaultFlightRecords;  // STRATA_FLIGHT_RECORDER
  int flight_recorder_ab = 0;                  // STRATA_FLIGHT_RECORDER_AB

  bool operator==(const RankEnv&) const = default;
};

// One node of a job, indexed by RankPlacement.node.
struct NodeEndpoint {
  std::string name;
  std::string address;  // its ranks' STRATA_NODE_ADDR
  int gpus = 0;         // > 0: ranks get CUDA_VISIBLE_DEVICES = local rank
};

// Job-wide values, the same for every rank of an attempt.
struct JobEndpoints {
  std::string job_id;
  int restart_count = 0;
  int max_restarts = 0;
  std::string master_addr;  // rank 0's node address
  int master_port = 0;
  std::string store;      // empty: added later (the worker's STRATA_STORE)
  std::string ckpt_uri;   // empty: not set
  std::string telemetry;  // empty: added later (the worker's)
  std::string plan_path;  // empty: added later (the worker's file)
};

// The environment of `rank` of `plan` (its placement lists every rank)
// whose nodes are `nodes`. LOCAL_WORLD_SIZE is the number of ranks the
// plan puts on the rank's node. InvalidArgument when the rank or its node is
// not in the plan, or the plan's coordinates disagree with the tp-cp-dp-pp
// order.
StatusOr<RankEnv> RankEnvFor(const Plan& plan, int rank,
                             const std::vector<NodeEndpoint>& nodes,
                             const JobEndpoints& job);
// The same for several ranks at once (one pass over the placement).
StatusOr<std::vector<RankEnv>> RankEnvsFor(
    const Plan& plan, const std::vector<int>& ranks,
    const std::vector<NodeEndpoint>& nodes, const JobEndpoints& job);

// What RankEnvsFor derives from the whole plan: its sizes, checked against
// the placed ranks, and the number of ranks on each of `num_nodes` nodes.
// One pass over the placement (O(world)); InvalidArgument as RankEnvsFor.
struct PlanShape {
  Sizes sizes;
  int world = 0;
  std::vector<int> ranks_on_node;
};
StatusOr<PlanShape> ShapeOf(const Plan& plan, size_t num_nodes);
// RankEnvsFor with the shape made once per plan: O(ranks asked), so a
// launcher asking node by node (the coordinator, one heartbeat per node)
// does not pay O(world) per node. `shape` must be ShapeOf(plan, nodes.size()).
StatusOr<std::vector<RankEnv>> RankEnvsFor(
    const Plan& plan, const PlanShape& shape, const std::vector<int>& ranks,
    const std::vector<NodeEndpoint>& nodes, const JobEndpoints& job);

// The variables of `env` (torchrun's and strata's). Empty strings and
// master_port 0 are left out.
EnvMap Variables(const RankEnv& env);

// Variables(RankEnvFor(...)): what a launcher sets for `rank`.
StatusOr<EnvMap> BuildRankEnv(const Plan& plan, int rank,
                              const std::vector<NodeEndpoint>& nodes,
                              const JobEndpoints& job);

// Reads a rank's placement from `env`. Rank, world and local sizes come
// from the first source whose rank variable is set:
//   RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE (strata, torchrun),
//   OMPI_COMM_WORLD_RANK _SIZE _LOCAL_RANK _LOCAL_SIZE (mpirun),
//   SLURM_PROCID SLURM_NTASKS SLURM_LOCALID SLURM_NTASKS_PER_NODE, else
//   SLURM_TASKS_PER_NODE ("2(x3)" and lists of equal counts) (srun);
// none: a single process. Sizes STRATA_TP/PP/CP default to 1, DP takes the
// rest. InvalidArgument naming the variable when one is malformed, missing
// (WORLD_SIZE without RANK, STRATA_STORE for a multi-rank job,
// STRATA_NODE_ADDR when LOCAL_WORLD_SIZE < WORLD_SIZE) or inconsistent
// (RANK >= WORLD_SIZE, a size above kMaxWorldSize or kMaxLocalWorldSize,
// LOCAL_WORLD_SIZE not dividing WORLD_SIZE, a node's ranks not
// one contiguous block, GROUP_RANK != NODE_RANK, STRATA_DP or a
// STRATA_*_RANK disagreeing with the tp-cp-dp-pp order).
StatusOr<RankEnv> ParseRankEnv(const EnvMap& env);

// This process's environment as a map.
EnvMap ProcessEnvironment();

}  // namespace strata::placement
