#include "runtime/runtime.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string_view>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "comm/backend_factory.h"
#include "comm/flight_recorder.h"
#include "common/logging.h"
#include "common/net.h"
#include "control/kv_client.h"
#include "placement/layout.h"
#include "runtime/rendezvous.h"

namespace strata {
namespace {

// The address the transport binds: STRATA_NODE_ADDR resolved, or loopback
// when it is unset (ParseRankEnv allows that only when every rank runs on
// this host). A name that does not resolve is an error: binding loopback
// would leave peers on other hosts waiting for a connection that never
// comes.
StatusOr<std::string> BindAddress(const RankInfo& info) {
  if (info.node_addr.empty()) return std::string("127.0.0.1");
  auto a = net::ResolveIpv4(info.node_addr);
  if (!a.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat(placement::kNodeAddr, " ", a.status().message(),
                     "; list every node in DNS or /etc/hosts, or give the "
                     "worker --address IP"));
  }
  return a;
}

}  // namespace

StatusOr<RankInfo> ReadRankEnv(const RuntimeOptions& options) {
  placement::EnvMap env = placement::ProcessEnvironment();
  for (auto [size, name, flag] : {std::tuple{options.tp, placement::kTp, "tp"},
                                  {options.pp, placement::kPp, "pp"},
                                  {options.cp, placement::kCp, "cp"}}) {
    if (size <= 0) continue;
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty() &&
        it->second != std::to_string(size)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, "=", size, " was asked for but ", name, "=",
                       it->second, " (the launcher's placement): launch with `strata run --",
                       flag, " ", size, " ...` (or constraints.", flag,
                       ": ", size, " in the job file) so the ranks are placed for it"));
    }
    env[name] = std::to_string(size);
  }
  return placement::ParseRankEnv(env);
}

StatusOr<std::shared_ptr<comm::Store>> ConnectStore(
    const std::string& uri, std::chrono::milliseconds timeout) {
  if (uri.starts_with("tcp://")) {
    auto hp = net::ParseHostPort(std::string_view(uri).substr(6));
    if (!hp.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("store URI '", uri, "' needs HOST:PORT"));
    }
    return comm::ConnectTcpStore(hp->host, hp->port, timeout);
  }
  if (uri.starts_with("strata://") || uri.starts_with("ipc://")) {
    return control::ConnectCoordinatorStore(uri);
  }
  if (uri.starts_with("file://")) return comm::NewFileStore(uri.substr(7));
  return absl::InvalidArgumentError(absl::StrCat(
      placement::kStore, "='", uri,
      "': expected tcp://HOST:PORT, strata://HOST:PORT or file:///DIR"));
}

StatusOr<std::unique_ptr<Runtime>> Runtime::FromEnv(
    const RuntimeOptions& options) {
  std::unique_ptr<Runtime> rt(new Runtime());
  ASSIGN_OR_RETURN(rt->info_, ReadRankEnv(options));
  const RankInfo& i = rt->info_;
  comm::BackendOptions& bo = rt->bo_;
  Placement& pl = rt->pl_;
  rt->connect_timeout_ = options.connect_timeout;
  // What this rank works out alone comes first; when it fails, the other
  // ranks learn why through the store instead of timing out.
  Status local = [&]() -> Status {
    if (!options.build_groups) return absl::OkStatus();
    ASSIGN_OR_RETURN(bo.node_of, placement::NodeOfRanks(i));
    ASSIGN_OR_RETURN(bo.tcp.bind, BindAddress(i));
    ASSIGN_OR_RETURN(pl, placement::GroupPlacement(i));
    return absl::OkStatus();
  }();
  std::shared_ptr<comm::Store> base;
  if (i.store_uri.empty()) {
    base = comm::NewInMemoryStore();  // a single process
  } else {
    ASSIGN_OR_RETURN(base, ConnectStore(i.store_uri, options.connect_timeout));
  }
  if (!local.ok()) {
    PublishStartFailure(*base, i, std::string(local.message()));
    return local;
  }
  if (!i.store_uri.empty()) {
    RETURN_IF_ERROR(
        JoinRendezvous(*base, i, i.store_uri, options.connect_timeout));
  }
  // A restarted attempt never sees the keys of the previous one, nor an
  // in-place restart generation those of the one before.
  rt->base_ = base;
  rt->attempt_store_ =
      comm::NewPrefixStore(absl::StrCat(i.job_id, "/", i.restart_count), base);
  rt->store_ = std::make_shared<comm::AbortableStore>(
      i.generation > 0 ? comm::NewPrefixStore(
                             absl::StrCat("g", i.generation), rt->attempt_store_)
                       : rt->attempt_store_);
  rt->announced_ = i.generation;
  rt->timer_ = std::make_unique<StepTimer>(i.telemetry, i.job_id, i.rank);
  if (!options.build_groups) return rt;
  // RuntimeOptions, else STRATA_COMM_BACKEND, else the factory's default.
  if (!options.comm_backend.empty()) {
    bo.name = options.comm_backend;
  } else if (!i.comm_backend.empty()) {
    bo.name = i.comm_backend;
  }
  bo.rank = i.rank;
  bo.tcp.connect_timeout = options.connect_timeout;
  bo.shm.connect_timeout = options.connect_timeout;
  RETURN_IF_ERROR(rt->BuildGroups());
  return rt;
}

