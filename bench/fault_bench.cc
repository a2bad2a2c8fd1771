// strata-bench fault: the fault issue's goals measured on real `strata run`
// jobs of strata-train (local workers, faults injected from outside the
// ranks by strata-inject; docs/fault.md). Scenarios (--only a,b,...):
//  straggler  4 ranks on 2 nodes, rank 3 slowed 1.3x and (another run)
//             1.15x from step --slow-at: steps until it is flagged (goals
//             30 and 100), whether rank and node are right, and any other
//             rank flagged (victims must not be);
//  clean      --clean-steps steps of the `tiny` model on 4 ranks without a
//             fault: straggler, hang, slow-link and plan findings (goal 0
//             in 2,000);
//  hang       rank 3 SIGSTOPped: seconds from its last step to detection
//             (goal max(3 x median step, 10 s)), whether the diagnosis names
//             the rank and the collective, and detection -> first step of
//             the next attempt (goal 20 s);
//  evict      rank 3 slowed 2x under straggler=report (doing nothing) and
//             under straggler=evict: tokens/s of the last 20 steps (goal
//             evict >= 1.3x);
//  rebalance  2 nodes x 1 rank, pp=2 planned for the strata-small model
//             preset, node-1 (all of stage 1) slowed 2x under
//             straggler=report and straggler=rebalance: tokens/s of the last
//             20 steps and the re-planned layer split;
//  recovery   per fault kind on 2 nodes x 1 rank with a hot spare
//             registered (--spares 1): rank SIGKILL, rank SIGSTOP (hang),
//             worker SIGKILL: seconds from the injection to the detection
//             (the coordinator's first event of it: rank_exited, hang,
//             worker_lost or attempt_failed) and to the first completed
//             step after it (in_place_restart: the step's end; else
//             running_again; event times from strata run's events.log),
//             steps computed again, in place or not, and
//             for the worker whether a spare took the lost node's place with
//             the same plan (goals: 3 s, max(3 x median step, 3 s) + 3 s and
//             5 s to the first step; <= 1 step lost; docs/fault.md);
//  ettr       strata-train for --ettr-minutes with a fault every
//             --ettr-every-s (rank SIGKILL, rank SIGSTOP, worker SIGKILL;
//             seeded; every worker kill has a hot spare, --spares as many):
//             productive time (the kept steps' own time) / wall time (goal
//             >= 97%), and the lost time per restart.
// Each scenario runs --repeat times; the note reports the worst run.
// --short: recovery once per kind and a 2-minute ettr run with a fault
// every 30 s, a few minutes in all. --train-extra adds strata-train flags
// to the recovery and ettr runs. Recovery and ettr run strata-train as a
// user who wants fast recovery would: --in-place-restart and a memory-tier
// checkpoint every step (--mem-ckpt-every 1), the durable tier every
// --recovery-ckpt-every steps (ettr: Young's interval); --full-restart
// measures the full restart instead (no in-place restart, no memory tier,
// durable every step).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/registry.h"
#include "bench/sibling.h"

namespace strata::bench {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string only = "straggler,clean,hang,evict";
  int repeat = 1;
  int slow_at = 10;
  int clean_steps = 2000;
  double ettr_minutes = 10;
  double ettr_every_s = 120;
  int seed = 1;
  std::string work = "/tmp/strata-bench-fault";
  std::string train_extra;   // more strata-train flags (recovery, ettr)
  int recovery_ckpt_every = 10;
  // Recovery and ettr runs restart fully (no --in-place-restart, no memory
  // tier, the durable checkpoint every step): the path before issue 35.
  bool full_restart = false;
  int heartbeat_ms = 500;    // strata run --heartbeat-ms (recovery, ettr)
  bool short_mode = false;
};

struct RunOut {
  int code = 0;
  double wall_s = 0;
  std::string out;  // strata run's terminal output
  std::string dir;  // its state directory
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The 1-minute load average (/proc/loadavg), -1 when unreadable: the
// machine is shared, every figure is printed with it.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double l = -1;
  in >> l;
  return l;
}

