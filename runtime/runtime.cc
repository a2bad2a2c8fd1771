#include "runtime/runtime.h"

#include <arpa/inet.h>
#include <netdb.h>

#include <cstdlib>
#include <map>
#include <tuple>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "comm/backend_factory.h"
#include "control/kv_client.h"

namespace strata {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// Reads an integer variable from the first of `names` that is set.
// Returns `fallback` when none is; InvalidArgument when malformed.
StatusOr<int> IntEnv(std::initializer_list<const char*> names, int fallback) {
  for (const char* n : names) {
    const char* v = Env(n);
    if (v == nullptr) continue;
    int out = 0;
    if (!absl::SimpleAtoi(v, &out) || out < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", n, "='", v,
                       "' is not a non-negative integer"));
    }
    return out;
  }
  return fallback;
}

// IPv4 address for TCP: a dotted quad as is, a host name resolved.
std::string ResolveIpv4(const std::string& host) {
  in_addr a;
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return host;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) {
    return "127.0.0.1";
  }
  char buf[INET_ADDRSTRLEN] = {0};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr,
            buf, sizeof(buf));
  freeaddrinfo(res);
  return buf;
}

}  // namespace

StatusOr<RankInfo> ReadRankEnv(const RuntimeOptions& options) {
  RankInfo r;
  ASSIGN_OR_RETURN(r.rank,
                   IntEnv({"RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"}, 0));
  ASSIGN_OR_RETURN(r.world_size,
                   IntEnv({"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS"}, 1));
  ASSIGN_OR_RETURN(r.local_rank, IntEnv({"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                                         "SLURM_LOCALID"}, 0));
  ASSIGN_OR_RETURN(r.local_world_size,
                   IntEnv({"LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE",
                           "SLURM_NTASKS_PER_NODE"}, r.world_size));
  if (r.world_size < 1 || r.rank >= r.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RANK=", r.rank, " is not below WORLD_SIZE=", r.world_size));
  }
  if (r.local_world_size < 1 || r.world_size % r.local_world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "LOCAL_WORLD_SIZE=", r.local_world_size,
        " does not divide WORLD_SIZE=", r.world_size));
  }
  ASSIGN_OR_RETURN(int tp, IntEnv({"STRATA_TP"}, 1));
  ASSIGN_OR_RETURN(int pp, IntEnv({"STRATA_PP"}, 1));
  ASSIGN_OR_RETURN(int cp, IntEnv({"STRATA_CP"}, 1));
  r.tp = options.tp > 0 ? options.tp : tp;
  r.pp = options.pp > 0 ? options.pp : pp;
  r.cp = options.cp > 0 ? options.cp : cp;
  const int fixed = r.tp * r.pp * r.cp;
  if (fixed < 1 || r.world_size % fixed != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tp=", r.tp, " x pp=", r.pp, " x cp=", r.cp,
        " does not divide WORLD_SIZE=", r.world_size));
  }
  r.dp = r.world_size / fixed;
  // tp-cp-dp-pp order, tp fastest (comm/plan_groups.h).
  r.tp_rank = r.rank % r.tp;
  r.cp_rank = r.rank / r.tp % r.cp;
  r.dp_rank = r.rank / (r.tp * r.cp) % r.dp;
  r.pp_rank = r.rank / (r.tp * r.cp * r.dp);
  ASSIGN_OR_RETURN(r.restart_count, IntEnv({"STRATA_RESTART_COUNT"}, 0));
  if (const char* v = Env("STRATA_JOB_ID")) r.job_id = v;
  if (const char* v = Env("STRATA_STORE")) r.store_uri = v;
  if (const char* v = Env("STRATA_CKPT_URI")) r.ckpt_uri = v;
  if (const char* v = Env("STRATA_TELEMETRY")) r.telemetry = v;
  if (const char* v = Env("STRATA_NODE_ADDR")) r.node_addr = v;
  if (r.store_uri.empty() && r.world_size > 1) {
    return absl::InvalidArgumentError(
        "STRATA_STORE is not set: a multi-rank job needs a rendezvous store "
        "(launch with `strata run`, `strata submit` or `mpirun strata-exec`)");
  }
  return r;
}

StatusOr<std::shared_ptr<comm::Store>> ConnectStore(
    const std::string& uri, std::chrono::milliseconds timeout) {
  auto host_port = [&](size_t skip) -> StatusOr<std::pair<std::string, int>> {
    std::string rest = uri.substr(skip);
    size_t colon = rest.rfind(':');
    int port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("store URI '", uri, "' needs HOST:PORT"));
    }
    return std::pair{rest.substr(0, colon), port};
  };
  if (uri.starts_with("tcp://")) {
    ASSIGN_OR_RETURN(auto hp, host_port(6));
    return comm::ConnectTcpStore(hp.first, hp.second, timeout);
  }
  if (uri.starts_with("strata://") || uri.starts_with("ipc://")) {
    return control::ConnectCoordinatorStore(uri);
  }
  if (uri.starts_with("file://")) return comm::NewFileStore(uri.substr(7));
  return absl::InvalidArgumentError(absl::StrCat(
      "STRATA_STORE='", uri,
      "': expected tcp://HOST:PORT, strata://HOST:PORT or file:///DIR"));
}

