// strata-bench control: one real strata-coordinator against thousands of
// simulated workers ("Benchmark").
//
// --procs child processes (control_sim.h) each own --workers/--procs DEALER
// sockets; every simulated worker registers with a probe, then heartbeats
// at 1 Hz (spread evenly over the second). Registration is timed; workers
// not registered within --register-timeout are reported (INCOMPLETE) and
// the phases run with the others. Phase 1 (--seconds) measures heartbeat
// round trips (p50/p99/max, client send -> reply received, so client-side
// polling delay is included: an upper bound on the coordinator's handling
// latency)
// and the coordinator's CPU time from /proc. Phase 2 submits a job of
// --workers x --ranks-per-worker ranks (16,384 by default) and measures the
// time until every simulated worker has received its launch orders
// (placement + per-node launch orders, handed out in heartbeat replies).
// Throughout both phases a scraper GETs the coordinator's /metrics every
// --scrape-every seconds (1; 0: never), as Prometheus would, and times each
// scrape (request sent to body received). Goals (issue 34): p99 < 10 ms
// while scraped; a scrape < 50 ms; the 16,384-rank job handed out in
// < 1.5 s with no event-loop step over 50 ms meanwhile (counted by the
// coordinator, strata_coordinator_loop_step_seconds, read before the submit
// and after the hand-out). Also printed: the coordinator's CPU per
// heartbeat and during the hand-out, so that figures from a machine the
// simulator shares can be projected, and the machine's load average.
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include <atomic>

#include <httplib.h>

#include "CLI/CLI.hpp"
#include "bench/control_sim.h"
#include "bench/registry.h"
#include "bench/sibling.h"
#include "common/clock.h"
#include "control/local_cluster.h"
#include "proto/control.pb.h"

namespace strata::bench {
namespace {

double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(in)), {});
  size_t p = s.rfind(')');
  if (p == std::string::npos) return 0;
  std::vector<std::string> f;
  std::string tok;
  for (size_t i = p + 2; i < s.size(); ++i) {
    if (s[i] == ' ') {
      f.push_back(tok);
      tok.clear();
    } else {
      tok += s[i];
    }
  }
  // Fields after the command: state is f[0]; utime, stime are fields 14, 15
  // of proc(5), i.e. f[11], f[12].
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
}

// The 1-minute load average: the simulator shares the machine's cores
// with the coordinator (and, on a shared machine, with everything else).
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  in >> load;
  return load;
}

// The coordinator's event-loop steps (strata_coordinator_loop_step_seconds
// {clock}) from one /metrics text: how many there were, and how many held
// the loop longer than `bound_s` (a bucket bound: 0.05).
struct LoopSteps {
  double total = 0, over = 0;
};
LoopSteps ParseLoopSteps(const std::string& text, const std::string& clock,
                         const std::string& bound) {
  auto value = [&](const std::string& key) {
    const size_t at = text.find("\n" + key + " ");
    return at == std::string::npos
               ? 0.0
               : std::strtod(text.c_str() + at + key.size() + 2, nullptr);
  };
  const std::string family = "strata_coordinator_loop_step_seconds";
  LoopSteps s;
  s.total = value(family + "_count{clock=\"" + clock + "\"}");
  s.over = s.total - value(family + "_bucket{clock=\"" + clock + "\",le=\"" +
                           bound + "\"}");
  return s;
}

// GET /metrics once (empty on failure).
std::string FetchMetrics(int port) {
  httplib::Client http("127.0.0.1", port);
  http.set_read_timeout(10, 0);
  auto res = http.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
}

struct BenchFlags {
  int workers = 4096, procs = 2, ranks_per_worker = 4;
  double seconds = 10;
  double register_s = 120;  // how long the simulator waits for registration
  double handout_s = 8;     // the hand-out phase, from the submit
  double scrape_every_s = 1;
  std::string format = "table";
};

// The scraper: GET /metrics every `every_s` seconds on its own thread until
// Stop(); times each scrape (request sent to body received).
class Scraper {
 public:
  Scraper(int port, double every_s) : port_(port), every_s_(every_s) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~Scraper() { Stop(); }
  void Stop() {
    running_ = false;
    if (thread_.joinable()) thread_.join();
  }

