#include "placement/rank_env.h"

#include <algorithm>
#include <limits>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace strata::placement {
namespace {

// The four variables a launcher family gives every rank.
struct Source {
  const char* rank;
  const char* world;
  const char* local_rank;
  const char* local_size;
};
constexpr Source kStrataSource = {kRank, kWorldSize, kLocalRank,
                                  kLocalWorldSize};
constexpr Source kMpiSource = {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                               "OMPI_COMM_WORLD_LOCAL_RANK",
                               "OMPI_COMM_WORLD_LOCAL_SIZE"};
constexpr Source kSlurmSource = {"SLURM_PROCID", "SLURM_NTASKS",
                                 "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"};
constexpr char kSlurmTasksPerNode[] = "SLURM_TASKS_PER_NODE";
constexpr char kSlurmNodeId[] = "SLURM_NODEID";

// The value of `name`, or null when it is unset or empty.
const std::string* Find(const EnvMap& env, const char* name) {
  auto it = env.find(name);
  return it == env.end() || it->second.empty() ? nullptr : &it->second;
}

// An integer variable in [min, max]; `fallback` when unset.
StatusOr<int> Int(const EnvMap& env, const char* name, int min, int fallback,
                  int max = std::numeric_limits<int>::max()) {
  const std::string* v = Find(env, name);
  if (v == nullptr) return fallback;
  int out = 0;
  if (!absl::SimpleAtoi(*v, &out) || out < min) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", *v, "' is not an integer >= ", min));
  }
  if (out > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "=", out, " is above the limit of ", max, " (placement/rank_env.h)"));
  }
  return out;
}

std::string Str(const EnvMap& env, const char* name) {
  const std::string* v = Find(env, name);
  return v == nullptr ? std::string() : *v;
}

// Slurm's per-node task counts: "4", "2(x3)", or a list of those ("2(x3),1").
// strata needs every node to run the same number.
StatusOr<int> SlurmTasksPerNode(const std::string& value, const char* name) {
  int common = 0;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    absl::string_view count = part;
    if (size_t paren = part.find('('); paren != absl::string_view::npos) {
      count = part.substr(0, paren);
      absl::string_view rep = part.substr(paren);
      int times = 0;
      if (!absl::StartsWith(rep, "(x") || !absl::EndsWith(rep, ")") ||
          !absl::SimpleAtoi(rep.substr(2, rep.size() - 3), &times) ||
          times < 1) {
        count = "";  // malformed
      }
    }
    int n = 0;
    if (!absl::SimpleAtoi(count, &n) || n < 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, "='", value, "' is not a task count like 4 or 2(x3)"));
    }
    if (common != 0 && n != common) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, "='", value,
          "': nodes run different numbers of tasks; strata needs the same "
          "number of ranks on every node"));
    }
    common = n;
  }
  return common;
}

Status Mismatch(const char* name, int got, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrCat(name, "=", got, " disagrees with ", why));
}

}  // namespace

StatusOr<PlanShape> ShapeOf(const Plan& plan, size_t num_nodes) {
  const Placement& pl = plan.placement();
  PlanShape shape;
  shape.world = pl.ranks_size();
  Sizes& c = shape.sizes;
  c.tp = plan.tp();
  c.pp = plan.pp();
  c.cp = std::max(1, plan.cp());
  c.dp = DataParallelSize(shape.world, c.tp, c.pp, c.cp);
  if (c.dp == 0 || c.dp != plan.dp()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan tp=", plan.tp(), " pp=", plan.pp(), " dp=", plan.dp(), " cp=",
        plan.cp(), " does not multiply to its ", shape.world, " placed ranks"));
  }
  shape.ranks_on_node.assign(num_nodes, 0);
  for (const RankPlacement& p : pl.ranks()) {
    if (p.node() < 0 || p.node() >= static_cast<int>(num_nodes)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", p.rank(), " is placed on node ", p.node(),
                       " but the job has ", num_nodes, " nodes"));
    }
    ++shape.ranks_on_node[p.node()];
  }
  return shape;
}

StatusOr<std::vector<RankEnv>> RankEnvsFor(
    const Plan& plan, const std::vector<int>& ranks,
    const std::vector<NodeEndpoint>& nodes, const JobEndpoints& job) {
  ASSIGN_OR_RETURN(PlanShape shape, ShapeOf(plan, nodes.size()));
  return RankEnvsFor(plan, shape, ranks, nodes, job);
}

