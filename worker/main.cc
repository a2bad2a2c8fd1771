// strata-worker: node agent (docs/architecture.md). Probes the node, registers with
// the coordinator, heartbeats, and runs the ranks it is told to: launch and
// stop orders arrive in heartbeat replies; rank states, new output and the
// latest step telemetry go out with each heartbeat (every interval, and
// every 200 ms while ranks run or right after a rank exits). Re-registers
// when the coordinator forgets it (restart), reporting the ranks it still
// runs so they are re-adopted. Without the coordinator for longer than
// --coordinator-timeout-ms it stops its ranks and exits 1.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "control/dealer_client.h"
#include "placement/rank_env.h"
#include "worker/node_identity.h"
#include "worker/peer_bandwidth.h"
#include "worker/probe.h"
#include "worker/rank_supervisor.h"
#include "worker/telemetry.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

using std::chrono::milliseconds;
using SteadyClock = std::chrono::steady_clock;

// Relayed output per heartbeat; the rest follows with the next one.
constexpr size_t kMaxLogBytesPerHeartbeat = 1 << 20;
constexpr auto kBusyReportPeriod = milliseconds(200);

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
  int64_t lost_ms = 10000;
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
  std::string peer;
  app.add_option("--peer", peer,
                 "measure TCP bandwidth to HOST:PORT (`strata probe "
                 "--serve-peer PORT` there) and report it in the probe");
  app.add_option("--coordinator-timeout-ms", lost_ms,
                 "stop ranks and exit after this long without the coordinator")
      ->check(CLI::Range(100, 3600000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto logger = strata::GetLogger("WORKER");
  auto probe = strata::worker::ProbeNode();
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
  if (address.empty()) address = probe->hostname();
  if (!peer.empty()) {
    auto gbps = strata::worker::MeasurePeerGbps(peer);
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
  std::error_code ec;
  std::filesystem::create_directories(work_dir, ec);
  if (ec) {
    std::cerr << "strata-worker: cannot create --work-dir " << work_dir << ": "
              << ec.message() << "\n";
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
  const std::string telemetry_ep = absl::StrCat("ipc://", work_dir, "/telemetry.sock");
  strata::worker::TelemetrySink telemetry(&ctx);
  if (auto s = telemetry.Bind(telemetry_ep); !s.ok()) {
    std::cerr << "strata-worker: " << s.message() << "\n";
    return 1;
  }
  strata::worker::RankSupervisor ranks(
      work_dir, {{strata::placement::kStore, StoreUri(coordinator)},
                 {strata::placement::kTelemetry, telemetry_ep},
                 {strata::control::kCurveDirEnv,
                  strata::control::ResolveCurveDir(curve_dir)}});
  strata::control::DealerClient client(&ctx, coordinator, *curve);
  std::string worker_id;
  int64_t interval_ms = 1000;
  auto last_ok = SteadyClock::now();
  auto next_report = SteadyClock::now();
  // Latest report per (job, rank) not yet accepted by the coordinator.
  std::map<std::pair<std::string, int>, strata::control::StepReport>
      unsent_steps;
  int exit_code = 0;
  while (!g_stop) {
    ranks.Poll();
    telemetry.Drain();
    const auto now = SteadyClock::now();
    if (ranks.TakeDirty()) next_report = now;
    if (now < next_report) {
      std::this_thread::sleep_for(milliseconds(10));
      continue;
    }
    strata::control::Request req;
    std::vector<strata::control::RankReport> reports = ranks.Reports();
    if (worker_id.empty()) {
      auto* reg = req.mutable_register_worker();
      reg->set_node_name(node_name);
      reg->set_address(address);
      *reg->mutable_probe() = *probe;
      for (auto& r : reports) *reg->add_ranks() = r;
    } else {
      auto* hb = req.mutable_heartbeat();
      hb->set_worker_id(worker_id);
      for (auto& r : reports) *hb->add_ranks() = r;
      for (auto& c : ranks.CollectLogs(kMaxLogBytesPerHeartbeat)) {
        *hb->add_logs() = std::move(c);
      }
      for (auto& s : telemetry.TakeChanged()) {
        unsent_steps[{s.job_id(), s.rank()}] = s;
      }
      for (auto& [key, s] : unsent_steps) *hb->add_steps() = s;
    }
    auto reply = client.Call(req, static_cast<int>(std::min<int64_t>(
                                      interval_ms * 2, 5000)));
    const auto after = SteadyClock::now();
    const milliseconds period(interval_ms);
    next_report = after + (ranks.running() > 0
                               ? std::min<milliseconds>(period, kBusyReportPeriod)
                               : period);
    if (reply.ok()) {
      last_ok = after;
      if (reply->has_register_worker()) {
        worker_id = reply->register_worker().worker_id();
        interval_ms = reply->register_worker().heartbeat_interval_ms();
        logger->info("registered as {} (heartbeat {} ms)", worker_id,
                     interval_ms);
        next_report = after;  // fetch orders now
        continue;
      }
      const auto& hb = reply->heartbeat();
      if (hb.reregister()) {
        logger->warn("coordinator does not know {}; re-registering",
                     worker_id);
        worker_id.clear();
        next_report = after;
        continue;
      }
      ranks.CommitLogs();
      unsent_steps.clear();
      for (const auto& key : hb.stop()) {
        ranks.Stop(key, milliseconds(hb.grace_ms()));
      }
      for (const auto& order : hb.launch()) ranks.Launch(order);
      continue;
    }
    logger->warn("coordinator call failed: {}",
                 std::string(reply.status().message()));
    if (reply.status().code() == absl::StatusCode::kInvalidArgument &&
        worker_id.empty()) {
      std::cerr << "strata-worker: coordinator rejected registration: "
                << reply.status().message() << "\n";
      exit_code = 1;
      break;
    }
    if (after - last_ok > milliseconds(lost_ms)) {
      std::cerr << "strata-worker: lost the coordinator for more than "
                << lost_ms << " ms; stopping ranks\n";
      exit_code = 1;
      break;
    }
  }
  ranks.StopAll(milliseconds(3000));
  return exit_code;
}
