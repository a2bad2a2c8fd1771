// Job commands against a running coordinator: `strata submit`, `status`,
// `logs`, `cancel`, `workers`, `events` ("Job submission").
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <map>
#include <set>
#include <memory>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/control_client.h"
#include "control/codec.h"
#include "cli/job_args.h"
#include "cli/slurm_submit.h"
#include "common/config.h"
#include "observe/goodput.h"
#include "observe/spare_pool.h"
#include "observe/heatmap.h"
#include "observe/progress.h"

namespace strata::cli {
namespace {

std::string Clock(int64_t unix_ms) {
  if (unix_ms <= 0) return "-";
  std::time_t t = unix_ms / 1000;
  char buf[32];
  std::strftime(buf, sizeof(buf), "%H:%M:%S", std::localtime(&t));
  return buf;
}

// Says so when the coordinator cannot persist changes (nothing when it can).
void PrintHealth(const control::CoordinatorHealth& h) {
  if (h.state_error().empty()) return;
  std::printf(
      "COORDINATOR STATE NOT WRITABLE since %s (%lld changes refused): %s\n",
      Clock(h.since_unix_ms()).c_str(),
      static_cast<long long>(h.refused_changes()), h.state_error().c_str());
}

// "reserved/asked" hot spares of a job ("-" when it asks for none).
std::string SparesText(const control::JobInfo& j) {
  if (j.spec().launch().spares() <= 0) return "-";
  return absl::StrCat(j.spare_workers_size(), "/", j.spec().launch().spares());
}

void PrintJobTable(const control::JobsReply& jobs,
                   const control::ListWorkersReply* workers) {
  PrintHealth(jobs.health());
  std::printf("%-10s %-20s %-10s %7s %6s %6s %-9s %s\n", "JOB", "NAME",
              "STATE", "ATTEMPT", "RANKS", "SPARES", "SUBMITTED", "MESSAGE");
  for (const auto& j : jobs.jobs()) {
    std::printf("%-10s %-20.20s %-10s %7d %6d %6s %-9s %s\n",
                j.job_id().c_str(), j.spec().name().c_str(),
                JobStateName(j.state()), j.attempt(), j.ranks_size(),
                SparesText(j).c_str(), Clock(j.submit_unix_ms()).c_str(),
                j.message().c_str());
  }
  if (workers == nullptr) return;
  std::printf("workers   %s\n",
              observe::DescribeSparePool(
                  observe::ComputeSparePool(jobs, *workers))
                  .c_str());
}

void PrintJob(const control::JobInfo& j) {
  std::printf("job       %s (%s)\n", j.job_id().c_str(),
              j.spec().name().c_str());
  std::printf("state     %s, attempt %d (restarts %d of %d)\n",
              JobStateName(j.state()), j.attempt(), j.restart_count(),
              j.spec().launch().max_restarts());
  std::printf("command   %s\n",
              absl::StrJoin(j.spec().launch().command(), " ").c_str());
  if (!j.message().empty()) std::printf("message   %s\n", j.message().c_str());
  if (j.spec().launch().spares() > 0) {
    std::printf("spares    %d of %d reserved [%s]\n", j.spare_workers_size(),
                j.spec().launch().spares(),
                absl::StrJoin(j.spare_workers(), ", ").c_str());
  }
  if (j.has_plan()) {
    std::printf("plan      tp=%d pp=%d dp=%d cp=%d on %d nodes [%s]\n",
                j.plan().tp(), j.plan().pp(), j.plan().dp(),
                std::max(1, j.plan().cp()), j.node_info_size(),
                absl::StrJoin(j.nodes(), ", ").c_str());
  }
  if (j.state() == control::RUNNING) {
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
    std::printf("progress  %s\n",
                observe::DescribeProgress(observe::ComputeProgress(j, now))
                    .c_str());
  }
  if (j.has_goodput() && j.goodput().wall_s() > 0) {
    std::printf("goodput   %s\n",
                observe::DescribeGoodput(observe::FromProto(j.goodput()))
                    .c_str());
  }
  std::map<int, control::StepReport> steps;
  for (const auto& s : j.steps()) steps[s.rank()] = s;
  if (j.ranks_size() == 0) return;
  std::printf("%6s %-16s %-16s %8s %8s %12s\n", "RANK", "NODE", "STATE", "PID",
              "STEP", "LOSS");
  const auto& placement = j.plan().placement();
  for (const auto& r : j.ranks()) {
    std::string node = "-";
    if (r.rank() < placement.ranks_size()) {
      int n = placement.ranks(r.rank()).node();
      if (n < j.node_info_size()) node = j.node_info(n).node_name();
    }
    std::string step = "-", loss = "-";
    if (auto it = steps.find(r.rank()); it != steps.end()) {
      step = absl::StrCat(it->second.step());
      if (it->second.loss() == it->second.loss()) {  // not NaN
        loss = absl::StrFormat("%.6g", it->second.loss());
      }
    }
    std::printf("%6d %-16s %-16s %8d %8s %12s\n", r.rank(), node.c_str(),
                RankStateText(r).c_str(), r.pid(), step.c_str(), loss.c_str());
  }
}

void AddSubmit(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "submit", "submit a job: strata submit job.yaml | -- COMMAND ARGS...");
  auto args = std::make_shared<JobArgs>();
  auto endpoint = std::make_shared<std::string>();
  auto wait = std::make_shared<bool>(false);
  auto follow = std::make_shared<bool>(false);
  AddJobOptions(cmd, args.get());
  AddCoordinatorOption(cmd, endpoint.get());
  cmd->add_flag("--wait", *wait,
                "wait for the job; exit 0 only if it succeeded");
  cmd->add_flag("-f,--follow", *follow,
                "with --wait: stream output and events");
  auto slurm = std::make_shared<bool>(false);
  auto slurm_args = std::make_shared<std::vector<std::string>>();
  cmd->add_flag("--slurm", *slurm,
                "submit through Slurm: write deploy/slurm/strata.sbatch filled "
                "in for this job and call sbatch (docs/launch.md)");
  cmd->add_option("--sbatch-arg", *slurm_args,
                  "with --slurm: an extra sbatch argument (repeatable)");
  cmd->callback([=] {
    JobSpec spec = BuildJobSpec("submit", *args);
    if (*slurm) {
      // The allocation's `strata submit` reads the merged spec (file plus
      // flag overrides) from the work directory.
      const std::string dir = ".strata-slurm";
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      const std::string file =
          std::filesystem::absolute(dir + "/job-" + std::to_string(getpid()) +
                                    ".json")
              .string();
      std::ofstream(file) << MessageToJson(spec) << "\n";
      SlurmSubmitOptions o;
      o.job_file = file;
      o.nodes = spec.launch().nodes();
      o.ranks_per_node = spec.launch().ranks_per_node();
      o.work_dir = dir;
      o.sbatch_args = *slurm_args;
      o.wait = *wait || *follow;
      auto sub = SubmitViaSlurm(o);
      if (!sub.ok()) {
        Fail(
            "submit",
            absl::IsInvalidArgument(sub.status()) ? kExitBadInput : kExitFailed,
            std::string(sub.status().message()));
      }
      std::printf("slurm job %s (script %s)\n", sub->slurm_job_id.c_str(),
                  sub->script.c_str());
      if (sub->exit_code != 0) throw CLI::RuntimeError(sub->exit_code);
      return;
    }
    ControlClient client(*endpoint);
    control::Request req;
    *req.mutable_submit_job()->mutable_spec() = spec;
    control::Reply reply = client.Call("submit", req);
    const std::string& id = reply.submit_job().job_id();
    std::printf("%s\n", id.c_str());
    std::fflush(stdout);
    if (*wait || *follow) {
      SystemClock clock;
      int rc = WaitForJob(clock, client, id, *follow);
      if (rc != 0) throw CLI::RuntimeError(rc);
    }
  });
}

// --coordinator, an optional job id and --format, shared by the read-only
// commands.
struct QueryArgs {
  std::string endpoint, job, format = "table";
};
std::shared_ptr<QueryArgs> AddQueryOptions(CLI::App* cmd, bool with_job) {
  auto q = std::make_shared<QueryArgs>();
  AddCoordinatorOption(cmd, &q->endpoint);
  if (with_job) cmd->add_option("job", q->job, "job id (default: all jobs)");
  cmd->add_option("--format", q->format, "table|json")
      ->check(CLI::IsMember({"table", "json"}));
  return q;
}

// Every job the coordinator holds, asked a page at a time so the list never
// has to fit one control frame (docs/control-plane.md "Retention").
control::Reply ListAllJobs(ControlClient& client) {
  constexpr int64_t kPageBytes = control::kMaxFrameBytes / 4;
  control::Reply all;
  std::string after;
  do {
    control::Request req;
    req.mutable_list_jobs()->set_after_job_id(after);
    req.mutable_list_jobs()->set_page_bytes(kPageBytes);
    control::Reply page = client.Call("status", req);
    for (auto& j : *page.mutable_jobs()->mutable_jobs()) {
      *all.mutable_jobs()->add_jobs() = std::move(j);
    }
    *all.mutable_jobs()->mutable_health() = page.jobs().health();
    after = page.jobs().next_after_job_id();
  } while (!after.empty());
  return all;
}

void AddStatus(CLI::App* app) {
  auto* cmd = app->add_subcommand("status", "jobs, or one job in detail");
  auto q = AddQueryOptions(cmd, true);
  cmd->callback([=] {
    ControlClient client(q->endpoint);
    control::Request req;
    control::Reply reply;
    if (q->job.empty()) {
      reply = ListAllJobs(client);
    } else {
      req.mutable_job_status()->set_job_id(q->job);
      reply = client.Call("status", req);
    }
    if (q->format == "json") {
      std::printf("%s\n", q->job.empty()
                              ? MessageToJson(reply.jobs()).c_str()
                              : MessageToJson(reply.jobs().jobs(0)).c_str());
    } else if (q->job.empty()) {
      // The idle pool line needs the workers; without them (an identity
      // not allowed to list them, a timeout) the table is printed alone.
      control::Request list;
      list.mutable_list_workers();
      auto workers = client.TryCall(list, 5000);
      PrintJobTable(reply.jobs(), workers.ok()
                                      ? &workers->list_workers()
                                      : nullptr);
    } else {
      PrintHealth(reply.jobs().health());
      PrintJob(reply.jobs().jobs(0));
    }
  });
}

void AddCancel(CLI::App* app) {
  auto* cmd = app->add_subcommand("cancel", "cancel a job (stops its ranks)");
  auto endpoint = std::make_shared<std::string>();
  auto job = std::make_shared<std::string>();
  AddCoordinatorOption(cmd, endpoint.get());
  cmd->add_option("job", *job, "job id")->required();
  cmd->callback([=] {
    ControlClient client(*endpoint);
    control::Request req;
    req.mutable_cancel_job()->set_job_id(*job);
    client.Call("cancel", req);
    std::printf("%s cancelled\n", job->c_str());
  });
}

void AddLogs(CLI::App* app) {
  auto* cmd = app->add_subcommand("logs", "a job's output (all ranks or one)");
  auto endpoint = std::make_shared<std::string>();
  auto job = std::make_shared<std::string>();
  auto rank = std::make_shared<int>(-1);
  auto follow = std::make_shared<bool>(false);
  AddCoordinatorOption(cmd, endpoint.get());
  cmd->add_option("job", *job, "job id")->required();
  cmd->add_option("--rank", *rank, "only this rank's output")
      ->check(CLI::Range(0, 1 << 24));
  cmd->add_flag("-f,--follow", *follow, "keep printing until the job ends");
  cmd->callback([=] {
    ControlClient client(*endpoint);
    int64_t offset = 0;
    while (true) {
      control::Request req;
      req.mutable_logs()->set_job_id(*job);
      req.mutable_logs()->set_rank(*rank);
      req.mutable_logs()->set_offset(offset);
      control::Reply reply = client.Call("logs", req);
      const auto& data = reply.logs().data();
      std::fwrite(data.data(), 1, data.size(), stdout);
      std::fflush(stdout);
      offset = reply.logs().next_offset();
      if (!*follow || reply.logs().finished()) return;
      if (data.empty())
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
}

void AddEvents(CLI::App* app) {
  auto* cmd = app->add_subcommand("events", "what happened to a job, in order");
  auto q = AddQueryOptions(cmd, true);
  cmd->callback([=] {
    ControlClient client(q->endpoint);
    control::Request req;
    req.mutable_events()->set_job_id(q->job);
    control::Reply reply = client.Call("events", req);
    for (const auto& e : reply.events().events()) {
      if (q->format == "json") {  // one object per line (JSON Lines)
        std::printf("%s\n", MessageToJson(e).c_str());
        continue;
      }
      std::time_t t = e.unix_ms() / 1000;
      char buf[32];
      std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S", std::localtime(&t));
      std::printf("%s.%03d %-8s %3d %-15s %s\n", buf,
                  static_cast<int>(e.unix_ms() % 1000),
                  e.job_id().empty() ? "-" : e.job_id().c_str(), e.attempt(),
                  e.kind().c_str(), e.message().c_str());
    }
  });
}

void AddFaultSet(CLI::App* app) {
  auto* fault = app->add_subcommand(
      "fault", "change a running job's fault policy (docs/fault.md)");
  fault->require_subcommand(1);
  auto* cmd = fault->add_subcommand(
      "set",
      "strata fault set JOB key=value...: e.g. hang_floor_s=30, "
      "straggler=restart, straggler_threshold=1.2");
  auto q = std::make_shared<QueryArgs>();
  auto settings = std::make_shared<std::vector<std::string>>();
  AddCoordinatorOption(cmd, &q->endpoint);
  cmd->add_option("job", q->job, "job id")->required();
  cmd->add_option("settings", *settings, "key=value ...")->required();
  cmd->callback([=] {
    ControlClient client(q->endpoint);
    control::Request req;
    req.mutable_fault_set()->set_job_id(q->job);
    for (const auto& kv : *settings) req.mutable_fault_set()->add_settings(kv);
    control::Reply reply = client.Call("fault set", req);
    std::printf("%s fault policy: %s\n", q->job.c_str(),
                MessageToJson(reply.jobs().jobs(0).spec().fault()).c_str());
  });
}

void AddDiagnose(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "diagnose",
      "per rank: compute, wait and lateness medians, straggler scores, the "
      "last hang's wavefront and the node x node link matrix (docs/fault.md)");
  auto q = std::make_shared<QueryArgs>();
  AddCoordinatorOption(cmd, &q->endpoint);
  cmd->add_option("job", q->job, "job id")->required();
  cmd->add_option("--format", q->format, "table|json")
      ->check(CLI::IsMember({"table", "json"}));
  cmd->callback([=] {
    ControlClient client(q->endpoint);
    control::Request req;
    req.mutable_diagnose()->set_job_id(q->job);
    control::Reply reply = client.Call("diagnose", req);
    const control::DiagnoseReply& d = reply.diagnose();
    if (q->format == "json") {
      std::printf("%s\n", MessageToJson(d).c_str());
      return;
    }
    std::printf("%s attempt %d: hang deadline %.1f s\n", d.job_id().c_str(),
                d.attempt(), d.hang_deadline_ms() / 1000.0);
    std::printf("%5s %-12s %5s %9s %10s %9s %9s %9s %10s %s\n", "rank", "node",
                "stage", "step", "compute_s", "wait_s", "late_s", "vs_peers",
                "vs_itself", "flagged");
    for (const auto& r : d.ranks()) {
      std::printf("%5d %-12s %5d %9lld %10.4f %9.4f %9.4f %9.3f %10.3f %s\n",
                  r.rank(), r.node().c_str(), r.stage(),
                  static_cast<long long>(r.last_step()), r.compute_s(),
                  r.wait_s(), r.late_s(), r.relative(), r.individual(),
                  r.flagged() ? "STRAGGLER" : "-");
    }
    if (!d.last_wavefront().empty()) {
      std::printf("last hang: %s\n", d.last_wavefront().c_str());
    }
    if (d.links_size() > 0) {
      std::printf("links (send rate while busy, docs/fault.md):\n");
      std::printf("  %-12s %-12s %10s %12s %8s %s\n", "from", "to", "MB/s",
                  "baseline", "samples", "slow");
      for (const auto& l : d.links()) {
        std::printf("  %-12s %-12s %10.1f %12.1f %8d %s\n",
                    l.src_node().c_str(), l.dst_node().c_str(), l.mb_per_s(),
                    l.baseline_mb_per_s(), l.samples(),
                    l.slow() ? "SLOW" : "-");
      }
    }
    if (d.stages_size() > 0) {
      std::printf(
          "stages (plan vs measured compute per step, the job at %.2fx the "
          "plan):\n",
          d.plan_calibration());
      std::printf("  %5s %12s %11s %11s\n", "stage", "predicted_s",
                  "measured_s", "vs_others");
      for (const auto& s : d.stages()) {
        std::printf("  %5d %12.4f %11.4f %11.3f\n", s.stage(),
                    s.predicted_s(), s.measured_s(), s.calibrated_ratio());
      }
    }
  });
}

// `strata heatmap JOB -o FILE.svg`: rank x step grid of compute (or wait)
// seconds of the job's running attempt, stragglers marked (docs/observe.md).
void AddHeatmap(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "heatmap",
      "rank x step heat map of compute or wait seconds as SVG or PNG, "
      "stragglers marked (docs/observe.md)");
  auto q = std::make_shared<QueryArgs>();
  auto out = std::make_shared<std::string>();
  auto what = std::make_shared<std::string>("compute");
  auto range = std::make_shared<std::string>();
  AddCoordinatorOption(cmd, &q->endpoint);
  cmd->add_option("job", q->job, "job id")->required();
  cmd->add_option("-o,--output", *out, "the .svg or .png file to write")
      ->required();
  cmd->add_option("--what", *what, "compute|wait")
      ->check(CLI::IsMember({"compute", "wait"}));
  cmd->add_option("--steps", *range, "A:B, steps A to B (default: all kept)");
  cmd->callback([=] {
    const bool png = out->ends_with(".png");
    if (!png && !out->ends_with(".svg")) {
      Fail("heatmap", kExitBadInput,
           absl::StrCat("-o ", *out, ": write .svg or .png"));
    }
    control::Request req;
    req.mutable_diagnose()->set_job_id(q->job);
    req.mutable_diagnose()->set_history(true);
    if (!range->empty()) {
      const auto [a, b] = ParseStepRange("heatmap", *range);
      req.mutable_diagnose()->set_first_step(a);
      req.mutable_diagnose()->set_last_step(b);
    }
    ControlClient client(q->endpoint);
    const control::DiagnoseReply d = client.Call("heatmap", req).diagnose();
    observe::Heatmap map;
    map.title = absl::StrCat(d.job_id(), " attempt ", d.attempt(), ": ", *what,
                             " seconds per step");
    std::set<int64_t> steps;
    for (const auto& r : d.ranks()) steps.insert(r.steps().begin(), r.steps().end());
    if (steps.empty()) {
      Fail("heatmap", kExitFailed,
           absl::StrCat(q->job, " has no step reports in its running attempt"));
    }
    map.steps.assign(steps.begin(), steps.end());
    std::map<int64_t, size_t> column;
    for (size_t i = 0; i < map.steps.size(); ++i) column[map.steps[i]] = i;
    for (const auto& r : d.ranks()) {
      map.ranks.push_back(r.rank());
      if (r.flagged()) map.flagged.insert(r.rank());
      std::vector<double> row(map.steps.size(), std::nan(""));
      const auto& v = *what == "wait" ? r.step_wait_s() : r.step_compute_s();
      for (int i = 0; i < r.steps_size() && i < v.size(); ++i) {
        row[column[r.steps(i)]] = v[i];
      }
      map.values.push_back(std::move(row));
    }
    std::ofstream f(*out, std::ios::binary);
    f << (png ? observe::RenderHeatmapPng(map) : observe::RenderHeatmapSvg(map));
    f.close();
    if (!f) {
      Fail("heatmap", kExitFailed, absl::StrCat("cannot write ", *out));
    }
    std::printf("%s: %zu ranks x %zu steps (%lld-%lld), %zu flagged\n",
                out->c_str(), map.ranks.size(), map.steps.size(),
                static_cast<long long>(map.steps.front()),
                static_cast<long long>(map.steps.back()), map.flagged.size());
  });
}

void AddWorkers(CLI::App* app) {
  auto* cmd = app->add_subcommand("workers", "registered workers");
  auto q = AddQueryOptions(cmd, false);
  cmd->callback([=] {
    ControlClient client(q->endpoint);
    control::Request req;
    req.mutable_list_workers();
    control::Reply reply = client.Call("workers", req);
    if (q->format == "json") {
      std::printf("%s\n", MessageToJson(reply.list_workers()).c_str());
      return;
    }
    PrintHealth(reply.list_workers().health());
    std::printf("%-20s %-6s %-16s %5s %8s %4s %-9s %s\n", "WORKER", "ALIVE",
                "ADDRESS", "CORES", "MEM GiB", "GPUS", "LAST HB", "RUNNING");
    for (const auto& w : reply.list_workers().workers()) {
      std::printf("%-20s %-6s %-16s %5d %8.1f %4d %-9s %s\n",
                  w.worker_id().c_str(), w.alive() ? "yes" : "LOST",
                  w.address().c_str(), w.probe().cpu_cores(),
                  w.probe().memory_bytes() / double(1ull << 30),
                  w.probe().gpus(), Clock(w.last_heartbeat_unix_ms()).c_str(),
                  absl::StrJoin(w.holds(), ",").c_str());
    }
  });
}

}  // namespace

void AddJobCommands(CLI::App* app) {
  AddSubmit(app);
  AddStatus(app);
  AddLogs(app);
  AddCancel(app);
  AddWorkers(app);
  AddEvents(app);
  AddDiagnose(app);
  AddHeatmap(app);
  AddFaultSet(app);
}

}  // namespace strata::cli