StatusOr<std::vector<RankEnv>> RankEnvsFor(
    const Plan& plan, const PlanShape& shape, const std::vector<int>& ranks,
    const std::vector<NodeEndpoint>& nodes, const JobEndpoints& job) {
  const Placement& pl = plan.placement();
  const int world = shape.world;
  const Sizes& c = shape.sizes;
  const std::vector<int>& ranks_on_node = shape.ranks_on_node;
  if (world != pl.ranks_size() || ranks_on_node.size() != nodes.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "plan shape of ", world, " ranks on ", ranks_on_node.size(),
        " nodes does not match the plan's ", pl.ranks_size(), " ranks on ",
        nodes.size(), " nodes"));
  }
  std::vector<RankEnv> out;
  for (int rank : ranks) {
    if (rank < 0 || rank >= world || pl.ranks(rank).rank() != rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " is not at its index in the plan's ",
                       world, " placed ranks"));
    }
    const RankPlacement& me = pl.ranks(rank);
    const Coord rc = CoordOf(c, rank);
    if (me.tp_rank() != rc.tp || me.cp_rank() != rc.cp ||
        me.dp_rank() != rc.dp || me.pp_rank() != rc.pp) {
      return absl::InvalidArgumentError(
          absl::StrCat("the plan places rank ", rank, " at tp ", me.tp_rank(),
                       " cp ", me.cp_rank(), " dp ", me.dp_rank(), " pp ",
                       me.pp_rank(), ", not at its tp-cp-dp-pp coordinates"));
    }
    RankEnv e;
    e.rank = rank;
    e.world_size = world;
    e.local_rank = me.local_gpu();
    e.local_world_size = ranks_on_node[me.node()];
    e.node_rank = me.node();
    e.num_nodes = static_cast<int>(nodes.size());
    const NodeEndpoint& node = nodes[me.node()];
    e.node_name = node.name;
    e.node_addr = node.address;
    if (node.gpus > 0) e.visible_devices = std::to_string(me.local_gpu());
    e.tp = c.tp;
    e.pp = c.pp;
    e.dp = c.dp;
    e.cp = c.cp;
    e.tp_rank = rc.tp;
    e.pp_rank = rc.pp;
    e.dp_rank = rc.dp;
    e.cp_rank = rc.cp;
    e.job_id = job.job_id;
    e.restart_count = job.restart_count;
    e.max_restarts = job.max_restarts;
    e.master_addr = job.master_addr;
    e.master_port = job.master_port;
    e.store_uri = job.store;
    e.plan_path = job.plan_path;
    e.ckpt_uri = job.ckpt_uri;
    e.telemetry = job.telemetry;
    out.push_back(std::move(e));
  }
  return out;
}

StatusOr<RankEnv> RankEnvFor(const Plan& plan, int rank,
                             const std::vector<NodeEndpoint>& nodes,
                             const JobEndpoints& job) {
  ASSIGN_OR_RETURN(std::vector<RankEnv> e,
                   RankEnvsFor(plan, {rank}, nodes, job));
  return std::move(e[0]);
}

EnvMap Variables(const RankEnv& e) {
  auto s = [](int v) { return std::to_string(v); };
  EnvMap v = {
      {kRank, s(e.rank)},
      {kWorldSize, s(e.world_size)},
      {kLocalRank, s(e.local_rank)},
      {kLocalWorldSize, s(e.local_world_size)},
      {kGroupRank, s(e.node_rank)},
      {kNodeRank, s(e.node_rank)},
      {kGroupWorldSize, s(e.num_nodes)},
      {kRoleName, "default"},
      {kRoleRank, s(e.rank)},
      {kRoleWorldSize, s(e.world_size)},
      {kRunId, e.job_id},
      {kTorchRestartCount, s(e.restart_count)},
      {kMaxRestarts, s(e.max_restarts)},
      {kJobId, e.job_id},
      {kTp, s(e.tp)},
      {kPp, s(e.pp)},
      {kDp, s(e.dp)},
      {kCp, s(e.cp)},
      {kTpRank, s(e.tp_rank)},
      {kPpRank, s(e.pp_rank)},
      {kDpRank, s(e.dp_rank)},
      {kCpRank, s(e.cp_rank)},
      {kRestartCount, s(e.restart_count)},
  };
  if (e.master_port > 0) v[kMasterPort] = s(e.master_port);
  for (auto [name, value] : {std::pair{kMasterAddr, &e.master_addr},
                             {kCudaVisibleDevices, &e.visible_devices},
                             {kStore, &e.store_uri},
                             {kPlan, &e.plan_path},
                             {kCkptUri, &e.ckpt_uri},
                             {kTelemetry, &e.telemetry},
                             {kNodeName, &e.node_name},
                             {kNodeAddr, &e.node_addr},
                             {kCommBackend, &e.comm_backend}}) {
    if (!value->empty()) v[name] = *value;
  }
  return v;
}