Placement PlacementFromSizes(int tp, int cp, int dp, int pp,
                             int ranks_per_node) {
  Placement pl;
  pl.set_order("tp-cp-dp-pp");
  const int world = tp * cp * dp * pp;
  std::map<std::tuple<std::string, int, int, int>, Group*> groups;
  auto add = [&](const std::string& kind, int a, int b, int c, int rank) {
    Group*& g = groups[{kind, a, b, c}];
    if (g == nullptr) {
      g = pl.add_groups();
      g->set_kind(kind);
    }
    g->add_ranks(rank);
  };
  for (int r = 0; r < world; ++r) {
    RankPlacement* p = pl.add_ranks();
    p->set_rank(r);
    p->set_node(r / ranks_per_node);
    p->set_local_gpu(r % ranks_per_node);
    p->set_tp_rank(r % tp);
    p->set_cp_rank(r / tp % cp);
    p->set_dp_rank(r / (tp * cp) % dp);
    p->set_pp_rank(r / (tp * cp * dp));
    add("tp", p->cp_rank(), p->dp_rank(), p->pp_rank(), r);
    add("cp", p->tp_rank(), p->dp_rank(), p->pp_rank(), r);
    add("dp", p->tp_rank(), p->cp_rank(), p->pp_rank(), r);
    add("pp", p->tp_rank(), p->cp_rank(), p->dp_rank(), r);
  }
  std::map<std::string, int> next_index;
  for (auto& g : *pl.mutable_groups()) g.set_index(next_index[g.kind()]++);
  return pl;
}

StatusOr<std::unique_ptr<Runtime>> Runtime::FromEnv(
    const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  ASSIGN_OR_RETURN(rt->info_, ReadRankEnv(options));
  const RankInfo& i = rt->info_;
  std::shared_ptr<comm::Store> base;
  if (i.store_uri.empty()) {
    base = comm::NewInMemoryStore();  // a single process
  } else {
    ASSIGN_OR_RETURN(base, ConnectStore(i.store_uri, options.connect_timeout));
  }
  // A restarted attempt never sees the keys of the previous one.
  rt->store_ = comm::NewPrefixStore(
      absl::StrCat(i.job_id, "/", i.restart_count), base);
  rt->timer_ = std::make_unique<StepTimer>(i.telemetry, i.job_id, i.rank);
  if (!options.build_groups) return rt;
  comm::BackendOptions bo;
  bo.name = options.comm_backend;
  if (bo.name.empty()) {
    const char* env = std::getenv("STRATA_COMM_BACKEND");
    bo.name = env != nullptr && *env != '\0' ? env : "hybrid";
  }
  bo.rank = i.rank;
  bo.node_of.resize(i.world_size);
  for (int r = 0; r < i.world_size; ++r) {
    bo.node_of[r] = r / i.local_world_size;
  }
  bo.store = comm::NewPrefixStore("comm", rt->store_);
  bo.tcp.bind = i.node_addr.empty() ? "127.0.0.1" : ResolveIpv4(i.node_addr);
  bo.tcp.connect_timeout = options.connect_timeout;
  bo.shm.connect_timeout = options.connect_timeout;
  Placement pl =
      PlacementFromSizes(i.tp, i.cp, i.dp, i.pp, i.local_world_size);
  ASSIGN_OR_RETURN(rt->groups_, comm::NewPlanGroups(bo, pl));
  return rt;
}

Runtime::~Runtime() = default;

StatusOr<std::unique_ptr<checkpoint::Checkpointer>> Runtime::NewCheckpointer(
    std::string uri, int keep_last) const {
  if (uri.empty()) uri = info_.ckpt_uri;
  if (uri.empty()) {
    return absl::InvalidArgumentError(
        "no checkpoint URI: pass one or set STRATA_CKPT_URI");
  }
  checkpoint::CheckpointOptions o;
  o.uri = uri;
  o.rank = info_.rank;
  o.world_size = info_.world_size;
  o.store = comm::NewPrefixStore("ckpt", store_);
  o.job = info_.job_id;
  o.keep_last = keep_last;
  o.default_catalog = true;
  return std::make_unique<checkpoint::Checkpointer>(o);
}

}  // namespace strata
