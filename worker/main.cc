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
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/service_notify.h"
#include "common/net.h"
#include "control/dealer_client.h"
#include "placement/rank_env.h"
#include "topology/probe/peer_bandwidth.h"
#include "topology/probe/probe.h"
#include "worker/node_identity.h"
#include "worker/private_dir.h"
#include "worker/rank_supervisor.h"
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
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata worker: runs a node's ranks for the coordinator"};
  std::string coordinator, node_name, address, work_dir;
  int64_t grace_ms = 600000;
  app.add_option("--coordinator", coordinator,
                 "coordinator endpoint, e.g. tcp://10.0.0.1:7077")
      ->required();
  app.add_option("--node-name", node_name, "node name (default: hostname)");
  app.add_option("--address", address,
                 "host this node's ranks are reached at (MASTER_ADDR for "
                 "rank 0; default: hostname)");
  app.add_option("--work-dir", work_dir,
                 "rank output and plan files (default: $TMPDIR/strata-<node>)");
  std::string curve_dir;  // docs/control-plane.md "Security"
  app.add_option("--curve-dir", curve_dir,
                 "CURVE client keys and server.key (default: $STRATA_CURVE_DIR,"
                 " else plaintext)");
  std::string rank_user;  // docs/security.md "Ranks as another user"
  app.add_option("--rank-user", rank_user,
                 "run ranks as this less privileged user (worker as root)");
  std::string peer;
  app.add_option("--peer", peer,
                 "measure TCP bandwidth to HOST:PORT (`strata probe "
                 "--serve-peer PORT` there) and report it in the probe");
  strata::worker::WorkDirGcOptions gc_options;  // worker/work_dir_gc.h
  int64_t retention_s = gc_options.retention_ms / 1000;
  app.add_option("--job-dir-retention-s", retention_s,
                 "remove an ended job's directory under --work-dir this long "
                 "after its last output")
      ->check(CLI::Range(int64_t{0}, int64_t{10} * 365 * 86400))
      ->capture_default_str();
  app.add_option("--max-ended-job-dirs", gc_options.max_ended_jobs,
                 "keep at most this many ended jobs' directories (oldest "
                 "removed first)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--coordinator-grace-ms", grace_ms,
                 "keep ranks running this long without an answer from the "
                 "coordinator (paused, restarting, unreachable), then stop "
                 "them; the worker keeps reconnecting either way")
      ->check(CLI::Range(int64_t{100}, int64_t{7} * 24 * 3600 * 1000));
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
  // --node-name, else the Slurm node (SLURMD_NODENAME / SLURM_NODEID),
  // else the hostname.
  auto identity =
      strata::worker::NodeIdentity(node_name, probe->hostname(), ::getenv);
  if (!identity.ok()) {
    std::cerr << "strata-worker: " << identity.status().message() << "\n";
    return 2;
  }
  node_name = *identity;
  // It becomes a worker id, file names and KV keys: refuse anything odd.
  if (auto s = strata::control::ValidateNodeName(node_name); !s.ok()) {
    std::cerr << "strata-worker: --node-name: " << s.message() << "\n";
    return 2;
  }
  if (address.empty()) address = probe->hostname();
  // Ranks bind this address (STRATA_NODE_ADDR) and peers on other nodes
  // connect to it: a name that does not resolve here is refused now.
  auto resolved = strata::net::ResolveIpv4(address);
  if (!resolved.ok()) {
    std::cerr << "strata-worker: this node's address (--address, default the "
                 "hostname) "
              << resolved.status().message()
              << "; pass --address IP or list the host in DNS or /etc/hosts\n";
    return 2;
  }
  if (strata::net::IsLoopback(*resolved)) {
    logger->warn(
        "this node's address '{}' is loopback ({}): ranks on other nodes "
        "cannot reach this node's ranks; pass --address for multi-node jobs",
        address, *resolved);
  }
  if (!peer.empty()) {
    auto gbps = strata::probe::MeasurePeerGbps(peer);
    if (!gbps.ok()) {
      std::cerr << "strata-worker: " << gbps.status() << "\n";
      return absl::IsInvalidArgument(gbps.status()) ? 2 : 1;
    }
    probe->set_peer_gbps(*gbps);
  }
  if (work_dir.empty()) {
    const char* tmp = getenv("TMPDIR");
    work_dir = absl::StrCat(tmp ? tmp : "/tmp", "/strata-", node_name);
  }
  // Private: created 0700, or refused when another user could plant files
  // in it (docs/security.md "Files").
  if (auto s = strata::worker::MakePrivateDir(work_dir); !s.ok()) {
    std::cerr << "strata-worker: --work-dir: " << s.message() << "\n";
    return 2;
  }
  auto curve = strata::control::CurveClientConfigFromFlagOrEnv(curve_dir);
  if (!curve.ok()) {
    std::cerr << "strata-worker: " << curve.status().message() << "\n";
    return 2;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);

  zmq::context_t ctx;
  const std::string telemetry_ep =
      absl::StrCat("ipc://", work_dir, "/telemetry.sock");
  strata::worker::TelemetrySink telemetry(&ctx);
  if (auto s = telemetry.Bind(telemetry_ep); !s.ok()) {
    std::cerr << "strata-worker: " << s.message() << "\n";
    return 1;
  }
  strata::SystemClock clock;
  strata::worker::RankSupervisor ranks(
      &clock, work_dir,
      {{strata::placement::kStore, StoreUri(coordinator)},
       {strata::placement::kTelemetry, telemetry_ep}});
  if (*curve) ranks.SetCurveServerKey((*curve)->server_public_key);
  telemetry.SetRanks(&ranks);  // reports only from ranks it started
  if (!rank_user.empty()) {
    auto user = strata::worker::LookUpRankUser(rank_user);
    strata::Status s = user.ok() ? ranks.SetRankUser(*user) : user.status();
    if (!s.ok()) {
      std::cerr << "strata-worker: " << s.message() << "\n";
      return 2;
    }
  }
  strata::control::DealerClient client(&ctx, coordinator, *curve);
  strata::worker::WorkerAgentOptions options;
  options.coordinator = coordinator;
  options.node_name = node_name;
  options.address = address;
  options.probe = *probe;
  options.coordinator_grace_ms = grace_ms;
  strata::worker::WorkerAgent agent(&clock, &client, &ranks, &telemetry,
                                    std::move(options), logger);
  gc_options.retention_ms = retention_s * 1000;
  strata::worker::WorkDirGc work_dir_gc(&clock, work_dir, &ranks, gc_options,
                                        logger);
  int exit_code = 0;
  // Under systemd (deploy/systemd/): READY=1 after the first step (the
  // telemetry socket is bound and the first report went out), WATCHDOG=1
  // from each loop turn.
  strata::ServiceNotifier notifier;
  while (!g_stop) {
    if (auto s = agent.Step(); !s.ok()) {
      std::cerr << "strata-worker: " << s.message() << "; stopping ranks\n";
      exit_code = 1;
      break;
    }
    work_dir_gc.Tick();
    notifier.Ready("serving");
    notifier.Tick(clock.SteadyNowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(
        std::min(kPollMs, agent.MsUntilNextReport())));
  }
  notifier.Stopping();
  ranks.StopAll(kStopGraceMs);
  return exit_code;
}
