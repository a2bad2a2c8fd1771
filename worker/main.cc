// strata-worker: node agent (docs/control-plane.md). Parses flags, probes
// the node, and wires the WorkerAgent (worker/worker_agent.h: registration,
// heartbeats, orders, re-registration) to the coordinator (DealerClient),
// the ranks (RankSupervisor) and their telemetry (TelemetrySink), then steps
// it until SIGINT/SIGTERM (exit 0) or until the coordinator rejects the
// registration (exit 1), and stops the ranks. A coordinator outage does not
// end the worker: its ranks run on for --coordinator-grace-ms.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/net.h"
#include "common/service_notify.h"
#include "control/dealer_client.h"
#include "placement/rank_env.h"
#include "topology/probe/peer_bandwidth.h"
#include "topology/probe/probe.h"
#include "worker/node_identity.h"
#include "worker/private_dir.h"
#include "worker/rank_supervisor.h"
#include "worker/replica_server.h"
#include "worker/telemetry.h"
#include "worker/work_dir_gc.h"
#include "worker/worker_agent.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

// How often ranks are polled between reports.
constexpr int64_t kPollMs = 10;
// Shutdown: SIGTERM to the ranks, SIGKILL after this.
constexpr int64_t kStopGraceMs = 3000;

// What ranks use to reach the coordinator's KV (comm::Store URI).
std::string StoreUri(const std::string& coordinator) {
  if (coordinator.starts_with("tcp://")) {
    return "strata://" + coordinator.substr(6);
  }
  return coordinator;
}

struct Flags {
  std::string coordinator, node_name, address, work_dir;
  std::string curve_dir;  // docs/control-plane.md "Security"
  std::string rank_user;  // docs/security.md "Ranks as another user"
  std::string peer;
  int64_t grace_ms = 600000;
  strata::worker::WorkDirGcOptions gc;  // worker/work_dir_gc.h
  int64_t retention_s = gc.retention_ms / 1000;
  // The memory tier (docs/checkpoint.md "Memory tier").
  std::string mem_dir = "/dev/shm/strata-mem";
  std::string mem_limit = "0.25";
  int mem_port = 0;
  int64_t mem_retention_s = 600;
};

void AddFlags(CLI::App& app, Flags* f) {
  app.add_option("--coordinator", f->coordinator,
                 "coordinator endpoint, e.g. tcp://10.0.0.1:7077")
      ->required();
  app.add_option("--node-name", f->node_name, "node name (default: hostname)");
  app.add_option("--address", f->address,
                 "host this node's ranks are reached at (MASTER_ADDR for "
                 "rank 0; default: hostname)");
  app.add_option("--work-dir", f->work_dir,
                 "rank output and plan files (default: $TMPDIR/strata-<node>)");
  app.add_option("--curve-dir", f->curve_dir,
                 "CURVE client keys and server.key (default: $STRATA_CURVE_DIR,"
                 " else plaintext)");
  app.add_option("--rank-user", f->rank_user,
                 "run ranks as this less privileged user (worker as root)");
  app.add_option("--peer", f->peer,
                 "measure TCP bandwidth to HOST:PORT (`strata probe "
                 "--serve-peer PORT` there) and report it in the probe");
  app.add_option("--job-dir-retention-s", f->retention_s,
                 "remove an ended job's directory under --work-dir this long "
                 "after its last output")
      ->check(CLI::Range(int64_t{0}, int64_t{10} * 365 * 86400))
      ->capture_default_str();
  app.add_option("--max-ended-job-dirs", f->gc.max_ended_jobs,
                 "keep at most this many ended jobs' directories (oldest "
                 "removed first)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--coordinator-grace-ms", f->grace_ms,
                 "keep ranks running this long without an answer from the "
                 "coordinator (paused, restarting, unreachable), then stop "
                 "them; the worker keeps reconnecting either way")
      ->check(CLI::Range(int64_t{100}, int64_t{7} * 24 * 3600 * 1000));
  app.add_option("--mem-dir", f->mem_dir,
                 "memory tier: in-memory checkpoints of this node's ranks and "
                 "replicas of its peers', on a tmpfs (empty: no memory tier)")
      ->capture_default_str();
  app.add_option("--mem-limit", f->mem_limit,
                 "memory tier: hold at most this fraction of host memory "
                 "(0-1], or a size (e.g. 512MiB); more is refused")
      ->capture_default_str();
  app.add_option("--mem-port", f->mem_port,
                 "memory tier: TCP port of the replica server (0: any free)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--mem-retention-s", f->mem_retention_s,
                 "memory tier: remove a job's memory this long after its "
                 "last write once no rank of it runs here")
      ->check(CLI::Range(int64_t{0}, int64_t{10} * 365 * 86400))
      ->capture_default_str();
}