// `strata run <args> --state-dir DIR -- strata-train <train>`.
RunOut StrataRun(const Options& o, const std::string& name,
                 const std::string& args, const std::string& train) {
  RunOut r;
  r.dir = o.work + "/" + name;
  fs::remove_all(r.dir);
  fs::create_directories(o.work);
  const std::string cmd = absl::StrCat(
      FindSibling("strata", "cli"), " run ", args, " --state-dir ", r.dir,
      " -- ", FindSibling("strata-train", "runtime"), " ", train, " > ",
      o.work, "/", name, ".out 2>&1");
  std::fprintf(stderr, "  running %s ...\n", name.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  const int status = std::system(cmd.c_str());
  r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                           t0)
                 .count();
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  r.out = ReadFile(o.work + "/" + name + ".out");
  return r;
}

struct Straggler {
  int rank, step;
  std::string node;
  double slowdown;
};

std::vector<Straggler> Stragglers(const std::string& out) {
  static const std::regex re(
      R"(straggler: rank (\d+) on (\S+) is ([\d.]+)x slower \(\w+\), )"
      R"(confirmed at step (\d+))");
  std::vector<Straggler> v;
  std::set<std::string> seen;  // the run prints events twice at most
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end;
       ++it) {
    if (!seen.insert((*it)[0].str()).second) continue;
    v.push_back({std::stoi((*it)[1]), std::stoi((*it)[4]), (*it)[2],
                 std::stod((*it)[3])});
  }
  return v;
}

// Seconds since midnight of a coordinator.log line's timestamp.
double LogTime(const std::string& line) {
  int h = 0, m = 0;
  double s = 0;
  if (line.size() < 23 || std::sscanf(line.c_str() + 11, "%d:%d:%lf", &h, &m,
                                      &s) != 3) {
    return -1;
  }
  return h * 3600 + m * 60 + s;
}

// The first coordinator.log line containing `what`.
std::string LogLine(const RunOut& r, const std::string& what) {
  std::stringstream in(ReadFile(r.dir + "/coordinator.log"));
  for (std::string line; std::getline(in, line);) {
    if (line.find(what) != std::string::npos) return line;
  }
  return "";
}

// step -> step seconds from rank 0's stdout of every attempt, later
// attempts overriding earlier ones (the kept steps).
std::map<int, double> KeptSteps(const RunOut& r) {
  std::map<int, std::map<int, double>> by_attempt;
  static const std::regex re(R"(step=(\d+) loss=\S+ tokens_per_s=\S+ step_s=(\S+))");
  for (const auto& node : fs::directory_iterator(r.dir)) {
    const fs::path job = node.path() / "job-1";
    if (!fs::is_directory(job)) continue;
    for (const auto& att : fs::directory_iterator(job)) {
      const std::string out = ReadFile(att.path() / "rank-0.stdout");
      if (out.empty()) continue;
      const int a = std::stoi(att.path().filename().string().substr(8));
      for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end;
           ++it) {
        by_attempt[a][std::stoi((*it)[1])] = std::stod((*it)[2]);
      }
    }
  }
  std::map<int, double> kept;
  for (const auto& [a, steps] : by_attempt) {
    for (const auto& [s, t] : steps) kept[s] = t;
  }
  return kept;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median tokens/s of the printing rank's last `n` steps in the last attempt
// (strata-train prints from the last pipeline stage's first rank).
double TailTokensPerS(const RunOut& r, int n) {
  static const std::regex re(R"(tokens_per_s=(\S+))");
  int last = -1;
  std::string out;
  for (const auto& node : fs::directory_iterator(r.dir)) {
    const fs::path job = node.path() / "job-1";
    if (!fs::is_directory(job)) continue;
    for (const auto& att : fs::directory_iterator(job)) {
      const int a = std::stoi(att.path().filename().string().substr(8));
      for (const auto& f : fs::directory_iterator(att.path())) {
        if (f.path().extension() != ".stdout") continue;
        std::string text = ReadFile(f.path());
        if (a >= last && text.find("tokens_per_s=") != std::string::npos) {
          last = a;
          out = std::move(text);
        }
      }
    }
  }
  std::vector<double> v;
  for (std::sregex_iterator it(out.begin(), out.end(), re), end; it != end;
       ++it) {
    v.push_back(std::stod((*it)[1]));
  }
  if (static_cast<int>(v.size()) > n) v.erase(v.begin(), v.end() - n);
  return Median(v);
}

