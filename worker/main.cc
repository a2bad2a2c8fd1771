// strata-worker: probes the node, registers with the coordinator and
// heartbeats. Re-registers when the coordinator forgets it (restart). Exits
// non-zero if the coordinator is unreachable for --coordinator-timeout-ms.
// Rank launching is not implemented yet.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <iostream>
#include <thread>

#include "CLI/CLI.hpp"
#include "common/logging.h"
#include "coordinator/server/dealer_client.h"
#include "worker/probe.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata worker"};
  std::string coordinator, node_name;
  int64_t lost_ms = 10000;
  app.add_option("--coordinator", coordinator, "coordinator endpoint")
      ->required();
  app.add_option("--node-name", node_name, "node name (default: hostname)");
  app.add_option("--coordinator-timeout-ms", lost_ms,
                 "give up after this long without the coordinator")
      ->check(CLI::Range(100, 3600000));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto logger = strata::GetLogger("CTRL");
  auto probe = strata::worker::ProbeNode();
  if (!probe.ok()) {
    std::cerr << "strata-worker: probe failed: " << probe.status() << "\n";
    return 1;
  }
  if (node_name.empty()) node_name = probe->hostname();
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  zmq::context_t ctx;
  strata::coordinator::DealerClient client(&ctx, coordinator);
  std::string worker_id;
  int64_t interval_ms = 1000;
  auto last_ok = std::chrono::steady_clock::now();
  while (!g_stop) {
    strata::control::Request req;
    if (worker_id.empty()) {
      auto* reg = req.mutable_register_worker();
      reg->set_node_name(node_name);
      *reg->mutable_probe() = *probe;
    } else {
      req.mutable_heartbeat()->set_worker_id(worker_id);
    }
    auto reply = client.Call(req, static_cast<int>(interval_ms));
    auto now = std::chrono::steady_clock::now();
    if (reply.ok()) {
      last_ok = now;
      if (reply->has_register_worker()) {
        worker_id = reply->register_worker().worker_id();
        interval_ms = reply->register_worker().heartbeat_interval_ms();
        logger->info("registered as {} (heartbeat {} ms)", worker_id,
                     interval_ms);
      } else if (reply->heartbeat().reregister()) {
        logger->warn("coordinator does not know {}; re-registering", worker_id);
        worker_id.clear();
        continue;
      }
    } else {
      logger->warn("coordinator call failed: {}",
                   std::string(reply.status().message()));
      if (reply.status().code() == absl::StatusCode::kInvalidArgument) {
        std::cerr << "strata-worker: coordinator rejected registration: "
                  << reply.status().message() << "\n";
        return 1;
      }
      if (now - last_ok > std::chrono::milliseconds(lost_ms)) {
        std::cerr << "strata-worker: lost the coordinator for more than "
                  << lost_ms << " ms\n";
        return 1;
      }
    }
    auto wake = now + std::chrono::milliseconds(interval_ms);
    while (!g_stop && std::chrono::steady_clock::now() < wake) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  return 0;
}