// Why the worker does not start: the text after "strata-worker: " and the
// exit code (2: a flag or the node's identity is wrong; 1: the node or the
// system failed). nullopt: go on.
struct Refusal {
  std::string message;
  int exit_code;
};
using Check = std::optional<Refusal>;

// --node-name, else the Slurm node (SLURMD_NODENAME / SLURM_NODEID), else
// the hostname. It becomes a worker id, file names and KV keys: refuse
// anything odd.
Check NameNode(Flags* f, const std::string& hostname) {
  auto identity =
      strata::worker::NodeIdentity(f->node_name, hostname, ::getenv);
  if (!identity.ok())
    return Refusal{std::string(identity.status().message()), 2};
  f->node_name = *identity;
  if (auto s = strata::control::ValidateNodeName(f->node_name); !s.ok()) {
    return Refusal{absl::StrCat("--node-name: ", s.message()), 2};
  }
  return std::nullopt;
}

// Ranks bind this address (STRATA_NODE_ADDR) and peers on other nodes
// connect to it: a name that does not resolve here is refused now.
Check ResolveAddress(Flags* f, const std::string& hostname,
                     const strata::Logger& logger) {
  if (f->address.empty()) f->address = hostname;
  auto resolved = strata::net::ResolveIpv4(f->address);
  if (!resolved.ok()) {
    return Refusal{
        absl::StrCat("this node's address (--address, default the hostname) ",
                     resolved.status().message(),
                     "; pass --address IP or list the host in DNS or "
                     "/etc/hosts"),
        2};
  }
  if (strata::net::IsLoopback(*resolved)) {
    logger->warn(
        "this node's address '{}' is loopback ({}): ranks on other nodes "
        "cannot reach this node's ranks; pass --address for multi-node jobs",
        f->address, *resolved);
  }
  return std::nullopt;
}

Check MeasurePeer(const Flags& f, strata::control::NodeProbe* probe) {
  if (f.peer.empty()) return std::nullopt;
  auto gbps = strata::probe::MeasurePeerGbps(f.peer);
  if (!gbps.ok()) {
    return Refusal{gbps.status().ToString(),
                   absl::IsInvalidArgument(gbps.status()) ? 2 : 1};
  }
  probe->set_peer_gbps(*gbps);
  return std::nullopt;
}

// Private: created 0700, or refused when another user could plant files in
// it (docs/security.md "Files").
Check PrepareWorkDir(Flags* f) {
  if (f->work_dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    f->work_dir = absl::StrCat(tmp ? tmp : "/tmp", "/strata-", f->node_name);
  }
  if (auto s = strata::worker::MakePrivateDir(f->work_dir); !s.ok()) {
    return Refusal{absl::StrCat("--work-dir: ", s.message()), 2};
  }
  return std::nullopt;
}

// Steps the agent until SIGINT/SIGTERM (0) or until it fails (1), then
// stops the ranks. Under systemd (deploy/systemd/): READY=1 after the first
// step (the telemetry socket is bound and the first report went out),
// WATCHDOG=1 from each loop turn.
// The memory tier's sweep of ended jobs (worker/replica_server.h), every
// 10 s of the loop.
void SweepMemory(strata::worker::ReplicaServer* mem,
                 const strata::worker::RankSupervisor& ranks,
                 int64_t retention_ms, const strata::Clock& clock,
                 int64_t* last_ms) {
  const int64_t now = clock.SteadyNowMs();
  if (mem == nullptr || now - *last_ms < 10000) return;
  *last_ms = now;
  std::set<std::string> held;
  for (const auto& r : ranks.Reports()) held.insert(r.job_id());
  mem->Sweep(held, retention_ms);
}

int Serve(strata::worker::WorkerAgent& agent,
          strata::worker::RankSupervisor& ranks,
          strata::worker::WorkDirGc& work_dir_gc, const strata::Clock& clock,
          strata::worker::ReplicaServer* mem, int64_t mem_retention_ms) {
  int exit_code = 0;
  strata::ServiceNotifier notifier;
  int64_t last_mem_sweep_ms = clock.SteadyNowMs();
  while (!g_stop) {
    if (auto s = agent.Step(); !s.ok()) {
      std::cerr << "strata-worker: " << s.message() << "; stopping ranks\n";
      exit_code = 1;
      break;
    }
    work_dir_gc.Tick();
    SweepMemory(mem, ranks, mem_retention_ms, clock, &last_mem_sweep_ms);
    notifier.Ready("serving");
    notifier.Tick(clock.SteadyNowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min(kPollMs, agent.MsUntilNextReport())));
  }
  notifier.Stopping();
  ranks.StopAll(kStopGraceMs);
  return exit_code;
}