const char* kTrainSmall =
    "--model small --global-batch 8 --micro-batch 1 --ckpt-every 10 --resume";
const char* kFourRanks = "--nodes 2 --ranks-per-node 2";

// What a user runs for fast recovery (docs/fault.md "In-place restart",
// docs/checkpoint.md "Memory tier"): a memory checkpoint every step and
// in-place restart; the durable tier keeps its own interval.
std::string RecoveryFlags(const Options& o) {
  return o.full_restart ? std::string()
                        : " --in-place-restart --mem-ckpt-every 1";
}

void Straggle(const Options& o, int run) {
  for (double factor : {1.3, 1.15}) {
    const int steps = o.slow_at + (factor > 1.2 ? 40 : 110);
    const RunOut r = StrataRun(
        o, absl::StrCat("straggler-", factor, "-", run),
        absl::StrCat(kFourRanks, " --inject slow:rank=3,factor=", factor,
                     ",step=", o.slow_at),
        absl::StrCat(kTrainSmall, " --steps ", steps));
    const auto found = Stragglers(r.out);
    int first = -1;
    std::vector<std::string> wrong;
    for (const auto& s : found) {
      if (s.rank == 3 && s.node == "node-1") {
        if (first < 0) first = s.step;
      } else {
        wrong.push_back(absl::StrCat("rank ", s.rank, " on ", s.node,
                                     " at step ", s.step));
      }
    }
    std::printf(
        "straggler %.2fx: %s (goal %d steps); other ranks flagged: %s; "
        "exit %d\n",
        factor,
        first < 0 ? "NOT flagged"
                  : absl::StrCat("rank 3 on node-1 flagged ",
                                 first - o.slow_at, " steps after the slowdown")
                        .c_str(),
        factor > 1.2 ? 30 : 100,
        wrong.empty() ? "none" : absl::StrJoin(wrong, "; ").c_str(), r.code);
  }
}

void Clean(const Options& o, int run) {
  const RunOut r = StrataRun(
      o, absl::StrCat("clean-", run), kFourRanks,
      absl::StrCat("--model tiny --global-batch 8 --micro-batch 1 --steps ",
                   o.clean_steps));
  const auto found = Stragglers(r.out);
  const bool hang = r.out.find(": hang: ") != std::string::npos;
  int other = 0;  // slow links and plan findings
  for (const char* kind : {": slow_link: ", ": plan_mismatch: ",
                           ": unbalanced_plan: "}) {
    for (size_t at = r.out.find(kind); at != std::string::npos;
         at = r.out.find(kind, at + 1)) {
      ++other;
    }
  }
  std::printf("clean: %d steps of tiny on 4 ranks in %.0f s: %zu straggler "
              "finding(s), %s, %d slow-link or plan finding(s) (goal 0); "
              "exit %d\n",
              o.clean_steps, r.wall_s, found.size(),
              hang ? "a hang finding" : "no hang finding", other, r.code);
  for (const auto& s : found) {
    std::printf("  false positive: rank %d on %s %.2fx at step %d\n", s.rank,
                s.node.c_str(), s.slowdown, s.step);
  }
}

