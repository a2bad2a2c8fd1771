// strata-bench plan: how long a full planner search takes.
//
// The goal: a full search for llama3-405b on 16,384 H100s, global batch
// 2048, sequence 8192, in under 1 s on one core. The peers cannot be run
// here (Alpa and Aceso need GPUs and their own model zoos), so their
// published search costs are printed next to ours: Alpa 4,092 s and Aceso
// 99 s for GPT-3 1.3B on 4 GPUs. The search is single-threaded and runs
// with a budget far above its cost, so every search is exhaustive. MoE
// models (deepseek-v3, mixtral-8x22b) add the EP and ETP axes.
//
// The second goal: every input the planner accepts (docs/config.md ranges)
// is searched in well under a second. The slowest accepted shapes force
// hundreds of pipeline stages: a 4,096-layer model on 110,880 or 131,072
// GPUs with global batches of 2^24 or 14,414,400 sequences (504 divisors).
//
// The third (issue 36), `--command`: the whole `strata plan` command for
// deepseek-v3 (MoE) on 16,384, 65,536 and 131,072 GPUs, as a user runs it
// (table output, default 1 s budget): wall time and peak RSS of the child
// process (wait4), goal < 1 s and < 500 MB each.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/registry.h"
#include "bench/sibling.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::bench {
namespace {

struct Scenario {
  const char* model;  // preset, or "max-layers" (MaxLayersModel)
  const char* cluster;
  int gpus;
  int batch;
  int seq;
};

// The largest layer count accepted (4,096) at hidden 8,192: the shape of
// the slowest searches.
ModelSpec MaxLayersModel() {
  ModelSpec m;
  m.set_name("max-layers");
  m.set_num_layers(4096);
  m.set_hidden_size(8192);
  m.set_num_attention_heads(64);
  m.set_ffn_hidden_size(32768);
  m.set_vocab_size(32000);
  m.set_seq_length(4096);
  return m;
}

// Runs `strata plan ARGS` with stdout to /dev/null; wall seconds and the
// child's peak RSS in MB (ru_maxrss), or false when it did not exit 0.
bool RunCommand(const std::string& strata, const std::vector<std::string>& args,
                double* seconds, double* rss_mb) {
  std::vector<char*> argv;
  std::string name = strata;
  argv.push_back(name.data());
  std::vector<std::string> copy = args;
  for (std::string& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    FILE* null = std::freopen("/dev/null", "w", stdout);
    (void)null;
    execv(argv[0], argv.data());
    _exit(127);
  }
  int status = 0;
  struct rusage ru = {};
  if (wait4(pid, &status, 0, &ru) != pid) return false;
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           start)
                 .count();
  *rss_mb = ru.ru_maxrss / 1024.0;  // KiB on Linux
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int CommandBench(int repeats) {
  const std::string strata = FindSibling("strata", "cli");
  std::printf("%-12s %7s %7s %10s %11s %10s %11s\n", "model", "gpus", "batch",
              "median_s", "slowest_s", "median_MB", "largest_MB");
  int rc = 0;
  for (int gpus : {16384, 65536, 131072}) {
    const std::vector<std::string> args = {
        "plan",           "--model",        "deepseek-v3",
        "--cluster",      "dgx-h100",       "--nodes",
        std::to_string(gpus / 8), "--gpus", std::to_string(gpus),
        "--global-batch", std::to_string(gpus), "--seq",
        "4096",           "--no-calibration"};
    std::vector<double> times, rss;
    for (int i = 0; i < std::max(1, repeats); ++i) {
      double t = 0, r = 0;
      if (!RunCommand(strata, args, &t, &r)) {
        std::fprintf(stderr, "strata plan failed for %d GPUs (%s)\n", gpus,
                     strata.c_str());
        return 1;
      }
      times.push_back(t);
      rss.push_back(r);
    }
    std::sort(times.begin(), times.end());
    std::sort(rss.begin(), rss.end());
    std::printf("%-12s %7d %7d %10.3f %11.3f %10.0f %11.0f\n", "deepseek-v3",
                gpus, gpus, times[times.size() / 2], times.back(),
                rss[rss.size() / 2], rss.back());
    if (times.back() >= 1.0 || rss.back() >= 500) rc = 1;
  }
  std::printf(
      "\nGoal (issue 36): the whole `strata plan` command for an MoE model on "
      "up to 131,072 GPUs in < 1 s and < 500 MB (slowest run, largest RSS).\n");
  return rc;
}

int PlanBench(int argc, char** argv) {
  CLI::App app{"strata-bench plan: planner search time"};
  std::string format = "table";
  int repeats = 5;
  bool command = false;
  app.add_option("--format", format, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  app.add_option("--repeats", repeats,
                 "runs per scenario (median and slowest reported)");
  app.add_flag("--command", command,
               "time the whole `strata plan` command (deepseek-v3 on 16,384, "
               "65,536 and 131,072 GPUs): wall time and peak RSS");
  CLI11_PARSE(app, argc, argv);
  if (command) return CommandBench(repeats);

  const Scenario scenarios[] = {
      {"llama3-405b", "dgx-h100", 16384, 2048, 8192},  // the goal
      {"llama3-405b", "h100-roce", 16384, 2048, 8192},
      // MoE: EP x ETP multiply the layouts (issue 16 goal: < 1 s).
      {"deepseek-v3", "dgx-h100", 16384, 16384, 4096},
      {"mixtral-8x22b", "dgx-h100", 16384, 4096, 4096},
      {"gpt-1t", "dgx-a100", 3072, 3072, 2048},
      {"llama3-70b", "hetero-ib-roce", 512, 512, 8192},
      {"gpt-1.7b", "dgx-a100", 4, 64, 2048},
      // The slowest accepted inputs (docs/planner.md "Speed").
      {"max-layers", "dgx-h100", 110880, 14414400, 4096},
      {"max-layers", "dgx-h100", 110880, 14414400, 128},
      {"max-layers", "dgx-h100", 131072, 16777216, 4096},
      {"max-layers", "dgx-h100", 131072, 14414400, 4096},
      {"max-layers", "dgx-h100", 131072, 16777216, 1048576},
  };
  if (format == "table") {
    std::printf("%-12s %-10s %6s %8s %7s %9s %8s %9s %9s %12s\n", "model",
                "cluster", "gpus", "batch", "seq", "candidates", "feasible",
                "median_s", "slowest_s", "vs Aceso 99s");
  }
  int rc = 0;
  for (const Scenario& s : scenarios) {
    planner::PlanRequest req;
    auto model = std::string(s.model) == "max-layers"
                     ? StatusOr<ModelSpec>(MaxLayersModel())
                     : planner::LoadModel(s.model);
    auto cluster = topology::LoadCluster(s.cluster);
    if (!model.ok() || !cluster.ok()) return 1;
    req.model = *model;
    if (Status st = planner::NormalizeModel(&req.model); !st.ok()) return 1;
    req.time_budget_s = 3600;  // exhaustive
    req.cluster = *cluster;
    req.gpus = s.gpus;
    req.job.set_global_batch(s.batch);
    req.job.set_seq_length(s.seq);
    req.top_k = 5;
    req.with_placement = true;  // the CLI builds it for the winner too
    std::vector<double> times;
    PlanReport last;
    for (int i = 0; i < std::max(1, repeats); ++i) {
      auto report = planner::PlanJob(req);
      if (!report.ok()) {
        std::fprintf(stderr, "%s: %s\n", s.model,
                     std::string(report.status().message()).c_str());
        return 1;
      }
      times.push_back(report->search().elapsed_s());
      last = *report;
    }
    std::sort(times.begin(), times.end());
    const double median = times[times.size() / 2];
    const double slowest = times.back();
    if (format == "json") {
      std::printf(
          "{\"bench\":\"plan\",\"model\":\"%s\",\"cluster\":\"%s\","
          "\"gpus\":%d,\"global_batch\":%d,\"seq\":%d,\"candidates\":%lld,"
          "\"feasible\":%lld,\"search_s\":%.6f,\"slowest_s\":%.6f,"
          "\"alpa_s\":4092,\"aceso_s\":99}\n",
          s.model, s.cluster, s.gpus, s.batch, s.seq,
          static_cast<long long>(last.search().candidates()),
          static_cast<long long>(last.search().feasible()), median, slowest);
    } else {
      std::printf("%-12s %-10s %6d %8d %7d %9lld %8lld %9.4f %9.4f %11.0fx\n",
                  s.model, s.cluster, s.gpus, s.batch, s.seq,
                  static_cast<long long>(last.search().candidates()),
                  static_cast<long long>(last.search().feasible()), median,
                  slowest, 99.0 / slowest);
    }
    if (slowest >= 1.0) rc = 1;  // the goals
  }
  if (format == "table") {
    std::printf(
        "\nGoals: llama3-405b on 16,384 GPUs, and every accepted input, "
        "searched exhaustively in well under 1 s on one core (slowest run). "
        "Published search costs of the peers (not runnable here): Alpa "
        "4,092 s, Aceso 99 s, for a 1.3B model on 4 GPUs.\n");
  }
  return rc;
}

}  // namespace
STRATA_BENCH("plan", "planner search time (llama3-405b on 16,384 GPUs)",
             PlanBench);
}  // namespace strata::bench