// The memory tier's replica server on this node's address, or null with
// --mem-dir "". Refused: a bad --mem-limit (2), a dir or port that cannot
// be had (1).
std::unique_ptr<strata::worker::ReplicaServer> StartMemoryTier(
    const Flags& f, const strata::Logger& logger, std::optional<Refusal>* r) {
  if (f.mem_dir.empty()) return nullptr;
  auto limit = strata::worker::ParseMemLimit(f.mem_limit,
                                             strata::worker::HostMemoryBytes());
  if (!limit.ok()) {
    *r = Refusal{std::string(limit.status().message()), 2};
    return nullptr;
  }
  auto bind = strata::net::ResolveIpv4(f.address);
  auto server = std::make_unique<strata::worker::ReplicaServer>(
      f.mem_dir, *limit, f.node_name, logger);
  strata::Status s = bind.ok() ? server->Start(*bind, f.mem_port, f.address)
                               : bind.status();
  if (!s.ok()) {
    *r = Refusal{std::string(s.message()), 1};
    return nullptr;
  }
  return server;
}

int Refuse(const Refusal& r) {
  std::cerr << "strata-worker: " << r.message << "\n";
  return r.exit_code;
}
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata worker: runs a node's ranks for the coordinator"};
  Flags f;
  AddFlags(app, &f);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto logger = strata::GetLogger("WORKER");
  strata::RouteProtobufLogs(logger);
  auto probe = strata::probe::ProbeNode();
  if (!probe.ok()) {
    std::cerr << "strata-worker: probe failed: " << probe.status() << "\n";
    return 1;
  }
  if (Check r = NameNode(&f, probe->hostname())) return Refuse(*r);
  if (Check r = ResolveAddress(&f, probe->hostname(), logger))
    return Refuse(*r);
  if (Check r = MeasurePeer(f, &*probe)) return Refuse(*r);
  if (Check r = PrepareWorkDir(&f)) return Refuse(*r);
  auto curve = strata::control::CurveClientConfigFromFlagOrEnv(f.curve_dir);
  if (!curve.ok()) return Refuse({std::string(curve.status().message()), 2});
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  zmq::context_t ctx;
  const std::string telemetry_ep =
      absl::StrCat("ipc://", f.work_dir, "/telemetry.sock");
  strata::worker::TelemetrySink telemetry(&ctx);
  if (auto s = telemetry.Bind(telemetry_ep); !s.ok()) {
    return Refuse({std::string(s.message()), 1});
  }
  strata::SystemClock clock;
  strata::worker::RankSupervisor ranks(
      &clock, f.work_dir,
      {{strata::placement::kStore, StoreUri(f.coordinator)},
       {strata::placement::kTelemetry, telemetry_ep}});
  if (*curve) ranks.SetCurveServerKey((*curve)->server_public_key);
  telemetry.SetRanks(&ranks);  // reports only from ranks it started
  std::optional<Refusal> mem_refused;
  auto mem = StartMemoryTier(f, logger, &mem_refused);
  if (mem_refused) return Refuse(*mem_refused);
  if (mem != nullptr) {
    ranks.SetMemDir(mem->dir(), [m = mem.get()](const std::string& job,
                                                const std::string& message) {
      m->Notice(job, "mem_dir", message);
    });
  }
  if (!f.rank_user.empty()) {
    auto user = strata::worker::LookUpRankUser(f.rank_user);
    strata::Status s = user.ok() ? ranks.SetRankUser(*user) : user.status();
    if (s.ok() && mem != nullptr) {
      s = strata::worker::OpenDirToGroup(mem->dir(), user->gid);
    }
    if (!s.ok()) return Refuse({std::string(s.message()), 2});
  }
  strata::control::DealerClient client(&ctx, f.coordinator, *curve);
  strata::worker::WorkerAgentOptions options;
  options.coordinator = f.coordinator;
  options.node_name = f.node_name;
  options.address = f.address;
  options.probe = *probe;
  if (mem != nullptr) {
    options.replica_endpoint = mem->endpoint();
    options.mem_notices = [m = mem.get()] { return m->TakeNotices(); };
  }
  options.coordinator_grace_ms = f.grace_ms;
  strata::worker::WorkerAgent agent(&clock, &client, &ranks, &telemetry,
                                    std::move(options), logger);
  f.gc.retention_ms = f.retention_s * 1000;
  strata::worker::WorkDirGc work_dir_gc(&clock, f.work_dir, &ranks, f.gc,
                                        logger);
  return Serve(agent, ranks, work_dir_gc, clock, mem.get(),
               f.mem_retention_s * 1000);
}