void Hang(const Options& o, int run) {
  const RunOut r = StrataRun(
      o, absl::StrCat("hang-", run),
      absl::StrCat(kFourRanks, " --max-restarts 1 --inject hang:rank=3,step=",
                   o.slow_at),
      absl::StrCat(kTrainSmall, " --steps ", o.slow_at + 30));
  static const std::regex stall(
      R"(no step progress for (\d+) ms \(deadline (\d+) ms\))");
  const std::string detect = LogLine(r, "no step progress for");
  const std::string acted = LogLine(r, "attempt 0: hang: ");
  static const std::regex again(R"(running_again: first step (\d+) ms)");
  std::smatch m;
  double back = -1;
  if (!detect.empty() && !acted.empty() &&
      std::regex_search(r.out, m, again)) {
    back = LogTime(acted) - LogTime(detect) + std::stod(m[1]) / 1000;
  }
  double stalled = -1, deadline = -1;
  if (std::regex_search(detect, m, stall)) {
    stalled = std::stod(m[1]) / 1000;
    deadline = std::stod(m[2]) / 1000;
  }
  static const std::regex named(R"(hang: (rank\(s\) 3 [^\n]*))");
  const bool ok = std::regex_search(r.out, m, named);
  std::printf(
      "hang: detected %.1f s after the last step (deadline %.1f s; goal "
      "max(3 x median step, 10 s)); running again %.1f s after detection "
      "(goal 20 s); diagnosis: %s; exit %d\n",
      stalled, deadline, back,
      ok ? m[1].str().substr(0, 200).c_str() : "rank 3 NOT named", r.code);
}

// One job twice, under straggler=report (doing nothing) and under
// straggler=`policy`; prints `what`, both runs' tokens/s of the last 20
// steps, their ratio and `found` (the first match of `sign` in the second
// run's output, else `missing`).
void PolicyPair(const Options& o, int run, const std::string& policy,
                const std::string& args, const std::string& train,
                const std::string& what, const std::regex& sign,
                const std::string& missing) {
  const RunOut nothing = StrataRun(o, absl::StrCat(policy, "-report-", run),
                                   args + " --fault straggler=report", train);
  const RunOut acted =
      StrataRun(o, absl::StrCat(policy, "-", policy, "-", run),
                args + " --fault straggler=" + policy, train);
  const double a = TailTokensPerS(nothing, 20), b = TailTokensPerS(acted, 20);
  std::smatch m;
  const bool found = std::regex_search(acted.out, m, sign);
  std::printf(
      "%s: %s: doing nothing %.0f tokens/s, %s %.0f tokens/s (last 20 "
      "steps): %.2fx (goal 1.3x); %s; wall %.0f s vs %.0f s; exit %d/%d\n",
      policy.c_str(), what.c_str(), a, policy.c_str(), b, a > 0 ? b / a : 0,
      found ? m[1].str().c_str() : missing.c_str(), nothing.wall_s,
      acted.wall_s, nothing.code, acted.code);
}

void Evict(const Options& o, int run) {
  PolicyPair(o, run, "evict",
             absl::StrCat(kFourRanks,
                          " --min-nodes 1 --max-restarts 2 --fault "
                          "restart_cost_s=1 --inject slow:rank=3,factor=2,"
                          "step=",
                          o.slow_at),
             absl::StrCat(kTrainSmall, " --steps 90"), "rank 3 slowed 2x",
             std::regex(R"((evicted: node node-1))"), "node-1 NOT evicted");
}

// A slow node holding a whole pipeline stage: no rank does the same work,
// so plan vs measured finds it; `rebalance` re-plans with the node at its
// measured speed (fewer layers on its stage).
void Rebalance(const Options& o, int run) {
  PolicyPair(o, run, "rebalance",
             absl::StrCat("--nodes 2 --ranks-per-node 1 --pp 2 --model "
                          "strata-small --max-restarts 2 --fault "
                          "restart_cost_s=1 --inject "
                          "slow-node:node=1,factor=2,step=",
                          o.slow_at),
             absl::StrCat(kTrainSmall, " --steps 120"),
             "node-1 (pipeline stage 1) slowed 2x",
             std::regex(R"(replanned: ([^\n]*))"), "NOT re-planned");
}

