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

}  // namespace

void AddTraceCommand(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "trace",
      "Perfetto/Chrome JSON trace of a running job: step sections and "
      "collectives per rank, clocks aligned across nodes (docs/observe.md)");
  auto endpoint = std::make_shared<std::string>();
  auto job = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto range = std::make_shared<std::string>();
  auto newest = std::make_shared<int64_t>(100);
  auto wait_s = std::make_shared<double>(8);
  auto raw = std::make_shared<bool>(false);
  AddCoordinatorOption(cmd, endpoint.get());
  cmd->add_option("job", *job, "job id")->required();
  cmd->add_option("-o,--output", *out, "the .json file to write")->required();
  cmd->add_option("--steps", *range,
                  "A:B, steps A to B (default: the newest --last steps)");
  cmd->add_option("--last", *newest, "without --steps: this many newest steps")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--wait", *wait_s,
                  "seconds to wait for the workers' flight recorders")
      ->check(CLI::Range(0.0, 600.0))
      ->capture_default_str();
  cmd->add_flag("--raw-clocks", *raw,
                "draw each node's timestamps as taken (no clock alignment)");
  cmd->callback([=] {
    if (!out->ends_with(".json")) {
      Fail("trace", kExitBadInput,
           absl::StrCat("-o ", *out, ": a trace is written as .json"));
    }
    control::Request req;
    control::TraceRequest* tr = req.mutable_trace();
    tr->set_job_id(*job);
    if (!range->empty()) {
      const auto [a, b] = ParseStepRange("trace", *range);
      tr->set_first_step(a);
      tr->set_last_step(b);
    } else {
      tr->set_newest_steps(*newest);
    }
    ControlClient client(*endpoint);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(int64_t(*wait_s * 1000));
    control::TraceReply t = client.Call("trace", req).trace();
    while (t.pending_size() > 0 &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kPollMs));
      // A poll: the same collection and the steps resolved at the request.
      tr->set_collection(t.collection());
      tr->set_first_step(t.first_step());
      tr->set_last_step(t.last_step());
      t = client.Call("trace", req).trace();
    }
    if (t.steps_size() == 0 && t.collectives_size() == 0) {
      Fail("trace", kExitFailed,
           absl::StrCat(*job,
                        " has no step reports in that range of its "
                        "running attempt ",
                        t.attempt()));
    }
    if (t.pending_size() > 0) {
      std::fprintf(stderr,
                   "strata trace: no flight recorder from rank(s) %s within "
                   "%.0f s; their collectives are missing\n",
                   absl::StrJoin(t.pending(), ",").c_str(), *wait_s);
    }
    std::set<std::string> errors;
    size_t ops = 0;
    for (const auto& c : t.collectives()) {
      ops += c.ops_size();
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
    std::ofstream f(*out);
    f << observe::WriteTrace(observe::TraceInputFromReply(t, !*raw));
    f.close();
    if (!f) Fail("trace", kExitFailed, absl::StrCat("cannot write ", *out));
    int64_t lo = 0, hi = 0;
    for (const auto& s : t.steps()) {
      lo = lo == 0 ? s.step() : std::min(lo, s.step());
      hi = std::max(hi, s.step());
    }
    std::printf(
        "%s: %s attempt %d, %d ranks, steps %lld-%lld, %zu "
        "collectives; clocks %s: %s\n",
        out->c_str(), t.job_id().c_str(), t.attempt(), t.ranks_size(),
        static_cast<long long>(lo), static_cast<long long>(hi), ops,
        *raw ? "as taken" : "aligned", Offsets(t).c_str());
  });
}

}  // namespace strata::cli