StatusOr<EnvMap> BuildRankEnv(const Plan& plan, int rank,
                              const std::vector<NodeEndpoint>& nodes,
                              const JobEndpoints& job) {
  ASSIGN_OR_RETURN(RankEnv e, RankEnvFor(plan, rank, nodes, job));
  return Variables(e);
}

StatusOr<RankEnv> ParseRankEnv(const EnvMap& env) {
  RankEnv e;
  // Who: the first launcher family whose rank variable is set.
  const Source* src = nullptr;
  for (const Source* s : {&kStrataSource, &kMpiSource, &kSlurmSource}) {
    if (Find(env, s->rank) != nullptr) {
      src = s;
      break;
    }
  }
  if (src == nullptr) {
    if (Find(env, kWorldSize) != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(kWorldSize, " is set but ", kRank, " is not"));
    }
    src = &kStrataSource;  // a single process
  } else if (Find(env, src->world) == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(src->rank, " is set but ", src->world, " is not"));
  }
  ASSIGN_OR_RETURN(e.rank, Int(env, src->rank, 0, 0));
  ASSIGN_OR_RETURN(e.world_size, Int(env, src->world, 1, 1, kMaxWorldSize));
  if (e.rank >= e.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(src->rank, "=", e.rank,
                                                   " is not below ", src->world,
                                                   "=", e.world_size));
  }
  // No local size: every rank runs on this host.
  const char* local_size_name = src->local_size;
  e.local_world_size = e.world_size;
  if (src == &kSlurmSource && Find(env, local_size_name) == nullptr) {
    local_size_name = kSlurmTasksPerNode;
  }
  if (const std::string* v = Find(env, local_size_name)) {
    if (src == &kSlurmSource) {
      ASSIGN_OR_RETURN(e.local_world_size,
                       SlurmTasksPerNode(*v, local_size_name));
      if (e.local_world_size > kMaxLocalWorldSize) {
        return absl::InvalidArgumentError(
            absl::StrCat(local_size_name, "=", *v, " gives ",
                         e.local_world_size, " ranks per node, above the limit of ",
                         kMaxLocalWorldSize, " (placement/rank_env.h)"));
      }
    } else {
      ASSIGN_OR_RETURN(e.local_world_size,
                       Int(env, local_size_name, 1, 1, kMaxLocalWorldSize));
    }
  }
  if (e.world_size % e.local_world_size != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(local_size_name, "=", e.local_world_size,
                     " does not divide ", src->world, "=", e.world_size));
  }
  e.num_nodes = e.world_size / e.local_world_size;
  ASSIGN_OR_RETURN(e.local_rank,
                   Int(env, src->local_rank, 0, e.rank % e.local_world_size));
  if (e.local_rank >= e.local_world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat(src->local_rank, "=", e.local_rank, " is not below ",
                     local_size_name, "=", e.local_world_size));
  }
  // The node: NODE_RANK (= GROUP_RANK), SLURM_NODEID, else by rank.
  const char* node_name = src == &kSlurmSource ? kSlurmNodeId : kNodeRank;
  ASSIGN_OR_RETURN(e.node_rank,
                   Int(env, node_name, 0, e.rank / e.local_world_size));
  if (src == &kStrataSource) {
    ASSIGN_OR_RETURN(int group_rank, Int(env, kGroupRank, 0, e.node_rank));
    if (group_rank != e.node_rank) {
      return Mismatch(kGroupRank, group_rank,
                      absl::StrCat(kNodeRank, "=", e.node_rank));
    }
    ASSIGN_OR_RETURN(int nodes, Int(env, kGroupWorldSize, 1, e.num_nodes));
    if (nodes != e.num_nodes) {
      return Mismatch(
          kGroupWorldSize, nodes,
          absl::StrCat(kWorldSize, " / ", kLocalWorldSize, " = ", e.num_nodes));
    }
  }
  if (e.node_rank >= e.num_nodes) {
    return absl::InvalidArgumentError(absl::StrCat(
        node_name, "=", e.node_rank, " is not below the job's ", e.num_nodes,
        " nodes (", src->world, " / ", local_size_name, ")"));
  }

  // Parallelism: TP x PP x CP from the environment, DP takes the rest.
  ASSIGN_OR_RETURN(e.tp, Int(env, kTp, 1, 1));
  ASSIGN_OR_RETURN(e.pp, Int(env, kPp, 1, 1));
  ASSIGN_OR_RETURN(e.cp, Int(env, kCp, 1, 1));
  e.dp = DataParallelSize(e.world_size, e.tp, e.pp, e.cp);
  if (e.dp == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tp=", e.tp, " x pp=", e.pp, " x cp=", e.cp,
                     " does not divide ", src->world, "=", e.world_size,
                     " (sizes from ", kTp, ", ", kPp, ", ", kCp, ")"));
  }
  ASSIGN_OR_RETURN(int dp, Int(env, kDp, 1, e.dp));
  if (dp != e.dp) {
    return Mismatch(kDp, dp,
                    absl::StrCat(src->world, "=", e.world_size, " / (tp ", e.tp,
                                 " x pp ", e.pp, " x cp ", e.cp, ") = ", e.dp));
  }
  const Coord rc =
      CoordOf({.tp = e.tp, .cp = e.cp, .dp = e.dp, .pp = e.pp}, e.rank);
  e.tp_rank = rc.tp;
  e.cp_rank = rc.cp;
  e.dp_rank = rc.dp;
  e.pp_rank = rc.pp;
  for (auto [name, want] : {std::pair{kTpRank, rc.tp},
                            {kCpRank, rc.cp},
                            {kDpRank, rc.dp},
                            {kPpRank, rc.pp}}) {
    ASSIGN_OR_RETURN(int got, Int(env, name, 0, want));
    if (got != want) {
      return Mismatch(
          name, got,
          absl::StrCat(src->rank, "=", e.rank,
                       " in the tp-cp-dp-pp order (expected ", want, ")"));
    }
  }

  // The job.
  if (const std::string* v = Find(env, kJobId)) e.job_id = *v;
  ASSIGN_OR_RETURN(int torch_restarts, Int(env, kTorchRestartCount, 0, 0));
  ASSIGN_OR_RETURN(e.restart_count, Int(env, kRestartCount, 0, torch_restarts));
  if (Find(env, kTorchRestartCount) != nullptr &&
      torch_restarts != e.restart_count) {
    return Mismatch(kTorchRestartCount, torch_restarts,
                    absl::StrCat(kRestartCount, "=", e.restart_count));
  }
  ASSIGN_OR_RETURN(e.generation, Int(env, kRestartGeneration, 0, 0));
  ASSIGN_OR_RETURN(e.max_restarts, Int(env, kMaxRestarts, 0, 0));
  e.master_addr = Str(env, kMasterAddr);
  ASSIGN_OR_RETURN(e.master_port, Int(env, kMasterPort, 1, 0));
  if (e.master_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(kMasterPort, "=", e.master_port, " is not a TCP port"));
  }
  e.store_uri = Str(env, kStore);
  e.plan_path = Str(env, kPlan);
  e.ckpt_uri = Str(env, kCkptUri);
  e.telemetry = Str(env, kTelemetry);
  e.node_name = Str(env, kNodeName);
  e.node_addr = Str(env, kNodeAddr);
  e.visible_devices = Str(env, kCudaVisibleDevices);
  e.comm_backend = Str(env, kCommBackend);
  ASSIGN_OR_RETURN(e.flight_records, Int(env, kFlightRecorder, 0,
                                         kDefaultFlightRecords,
                                         kMaxFlightRecords));
  ASSIGN_OR_RETURN(e.flight_recorder_ab, Int(env, kFlightRecorderAb, 0, 0,
                                             kMaxFlightRecorderAb));
  if (e.store_uri.empty() && e.world_size > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        kStore,
        " is not set: a multi-rank job needs a rendezvous store (launch with "
        "`strata run`, `strata submit` or `mpirun strata-exec`)"));
  }
  if (e.node_addr.empty() && e.local_world_size < e.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        kNodeAddr, " is not set, but the job spans ", e.num_nodes, " nodes (",
        local_size_name, "=", e.local_world_size, " < ", src->world, "=",
        e.world_size,
        "): a rank must bind an address its peers on other hosts can reach "
        "(launch with `strata run`, `strata submit` or `mpirun strata-exec`, "
        "or set ",
        kNodeAddr, " to this host's address)"));
  }
  return e;
}

EnvMap ProcessEnvironment() {
  EnvMap env;
  for (char** p = environ; *p != nullptr; ++p) {
    const std::string kv = *p;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

}  // namespace strata::placement