// The local time ("HH:MM:SS.mmm", seconds since midnight) `strata run`
// printed for its injection of `what`, else -1.
double InjectionTime(const RunOut& r, const std::string& what) {
  static const std::regex re(
      R"(fault injection at step \d+ \((\d+):(\d+):([\d.]+)\): (\S+))");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), re), end; it != end;
       ++it) {
    if ((*it)[4].str().rfind(what, 0) == 0) {
      return std::stoi((*it)[1]) * 3600 + std::stoi((*it)[2]) * 60 +
             std::stod((*it)[3]);
    }
  }
  return -1;
}

// Seconds from `t0` to the first event of `strata run`'s DIR/events.log
// ("HH:MM:SS.mmm job-1 attempt A: kind: message") containing `what` at or
// after t0 (-1: none).
double SecondsTo(const RunOut& r, double t0, const std::string& what) {
  std::stringstream in(ReadFile(r.dir + "/events.log"));
  for (std::string line; std::getline(in, line);) {
    int h = 0, m = 0;
    double sec = 0;
    if (line.find(what) == std::string::npos ||
        std::sscanf(line.c_str(), "%d:%d:%lf", &h, &m, &sec) != 3) {
      continue;
    }
    const double t = h * 3600 + m * 60 + sec;
    if (t >= t0 - 0.001) return t - t0;
  }
  return -1;
}

// The time ("HH:MM:SS.mmm", seconds since midnight) of the first
// events.log line at or after t0 containing one of `what`, and the line.
std::pair<double, std::string> FirstEvent(const RunOut& r, double t0,
                                          const std::vector<std::string>& what) {
  std::stringstream in(ReadFile(r.dir + "/events.log"));
  for (std::string line; std::getline(in, line);) {
    int h = 0, m = 0;
    double sec = 0;
    if (std::none_of(what.begin(), what.end(),
                     [&](const std::string& w) {
                       return line.find(w) != std::string::npos;
                     }) ||
        std::sscanf(line.c_str(), "%d:%d:%lf", &h, &m, &sec) != 3) {
      continue;
    }
    const double t = h * 3600 + m * 60 + sec;
    if (t >= t0 - 0.001) return {t, line};
  }
  return {-1, ""};
}

// Seconds from t0 (a fault) to the first completed step after it: the
// in-place restart's first step (its event minus how late its report came:
// the step's own end), else the next attempt's running_again event.
double SecondsToStep(const RunOut& r, double t0) {
  auto [t, line] = FirstEvent(r, t0, {": in_place_restart: "});
  if (t >= 0) {
    static const std::regex late(R"(reported (\d+) ms after it ended)");
    std::smatch m;
    const double l =
        std::regex_search(line, m, late) ? std::stod(m[1]) / 1000 : 0;
    return t - t0 - l;
  }
  return SecondsTo(r, t0, ": running_again: ");
}

// Steps computed again per in-place restart, from the printing rank's
// output (rank 0 of dp, which the faults here never hit): its last step
// line before each "in-place restart" line minus the step it continued
// from.
std::vector<int> InPlaceRecomputed(const RunOut& r) {
  std::vector<int> out;
  static const std::regex step(R"(^step=(\d+) loss=)");
  static const std::regex from(R"(^in-place restart: .*continuing from step (\d+))");
  for (const auto& node : fs::directory_iterator(r.dir)) {
    const fs::path job = node.path() / "job-1";
    if (!fs::is_directory(job)) continue;
    for (const auto& att : fs::directory_iterator(job)) {
      std::stringstream in(ReadFile(att.path() / "rank-0.stdout"));
      int last = 0;
      std::smatch m;
      for (std::string line; std::getline(in, line);) {
        if (std::regex_search(line, m, step)) last = std::stoi(m[1]);
        if (std::regex_search(line, m, from)) {
          out.push_back(std::max(0, last - std::stoi(m[1])));
        }
      }
    }
  }
  return out;
}

struct FaultKind {
  const char* name;
  const char* inject;  // --inject, ",step=N" appended
  const char* goal;
};

