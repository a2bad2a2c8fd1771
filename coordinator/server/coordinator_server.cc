#include "coordinator/server/coordinator_server.h"

#include <filesystem>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/metrics/dashboard_input.h"
#include "coordinator/metrics/dashboard_render.h"
#include "coordinator/metrics/metrics_render.h"
#include "coordinator/server/http_routes.h"

namespace strata::coordinator {
namespace {

// ROUTER loop tick: how often Tick() runs when no request arrives.
constexpr int kTickMs = 50;

// InvalidArgument is reserved for bad flags (the header): a state or system
// error that happens to carry it is reported as FailedPrecondition.
Status NotAFlagError(const Status& s) {
  if (!absl::IsInvalidArgument(s)) return s;
  return absl::FailedPreconditionError(s.message());
}

}  // namespace

CoordinatorServer::CoordinatorServer(CoordinatorOptions options, Logger logger)
    : options_(std::move(options)), logger_(std::move(logger)) {}

CoordinatorServer::~CoordinatorServer() = default;

Status CoordinatorServer::Init() {
  RETURN_IF_ERROR(InitStateDir());
  RETURN_IF_ERROR(InitSecurity());
  RETURN_IF_ERROR(InitState());
  RETURN_IF_ERROR(InitRouter());
  return InitHttp();
}

Status CoordinatorServer::InitStateDir() {
  std::error_code ec;
  std::filesystem::create_directories(options_.state_dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot create --state-dir ", options_.state_dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

Status CoordinatorServer::InitSecurity() {
  if (options_.curve_dir.empty()) {
    logger_->warn(
        "plaintext mode (no --curve-dir): nothing is authenticated and every "
        "peer that reaches the listen address acts as an admin; for a local "
        "run only (docs/security.md)");
    return absl::OkStatus();
  }
  auto loaded = control::LoadCurveServerConfig(options_.curve_dir);
  if (!loaded.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--curve-dir: ", loaded.status().message()));
  }
  curve_ = *std::move(loaded);
  // Under CURVE every launched rank gets a key of its own (docs/security.md).
  rank_keys_ = std::make_unique<RankKeys>(curve_->server.secret_key);
  return absl::OkStatus();
}

Status CoordinatorServer::InitState() {
  const std::string& dir = options_.state_dir;
  auto store = StateStore::Open(dir + "/db", &clock_);
  if (!store.ok()) return NotAFlagError(store.status());
  store_ = *std::move(store);
  events_ = std::make_unique<EventLog>(&clock_, store_.get());
  logs_ = std::make_unique<LogStore>(dir + "/logs");
  kv_ = std::make_unique<KvStore>(store_.get());
  JobOptions jobs = options_.jobs;
  jobs.rank_keys = rank_keys_.get();
  jobs_ = std::make_unique<JobManager>(&clock_, store_.get(), events_.get(),
                                       logs_.get(), kv_.get(), jobs);
  for (auto s : {events_->Recover(), kv_->Recover(), jobs_->Recover()}) {
    if (!s.ok()) {
      return NotAFlagError(Status(
          s.code(),
          absl::StrCat("recovering state from ", dir, ": ", s.message())));
    }
  }
  logger_->info("recovered {} jobs, {} KV keys from {}",
                jobs_->List().jobs_size(), kv_->size(), dir);
  return absl::OkStatus();
}

Status CoordinatorServer::InitRouter() {
  service_ = std::make_unique<Service>(
      &clock_,
      RegistryOptions{
          .heartbeat_interval_ms = options_.heartbeat_ms,
          .lost_after_ms = options_.heartbeat_ms * options_.missed_heartbeats},
      Services{.jobs = jobs_.get(),
               .kv = kv_.get(),
               .events = events_.get(),
               .logs = logs_.get(),
               .store = store_.get()});
  router_ = std::make_unique<RouterServer>(&ctx_, service_.get(), logger_,
                                           std::move(curve_), rank_keys_.get());
  auto bound = router_->Bind(options_.listen);
  if (!bound.ok()) return NotAFlagError(bound.status());
  endpoint_ = *bound;
  logger_->info("listening on {}", endpoint_);
  return absl::OkStatus();
}

Status CoordinatorServer::InitHttp() {
  if (options_.metrics_listen.empty()) return absl::OkStatus();
  auto started = observe::HttpServer::Start(
      {.listen = options_.metrics_listen,
       .token = options_.metrics_token,
       .threads = 4},
      CoordinatorRoutes(&metrics_, &dashboard_, &traces_));
  if (!started.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics-listen: ", started.status().message()));
  }
  http_ = *std::move(started);
  return absl::OkStatus();
}

std::string CoordinatorServer::http_url() const {
  return http_ ? http_->url() : std::string();
}

void CoordinatorServer::Run(const std::atomic<bool>& stop) {
  notifier_.Ready("serving");
  router_->Run(stop, kTickMs, [this] { Tick(); });
  notifier_.Stopping();
  logger_->info("stopping: handled {} requests, rejected {}",
                router_->handled(), router_->rejects().Total());
}

void CoordinatorServer::Tick() {
  notifier_.Tick(clock_.SteadyNowMs());
  if (!http_) return;
  render_cpu_.Time(RenderCpu::kTrace,
                   [&] { traces_.Serve(*jobs_, service_->registry()); });
  if (dashboard_.Wanted()) PublishDashboard();
  if (metrics_.Wanted()) PublishMetrics();
}

void CoordinatorServer::PublishDashboard() {
  render_cpu_.Time(RenderCpu::kDashboard, [&] {
    dashboard_.Publish(RenderDashboardJson(CollectDashboard(
        *jobs_, *events_, service_->registry(), clock_.NowMs())));
  });
}

// The loop takes the inputs; the exposition is written by the scraping
// thread, from this snapshot (Published::Publish(render)). Readers share
// the snapshot: one renders at a time.
void CoordinatorServer::PublishMetrics() {
  render_cpu_.Time(RenderCpu::kMetrics, [&] {
    MetricsInput in;
    in.jobs = jobs_->Summaries();  // without per-node and per-rank lists
    in.workers = service_->registry().List(/*probes=*/false);
    *in.workers.mutable_health() = service_->Health();
    in.now_unix_ms = clock_.NowMs();
    in.step_seconds = jobs_->StepHistograms();
    in.heartbeat_rtt = service_->registry().HeartbeatRtt();
    in.loop_steps = {.buckets = LoopStats::Buckets(),
                     .wall = router_->loop_stats().wall(),
                     .cpu = router_->loop_stats().cpu()};
    const auto rej = router_->rejects();
    in.rejected = {{"oversized", rej.oversized},
                   {"malformed", rej.malformed},
                   {"wrong_version", rej.wrong_version},
                   {"empty_body", rej.empty_body},
                   {"unauthenticated", rej.unauthenticated}};
    metrics_.Publish([in = std::move(in), cpu = &render_cpu_,
                      mu = std::make_shared<std::mutex>()]() mutable {
      std::lock_guard<std::mutex> lock(*mu);
      std::string text;
      cpu->Time(RenderCpu::kMetrics, [&] {
        in.render_cpu_seconds = cpu->Seconds();
        text = RenderMetrics(in);
      });
      return text;
    });
  });
}

}  // namespace strata::coordinator
