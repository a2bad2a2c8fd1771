// The job a `strata submit` or `strata run` command describes: a JobSpec
// YAML/JSON file and/or `-- COMMAND ARGS...`, with flag overrides. Shared
// by both commands so they accept the same flags.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "cli/control_client.h"
#include "common/clock.h"
#include "proto/job.pb.h"

namespace strata::cli {

struct JobArgs {
  std::string file;
  std::string name;
  int nodes = -1, ranks_per_node = -1, max_restarts = -1, min_nodes = -1;
  int spares = -1;
  int tp = 0, pp = 0, cp = 0;
  std::string model, ckpt;
  std::vector<std::string> env;    // KEY=VALUE
  std::vector<std::string> fault;  // KEY=VALUE (fault/policy.h)
};

void AddJobOptions(CLI::App* cmd, JobArgs* args);

// Loads and merges; exits 2 naming the problem on bad input, including a
// job too large for one control request (with its sizes).
JobSpec BuildJobSpec(const char* what, const JobArgs& args);

// Polls the job until it ends, printing new output (and events) as they
// arrive when `follow`; returns 0 if it succeeded, 1 otherwise. A
// coordinator that stops answering for `lost_ms` (on `clock`'s steady
// reading) is an error (exit 1). Pauses 200 ms of real time between polls
// that brought nothing new.
// `on_status` (optional) sees every status poll; `interrupted` (optional)
// makes it cancel the job once and keep waiting for the end.
int WaitForJob(
    const Clock& clock, ControlClient& client, const std::string& job_id,
    bool follow, int lost_ms = 15000,
    const std::function<void(const control::JobInfo&)>& on_status = nullptr,
    const std::atomic<bool>* interrupted = nullptr,
    const std::function<void(const control::Event&)>& on_event = nullptr);

// `--steps A:B` of `strata heatmap` and `strata trace`: steps A to B with
// 0 <= A <= B; exits 2 naming the flag's value otherwise.
std::pair<int64_t, int64_t> ParseStepRange(const char* what,
                                           const std::string& text);

}  // namespace strata::cli