void Recovery(const Options& o, int run) {
  static const FaultKind kinds[] = {
      {"rank SIGKILL", "kill-rank:rank=1", "3 s"},
      {"rank SIGSTOP (hang)", "hang:rank=1", "max(3 x median step, 3 s) + 3 s"},
      {"worker SIGKILL, spare registered", "kill-worker:node=1", "5 s"},
  };
  int i = 0;
  for (const FaultKind& k : kinds) {
    const std::string inject = absl::StrCat(k.inject, ",step=", o.slow_at);
    const RunOut r = StrataRun(
        o, absl::StrCat("recovery-", i++, "-", run),
        absl::StrCat("--nodes 2 --ranks-per-node 1 --spares 1 --max-restarts 2 "
                     "--heartbeat-ms ",
                     o.heartbeat_ms, " --inject ", inject),
        absl::StrCat(kTrainSmall, " --steps ", o.slow_at + 30,
                     " --ckpt-every ",
                     o.full_restart ? 1 : o.recovery_ckpt_every,
                     RecoveryFlags(o), " ", o.train_extra));
    const double t0 = InjectionTime(r, k.inject);
    // Detection: the coordinator's first word of the fault.
    const double found =
        t0 < 0 ? -1
               : FirstEvent(r, t0, {": attempt_failed: ", ": worker_lost: ",
                                    ": rank_exited: ", ": hang: "})
                     .first;
    const double detect = found < 0 ? -1 : found - t0;
    const double back = t0 < 0 ? -1 : SecondsToStep(r, t0);
    static const std::regex lost_re(R"((\d+) step\(s\) lost to the fault)");
    std::smatch m;
    int lost = std::regex_search(r.out, m, lost_re) ? std::stoi(m[1]) : -1;
    const std::vector<int> redo = InPlaceRecomputed(r);
    const bool in_place = !redo.empty();
    if (in_place) lost = *std::max_element(redo.begin(), redo.end());
    std::string how;
    if (std::string(k.inject).rfind("kill-worker", 0) == 0) {
      static const std::regex used(R"(spare_used: ([^\n]*))");
      how = std::regex_search(r.out, m, used)
                ? "; " + m[1].str()
                : std::string("; NO spare used");
      if (r.out.find(": replanned: ") != std::string::npos) {
        how += " (re-planned)";
      }
    }
    std::printf(
        "recovery %s: detected %.2f s after the fault, first step %.2f s "
        "after it (goal %s), %d step(s) computed again (goal <= 1), %s%s; "
        "load %.1f; exit %d\n",
        k.name, detect, back, k.goal, lost,
        in_place ? "in place" : "full restart", how.c_str(), LoadAverage(),
        r.code);
  }
}

