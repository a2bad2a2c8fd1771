// CoordinatorServer: strata-coordinator assembled from its parts, so that
// coordinator/main.cc only parses flags. Init() runs one step per part:
//   InitStateDir   --state-dir exists
//   InitSecurity   CURVE keys and per-rank keys (or the plaintext warning)
//   InitState      RocksDB state store, event log, log store, KV, job
//                  manager, each recovered from the store
//   InitRouter     the control service and the ROUTER socket, bound
//   InitHttp       the read-only HTTP listener (http_routes.h), if asked
// Run() then serves on the calling thread until `stop`: every request and,
// on each tick, the systemd watchdog and what the HTTP listener serves
// (trace hand-offs, dashboard JSON and the /metrics snapshot, each made only
// when wanted; docs/observe.md).
//
// Threads: Init() and Run() on one thread (the loop); the HTTP listener's
// threads read only published snapshots. Errors of Init():
// InvalidArgument when a flag's value is wrong (the state dir cannot be
// created, the CURVE keys do not load, the HTTP listener cannot start);
// any other code when the state or the system is (the store does not open
// or recover, the endpoint does not bind). The message names the flag or
// the path.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "common/clock.h"
#include "common/logging.h"
#include "common/service_notify.h"
#include "common/status.h"
#include "control/curve_config.h"
#include "coordinator/jobs/event_log.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/jobs/log_store.h"
#include "coordinator/kv/kv_store.h"
#include "coordinator/metrics/trace_download.h"
#include "coordinator/security/rank_keys.h"
#include "coordinator/server/render_cpu.h"
#include "coordinator/server/router_server.h"
#include "coordinator/server/service.h"
#include "coordinator/state/state_store.h"
#include "observe/http_server.h"
#include "observe/published.h"

namespace strata::coordinator {

struct CoordinatorOptions {
  std::string state_dir;  // RocksDB in db/, relayed output in logs/
  std::string listen = "tcp://127.0.0.1:7077";
  int64_t heartbeat_ms = 1000;
  int missed_heartbeats = 3;  // intervals before a worker is lost
  std::string curve_dir;      // empty: plaintext (docs/security.md)
  // Job defaults and limits; rank_keys is set by the server.
  JobOptions jobs;
  // HOST:PORT of the HTTP listener; empty: none.
  std::string metrics_listen;
  std::string metrics_token;
};

class CoordinatorServer {
 public:
  CoordinatorServer(CoordinatorOptions options, Logger logger);
  ~CoordinatorServer();

  Status Init();
  // REQUIRES: Init() succeeded. Returns when `stop` is set.
  void Run(const std::atomic<bool>& stop);

  // The bound control endpoint (after Init).
  const std::string& endpoint() const { return endpoint_; }
  // The HTTP listener's base URL ("http://HOST:PORT"); empty without one.
  std::string http_url() const;

 private:
  Status InitStateDir();
  Status InitSecurity();
  Status InitState();
  Status InitRouter();
  Status InitHttp();
  // Loop tick: watchdog, then what the HTTP listener serves.
  void Tick();
  void PublishDashboard();
  void PublishMetrics();

  const CoordinatorOptions options_;
  Logger logger_;
  SystemClock clock_;
  std::optional<control::CurveServerConfig> curve_;
  std::unique_ptr<RankKeys> rank_keys_;  // under CURVE only
  // The managers, in dependency order (each uses those above it).
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<LogStore> logs_;
  std::unique_ptr<KvStore> kv_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<Service> service_;
  zmq::context_t ctx_;
  std::unique_ptr<RouterServer> router_;
  std::string endpoint_;
  // What the HTTP threads read; declared before http_ so that the listener
  // (destroyed first) never sees them gone. The page polls every 2 s:
  // its JSON is rendered at most once a second.
  observe::Published metrics_{&clock_};
  observe::Published dashboard_{&clock_,
                                {.refresh_ms = 1000, .max_age_ms = 3000}};
  TraceDownload traces_{&clock_};
  RenderCpu render_cpu_;
  std::unique_ptr<observe::HttpServer> http_;
  // Under systemd (deploy/systemd/): READY=1 once serving, WATCHDOG=1 from
  // the loop's ticks.
  ServiceNotifier notifier_;
};

}  // namespace strata::coordinator
