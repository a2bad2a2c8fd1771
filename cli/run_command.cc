// `strata run [--nodes N] [--ranks-per-node R] [job.yaml | -- COMMAND ...]`:
// the embedded default (docs/architecture.md). Starts a coordinator and N local
// workers as separate processes (simulated nodes on this host), submits the
// job, streams its output and events, exits with the job's status, and
// stops every process it started (SIGTERM, then SIGKILL after 5 s). Ctrl-C
// cancels the job first. Every rank gets the torchrun environment, so
// `strata run --nodes 2 --ranks-per-node 2 -- python3 train.py` runs an
// unmodified torch.distributed script.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/control_client.h"
#include "cli/inject_spec.h"
#include "cli/job_args.h"
#include "common/subprocess.h"
#include "control/local_cluster.h"
#include "observe/goodput.h"

namespace strata::cli {
namespace {

std::atomic<bool> g_interrupted{false};
void OnInterrupt(int) { g_interrupted = true; }

struct RunArgs {
  JobArgs job;
  int heartbeat_ms = 500;
  std::string state_dir;
  bool keep = false;
  int64_t kill_worker_at_step = -1;
  std::vector<std::string> inject;  // InjectSpec texts
  double startup_timeout_s = 30;
  bool plaintext = false;
  std::string dashboard;  // HOST:PORT of the coordinator's web listener
};

// strata-coordinator / strata-worker / strata-inject next to this binary
// (installed) or in the build tree's sibling directories; $STRATA_BIN_DIR wins.
std::string FindBinary(const std::string& name) {
  std::vector<std::string> dirs;
  if (const char* d = getenv("STRATA_BIN_DIR")) dirs.push_back(d);
  char self[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    std::filesystem::path dir = std::filesystem::path(self).parent_path();
    dirs.push_back(dir.string());
    dirs.push_back((dir.parent_path() / "coordinator").string());
    dirs.push_back((dir.parent_path() / "worker").string());
    dirs.push_back((dir.parent_path() / "fault").string());
  }
  for (const auto& d : dirs) {
    std::string p = d + "/" + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  Fail("run", kExitFailed,
       absl::StrCat("cannot find ", name,
                    " next to strata (set STRATA_BIN_DIR)"));
}

// What `strata run` saw of the job's step telemetry (control.StepReport,
// sampled at each status poll): the loss curve, the steps each restart
// lost, and the checkpoint stall (the *_total section convention of
// docs/runtime.md). Printed when the job reported steps.
class RunSummary {
 public:
  void Observe(const control::JobInfo& job) {
    goodput_ = job.goodput();
    for (const auto& s : job.steps()) {
      Attempt& a = attempts_[job.attempt()];
      if (a.first_step == 0 || s.step() < a.first_step) a.first_step = s.step();
      a.last_step = std::max(a.last_step, s.step());
      auto total = s.section_seconds().find("checkpoint_stall_total");
      if (total != s.section_seconds().end()) {
        double& stall = a.stall_by_rank[s.rank()];
        stall = std::max(stall, total->second);
      }
      if (s.loss() == s.loss()) loss_[s.step()] = s.loss();  // not NaN
    }
  }

  void Print() const {
    if (loss_.empty()) return;
    std::fprintf(stderr, "\n[strata] summary\n  loss curve:\n");
    const auto [lo, hi] = std::minmax_element(
        loss_.begin(), loss_.end(),
        [](const auto& a, const auto& b) { return a.second < b.second; });
    const int64_t last = loss_.rbegin()->first;
    const int64_t every = std::max<int64_t>(1, last / 12);
    int64_t next = 0;
    for (const auto& [step, loss] : loss_) {
      if (step < next && step != last) continue;
      next = step + every;
      const double span = hi->second - lo->second;
      const int bar =
          span > 0 ? static_cast<int>(40 * (loss - lo->second) / span) + 1 : 1;
      std::fprintf(stderr, "    step %6lld  loss %9.5f  %s\n",
                   static_cast<long long>(step), loss,
                   std::string(bar, '#').c_str());
    }
    double stall = 0, stall_ranks = 0;
    const Attempt* prev = nullptr;
    for (const auto& [attempt, a] : attempts_) {
      double worst = 0;
      for (const auto& [rank, s] : a.stall_by_rank) worst = std::max(worst, s);
      stall += worst;
      stall_ranks += a.stall_by_rank.empty() ? 0 : 1;
      if (prev != nullptr) {
        std::fprintf(stderr,
                     "  attempt %d: resumed at step %lld after reaching %lld: "
                     "%lld step(s) lost to the fault\n",
                     attempt, static_cast<long long>(a.first_step - 1),
                     static_cast<long long>(prev->last_step),
                     static_cast<long long>(std::max<int64_t>(
                         0, prev->last_step - a.first_step + 1)));
      }
      prev = &a;
    }
    if (stall_ranks > 0) {
      std::fprintf(
          stderr,
          "  checkpoint stall (SaveAsync + snapshot fence, slowest rank): "
          "%.3f s in total\n",
          stall);
    }
    std::fprintf(
        stderr, "  goodput: %s\n",
        observe::DescribeGoodput(observe::FromProto(goodput_)).c_str());
  }

 private:
  control::Goodput goodput_;
  struct Attempt {
    int64_t first_step = 0, last_step = 0;
    std::map<int, double> stall_by_rank;
  };
  std::map<int, Attempt> attempts_;
  std::map<int64_t, double> loss_;
};

// The --inject and --kill-worker-at-step faults, validated against the
// number of local workers (`workers`: the job's `nodes` and its spares);
// --kill-worker-at-step kills the job's last node.
std::vector<InjectSpec> ParseInjections(const RunArgs& a, int nodes,
                                        int workers) {
  std::vector<InjectSpec> injects;
  for (const std::string& text : a.inject) {
    auto spec_or = ParseInjectSpec(text);
    if (!spec_or.ok()) {
      Fail("run", kExitBadInput, std::string(spec_or.status().message()));
    }
    if ((spec_or->kind == InjectSpec::Kind::kKillWorker ||
         spec_or->kind == InjectSpec::Kind::kSlowNode) &&
        spec_or->node >= workers) {
      Fail("run", kExitBadInput,
           absl::StrCat("--inject '", text, "': node ", spec_or->node,
                        " does not exist (", workers, " node(s))"));
    }
    injects.push_back(*std::move(spec_or));
  }
  if (a.kill_worker_at_step >= 0 && nodes >= 2) {
    InjectSpec kw;
    kw.kind = InjectSpec::Kind::kKillWorker;
    kw.node = nodes - 1;
    kw.step = a.kill_worker_at_step;
    kw.text = absl::StrCat("kill-worker:node=", kw.node, ",step=", kw.step);
    injects.push_back(kw);
  }
  return injects;
}

// The run's state directory (--state-dir, or a new temporary one), and the
// embedded default checkpoint store in it (docs/checkpoint.md): RocksDB in
// the run's state directory, so a restarted attempt resumes from it.
std::string PrepareStateDir(const RunArgs& a, JobLaunch* l) {
  std::string dir = a.state_dir;
  if (dir.empty()) {
    char tmpl[] = "/tmp/strata-run-XXXXXX";
    if (mkdtemp(tmpl) == nullptr) Fail("run", kExitFailed, "mkdtemp failed");
    dir = tmpl;
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    Fail("run", kExitBadInput, "cannot create " + dir + ": " + ec.message());
  if (l->checkpoint_uri().empty()) {
    l->set_checkpoint_uri("rocksdb://" +
                          std::filesystem::absolute(dir).string() +
                          "/checkpoints");
  }
  return dir;
}

// A throwaway CURVE key set for this run's own processes (DIR/curve); empty
// with --plaintext.
std::string MakeRunCurveDir(const RunArgs& a, const std::string& dir) {
  if (a.plaintext) {
    unsetenv(control::kCurveDirEnv);
    return "";
  }
  std::error_code ec;
  std::filesystem::remove_all(dir + "/curve", ec);
  auto made = control::MakeEphemeralCurveDir(dir);
  if (!made.ok())
    Fail("run", kExitFailed, std::string(made.status().message()));
  return *made;
}

// The coordinator and `nodes` workers (control/local_cluster.h): state in
// DIR/coordinator, logs DIR/coordinator.log and DIR/node-I.log.
std::unique_ptr<control::LocalCluster> StartCluster(
    const RunArgs& a, const std::string& dir, const std::string& curve_dir,
    int nodes, const Clock* clock) {
  control::LocalClusterOptions o;
  o.dir = dir;
  o.coordinator_binary = FindBinary("strata-coordinator");
  o.worker_binary = FindBinary("strata-worker");
  o.workers = nodes;
  o.heartbeat_ms = a.heartbeat_ms;
  o.startup_timeout_ms = static_cast<int64_t>(a.startup_timeout_s * 1000);
  if (!curve_dir.empty()) {
    o.coordinator_args = {"--curve-dir", curve_dir};
    o.worker_args = {"--curve-dir", curve_dir};
  }
  if (!a.dashboard.empty()) {
    o.coordinator_args.insert(o.coordinator_args.end(),
                              {"--metrics-listen", a.dashboard});
  }
  auto cluster = control::LocalCluster::Start(std::move(o), clock);
  if (!cluster.ok()) {
    Fail("run", kExitFailed, std::string(cluster.status().message()));
  }
  return *std::move(cluster);
}

// Local wall time "HH:MM:SS.mmm" of `unix_ms` (now when negative), as the
// coordinator's log lines carry it: `strata-bench fault` times detection
// and recovery from an injection to the events in DIR/events.log.
std::string LocalTimeMs(int64_t unix_ms = -1) {
  if (unix_ms < 0) {
    unix_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count();
  }
  const time_t t = static_cast<time_t>(unix_ms / 1000);
  const int ms = static_cast<int>(unix_ms % 1000);
  struct tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%02d:%02d:%02d.%03d", tm.tm_hour, tm.tm_min,
                tm.tm_sec, ms);
  return buf;
}

// Runs the requested faults once a rank reports their step: rank faults
// through strata-inject (its log DIR/inject.log), kill-worker by SIGKILL.
class FaultInjector {
 public:
  FaultInjector(std::vector<InjectSpec> injects, control::LocalCluster* cluster)
      : injects_(std::move(injects)), cluster_(cluster) {}

  // Called at each status poll; `step` is the newest any rank reported.
  void OnStatus(const control::JobInfo& job, int64_t step) {
    for (auto it = injects_.begin(); it != injects_.end();) {
      const int pid = TargetPid(*it, job);
      const bool rank_fault = it->kind != InjectSpec::Kind::kKillWorker;
      if (step < it->step || (rank_fault && pid <= 0)) {
        ++it;
        continue;
      }
      std::fprintf(stderr, "[strata] fault injection at step %lld (%s): %s\n",
                   static_cast<long long>(step), LocalTimeMs().c_str(),
                   it->text.c_str());
      Inject(*it, pid);
      it = injects_.erase(it);
    }
  }

  // A job can end before this command sees the step an injection waits for
  // (steps of a few ms pass between two status polls): say so, or the run
  // reads as if the fault had been survived.
  void ReportNotRun(int64_t step) const {
    for (const auto& it : injects_) {
      std::fprintf(stderr,
                   "[strata] fault injection did not run: %s (the newest step "
                   "seen was %lld; make the job longer or inject earlier)\n",
                   it.text.c_str(), static_cast<long long>(step));
    }
  }

 private:
  // The rank's process, from its worker's report; for slow-node the
  // worker's (every rank below it).
  int TargetPid(const InjectSpec& spec, const control::JobInfo& job) const {
    int pid = 0;
    for (const auto& r : job.ranks()) {
      if (r.rank() == spec.rank && r.state() == control::RANK_RUNNING)
        pid = r.pid();
    }
    if (spec.kind == InjectSpec::Kind::kSlowNode &&
        spec.node < cluster_->workers()) {
      pid = cluster_->worker_pid(spec.node);
    }
    return pid;
  }

  void Inject(const InjectSpec& spec, int pid) {
    if (spec.kind == InjectSpec::Kind::kKillWorker) {
      if (spec.node < cluster_->workers()) cluster_->KillWorker(spec.node);
      return;
    }
    SubprocessOptions o;
    o.argv = InjectArgs(spec, pid);
    o.argv.insert(o.argv.begin(), FindBinary("strata-inject"));
    o.out.path = o.err.path = cluster_->dir() + "/inject.log";
    auto started = StartSubprocess(o);
    if (!started.ok()) {
      Fail("run", kExitFailed,
           absl::StrCat("cannot start ", o.argv[0], ": ",
                        started.status().message()));
    }
    cluster_->Adopt(*started);
  }

  std::vector<InjectSpec> injects_;
  control::LocalCluster* cluster_;
};

// Waits until `n` workers are registered, so the job takes the first
// workers (node-0, node-1, ...) and the rest are its spares, whichever
// started first; after `timeout_s` the job is submitted anyway (placement
// waits for workers as usual).
void WaitForWorkers(ControlClient& client, int n, double timeout_s,
                    const Clock& clock) {
  const int64_t until =
      clock.SteadyNowMs() + static_cast<int64_t>(timeout_s * 1000);
  control::Request list;
  list.mutable_list_workers();
  while (clock.SteadyNowMs() < until && !g_interrupted) {
    auto reply = client.TryCall(list, 2000);
    if (reply.ok()) {
      int alive = 0;
      for (const auto& w : reply->list_workers().workers()) alive += w.alive();
      if (alive >= n) return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int Run(const RunArgs& a) {
  JobSpec spec = BuildJobSpec("run", a.job);
  JobLaunch* l = spec.mutable_launch();
  const int nodes = l->nodes() > 0 ? l->nodes() : 1;
  // launch.spares: that many more local workers, idle until a node is lost
  // (docs/fault.md "Hot spares"); injections may target them too.
  const int workers = nodes + std::max(0, l->spares());
  std::vector<InjectSpec> injects = ParseInjections(a, nodes, workers);
  l->set_nodes(nodes);
  if (l->ranks_per_node() == 0) l->set_ranks_per_node(1);
  if (l->worker_wait_s() == 0) l->set_worker_wait_s(30);
  const std::string dir = PrepareStateDir(a, l);
  const std::string curve_dir = MakeRunCurveDir(a, dir);
  signal(SIGINT, OnInterrupt);
  signal(SIGTERM, OnInterrupt);
  SystemClock clock;
  auto cluster = StartCluster(a, dir, curve_dir, workers, &clock);
  if (const std::string url = cluster->Announced("dashboard"); !url.empty()) {
    std::fprintf(stderr, "[strata] dashboard %s\n", url.c_str());
  }
  const std::string& endpoint = cluster->endpoint();
  std::fprintf(stderr,
               "[strata] coordinator %s, %d local worker(s) (%d spare), %d "
               "rank(s) each; state and logs in %s\n",
               endpoint.c_str(), workers, workers - nodes, l->ranks_per_node(),
               dir.c_str());
  ControlClient client(endpoint, curve_dir);
  WaitForWorkers(client, workers, a.startup_timeout_s, clock);
  control::Request req;
  *req.mutable_submit_job()->mutable_spec() = spec;
  control::Reply reply = client.Call("run", req);
  const std::string job_id = reply.submit_job().job_id();
  std::fprintf(stderr, "[strata] submitted %s\n", job_id.c_str());

  RunSummary summary;
  FaultInjector injector(std::move(injects), cluster.get());
  int64_t step = -1;  // the newest any rank reported
  auto on_status = [&](const control::JobInfo& job) {
    summary.Observe(job);
    for (const auto& s : job.steps()) step = std::max(step, s.step());
    injector.OnStatus(job, step);
  };
  // DIR/events.log: every event with its coordinator time, for tools that
  // time detection and recovery (strata-bench fault).
  std::FILE* events_log = std::fopen((dir + "/events.log").c_str(), "w");
  auto on_event = [&](const control::Event& e) {
    if (events_log == nullptr) return;
    std::fprintf(events_log, "%s %s attempt %d: %s: %s\n",
                 LocalTimeMs(e.unix_ms()).c_str(), e.job_id().c_str(),
                 e.attempt(), e.kind().c_str(), e.message().c_str());
    std::fflush(events_log);
  };
  int rc = WaitForJob(clock, client, job_id, /*follow=*/true, 15000, on_status,
                      &g_interrupted, on_event);
  if (events_log != nullptr) std::fclose(events_log);
  cluster->Stop();
  injector.ReportNotRun(step);
  summary.Print();
  std::error_code ec;
  if (!a.keep && a.state_dir.empty() && rc == 0) {
    std::filesystem::remove_all(dir, ec);
  } else {
    std::fprintf(stderr, "[strata] state and logs kept in %s\n", dir.c_str());
  }
  return rc;
}

}  // namespace

void AddRunCommand(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "run",
      "run a job on a local cluster: a coordinator and --nodes workers on "
      "this host (strata run --nodes 2 --ranks-per-node 2 -- python3 x.py)");
  auto a = std::make_shared<RunArgs>();
  AddJobOptions(cmd, &a->job);
  cmd->add_option("--heartbeat-ms", a->heartbeat_ms,
                  "worker heartbeat interval")
      ->check(CLI::Range(20, 60000))
      ->capture_default_str();
  cmd->add_option("--state-dir", a->state_dir,
                  "keep coordinator state and logs here (default: a temporary "
                  "directory, removed after a successful run)");
  cmd->add_flag("--keep", a->keep, "keep the temporary state directory");
  cmd->add_option("--dashboard", a->dashboard,
                  "serve the web dashboard and /metrics on HOST:PORT, e.g. "
                  "127.0.0.1:8080 (port 0: a free one; the URL is printed)");
  cmd->add_flag("--plaintext", a->plaintext,
                "no CURVE between this run's processes (default: a "
                "throwaway key set in the state directory)");
  cmd->add_option(
      "--kill-worker-at-step", a->kill_worker_at_step,
      "fault injection: SIGKILL the last worker once a rank reports "
      "this step (demo and tests; = --inject kill-worker:node=LAST,step=N)");
  cmd->add_option(
      "--inject", a->inject,
      "fault injection once a rank reports step N: "
      "slow:rank=R,factor=F[,step=N][,duration=S], "
      "hang:rank=R[,step=N][,duration=S], kill-rank:rank=R[,step=N], "
      "kill-worker:node=K[,step=N], "
      "slow-node:node=K,factor=F[,step=N][,duration=S][,period_ms=P] "
      "(repeatable; docs/fault.md)");
  cmd->callback([a] {
    int rc = Run(*a);
    if (rc != 0) throw CLI::RuntimeError(rc);
  });
}

}  // namespace strata::cli