void Ettr(const Options& o, int run) {
  // Calibrate the step time, then place a fault every ettr_every_s.
  // With the recovery flags: the memory tier's saves are part of the step
  // the faults are placed by.
  const RunOut cal =
      StrataRun(o, absl::StrCat("ettr-cal-", run), kFourRanks,
                absl::StrCat(kTrainSmall, " --steps 20", RecoveryFlags(o)));
  std::vector<double> times;
  for (const auto& [s, t] : KeptSteps(cal)) {
    if (s > 3) times.push_back(t);
  }
  const double step_s = std::max(0.01, Median(times));
  const int steps = static_cast<int>(o.ettr_minutes * 60 / step_s);
  const int every = std::max(20, static_cast<int>(o.ettr_every_s / step_s));
  // The checkpoint interval a user would pick for this failure rate:
  // Young's first-order optimum sqrt(2 x checkpoint cost x MTBF) (J. W.
  // Young, "A first order approximation to the optimum checkpoint
  // interval", CACM 17(9), 1974), the cost being the slowest rank's stall
  // per checkpoint in the calibration run (2 checkpoints), at least 2 steps.
  static const std::regex stall_re(R"(ckpt_stall_s=(\S+))");
  double stall = 0;
  for (auto it = std::sregex_iterator(cal.out.begin(), cal.out.end(), stall_re);
       it != std::sregex_iterator(); ++it) {
    stall = std::max(stall, std::stod((*it)[1]) / 2);
  }
  const double young_s = std::sqrt(2 * std::max(stall, 1e-3) * o.ettr_every_s);
  const int ckpt_every =
      std::max(2, static_cast<int>(std::lround(young_s / step_s)));
  std::printf("ettr: %.3f s per step, checkpoint stall %.3f s: checkpoint "
              "every %d steps (Young: sqrt(2 x %.3f s x %.0f s) = %.1f s)\n",
              step_s, stall, ckpt_every, stall, o.ettr_every_s, young_s);
  std::mt19937 rng(o.seed + run);
  std::vector<std::string> inject;
  // Worker kills take node 1, then the spares in the order they replace it
  // (node 2, 3, ...): each has a spare registered.
  int worker_kills = 0;
  for (int at = every; at < steps - every / 2; at += every) {
    const int kind = static_cast<int>(rng() % 3);
    if (kind == 0) inject.push_back(absl::StrCat("kill-rank:rank=1,step=", at));
    if (kind == 1) inject.push_back(absl::StrCat("hang:rank=1,step=", at));
    if (kind == 2) {
      inject.push_back(
          absl::StrCat("kill-worker:node=", 1 + worker_kills++, ",step=", at));
    }
  }
  std::string args = absl::StrCat(
      kFourRanks, " --min-nodes 1 --spares ", worker_kills, " --heartbeat-ms ",
      o.heartbeat_ms, " --max-restarts ", inject.size() + 1);
  for (const auto& i : inject) absl::StrAppend(&args, " --inject ", i);
  const double load0 = LoadAverage();
  const RunOut r =
      StrataRun(o, absl::StrCat("ettr-", run), args,
                absl::StrCat(kTrainSmall, " --steps ", steps, " --ckpt-every ",
                             ckpt_every, RecoveryFlags(o), " ",
                             o.train_extra));
  double productive = 0;
  const auto kept = KeptSteps(r);
  for (const auto& [s, t] : kept) productive += t;
  std::printf(
      "ettr: %d steps (%.3f s each) in %.0f s with %zu faults [%s]: "
      "productive %.0f s / wall %.0f s = %.1f%% (goal 97%%); %zu steps kept; "
      "load %.1f -> %.1f; exit %d\n",
      steps, step_s, r.wall_s, inject.size(),
      absl::StrJoin(inject, " ").c_str(), productive, r.wall_s,
      100 * productive / r.wall_s, kept.size(), load0, LoadAverage(), r.code);
  // In-place restarts: what each cost (events) and the steps computed
  // again (the printing rank's output).
  static const std::regex inplace(R"(in_place_restart: ([^\n]*))");
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), inplace);
       it != std::sregex_iterator(); ++it) {
    std::printf("  in place: %s\n", (*it)[1].str().substr(0, 220).c_str());
  }
  const std::vector<int> redo_in_place = InPlaceRecomputed(r);
  if (!redo_in_place.empty()) {
    std::printf("  steps computed again per in-place restart: %s\n",
                absl::StrJoin(redo_in_place, ", ").c_str());
  }
  // Lost time per restart: the cause, the gap from failure to the next
  // first step, and the steps computed again.
  std::stringstream log(r.out);
  static const std::regex again(
      R"(attempt (\d+): running_again: first step (\d+) ms)");
  std::map<int, double> gap;
  for (std::string line; std::getline(log, line);) {
    std::smatch m;
    if (std::regex_search(line, m, again))
      gap[std::stoi(m[1])] = std::stod(m[2]) / 1000;
  }
  static const std::regex cause(
      R"(attempt (\d+): restarting after: ([^\n]{0,90}))");
  static const std::regex lost(
      R"(attempt (\d+): resumed at step (\d+) after reaching (\d+))");
  std::map<int, std::string> why;
  std::map<int, int> redo;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), cause);
       it != std::sregex_iterator(); ++it) {
    why[std::stoi((*it)[1])] = (*it)[2];
  }
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), lost);
       it != std::sregex_iterator(); ++it) {
    redo[std::stoi((*it)[1])] = std::stoi((*it)[3]) - std::stoi((*it)[2]);
  }
  for (const auto& [a, text] : why) {
    std::printf("  attempt %d: %.1f s from the failure to its first step, "
                "%d step(s) (%.1f s) computed again; after: %s\n",
                a, gap.count(a) ? gap[a] : -1.0, redo[a], redo[a] * step_s,
                text.c_str());
  }
}

