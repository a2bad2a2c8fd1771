// `strata trace JOB -o trace.json`: a Perfetto/Chrome trace of the running
// attempt (docs/observe.md "Traces"): one track per rank with its step
// sections and its collectives from the flight recorder, flow arrows
// through the ranks of each collective, the attempt's events as instants,
// every node's clock moved onto the coordinator's.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"
#include "cli/control_client.h"
#include "cli/job_args.h"
#include "observe/trace.h"
#include "observe/trace_reply.h"

namespace strata::cli {
namespace {

// Between polls while workers send their ranks' records (each answers with
// its next heartbeat, 500 ms apart when it runs ranks).
constexpr int kPollMs = 300;

std::string Offsets(const control::TraceReply& t) {
  std::map<std::string, const control::TraceRankInfo*> by_node;
  for (const auto& r : t.ranks()) by_node.emplace(r.node(), &r);
  std::vector<std::string> parts;
  for (const auto& [node, r] : by_node) {
    parts.push_back(r->has_clock()
                        ? absl::StrFormat("%s %+.3f ms (+-%.3f)", node,
                                          r->clock().offset_us() / 1e3,
                                          r->clock().error_us() / 1e3)
                        : absl::StrCat(node, " unknown"));
  }
  return absl::StrJoin(parts, ", ");
}

struct TraceArgs {
  std::string endpoint, job, out, range;
  int64_t newest = 100;
  double wait_s = 8;
  bool raw = false;
};

// Asks for the trace, then polls (same collection, same steps) until no
// worker is pending or --wait has passed.
control::TraceReply Collect(const TraceArgs& a) {
  control::Request req;
  control::TraceRequest* tr = req.mutable_trace();
  tr->set_job_id(a.job);
  if (!a.range.empty()) {
    const auto [first, last] = ParseStepRange("trace", a.range);
    tr->set_first_step(first);
    tr->set_last_step(last);
  } else {
    tr->set_newest_steps(a.newest);
  }
  ControlClient client(a.endpoint);
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(int64_t(a.wait_s * 1000));
  control::TraceReply t = client.Call("trace", req).trace();
  while (t.pending_size() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
    tr->set_collection(t.collection());
    tr->set_first_step(t.first_step());
    tr->set_last_step(t.last_step());
    t = client.Call("trace", req).trace();
  }
  return t;
}

// What is missing from the trace, on stderr: ranks whose flight recorder
// did not answer, their errors, what the reply size limit left out.
void WarnIncomplete(const control::TraceReply& t, double wait_s) {
  if (t.pending_size() > 0) {
    std::fprintf(stderr,
                 "strata trace: no flight recorder from rank(s) %s within "
                 "%.0f s; their collectives are missing\n",
                 absl::StrJoin(t.pending(), ",").c_str(), wait_s);
  }
  std::set<std::string> errors;
  for (const auto& c : t.collectives()) {
    if (!c.error().empty())
      errors.insert(absl::StrCat("rank ", c.rank(), ": ", c.error()));
  }
  for (const auto& e : errors) {
    std::fprintf(stderr, "strata trace: %s\n", e.c_str());
  }
  if (t.dropped_steps() > 0 || t.dropped_ops() > 0) {
    std::fprintf(stderr,
                 "strata trace: %lld step reports and %lld records left out "
                 "(reply size limit); ask for fewer steps with --steps\n",
                 static_cast<long long>(t.dropped_steps()),
                 static_cast<long long>(t.dropped_ops()));
  }
}

void Trace(const TraceArgs& a) {
  if (!a.out.ends_with(".json")) {
    Fail("trace", kExitBadInput,
         absl::StrCat("-o ", a.out, ": a trace is written as .json"));
  }
  const control::TraceReply t = Collect(a);
  if (t.steps_size() == 0 && t.collectives_size() == 0) {
    Fail("trace", kExitFailed,
         absl::StrCat(a.job,
                      " has no step reports in that range of its "
                      "running attempt ",
                      t.attempt()));
  }
  WarnIncomplete(t, a.wait_s);
  std::ofstream f(a.out);
  f << observe::WriteTrace(observe::TraceInputFromReply(t, !a.raw));
  f.close();
  if (!f) Fail("trace", kExitFailed, absl::StrCat("cannot write ", a.out));
  size_t ops = 0;
  for (const auto& c : t.collectives()) ops += c.ops_size();
  int64_t lo = 0, hi = 0;
  for (const auto& s : t.steps()) {
    lo = lo == 0 ? s.step() : std::min(lo, s.step());
    hi = std::max(hi, s.step());
  }
  std::printf(
      "%s: %s attempt %d, %d ranks, steps %lld-%lld, %zu "
      "collectives; clocks %s: %s\n",
      a.out.c_str(), t.job_id().c_str(), t.attempt(), t.ranks_size(),
      static_cast<long long>(lo), static_cast<long long>(hi), ops,
      a.raw ? "as taken" : "aligned", Offsets(t).c_str());
}

}  // namespace

void AddTraceCommand(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "trace",
      "Perfetto/Chrome JSON trace of a running job: step sections and "
      "collectives per rank, clocks aligned across nodes (docs/observe.md)");
  auto a = std::make_shared<TraceArgs>();
  AddCoordinatorOption(cmd, &a->endpoint);
  cmd->add_option("job", a->job, "job id")->required();
  cmd->add_option("-o,--output", a->out, "the .json file to write")->required();
  cmd->add_option("--steps", a->range,
                  "A:B, steps A to B (default: the newest --last steps)");
  cmd->add_option("--last", a->newest,
                  "without --steps: this many newest steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--wait", a->wait_s,
                  "seconds to wait for the workers' flight recorders")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cmd->add_flag("--raw-clocks", a->raw,
                "draw each node's timestamps as taken (no clock alignment)");
  cmd->callback([a] { Trace(*a); });
}

}  // namespace strata::cli
