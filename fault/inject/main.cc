// strata-inject: slows or hangs a running rank from outside it (inject.h).
//
//   strata-inject slow --job JOB --rank R --factor 1.3 [--period-ms 100]
//                      [--after S] [--duration S]
//   strata-inject hang --job JOB --rank R [--after S] [--duration S]
//   strata-inject kill --job JOB --rank R [--after S]
//   (or --pid PID instead of --job/--rank)
//   strata-inject slow --children-of PID --factor F ...   (a slow node: every
//                      process below PID, e.g. a worker's ranks, in every
//                      attempt)
//
// Runs in the foreground until the duration ends, the processes exit, or
// SIGINT/SIGTERM; the processes are continued before it exits (a `hang`
// without --duration leaves them stopped: that is the fault). Exit 2 on bad
// arguments, 1 when the rank is not found or cannot be signalled.
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <chrono>
#include <cstdio>
#include <thread>

#include "CLI/CLI.hpp"
#include "fault/inject/inject.h"

namespace {

std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }

struct Target {
  std::vector<int> pids;
  std::string job;
  int rank = -1;
  double wait_s = 60;
};

void AddTarget(CLI::App* app, Target* t) {
  app->add_option("--pid", t->pids, "process ids to act on");
  app->add_option("--job", t->job, "job id (with --rank): find the rank");
  app->add_option("--rank", t->rank, "global rank (with --job)")
      ->check(CLI::Range(0, 1 << 20));
  app->add_option("--wait", t->wait_s, "seconds to wait for the rank to appear")
      ->check(CLI::Range(0.0, 3600.0));
}

// The target's processes, waiting up to --wait seconds for a rank to start.
strata::StatusOr<std::vector<pid_t>> Resolve(const Target& t) {
  if (!t.pids.empty()) return std::vector<pid_t>(t.pids.begin(), t.pids.end());
  if (t.job.empty() || t.rank < 0) {
    return absl::InvalidArgumentError("give --pid, or --job and --rank");
  }
  const auto end =
      std::chrono::steady_clock::now() +
      std::chrono::milliseconds(static_cast<int64_t>(t.wait_s * 1000));
  while (true) {
    // Only a rank a strata worker started, never a look-alike
    // (docs/security.md).
    auto pids = strata::fault::FindRank(t.job, t.rank, "strata-worker");
    if (absl::IsFailedPrecondition(pids.status())) return pids;
    if (pids.ok() || g_stop || std::chrono::steady_clock::now() >= end) {
      return pids;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void WaitSeconds(double s) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<int64_t>(s * 1000));
  while (!g_stop && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Fail(int code, const std::string& msg) {
  std::fprintf(stderr, "strata-inject: %s\n", msg.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Slows or hangs a running rank from outside it"};
  app.require_subcommand(1);
  Target target;
  int children_of = 0;
  double after_s = 0, duration_s = -1, factor = 0;
  int64_t period_ms = 100;
  CLI::App* slow = app.add_subcommand(
      "slow", "stop/continue the rank so it runs 1/FACTOR of the time");
  AddTarget(slow, &target);
  slow->add_option("--factor", factor, "slowdown, e.g. 1.3")
      ->required()
      ->check(CLI::Range(1.0001, 1000.0));
  slow->add_option("--period-ms", period_ms, "one stop/continue cycle")
      ->check(CLI::Range(2, 60000));
  slow->add_option("--children-of", children_of,
                   "a slow node: every process below this one (a worker's "
                   "ranks), found again each period, while it lives")
      ->check(CLI::Range(1, 1 << 30))
      ->excludes("--pid")
      ->excludes("--job");
  CLI::App* hang = app.add_subcommand("hang", "SIGSTOP the rank");
  AddTarget(hang, &target);
  CLI::App* kill_cmd = app.add_subcommand("kill", "SIGKILL the rank");
  AddTarget(kill_cmd, &target);
  for (CLI::App* sub : {slow, hang, kill_cmd}) {
    sub->add_option("--after", after_s, "seconds to wait before acting")
        ->check(CLI::Range(0.0, 86400.0));
  }
  for (CLI::App* sub : {slow, hang}) {
    sub->add_option("--duration", duration_s,
                    "seconds to act (slow: default until interrupted; hang: "
                    "default stays stopped)")
        ->check(CLI::Range(0.0, 86400.0));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return Fail(2, std::string(e.what()) + " (see --help)");
  }
  signal(SIGINT, OnSignal);
  signal(SIGTERM, OnSignal);
  const int64_t duration_ms =
      duration_s < 0 ? -1 : static_cast<int64_t>(duration_s * 1000);
  strata::fault::SlowOptions o;
  o.factor = factor;
  o.period_ms = period_ms;
  o.duration_ms = duration_ms;
  if (children_of > 0) {
    if (kill(children_of, 0) != 0) {
      return Fail(1, "no process " + std::to_string(children_of));
    }
    WaitSeconds(after_s);
    if (g_stop) return 0;
    std::printf("strata-inject: slowing the processes below %d %.2fx\n",
                children_of, factor);
    std::fflush(stdout);
    auto stopped = strata::fault::SlowChildren(children_of, o, g_stop);
    if (!stopped.ok()) return Fail(1, std::string(stopped.status().message()));
    std::printf("strata-inject: stopped %lld ms in all\n",
                static_cast<long long>(*stopped));
    return 0;
  }

  auto pids = Resolve(target);
  if (!pids.ok()) {
    return Fail(absl::IsInvalidArgument(pids.status()) ? 2 : 1,
                std::string(pids.status().message()));
  }
  for (pid_t p : *pids) {
    std::printf("strata-inject: target %s\n",
                strata::fault::DescribeProcess(p).c_str());
  }
  std::fflush(stdout);
  WaitSeconds(after_s);
  if (g_stop) return 0;
  if (slow->parsed()) {
    std::printf("strata-inject: slowing %zu process(es) %.2fx\n", pids->size(),
                factor);
    std::fflush(stdout);
    auto stopped = strata::fault::Slow(*pids, o, g_stop);
    if (!stopped.ok()) return Fail(1, std::string(stopped.status().message()));
    std::printf("strata-inject: stopped %lld ms in all\n",
                static_cast<long long>(*stopped));
    return 0;
  }
  if (kill_cmd->parsed()) {
    std::printf("strata-inject: killing %zu process(es)\n", pids->size());
    for (pid_t p : *pids) {
      if (kill(p, SIGKILL) != 0 && errno != ESRCH) {
        return Fail(1, "cannot kill process " + std::to_string(p) + ": " +
                           std::strerror(errno));
      }
    }
    return 0;
  }
  std::printf("strata-inject: stopping %zu process(es)\n", pids->size());
  std::fflush(stdout);
  auto st = strata::fault::Hang(*pids, duration_ms, g_stop);
  if (!st.ok()) return Fail(1, std::string(st.message()));
  return 0;
}