  // Read after Stop().
  std::vector<std::pair<double, double>> scrapes;  // (sent at, ms)
  size_t bytes = 0;
  int errors = 0;
  // The coordinator's own strata_coordinator_render_cpu_seconds_total
  // {what="metrics"} in the last scrape: its CPU time making /metrics.
  double render_cpu_s = 0;

 private:
  void Loop() {
    httplib::Client http("127.0.0.1", port_);
    http.set_read_timeout(5, 0);
    while (running_ && every_s_ > 0) {
      const double t0 = Now();
      auto res = http.Get("/metrics");
      const double ms = (Now() - t0) * 1e3;
      if (res && res->status == 200) {
        scrapes.emplace_back(t0, ms);
        bytes = res->body.size();
        const std::string key =
            "\nstrata_coordinator_render_cpu_seconds_total{what=\"metrics\"} ";
        if (size_t at = res->body.find(key); at != std::string::npos) {
          render_cpu_s = std::strtod(res->body.c_str() + at + key.size(), nullptr);
        }
      } else {
        ++errors;
      }
      while (running_ && Now() < t0 + every_s_)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  const int port_;
  const double every_s_;
  std::atomic<bool> running_{true};
  std::thread thread_;
};

// The child processes of RunChild, each simulating its share of the
// workers; `ready` says it registered them, `start` gives the start time.
struct Children {
  std::vector<pid_t> pids;
  std::vector<int> ready_fds, start_fds;
};

bool StartChildren(const std::string& endpoint, const BenchFlags& f,
                   const std::string& dir, Children* c) {
  for (int p = 0; p < f.procs; ++p) {
    int first = f.workers * p / f.procs, last = f.workers * (p + 1) / f.procs;
    int ready[2], start[2];
    if (pipe(ready) != 0 || pipe(start) != 0) return false;
    pid_t pid = fork();
    if (pid == 0) {
      close(ready[0]);
      close(start[1]);
      _exit(RunChild(endpoint, first, last - first, ready[1], start[0],
                     f.seconds, f.register_s, f.handout_s,
                     dir + "/child-" + std::to_string(p)));
    }
    close(ready[1]);
    close(start[0]);
    c->pids.push_back(pid);
    c->ready_fds.push_back(ready[0]);
    c->start_fds.push_back(start[1]);
  }
  return true;
}

// Phase 2: one job over every simulated worker, submitted from this process
// (the scraper thread runs: no fork from here on). Returns the
// coordinator's refusal of the job, empty if it took it.
std::string SubmitJob(const std::string& endpoint, const BenchFlags& f) {
  zmq::context_t ctx;
  zmq::socket_t s(ctx, zmq::socket_type::dealer);
  s.set(zmq::sockopt::linger, 0);
  s.connect(endpoint);
  control::Request req;
  req.set_protocol_version(control::PROTOCOL_VERSION_CURRENT);
  req.set_request_id(1);
  auto* spec = req.mutable_submit_job()->mutable_spec();
  spec->set_name("bench");
  spec->mutable_launch()->add_command("/bin/true");
  spec->mutable_launch()->set_nodes(f.workers);
  spec->mutable_launch()->set_ranks_per_node(f.ranks_per_worker);
  std::string bytes = req.SerializeAsString();
  s.send(zmq::buffer(bytes));
  zmq::message_t reply;
  s.set(zmq::sockopt::rcvtimeo, 10000);
  std::string refused;
  control::Reply decoded;
  if (!s.recv(reply)) {
    refused = "NO ANSWER: the coordinator did not answer the submit within "
              "10 s (not a refusal; an overloaded coordinator or machine)";
  } else if (decoded.ParseFromArray(reply.data(), reply.size()) &&
             decoded.status().code() != 0) {
    refused = decoded.status().message();
  }
  if (!refused.empty()) {
    std::fprintf(stderr, "strata-bench control: job refused: %s\n",
                 refused.c_str());
  }
  return refused;
}

// What one run measured.
struct Report {
  bool all_registered = true;
  int registered = 0;  // workers registered within --register-timeout
  double registration_s = 0;
  double start = 0, submit_at = 0;
  double cpu_pct = 0;
  int failures = 0;
  std::vector<double> lat1, lat2;  // heartbeat round trips, phase 1 and 2
  double last_order = 0;
  int with_orders = 0;
  double handout_s = -1;
  std::string refused;  // the coordinator's refusal of the job, if any
  std::vector<double> scrape_ms, scrape2_ms;  // steady phase, hand-out
  double first_order = 0;   // earliest time a worker got its orders
  double cpu_steady_s = 0;  // coordinator CPU in the steady phase
  double cpu_handout_s = 0;  // ... from the submit to the end
  double handout_end = 0;    // when the hand-out phase ended
  double load_before = -1, load_after = -1;
  // Loop steps over 50 ms during the hand-out (wall, CPU) and in total.
  LoopSteps wall_steps, cpu_steps;
  // Steady phase: loop steps over 1, 10 and 50 ms (wall, CPU), and the
  // simulator's CPU (all client processes), to split the round trip into
  // the coordinator's handling and waiting for a core.
  std::string metrics_steady_start;
  LoopSteps steady_wall[3], steady_cpu[3];
  double sim_cpu_steady_s = 0;
};

// Latencies and order arrival times the children wrote to DIR/child-P.
void ReadChildResults(const std::string& dir, int procs, Report* r) {
  for (int p = 0; p < procs; ++p) {
    std::ifstream in(dir + "/child-" + std::to_string(p));
    std::string kind;
    double v;
    while (in >> kind >> v) {
      if (kind == "1") r->lat1.push_back(v);
      if (kind == "2") r->lat2.push_back(v);
      if (kind == "o" && v > 0) {
        ++r->with_orders;
        r->last_order = std::max(r->last_order, v);
        r->first_order = r->first_order == 0 ? v : std::min(r->first_order, v);
      }
    }
  }
}

// Scrapes in the steady phase, and while the job was placed and handed out
// (the placement holds the event loop, docs/control-plane.md).
void SplitScrapes(const Scraper& scraper, Report* r) {
  for (const auto& [at, ms] : scraper.scrapes) {
    if (at >= r->start && at < r->submit_at) r->scrape_ms.push_back(ms);
    if (at >= r->submit_at) r->scrape2_ms.push_back(ms);
  }
}

void PrintJson(const BenchFlags& f, const Report& r, const Scraper& s) {
  std::string refused = r.refused;  // a JSON string: no quotes or escapes
  std::replace_if(
      refused.begin(), refused.end(),
      [](char c) { return c == '"' || c == '\\' || c < ' '; }, '\'');
  std::printf(
      "{\"workers\": %d, \"procs\": %d, \"registered\": %d, "
      "\"registration_s\": %.3f, "
      "\"heartbeats\": %zu, \"p50_ms\": %.3f, \"p99_ms\": %.3f, "
      "\"max_ms\": %.3f, \"coordinator_cpu_pct\": %.1f, \"ranks\": %d, "
      "\"handout_s\": %.3f, \"handout_p99_ms\": %.3f, "
      "\"workers_with_orders\": %d, \"scrapes\": %zu, "
      "\"scrape_p50_ms\": %.3f, \"scrape_max_ms\": %.3f, "
      "\"scrape_handout_max_ms\": %.3f, "
      "\"scrape_bytes\": %zu, \"scrape_errors\": %d, "
      "\"cpu_per_heartbeat_ms\": %.4f, \"first_order_s\": %.3f, "
      "\"handout_cpu_s\": %.3f, \"handout_steps_over_50ms_wall\": %.0f, "
      "\"handout_steps_over_50ms_cpu\": %.0f, \"load_before\": %.2f, "
      "\"load_after\": %.2f, \"steady_steps\": %.0f, "
      "\"steady_steps_over_1ms_wall\": %.0f, "
      "\"steady_steps_over_1ms_cpu\": %.0f, "
      "\"steady_steps_over_10ms_wall\": %.0f, "
      "\"steady_steps_over_10ms_cpu\": %.0f, \"simulator_cpu_pct\": %.1f, "
      "\"refused\": \"%s\"}\n",
      f.workers, f.procs, r.registered, r.registration_s, r.lat1.size(),
      Percentile(r.lat1, 0.5), Percentile(r.lat1, 0.99),
      Percentile(r.lat1, 1.0), r.cpu_pct, f.workers * f.ranks_per_worker,
      r.handout_s, Percentile(r.lat2, 0.99), r.with_orders, r.scrape_ms.size(),
      Percentile(r.scrape_ms, 0.5), Percentile(r.scrape_ms, 1.0),
      Percentile(r.scrape2_ms, 1.0), s.bytes, s.errors,
      r.lat1.empty() ? 0.0 : 1e3 * r.cpu_steady_s / r.lat1.size(),
      r.first_order > 0 ? r.first_order - r.submit_at : -1.0, r.cpu_handout_s,
      r.wall_steps.over, r.cpu_steps.over, r.load_before, r.load_after,
      r.steady_wall[0].total, r.steady_wall[0].over, r.steady_cpu[0].over,
      r.steady_wall[1].over, r.steady_cpu[1].over,
      100.0 * r.sim_cpu_steady_s / f.seconds, refused.c_str());
}

void PrintTable(const BenchFlags& f, const Report& r, const Scraper& s) {
  std::printf(
      "coordinator vs %d simulated workers (%d processes), 1 Hz heartbeats\n",
      f.workers, f.procs);
  if (r.all_registered) {
    std::printf("  registration of all workers     %8.3f s\n",
                r.registration_s);
  } else {
    std::printf(
        "  registration                    %d of %d workers within %.3f s "
        "(INCOMPLETE; --register-timeout %.0f)\n",
        r.registered, f.workers, r.registration_s, f.register_s);
  }
  std::printf("  heartbeats measured             %8zu\n", r.lat1.size());
  std::printf(
      "  round trip p50 / p99 / max      %8.3f / %.3f / %.3f ms   (goal p99 "
      "< 10 ms)\n",
      Percentile(r.lat1, 0.5), Percentile(r.lat1, 0.99),
      Percentile(r.lat1, 1.0));
  std::printf("  coordinator CPU                 %8.1f %% of one core\n",
              r.cpu_pct);
  std::printf("  coordinator CPU per heartbeat   %8.3f ms\n",
              r.lat1.empty() ? 0.0 : 1e3 * r.cpu_steady_s / r.lat1.size());
  std::printf(
      "  loop steps, steady              %8.0f; over 1 / 10 / 50 ms: wall "
      "%.0f / %.0f / %.0f, CPU %.0f / %.0f / %.0f\n",
      r.steady_wall[0].total, r.steady_wall[0].over, r.steady_wall[1].over,
      r.steady_wall[2].over, r.steady_cpu[0].over, r.steady_cpu[1].over,
      r.steady_cpu[2].over);
  std::printf("  simulator CPU, steady           %8.1f %% of one core\n",
              100.0 * r.sim_cpu_steady_s / f.seconds);
  const int ranks = f.workers * f.ranks_per_worker;
  if (!r.refused.empty()) {
    std::printf("  %d-rank job %s%s\n", ranks,
                r.refused.rfind("NO ANSWER", 0) == 0 ? "" : "REFUSED: ",
                r.refused.c_str());
  } else if (r.handout_s < 0) {
    std::printf(
        "  %d-rank job placed, but only %d of %d workers had orders when "
        "the hand-out phase ended %.1f s after the submit   (INCOMPLETE)\n",
        ranks, r.with_orders, f.workers, r.handout_end - r.submit_at);
  } else {
    std::printf(
        "  %d-rank job placed, orders at all %d workers after %.3f s   "
        "(goal < 1.5 s; first orders after %.3f s)\n",
        ranks, r.with_orders, r.handout_s, r.first_order - r.submit_at);
  }
  std::printf("  round trip p99 during hand-out  %8.3f ms\n",
              Percentile(r.lat2, 0.99));
  if (r.refused.empty()) {
    std::printf(
        "  loop steps over 50 ms, hand-out %6.0f wall, %.0f CPU of %.0f "
        "steps   (goal 0)\n",
        r.wall_steps.over, r.cpu_steps.over, r.wall_steps.total);
    std::printf("  coordinator CPU, hand-out       %8.3f s\n", r.cpu_handout_s);
  }
  std::printf("  machine load (1-min average)    %8.2f before, %.2f after "
              "(2 cores)\n",
              r.load_before, r.load_after);
  if (f.scrape_every_s <= 0) return;
  std::printf(
      "  /metrics scraped every %.3g s    %8zu scrapes, p50 %.3f ms, max "
      "%.3f ms, %zu bytes, %d failed   (goal < 50 ms)\n",
      f.scrape_every_s, r.scrape_ms.size(), Percentile(r.scrape_ms, 0.5),
      Percentile(r.scrape_ms, 1.0), s.bytes, s.errors);
  std::printf("  /metrics scrape max during hand-out %.3f ms\n",
              Percentile(r.scrape2_ms, 1.0));
  std::printf(
      "  making /metrics                 %8.3f ms CPU per scrape (loop "
      "snapshot + scraping thread; strata_coordinator_render_cpu_seconds_total)\n",
      s.scrapes.empty() ? 0.0 : 1e3 * s.render_cpu_s / s.scrapes.size());
}

bool ParseBenchFlags(int argc, char** argv, BenchFlags* f, int* exit_code) {
  CLI::App app{"strata-bench control: coordinator under many workers"};
  app.add_option("--workers", f->workers, "simulated workers")
      ->check(CLI::Range(1, 65536));
  app.add_option("--procs", f->procs, "client processes")
      ->check(CLI::Range(1, 64));
  app.add_option("--ranks-per-worker", f->ranks_per_worker,
                 "ranks per node of the placed job")
      ->check(CLI::Range(1, 64));
  app.add_option("--seconds", f->seconds, "steady heartbeat phase length")
      ->check(CLI::Range(1.0, 600.0));
  app.add_option("--register-timeout", f->register_s,
                 "seconds the simulator waits for every worker to register "
                 "before the measured phases start without the rest")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--handout-seconds", f->handout_s,
                 "length of the hand-out phase after the submit")
      ->check(CLI::Range(2.0, 600.0));
  app.add_option("--scrape-every", f->scrape_every_s,
                 "seconds between /metrics scrapes (0: no scraping)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--format", f->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    *exit_code = app.exit(e);
    return false;
  }
  return true;
}

// The coordinator alone (the workers are simulated); its metrics port from
// the "metrics http://127.0.0.1:P/metrics" line, 0 if it did not start.
std::unique_ptr<control::LocalCluster> StartCoordinator(
    const std::string& dir, const Clock* clock, int* metrics_port) {
  control::LocalClusterOptions o;
  o.dir = dir;
  o.coordinator_binary = FindSibling("strata-coordinator", "coordinator");
  o.workers = 0;
  o.heartbeat_ms = 1000;
  o.state_subdir = "state";
  o.coordinator_args = {"--missed-heartbeats", "5", "--metrics-listen",
                        "127.0.0.1:0"};
  auto cluster = control::LocalCluster::Start(std::move(o), clock);
  *metrics_port = 0;
  if (!cluster.ok()) return nullptr;
  const std::string url = (*cluster)->Announced("metrics");
  if (!url.empty()) *metrics_port = std::atoi(url.c_str() + url.rfind(':') + 1);
  return *std::move(cluster);
}

// Phase 1: waits for every child to register its workers, starts the
// measured phase in 0.5 s and samples the coordinator's CPU across it.
void SteadyPhase(const Children& children, int total_workers, pid_t coord,
                 double seconds, int metrics_port, Report* r) {
  const double reg_start = Now();
  for (size_t p = 0; p < children.ready_fds.size(); ++p) {
    int32_t n = 0;
    if (read(children.ready_fds[p], &n, sizeof(n)) == sizeof(n)) {
      r->registered += n;
    }
  }
  r->all_registered = r->registered == total_workers;
  r->registration_s = Now() - reg_start;
  r->start = Now() + 0.5;
  for (int fd : children.start_fds) (void)!write(fd, &r->start, sizeof(r->start));
  while (Now() < r->start)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double cpu0 = CpuSeconds(coord);
  double sim0 = 0;
  for (pid_t p : children.pids) sim0 += CpuSeconds(p);
  r->metrics_steady_start = FetchMetrics(metrics_port);
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  r->cpu_steady_s = CpuSeconds(coord) - cpu0;
  for (pid_t p : children.pids) r->sim_cpu_steady_s += CpuSeconds(p);
  r->sim_cpu_steady_s -= sim0;
  r->cpu_pct = 100.0 * r->cpu_steady_s / seconds;
}

int ControlBench(int argc, char** argv) {
  BenchFlags f;
  if (int code = 0; !ParseBenchFlags(argc, argv, &f, &code)) return code;
  RaiseFdLimit();
  char tmpl[] = "/tmp/strata-bench-control-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return 1;
  const std::string dir = tmpl;
  SystemClock clock;
  int metrics_port = 0;
  auto cluster = StartCoordinator(dir, &clock, &metrics_port);
  if (cluster == nullptr || metrics_port <= 0) {
    std::fprintf(stderr,
                 "strata-bench control: coordinator did not start (%s)\n",
                 (dir + "/coordinator.log").c_str());
    return 1;
  }
  Children children;
  if (!StartChildren(cluster->endpoint(), f, dir, &children)) return 1;
  Scraper scraper(metrics_port, f.scrape_every_s);
  Report r;
  r.load_before = LoadAverage();
  SteadyPhase(children, f.workers, cluster->coordinator_pid(), f.seconds,
              metrics_port, &r);
  const std::string metrics_before = FetchMetrics(metrics_port);
  const char* bounds[3] = {"0.001", "0.01", "0.05"};
  for (int b = 0; b < 3; ++b) {
    for (auto [clock, out] : {std::pair{"wall", &r.steady_wall[b]},
                              std::pair{"cpu", &r.steady_cpu[b]}}) {
      const LoopSteps a =
          ParseLoopSteps(r.metrics_steady_start, clock, bounds[b]);
      const LoopSteps z = ParseLoopSteps(metrics_before, clock, bounds[b]);
      *out = {z.total - a.total, z.over - a.over};
    }
  }
  const double cpu_before = CpuSeconds(cluster->coordinator_pid());
  r.submit_at = Now();
  r.refused = SubmitJob(cluster->endpoint(), f);
  for (pid_t p : children.pids) {
    int st = 0;
    waitpid(p, &st, 0);
    r.failures += !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  r.handout_end = Now();
  r.cpu_handout_s = CpuSeconds(cluster->coordinator_pid()) - cpu_before;
  const std::string metrics_after = FetchMetrics(metrics_port);
  for (auto [clock, out] : {std::pair{"wall", &r.wall_steps},
                            std::pair{"cpu", &r.cpu_steps}}) {
    const LoopSteps a = ParseLoopSteps(metrics_before, clock, "0.05");
    const LoopSteps b = ParseLoopSteps(metrics_after, clock, "0.05");
    *out = {b.total - a.total, b.over - a.over};
  }
  r.load_after = LoadAverage();
  scraper.Stop();
  cluster->Stop();
  ReadChildResults(dir, f.procs, &r);
  if (r.with_orders == f.workers) r.handout_s = r.last_order - r.submit_at;
  SplitScrapes(scraper, &r);
  if (f.format == "json") {
    PrintJson(f, r, scraper);
  } else {
    PrintTable(f, r, scraper);
  }
  std::filesystem::remove_all(dir);
  return r.failures == 0 && r.all_registered && r.handout_s >= 0 &&
                 scraper.errors == 0
             ? 0
             : 1;
}

}  // namespace

STRATA_BENCH("control",
             "coordinator heartbeat latency and placement hand-out at scale",
             ControlBench);

}  // namespace strata::bench
