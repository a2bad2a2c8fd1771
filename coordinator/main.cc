// strata-coordinator: serves the control protocol on --listen: worker
// registry and heartbeats, jobs (placement, launch orders, restart), events,
// job output and the rendezvous KV. State lives under --state-dir: RocksDB
// in db/ (jobs, events, KV) and relayed output in logs/
// (docs/control-plane.md).
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>

#include "CLI/CLI.hpp"
#include "common/cpu_time.h"
#include "common/log_limiter.h"
#include "common/logging.h"
#include "common/service_notify.h"
#include "common/embedded.h"
#include "coordinator/metrics/dashboard_input.h"
#include "coordinator/metrics/metrics_render.h"
#include "coordinator/metrics/trace_download.h"
#include "coordinator/server/router_server.h"
#include "observe/http_server.h"
#include "observe/published.h"

namespace strata {
extern const EmbeddedFile kDashboardFiles[];  // observe/dashboard/index.html
}

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata coordinator"};
  std::string state_dir, listen = "tcp://127.0.0.1:7077";
  int64_t heartbeat_ms = 1000;
  int missed = 3;
  app.add_option("--state-dir", state_dir, "directory for persistent state")
      ->required();
  app.add_option("--listen", listen, "ZeroMQ endpoint to bind");
  app.add_option("--heartbeat-ms", heartbeat_ms, "worker heartbeat interval")
      ->check(CLI::Range(10, 600000));
  std::string curve_dir;  // docs/control-plane.md "Security"
  app.add_option("--curve-dir", curve_dir,
                 "CURVE keys (server.key, server.key_secret, authorized_keys); "
                 "default: plaintext, for loopback and trusted networks only");
  app.add_option("--missed-heartbeats", missed,
                 "intervals without heartbeat before a worker is lost")
      ->check(CLI::Range(1, 100));
  // docs/control-plane.md "Limits": what one job may ask for.
  strata::coordinator::JobLimits limits;
  std::string metrics_listen, metrics_token;
  app.add_option("--metrics-listen", metrics_listen,
                 "HOST:PORT of the read-only HTTP listener serving /metrics "
                 "(Prometheus) and the dashboard (/), e.g. 127.0.0.1:9478; "
                 "port 0 picks a free one; default off")
      ->capture_default_str();
  app.add_option("--metrics-token", metrics_token,
                 "bearer token the listener requires (required off loopback)");
  app.add_option("--max-nodes", limits.max_nodes, "nodes one job may use")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-ranks-per-node", limits.max_ranks_per_node,
                 "ranks one job may run on one node")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  app.add_option("--max-ranks", limits.max_ranks,
                 "ranks of one job (nodes x ranks per node)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24))
      ->capture_default_str();
  app.add_option("--max-ranks-per-core", limits.max_ranks_per_core,
                 "ranks per CPU core or GPU a worker reported")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--max-command-bytes", limits.max_command_bytes,
                 "bytes of a job's launch.command")
      ->check(CLI::Range(size_t{1}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-env-bytes", limits.max_env_bytes,
                 "bytes of a job's launch.env (keys and values)")
      ->check(CLI::Range(size_t{0}, size_t{1} << 20))
      ->capture_default_str();
  app.add_option("--max-active-jobs", limits.max_active_jobs,
                 "pending and running jobs kept at once")
      ->check(CLI::Range(1, 1 << 24))
      ->capture_default_str();
  app.add_option("--max-active-launch-bytes", limits.max_active_launch_bytes,
                 "bytes of launch.command + launch.env across pending and "
                 "running jobs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40))
      ->capture_default_str();
  app.add_option("--max-active-ranks", limits.max_active_ranks,
                 "ranks across pending and running jobs")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 32))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  auto logger = strata::GetLogger("CTRL");
  strata::RouteProtobufLogs(logger);  // bad frames must not flood stderr
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) {
    std::cerr << "strata-coordinator: cannot create --state-dir " << state_dir
              << ": " << ec.message() << "\n";
    return 2;
  }
  // One connection per worker: thousands of descriptors on a large cluster.
  rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);

  std::optional<strata::control::CurveServerConfig> curve;
  if (!curve_dir.empty()) {
    auto loaded = strata::control::LoadCurveServerConfig(curve_dir);
    if (!loaded.ok()) {
      std::cerr << "strata-coordinator: --curve-dir: "
                << loaded.status().message() << "\n";
      return 2;
    }
    curve = *std::move(loaded);
  } else {
    logger->warn(
        "plaintext mode (no --curve-dir): nothing is authenticated and every "
        "peer that reaches the listen address acts as an admin; for a local "
        "run only (docs/security.md)");
  }
  // Under CURVE every launched rank gets a key of its own (docs/security.md).
  std::unique_ptr<strata::coordinator::RankKeys> rank_keys;
  if (curve) {
    rank_keys = std::make_unique<strata::coordinator::RankKeys>(
        curve->server.secret_key);
  }
  strata::SystemClock clock;
  auto store = strata::coordinator::StateStore::Open(state_dir + "/db", &clock);
  if (!store.ok()) {
    std::cerr << "strata-coordinator: " << store.status().message() << "\n";
    return 1;
  }
  namespace sc = strata::coordinator;
  sc::EventLog events(&clock, store->get());
  sc::LogStore logs(state_dir + "/logs");
  sc::KvStore kv(store->get());
  sc::JobManager jobs(&clock, store->get(), &events, &logs, &kv,
                      {.limits = limits, .rank_keys = rank_keys.get()});
  for (auto s : {events.Recover(), kv.Recover(), jobs.Recover()}) {
    if (!s.ok()) {
      std::cerr << "strata-coordinator: recovering state from " << state_dir
                << ": " << s.message() << "\n";
      return 1;
    }
  }
  logger->info("recovered {} jobs, {} KV keys from {}", jobs.List().jobs_size(),
               kv.size(), state_dir);
  sc::Service service(&clock,
                      {.heartbeat_interval_ms = heartbeat_ms,
                       .lost_after_ms = heartbeat_ms * missed},
                      {.jobs = &jobs,
                       .kv = &kv,
                       .events = &events,
                       .logs = &logs,
                       .store = store->get()});
  zmq::context_t ctx;
  strata::coordinator::RouterServer server(&ctx, &service, logger,
                                           std::move(curve), rank_keys.get());
  auto bound = server.Bind(listen);
  if (!bound.ok()) {
    std::cerr << "strata-coordinator: " << bound.status().message() << "\n";
    return 1;
  }
  logger->info("listening on {}", *bound);
  // /metrics and the dashboard's JSON: rendered on this loop when wanted,
  // served from the snapshots; the page itself is compiled in; traces are
  // made on the loop for the HTTP thread that asks (docs/observe.md).
  strata::observe::Published metrics(&clock);
  // The page polls every 2 s: render its JSON at most once a second.
  strata::observe::Published dashboard(
      &clock, {.refresh_ms = 1000, .max_age_ms = 3000});
  sc::TraceDownload traces(&clock);
  std::unique_ptr<strata::observe::HttpServer> http;
  if (!metrics_listen.empty()) {
    using strata::observe::HttpRequest, strata::observe::HttpResponse;
    auto snapshot = [](strata::observe::Published& p, const char* type) {
      return [&p, type](const HttpRequest&) {
        HttpResponse r;
        auto text = p.Get();
        r.status = text.ok() ? 200 : 503;
        r.content_type = type;
        r.body = text.ok() ? *text : std::string(text.status().message());
        return r;
      };
    };
    auto page = [](const HttpRequest&) {
      HttpResponse r;
      r.content_type = "text/html; charset=utf-8";
      r.body = strata::kDashboardFiles[0].contents;
      return r;
    };
    auto trace = [&traces](const HttpRequest& req) {
      HttpResponse r;
      auto job = req.params.find("job");
      if (job == req.params.end() || job->second.empty() ||
          job->second.size() > 128) {
        r.status = 400;
        r.body = "give the job: /api/trace.json?job=JOB_ID\n";
        return r;
      }
      auto text = traces.Get(job->second);
      if (!text.ok()) {
        r.status = absl::IsNotFound(text.status())             ? 404
                   : absl::IsDeadlineExceeded(text.status())   ? 503
                                                               : 409;
        r.body = std::string(text.status().message()) + "\n";
        return r;
      }
      r.content_type = "application/json";
      r.body = *std::move(text);
      return r;
    };
    auto started = strata::observe::HttpServer::Start(
        {.listen = metrics_listen, .token = metrics_token, .threads = 4},
        {{"/metrics",
          snapshot(metrics, "text/plain; version=0.0.4; charset=utf-8")},
         {"/", page},
         {"/api/dashboard.json", snapshot(dashboard, "application/json")},
         {"/api/trace.json", trace}});
    if (!started.ok()) {
      std::cerr << "strata-coordinator: --metrics-listen: "
                << started.status().message() << "\n";
      return 2;
    }
    http = *std::move(started);
    std::cout << "metrics " << http->url() << "/metrics" << std::endl;
    std::cout << "dashboard " << http->url() << "/" << std::endl;
  }
  std::cout << "listening " << *bound << std::endl;
  // Thread CPU nanoseconds spent making each (the metric
  // strata_coordinator_render_cpu_seconds_total): on the loop, and for
  // /metrics also on the HTTP thread that renders the loop's snapshot.
  struct RenderCpu {
    std::atomic<int64_t> dashboard{0}, metrics{0}, trace{0};
  };
  auto render_cpu = std::make_shared<RenderCpu>();
  auto timed = [](std::atomic<int64_t>& ns, auto&& f) {
    const double t0 = strata::ThreadCpuSeconds();
    f();
    ns += static_cast<int64_t>((strata::ThreadCpuSeconds() - t0) * 1e9);
  };
  // Under systemd (deploy/systemd/): READY=1 now that the socket is bound,
  // WATCHDOG=1 from the loop's ticks.
  strata::ServiceNotifier notifier;
  notifier.Ready("serving");
  auto render = [&] {
    notifier.Tick(clock.SteadyNowMs());
    if (!http) return;
    timed(render_cpu->trace, [&] { traces.Serve(jobs, service.registry()); });
    if (dashboard.Wanted()) {
      timed(render_cpu->dashboard, [&] {
        dashboard.Publish(sc::RenderDashboardJson(sc::CollectDashboard(
            jobs, events, service.registry(), clock.NowMs())));
      });
    }
    if (!metrics.Wanted()) return;
    timed(render_cpu->metrics, [&] {
      sc::MetricsInput in;
      in.jobs = jobs.List(/*with_steps=*/true);
      in.workers = service.registry().List();
      *in.workers.mutable_health() = service.Health();
      in.now_unix_ms = clock.NowMs();
      in.step_seconds = jobs.StepHistograms();
      in.heartbeat_rtt = service.registry().HeartbeatRtt();
      const auto rej = server.rejects();
      in.rejected = {{"oversized", rej.oversized},
                     {"malformed", rej.malformed},
                     {"wrong_version", rej.wrong_version},
                     {"empty_body", rej.empty_body},
                     {"unauthenticated", rej.unauthenticated}};
      // The exposition is written by the scraping thread, from this
      // snapshot (Published::Publish(render)).
      // Readers share the snapshot: one renders at a time.
      metrics.Publish([in = std::move(in), render_cpu, timed,
                       mu = std::make_shared<std::mutex>()]() mutable {
        std::lock_guard<std::mutex> lock(*mu);
        std::string text;
        timed(render_cpu->metrics, [&] {
          in.render_cpu_seconds = {
              {"dashboard", render_cpu->dashboard * 1e-9},
              {"metrics", render_cpu->metrics * 1e-9},
              {"trace", render_cpu->trace * 1e-9}};
          text = sc::RenderMetrics(in);
        });
        return text;
      });
    });
  };
  server.Run(g_stop, 50, render);
  notifier.Stopping();
  logger->info("stopping: handled {} requests, rejected {}", server.handled(),
               server.rejects().Total());
  return 0;
}
