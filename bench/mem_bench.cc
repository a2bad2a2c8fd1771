// strata-bench memtier (docs/checkpoint.md "Memory tier"; issue 35 goal:
// a checkpoint every step costs < 1% of the step time):
//   strata-train --model small, one rank, --steps S, three configurations
//   in one run, rotated over --pairs rounds so that none always runs first:
//     none   no checkpoint,
//     mem    --mem-ckpt-every 1 (the memory tier: staging copy overlapped
//            with forward/backward by the deferred snapshot, the rank's
//            tmpfs write, the admission calls and the replica to a buddy
//            replica server at --rate MiB/s),
//     file   --ckpt-every 1 to file:// on --file-dir (the durable tier a
//            user would otherwise use every step).
//   The figure per run is the mean step_s of the steps after --skip; the
//   cost of a configuration is its mean against none's in the same round;
//   the worst round is reported.
// Both replica servers run in this process on loopback, so the buddy's
// receiving work shares this machine's cores with training: an upper bound
// of what the replica costs a node whose buddy is elsewhere.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/registry.h"
#include "bench/sibling.h"
#include "checkpoint/mem_wire.h"
#include "common/logging.h"
#include "worker/replica_server.h"

namespace strata::bench {
namespace {

struct Run {
  double mean_step_s = 0;
  double stall_s = 0;
  double cpu_s = 0;  // user + system CPU of the training process
  int steps = 0;     // steps after --skip
  int all_steps = 0;
  int skipped = 0;  // memory-tier steps skipped (the agreed rule)
  bool ok = false;
};

double ChildrenCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}
double SelfCpuSeconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

// Runs `cmd`, returns the mean step_s over steps > skip and the stall.
Run TrainOnce(const std::string& cmd, int skip) {
  Run r;
  const double cpu0 = ChildrenCpuSeconds();
  FILE* p = popen((cmd + " 2>/dev/null").c_str(), "r");
  if (p == nullptr) return r;
  char line[1024];
  double sum = 0;
  while (fgets(line, sizeof(line), p) != nullptr) {
    long long step = 0;
    double loss = 0, tps = 0, s = 0;
    if (std::sscanf(line, "step=%lld loss=%lf tokens_per_s=%lf step_s=%lf",
                    &step, &loss, &tps, &s) == 4 &&
        step > 0) {
      ++r.all_steps;
      if (step > skip) {
        sum += s;
        ++r.steps;
      }
    }
    double stall = 0;
    if (std::sscanf(line, "done steps=%lld ckpt_stall_s=%lf mem_skipped=%d",
                    &step, &stall, &r.skipped) >= 2) {
      r.stall_s = stall;
    }
  }
  r.ok = pclose(p) == 0 && r.steps > 0;
  r.cpu_s = ChildrenCpuSeconds() - cpu0;
  if (r.steps > 0) r.mean_step_s = sum / r.steps;
  return r;
}

// The replica rate: --rate, else STRATA_MEM_RATE_MIBS (what a rank under
// a worker would use), else the default.
double DefaultRate() {
  double mibs = checkpoint::mem::kDefaultRateMiBs;
  if (const char* env = std::getenv(checkpoint::mem::kMemRateEnv)) {
    mibs = std::atof(env);
  }
  return mibs;
}

int MemTierBench(int argc, char** argv) {
  CLI::App app{"memory-tier checkpoint every step vs none vs file://"};
  int steps = 60, pairs = 3, skip = 5;
  double rate = DefaultRate();
  bool local = false;
  std::string model = "small", file_dir = "/tmp/strata-bench-memtier-file";
  app.add_option("--steps", steps, "steps per run")->check(CLI::Range(10, 100000));
  app.add_option("--pairs", pairs, "rounds (each runs every configuration)")
      ->check(CLI::Range(1, 100));
  app.add_option("--skip", skip, "warm-up steps left out")->check(CLI::Range(0, 1000));
  app.add_option("--model", model, "strata-train --model");
  app.add_option("--rate", rate,
                 "replica rate, MiB/s (0: unshaped; default "
                 "$STRATA_MEM_RATE_MIBS, else 256)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--file-dir", file_dir, "directory of the file:// runs");
  app.add_flag("--local", local,
               "also run the memory tier without peers (mem:///DIR: no "
               "admission, no replica), to split the cost");
  CLI11_PARSE(app, argc, argv);
  if (skip >= steps) {
    std::fprintf(stderr, "--skip %d must be below --steps %d\n", skip, steps);
    return 2;
  }
  const std::string root =
      absl::StrCat("/dev/shm/strata-bench-memtier-", getpid());
  std::vector<std::unique_ptr<worker::ReplicaServer>> servers;
  for (int i = 0; i < 2; ++i) {
    servers.push_back(std::make_unique<worker::ReplicaServer>(
        absl::StrCat(root, "/node", i), uint64_t{8} << 30, absl::StrCat("n", i),
        GetLogger("BENCH")));
    if (auto s = servers.back()->Start("127.0.0.1", 0, "127.0.0.1"); !s.ok()) {
      std::fprintf(stderr, "replica server: %s\n", s.ToString().c_str());
      return 1;
    }
  }
  const std::string train = FindSibling("strata-train", "runtime");
  const std::string unset = "env -u STRATA_STORE -u RANK -u WORLD_SIZE ";
  const std::string vars = absl::StrCat(checkpoint::mem::kMemDirEnv,
      "=", root, "/node0/job-bench ", checkpoint::mem::kMemNodeEnv, "=0 ",
      checkpoint::mem::kMemRateEnv, "=", rate, " ");
  const std::string peers =
      absl::StrCat(checkpoint::mem::kMemPeersEnv, "=", servers[0]->endpoint(),
                   ",", servers[1]->endpoint(), " ");
  const std::string args = absl::StrCat(" --model ", model, " --steps ", steps,
                                        " --global-batch 8 --micro-batch 1");
  struct Config {
    const char* name;
    std::string cmd;
  };
  const std::string env = unset + vars;
  std::vector<Config> configs = {
      {"none", env + peers + train + args},
      {"mem", env + peers + train + args + " --mem-ckpt-every 1"},
      {"file", absl::StrCat(env, peers, train, args, " --ckpt file://",
                            file_dir, " --ckpt-every 1 --ckpt-keep 2")}};
  if (local) {
    configs.push_back({"local", absl::StrCat(unset, "-u ",
                                             checkpoint::mem::kMemPeersEnv, " ",
                                             vars,
                                             train, args,
                                             " --mem-ckpt-every 1 --mem-ckpt "
                                             "mem://",
                                             root, "/local/job-bench")});
  }
  std::printf(
      "strata-bench memtier: strata-train --model %s, 1 rank, %d steps "
      "(mean step_s of steps > %d), replica to a loopback buddy at %.0f "
      "MiB/s%s\n",
      model.c_str(), steps, skip, rate, rate <= 0 ? " (unshaped)" : "");
  std::printf(
      "cpu/save: the training process's CPU seconds (user+sys) over none's, "
      "per save taken; recv/save: the replica servers' CPU per save; saves: "
      "saves taken / steps (the memory tier skips steps while its replica "
      "lags)\n");
  std::printf("%-6s %-6s %10s %9s %10s %10s %10s %7s\n", "round", "config",
              "step_s", "cost", "stall_s", "cpu/save", "recv/save", "saves");
  std::vector<double> worst(configs.size(), -1e9);
  for (int round = 0; round < pairs; ++round) {
    std::vector<Run> runs(configs.size());
    std::vector<double> server_cpu(configs.size(), 0);
    for (size_t k = 0; k < configs.size(); ++k) {
      const size_t c = (k + round) % configs.size();  // rotated order
      (void)!std::system(absl::StrCat("rm -rf ", file_dir, " ", root,
                                      "/node*/job-bench ", root, "/local")
                             .c_str());
      const double self0 = SelfCpuSeconds();
      runs[c] = TrainOnce(configs[c].cmd, skip);
      server_cpu[c] = SelfCpuSeconds() - self0;
      if (!runs[c].ok) {
        std::fprintf(stderr, "run '%s' failed: %s\n", configs[c].name,
                     configs[c].cmd.c_str());
        return 1;
      }
    }
    const Run& none = runs[0];
    for (size_t c = 0; c < configs.size(); ++c) {
      const double cost =
          (runs[c].mean_step_s - none.mean_step_s) / none.mean_step_s * 100;
      worst[c] = std::max(worst[c], cost);
      const int saves = std::max(1, runs[c].all_steps - runs[c].skipped);
      const double cpu = (runs[c].cpu_s - none.cpu_s) / saves;
      std::printf("%-6d %-6s %10.4f %8.2f%% %10.3f %9.4fs %9.4fs %5d/%d\n",
                  round + 1, configs[c].name, runs[c].mean_step_s, cost,
                  runs[c].stall_s, c == 0 ? 0.0 : cpu, server_cpu[c] / saves,
                  c == 0 ? 0 : saves, runs[c].all_steps);
    }
    std::fflush(stdout);
  }
  std::printf(
      "worst round: mem every step %+.2f%% of the step time (goal < 1%%: %s), "
      "file:// every step %+.2f%%%s\n",
      worst[1], worst[1] < 1.0 ? "met" : "NOT met", worst[2],
      local ? absl::StrFormat(", mem without peers %+.2f%%", worst[3]).c_str()
            : "");
  servers.clear();
  (void)!std::system(absl::StrCat("rm -rf ", root, " ", file_dir).c_str());
  return 0;
}

STRATA_BENCH("memtier", "memory-tier checkpoint every step: cost vs none and file://",
             MemTierBench);

}  // namespace
}  // namespace strata::bench