Status Runtime::BuildGroups() {
  const RankInfo& i = info_;
  comm::BackendOptions bo = bo_;
  bo.store = comm::NewPrefixStore("comm", store_);
  if (i.flight_records > 0) {
    // A recorder that cannot be made (no /dev/shm space) costs diagnosis
    // of hangs, not the run.
    // A generation's groups start their sequence numbers over: each gets
    // a recorder of its own (the same path; the worker reads the newest).
    const std::string path =
        comm::FlightRecorderPath(i.job_id, i.rank, getpid());
    if (recorder_ != nullptr) {
      recorder_.reset();
      unlink(path.c_str());
    }
    auto rec =
        comm::FlightRecorder::Create(path, i.job_id, i.rank, i.flight_records);
    if (rec.ok()) {
      recorder_ = *rec;
      bo.group.recorder = recorder_;
    } else {
      GetLogger("RUNTIME")->warn("no flight recorder: {}",
                                 std::string(rec.status().message()));
    }
  }
  std::unique_ptr<comm::PlanGroups> groups;
  ASSIGN_OR_RETURN(groups, comm::NewPlanGroups(bo, pl_));
  comm::PlanGroups* g = groups.get();
  {
    std::lock_guard<std::mutex> lock(mu_);
    groups_ = std::move(groups);
  }
  timer_->SetCommSource([g] {
    std::pair<double, double> sum{0, 0};
    for (const auto* b : {g->tp.get(), g->cp.get(), g->dp.get(), g->pp.get()}) {
      if (b == nullptr) continue;
      const comm::Backend::CommTime t = b->comm_time();
      sum.first += t.wait_s;
      sum.second += t.comm_s;
    }
    return sum;
  });
  if (g->world != nullptr) {
    // Every group is a view of the world transport: its connections are
    // the rank's.
    timer_->SetLinkSource([g] {
      std::vector<StepTimer::Link> links;
      for (const comm::LinkCounter& c : g->world->LinkCounters()) {
        links.push_back({c.peer, c.stream, c.bytes_acked, c.busy_us});
      }
      return links;
    });
  }
  return absl::OkStatus();
}

void ReportStartFailure(const RankInfo& info, const std::string& reason) {
  if (info.store_uri.empty()) return;
  if (info.store_uri.starts_with("file://")) {
    struct stat st;  // nobody waits in a directory that does not exist
    if (stat(info.store_uri.substr(7).c_str(), &st) != 0) return;
  }
  auto store = ConnectStore(info.store_uri, std::chrono::seconds(2));
  if (store.ok()) PublishStartFailure(**store, info, reason);
}

bool Runtime::BeginStep(int64_t step) {
  if (recorder_ == nullptr) return false;
  const int k = info_.flight_recorder_ab;
  if (k > 0) recorder_->SetPaused(!placement::FlightRecorderRecords(step, k));
  return !recorder_->paused();
}

Runtime::~Runtime() {
  if (watcher_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(watch_mu_);
      watch_stop_ = true;
    }
    watch_cv_.notify_all();
    watcher_.join();
  }
  // A clean end removes the flight recorder; after a crash it stays for the
  // worker (or a person) to read, and the worker removes it with the attempt.
  groups_.reset();
  if (recorder_ != nullptr) unlink(recorder_->path().c_str());
}

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
