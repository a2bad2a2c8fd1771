// strata-bench observe: what observability costs strata-train (docs/observe.md,
// "Overhead"). Goal: at most 1% of step time, with vs without, in one run.
//
// Each run is one job, `strata run --nodes 1 --ranks-per-node R --dashboard
// ADDR -- strata-train --model M --steps S`, whose steps alternate in
// blocks of K (--block): with STRATA_FLIGHT_RECORDER_AB=K the ranks' flight
// recorders record in even blocks and pause in odd ones, and strata-train
// marks each step line recorder=on|off. This bench follows the job's
// output and, while an "on" block runs, does what Prometheus, an open
// dashboard and a user's `strata trace` would: GET /metrics and
// /api/dashboard.json every --scrape-every s and a trace
// (/api/trace.json) every --trace-every s. During "off" blocks nothing
// polls. Heartbeats, step reports and the goodput ledger run throughout:
// the fault detector and the run summary need them, so they are not
// optional.
//
// The first --settle steps of every block are left out (the poller learns
// of a block's start from the output, a few hundred ms late), as are the
// first --warmup steps of the run. Per run it prints the median and the
// mean step time of the on steps over those of the off steps, and the
// median over the blocks of each block's median against the mean of its two
// neighbours' (on over off: an on block's ratio is its median over theirs,
// an off block's is theirs over its own). Blocks a few seconds apart see
// the same machine, and a block between two of the other kind cancels a
// drift that is linear over the three (a shared 2-core VM drifts several %
// between runs minutes apart, and within a run too). The summary prints
// the worst run, as the project reports benchmarks.
//
// A trace's own cost is measured apart: the median on step that ran while
// a trace request was in flight against the median of the other on steps,
// times the overlapped steps per trace, gives the step time one trace
// costs; over --trace-every that is its share of the run.
//
// It also adds the costs up directly (the "accounted" column):
//  in the ranks    flight-recorder records per step (from the collected
//                  traces) x the measured time of one record (Begin,
//                  Started, two Transfers, Finish), over the step time;
//  outside them    the coordinator's CPU seconds per second spent making
//                  /metrics, the dashboard JSON and traces (its own counter
//                  strata_coordinator_render_cpu_seconds_total), spread
//                  over the cores the ranks use. The worker's part (reading
//                  the recorders for a trace, tens of kilobytes every
//                  --trace-every s) is not counted.
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "bench/registry.h"
#include "bench/sibling.h"
#include "comm/flight_recorder.h"
#include "common/status.h"
#include "placement/rank_env.h"