int FaultBench(int argc, char** argv) {
  CLI::App app{"strata-bench fault: the fault-detection goals on strata run"};
  Options o;
  app.add_option("--only", o.only,
                 "scenarios: straggler,clean,hang,evict,rebalance,recovery,"
                 "ettr")
      ->capture_default_str();
  app.add_option("--repeat", o.repeat, "runs per scenario (report the worst)")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  app.add_option("--slow-at", o.slow_at, "step of the injected fault")
      ->capture_default_str()
      ->check(CLI::Range(5, 1000));
  app.add_option("--clean-steps", o.clean_steps, "steps of the clean run")
      ->capture_default_str()
      ->check(CLI::Range(10, 100000));
  app.add_option("--ettr-minutes", o.ettr_minutes, "length of the ettr run")
      ->capture_default_str()
      ->check(CLI::Range(1.0, 120.0));
  app.add_option("--ettr-every-s", o.ettr_every_s, "seconds between faults")
      ->capture_default_str()
      ->check(CLI::Range(20.0, 3600.0));
  app.add_option("--seed", o.seed, "fault mix of the ettr run")
      ->capture_default_str();
  app.add_option("--work", o.work, "state directories of the runs")
      ->capture_default_str();
  app.add_option("--train-extra", o.train_extra,
                 "more strata-train flags for the recovery and ettr runs");
  app.add_option("--recovery-ckpt-every", o.recovery_ckpt_every,
                 "checkpoint interval of the recovery runs")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  app.add_option("--heartbeat-ms", o.heartbeat_ms,
                 "worker heartbeat of the recovery and ettr runs (a worker is "
                 "lost after 3)")
      ->capture_default_str()
      ->check(CLI::Range(20, 60000));
  app.add_flag("--full-restart", o.full_restart,
               "recovery and ettr runs without --in-place-restart and the "
               "memory tier (durable checkpoint every step in recovery): "
               "the full restart they fall back to");
  app.add_flag("--short", o.short_mode,
               "recovery once per kind and a 2-minute ettr run with a fault "
               "every 30 s (overrides --only, --repeat and the ettr length)");
  CLI11_PARSE(app, argc, argv);
  if (o.short_mode) {
    o.only = "recovery,ettr";
    o.repeat = 1;
    o.ettr_minutes = 2;
    o.ettr_every_s = 30;
  }
  const std::vector<std::string> only = absl::StrSplit(o.only, ',');
  const std::map<std::string, void (*)(const Options&, int)> scenarios = {
      {"straggler", Straggle}, {"clean", Clean}, {"hang", Hang},
      {"evict", Evict},        {"rebalance", Rebalance},
      {"recovery", Recovery},  {"ettr", Ettr}};
  for (const auto& name : only) {
    if (!scenarios.contains(name)) {
      std::fprintf(stderr, "strata-bench fault: unknown scenario '%s' "
                           "(straggler, clean, hang, evict, rebalance, "
                           "recovery, ettr)\n",
                   name.c_str());
      return 2;
    }
  }
  for (const auto& name : only) {
    for (int run = 0; run < o.repeat; ++run) scenarios.at(name)(o, run);
    std::fflush(stdout);
  }
  return 0;
}

STRATA_BENCH("fault", "fault detection and recovery goals on strata run",
             FaultBench);

}  // namespace
}  // namespace strata::bench