namespace strata::bench {
namespace {

namespace fs = std::filesystem;

struct Options {
  int runs = 3;
  int steps = 1440;
  int block = 10;
  int settle = 2;
  int warmup = 5;
  int ranks = 2;
  std::string model = "small";
  double scrape_every = 1.0;
  double trace_every = 5.0;
  std::string work = "/tmp/strata-bench-observe";
};

struct Run {
  bool ok = false;
  int steps = 0;
  double on_s = 0, off_s = 0;  // median step time, on and off steps
  double mean_ratio = 0;       // mean on step / mean off step
  std::vector<double> block_ratios;  // each block against its neighbours
  double trace_cost_s = 0;  // step time one trace costs (see the header)
  int polls = 0, poll_failures = 0, traces = 0;
  double max_poll_ms = 0;
  double wall_s = 0;
  // strata_coordinator_render_cpu_seconds_total summed over `what`, from
  // the last /metrics scrape, and when that scrape was (s into the run).
  double render_cpu_s = 0, render_at_s = 0;
  std::string last_metrics;  // the newest /metrics text
  // From the last trace collected: rank 0's collectives and the steps
  // they span.
  int trace_collectives = 0, trace_steps = 0;
};

// Rank 0's collectives in a trace and the steps whose sections start after
// the first of them (the recorder keeps the newest operations, the
// coordinator the newest steps: only the window both cover counts).
void CountTrace(const std::string& body, Run* r) {
  static const std::regex coll(
      R"re("ph":"X","cat":"collective","name":"[^"]*","pid":0,"tid":\d+,"ts":([\d.]+))re");
  static const std::regex step(
      R"re("ph":"X","cat":"step","name":"[^"]*","pid":0,"tid":\d+,"ts":([\d.]+),"dur":[\d.e+-]+,"args":\{"step":(\d+))re");
  double first = -1;
  int n = 0;
  for (std::sregex_iterator it(body.begin(), body.end(), coll), end; it != end;
       ++it) {
    const double ts = std::stod((*it)[1]);
    first = first < 0 ? ts : std::min(first, ts);
    ++n;
  }
  std::set<int> steps;
  for (std::sregex_iterator it(body.begin(), body.end(), step), end; it != end;
       ++it) {
    if (first >= 0 && std::stod((*it)[1]) >= first) {
      steps.insert(std::stoi((*it)[2]));
    }
  }
  // Collectives before the first whole step belong to an earlier one.
  if (steps.size() < 2) return;
  r->trace_collectives = n;
  r->trace_steps = static_cast<int>(steps.size());
}

// Seconds of one flight-recorder record as a collective writes it.
// Seconds one flight-recorder record costs; the recorder's error when it
// cannot be created in `dir` (made here: the runs make it only later).
StatusOr<double> RecordSeconds(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  auto fr = comm::FlightRecorder::Create(dir + "/fr-bench", "bench", 0);
  if (!fr.ok()) return fr.status();
  const int g = (*fr)->AddGroup("dp0");
  constexpr int kOps = 200000;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kOps; ++i) {
    comm::FlightRecorder::Op op = (*fr)->Begin(g, i, "all_reduce", 4 << 20);
    op.Started();
    op.Transfer(1, 2 << 20, 1000);
    op.Transfer(1, 2 << 20, 1000);
    op.Finish(true);
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  fs::remove(dir + "/fr-bench");
  return s / kOps;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The step lines of rank 0 in `text`: step number, seconds, recorder on.
struct StepLine {
  int step;
  double seconds;
  bool on;
};
std::vector<StepLine> StepLines(const std::string& text) {
  static const std::regex re(
      R"(\[rank 0\] step=(\d+) loss=\S+ tokens_per_s=\S+ step_s=(\S+) recorder=(on|off))");
  std::vector<StepLine> out;
  for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end;
       ++it) {
    out.push_back({std::stoi((*it)[1]), std::stod((*it)[2]), (*it)[3] == "on"});
  }
  return out;
}

// Polls /metrics and the dashboard JSON once; keeps the render counter.
void Scrape(httplib::Client& cli, double t, Run* r) {
  using Clock = std::chrono::steady_clock;
  for (const char* path : {"/metrics", "/api/dashboard.json"}) {
    const auto p0 = Clock::now();
    auto res = cli.Get(path);
    const double ms =
        std::chrono::duration<double, std::milli>(Clock::now() - p0).count();
    ++r->polls;
    // Before the listener is up the poll fails; count, don't stop.
    if (!res || res->status != 200) {
      ++r->poll_failures;
      continue;
    }
    r->max_poll_ms = std::max(r->max_poll_ms, ms);
    if (std::string(path) != "/metrics") continue;
    // Parsed after the run: this process shares the cores with the ranks.
    r->last_metrics = std::move(res->body);
    r->render_at_s = t;
  }
}

// The coordinator's render CPU seconds in a /metrics text.
double RenderCpuSeconds(const std::string& metrics) {
  static const std::regex re(
      R"(\nstrata_coordinator_render_cpu_seconds_total\{[^}]*\} (\S+))");
  double sum = 0;
  for (std::sregex_iterator it(metrics.begin(), metrics.end(), re), end;
       it != end; ++it) {
    sum += std::stod((*it)[1]);
  }
  return sum;
}

Run RunOnce(const Options& o, const std::string& name) {
  Run r;
  const std::string dir = o.work + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(o.work);
  const int port = FreePort();
  std::vector<std::string> args = {
      FindSibling("strata", "cli"), "run", "--nodes", "1", "--ranks-per-node",
      std::to_string(o.ranks), "--plaintext", "--state-dir", dir,
      "--dashboard", absl::StrCat("127.0.0.1:", port), "--env",
      absl::StrCat("STRATA_FLIGHT_RECORDER_AB=", o.block), "--",
      FindSibling("strata-train", "runtime"), "--model", o.model, "--steps"};
  args.push_back(std::to_string(o.steps));
  const std::string out_path = o.work + "/" + name + ".out";
  std::fflush(nullptr);  // the child must not print our buffered output
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* f = std::freopen(out_path.c_str(), "w", stdout);
    if (f == nullptr || dup2(fileno(stdout), 2) < 0) _exit(127);
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (pid < 0) return r;
  std::fprintf(stderr, "  running %s ...\n", name.c_str());

  httplib::Client cli("127.0.0.1", port);
  cli.set_connection_timeout(1);
  cli.set_read_timeout(5);
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  double next_scrape = o.scrape_every, next_trace = o.trace_every;
  int status = 0;
  rusage ru{};
  std::ifstream out;
  std::string pending;     // output read but not yet a whole line
  std::string last_trace;  // the newest trace collected
  int done = 0;         // steps the job has printed
  std::map<int, double> printed_at;  // step -> s into the run it was read
  std::vector<std::pair<double, double>> requests;  // traces: start, end
  // Bounded: strata run ends the job itself (steps are finite); the loop
  // gives up after 30 minutes and kills the run.
  for (;;) {
    const pid_t w = wait4(pid, &status, WNOHANG, &ru);
    if (w == pid) break;
    const double t = std::chrono::duration<double>(Clock::now() - t0).count();
    if (t > 1800) {
      kill(pid, SIGKILL);
      wait4(pid, &status, 0, &ru);
      std::fprintf(stderr, "  %s: gave up after 30 minutes\n", name.c_str());
      return r;
    }
    if (!out.is_open()) out.open(out_path);
    if (out.is_open()) {
      std::string chunk((std::istreambuf_iterator<char>(out)), {});
      out.clear();  // at EOF: keep following the file
      pending += chunk;
      const size_t cut = pending.rfind('\n');
      if (cut != std::string::npos) {
        for (const StepLine& l : StepLines(pending.substr(0, cut + 1))) {
          done = std::max(done, l.step);
          printed_at.try_emplace(l.step, t);
        }
        pending.erase(0, cut + 1);
      }
    }
    // The step running now is number done + 1.
    const bool on_block = placement::FlightRecorderRecords(done, o.block);
    if (on_block && o.scrape_every > 0 && t >= next_scrape) {
      next_scrape = t + o.scrape_every;
      Scrape(cli, t, &r);
    }
    if (on_block && o.trace_every > 0 && t >= next_trace) {
      next_trace = t + o.trace_every;
      auto res = cli.Get("/api/trace.json?job=job-1");
      requests.emplace_back(
          t, std::chrono::duration<double>(Clock::now() - t0).count());
      if (res && res->status == 200) {
        ++r.traces;
        last_trace = std::move(res->body);  // parsed after the run
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  CountTrace(last_trace, &r);
  r.render_cpu_s = RenderCpuSeconds(r.last_metrics);
  // Step times by block, leaving out the run's warm-up and each block's
  // first --settle steps.
  std::vector<std::vector<double>> blocks((o.steps + o.block - 1) / o.block);
  std::vector<double> on, off, traced, clean;
  // A step ran from (read - its seconds) to when its line was read, which
  // is up to one poll (20 ms) plus the pipe's delay late.
  constexpr double kReadLateS = 0.05;
  std::set<size_t> hit;  // requests that overlapped a counted on step
  auto overlaps_trace = [&](const StepLine& l) {
    auto at = printed_at.find(l.step);
    if (at == printed_at.end()) return false;
    const double begin = at->second - l.seconds - kReadLateS, end = at->second;
    bool any = false;
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].first < end && requests[i].second > begin) {
        hit.insert(i);
        any = true;
      }
    }
    return any;
  };
  for (const StepLine& l : StepLines(ReadFile(out_path))) {
    ++r.steps;
    const int index = l.step - 1;  // step=N is the N-th step
    const int b = index / o.block;
    if (l.step <= o.warmup || index % o.block < o.settle) continue;
    if (l.on != placement::FlightRecorderRecords(index, o.block)) {
      std::fprintf(stderr, "  %s: step %d ran recorder=%s in block %d\n",
                   name.c_str(), l.step, l.on ? "on" : "off", b);
      return r;
    }
    blocks[b].push_back(l.seconds);
    (l.on ? on : off).push_back(l.seconds);
    if (l.on) (overlaps_trace(l) ? traced : clean).push_back(l.seconds);
  }
  r.on_s = Median(on);
  r.off_s = Median(off);
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0 : sum / v.size();
  };
  if (!off.empty()) r.mean_ratio = mean(on) / mean(off);
  for (size_t b = 1; b + 1 < blocks.size(); ++b) {
    if (blocks[b - 1].empty() || blocks[b].empty() || blocks[b + 1].empty())
      continue;
    const double self = Median(blocks[b]);
    const double around = (Median(blocks[b - 1]) + Median(blocks[b + 1])) / 2;
    const bool on = placement::FlightRecorderRecords(b * o.block, o.block);
    r.block_ratios.push_back(on ? self / around : around / self);
  }
  // Medians: a slow spell of the machine that happens to cover a few
  // requests would move the means by more than a trace costs.
  if (!traced.empty() && !clean.empty()) {
    r.trace_cost_s = (Median(traced) - Median(clean)) * traced.size() /
                     static_cast<double>(hit.size());
  }
  r.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0 &&
         r.steps == o.steps && !on.empty() && !off.empty();
  if (!r.ok) {
    std::fprintf(stderr, "  %s failed (exit %d, %d of %d steps); see %s\n",
                 name.c_str(), WIFEXITED(status) ? WEXITSTATUS(status) : -1,
                 r.steps, o.steps, out_path.c_str());
  }
  return r;
}

int ObserveMain(int argc, char** argv) {
  Options o;
  CLI::App app{"strata-bench observe: observability's cost on strata-train"};
  app.add_option("--runs", o.runs, "jobs, each with on and off blocks")
      ->check(CLI::Range(1, 100));
  app.add_option("--steps", o.steps, "steps per run")
      ->check(CLI::Range(8, 100000));
  app.add_option("--block", o.block, "steps per on or off block")
      ->check(CLI::Range(2, 10000));
  app.add_option("--settle", o.settle, "leading steps of a block left out")
      ->check(CLI::Range(0, 10000));
  app.add_option("--warmup", o.warmup, "leading steps of a run left out")
      ->check(CLI::Range(0, 100000));
  app.add_option("--ranks", o.ranks, "ranks (data parallel)")
      ->check(CLI::Range(1, 64));
  app.add_option("--model", o.model, "strata-train --model");
  app.add_option("--scrape-every", o.scrape_every,
                 "seconds between polls of /metrics and the dashboard in on "
                 "blocks (0: none)")
      ->check(CLI::Range(0.0, 60.0));
  app.add_option("--trace-every", o.trace_every,
                 "seconds between trace collections in on blocks (0: none)")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--work", o.work, "scratch directory");
  CLI11_PARSE(app, argc, argv);
  if (o.settle >= o.block || o.warmup + 2 * o.block > o.steps) {
    std::fprintf(stderr,
                 "strata-bench observe: --steps %d with --warmup %d, --block "
                 "%d and --settle %d leaves no on/off pair of blocks\n",
                 o.steps, o.warmup, o.block, o.settle);
    return 2;
  }

  std::printf(
      "observability on vs off in one run: strata-train --model %s, %d "
      "ranks, %d steps in blocks of %d (first %d of each and of the run "
      "left out), %d runs\n",
      o.model.c_str(), o.ranks, o.steps, o.block, o.settle, o.runs);
  std::printf(
      "  on blocks: flight recorder, /metrics + dashboard every %.1f s, "
      "trace every %.1f s; off blocks: recorder paused, nothing polled\n",
      o.scrape_every, o.trace_every);
  std::printf("  %-4s %10s %10s %8s %8s %12s %6s %6s %7s %9s %8s %15s\n",
              "run", "on s", "off s", "on/off", "means", "blocks", "polls",
              "traces", "max ms", "rec/step", "acct %", "ms/trace (%)");
  std::vector<double> ratios, mean_ratios, pair_ratios, accounted,
      trace_shares;
  const StatusOr<double> timed = RecordSeconds(o.work);
  if (!timed.ok()) {
    std::fprintf(stderr,
                 "strata-bench observe: cannot time a flight-recorder "
                 "record in %s: %s\n",
                 o.work.c_str(), timed.status().ToString().c_str());
    return 1;
  }
  const double record_s = *timed;
  for (int i = 0; i < o.runs; ++i) {
    const Run r = RunOnce(o, absl::StrCat("run", i));
    if (!r.ok) return 1;
    ratios.push_back(r.on_s / r.off_s);
    mean_ratios.push_back(r.mean_ratio);
    pair_ratios.push_back(Median(r.block_ratios));
    const double ops_per_step =
        r.trace_steps > 0 ? double(r.trace_collectives) / r.trace_steps : 0;
    const double in_ranks = ops_per_step * record_s / r.on_s;
    const double outside =
        r.render_at_s > 0 ? r.render_cpu_s / r.render_at_s / o.ranks : 0;
    accounted.push_back(in_ranks + outside);
    // One trace every --trace-every s of the run's wall time.
    if (o.trace_every > 0)
      trace_shares.push_back(r.trace_cost_s / o.trace_every);
    std::printf(
        "  %-4d %10.4f %10.4f %8.4f %8.4f %6.4f (%2zu) %6d %6d %7.1f %9.1f "
        "%8.3f %7.1f (%5.2f)\n",
        i, r.on_s, r.off_s, ratios.back(), mean_ratios.back(),
        pair_ratios.back(),
        r.block_ratios.size(), r.polls - r.poll_failures, r.traces,
        r.max_poll_ms, ops_per_step, 100 * accounted.back(),
        1000 * r.trace_cost_s,
        trace_shares.empty() ? 0.0 : 100 * trace_shares.back());
    std::fflush(stdout);
  }
  std::printf(
      "  accounted: %.0f ns per flight-recorder record; worst run %.3f%% of "
      "step time (ranks: records per step x record time; coordinator: "
      "render CPU per second / %d ranks)\n",
      record_s * 1e9,
      100 * *std::max_element(accounted.begin(), accounted.end()), o.ranks);
  std::printf(
      "  on/off, worst run: median steps %.4f, mean steps %.4f, blocks vs "
      "neighbours %.4f   (goal <= 1.010)\n",
      *std::max_element(ratios.begin(), ratios.end()),
      *std::max_element(mean_ratios.begin(), mean_ratios.end()),
      *std::max_element(pair_ratios.begin(), pair_ratios.end()));
  if (!trace_shares.empty()) {
    std::printf(
        "  a trace's own cost, worst run: %.2f%% of step time at one trace "
        "every %.1f s (on steps overlapping a request vs not)\n",
        100 * *std::max_element(trace_shares.begin(), trace_shares.end()),
        o.trace_every);
  }
  return 0;
}

}  // namespace

STRATA_BENCH("observe", "observability's cost on strata-train step time (on vs off)",
             ObserveMain);

}  // namespace strata::bench
