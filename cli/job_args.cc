#include "cli/job_args.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/live_progress.h"
#include "common/field_range.h"
#include "control/codec.h"
#include "fault/policy.h"
#include "planner/job.h"

namespace strata::cli {
namespace {

constexpr uintmax_t kMaxJobFileBytes = 4 * control::kMaxFrameBytes;

// CLI11's check for a flag that sets the JobSpec field `path`.
CLI::Range RangeOf(const char* path) {
  const FieldRange* r = FindRange(planner::JobRanges(), path);
  return CLI::Range(static_cast<int>(r->min), static_cast<int>(r->max));
}

}  // namespace

void AddJobOptions(CLI::App* cmd, JobArgs* a) {
  cmd->add_option("job", a->file, "JobSpec YAML/JSON file (optional with --)");
  cmd->add_option("--name", a->name, "job name");
  cmd->add_option("--nodes", a->nodes, "workers to use")
      ->check(RangeOf("launch.nodes"));
  cmd->add_option("--ranks-per-node", a->ranks_per_node,
                  "ranks per node (default: one per GPU, else 1)")
      ->check(RangeOf("launch.ranks_per_node"));
  cmd->add_option("--min-nodes", a->min_nodes,
                  "restarts may continue on this few nodes (re-planned)")
      ->check(RangeOf("launch.min_nodes"));
  cmd->add_option("--spares", a->spares,
                  "idle workers reserved as hot spares: a lost node is "
                  "replaced by one, same plan (docs/fault.md)")
      ->check(RangeOf("launch.spares"));
  cmd->add_option("--max-restarts", a->max_restarts, "restarts after failures")
      ->check(RangeOf("launch.max_restarts"));
  cmd->add_option("--tp", a->tp, "fixed tensor-parallel size")
      ->check(RangeOf("constraints.tp"));
  cmd->add_option("--pp", a->pp, "fixed pipeline-parallel size")
      ->check(RangeOf("constraints.pp"));
  cmd->add_option("--cp", a->cp, "fixed context-parallel size")
      ->check(RangeOf("constraints.cp"));
  cmd->add_option("--model", a->model,
                  "model preset/file: let the planner pick the parallelism");
  cmd->add_option("--ckpt", a->ckpt, "checkpoint URI (STRATA_CKPT_URI)");
  cmd->add_option("--env", a->env, "KEY=VALUE for every rank (repeatable)");
  cmd->add_option("--fault", a->fault,
                  "fault policy KEY=VALUE, e.g. hang=restart, "
                  "straggler=evict, straggler_threshold=1.2 (repeatable; "
                  "docs/fault.md)");
}

JobSpec BuildJobSpec(const char* what, const JobArgs& a) {
  JobSpec spec;
  if (!a.file.empty()) {
    // A file this large cannot encode into one request: refuse it before
    // spending seconds parsing it. (Comments and YAML syntax make a file
    // larger than its encoding, hence the margin.)
    std::error_code ec;
    const uintmax_t file_bytes = std::filesystem::file_size(a.file, ec);
    if (!ec && file_bytes > kMaxJobFileBytes) {
      Fail(what, kExitBadInput,
           absl::StrCat("job file ", a.file, " is too large: ", file_bytes,
                        " bytes; a job file may be at most ", kMaxJobFileBytes,
                        " bytes and must encode to at most ",
                        control::kMaxFrameBytes,
                        " bytes (one control request)"));
    }
    auto job = planner::LoadJob(a.file, kMaxJobFileBytes);
    if (!job.ok())
      Fail(what, kExitBadInput, std::string(job.status().message()));
    spec = *std::move(job);
  }
  JobLaunch* l = spec.mutable_launch();
  if (!CommandAfterDashDash().empty()) {
    l->clear_command();
    for (const auto& c : CommandAfterDashDash()) l->add_command(c);
  }
  if (l->command().empty()) {
    Fail(what, kExitBadInput,
         "no command: give a job file with launch.command or `-- COMMAND "
         "ARGS...`");
  }
  if (!a.name.empty()) spec.set_name(a.name);
  if (spec.name().empty()) spec.set_name(l->command(0));
  if (a.nodes > 0) l->set_nodes(a.nodes);
  if (a.ranks_per_node > 0) l->set_ranks_per_node(a.ranks_per_node);
  if (a.min_nodes > 0) l->set_min_nodes(a.min_nodes);
  if (a.spares >= 0) l->set_spares(a.spares);
  if (a.max_restarts >= 0) l->set_max_restarts(a.max_restarts);
  if (a.tp > 0) spec.mutable_constraints()->set_tp(a.tp);
  if (a.pp > 0) spec.mutable_constraints()->set_pp(a.pp);
  if (a.cp > 0) spec.mutable_constraints()->set_cp(a.cp);
  if (!a.model.empty()) l->set_model(a.model);
  if (!a.ckpt.empty()) l->set_checkpoint_uri(a.ckpt);
  for (const auto& kv : a.env) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      Fail(what, kExitBadInput,
           absl::StrCat("--env expects KEY=VALUE, got '", kv, "'"));
    }
    (*l->mutable_env())[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& kv : a.fault) {
    Status fs = fault::ApplyFaultSetting(kv, spec.mutable_fault());
    if (!fs.ok())
      Fail(what, kExitBadInput, "--fault: " + std::string(fs.message()));
  }
  Status st = planner::ValidateJob(spec, "job");
  if (!st.ok()) Fail(what, kExitBadInput, std::string(st.message()));
  // The submit request must fit in one control frame, or the coordinator
  // drops it unanswered.
  control::Request request;
  *request.mutable_submit_job()->mutable_spec() = spec;
  const size_t encoded = control::EncodeRequest(request).size();
  if (encoded > control::kMaxFrameBytes) {
    Fail(what, kExitBadInput,
         absl::StrCat(a.file.empty() ? "the job" : "job file " + a.file,
                      " is too large: it encodes to ", encoded,
                      " bytes; one control request holds at most ",
                      control::kMaxFrameBytes,
                      " bytes (launch.command and launch.env are limited "
                      "further by the coordinator, see strata-coordinator "
                      "--help)"));
  }
  return spec;
}

int WaitForJob(const Clock& clock, ControlClient& client,
               const std::string& job_id, bool follow, int lost_ms,
               const std::function<void(const control::JobInfo&)>& on_status,
               const std::atomic<bool>* interrupted,
               const std::function<void(const control::Event&)>& on_event) {
  int64_t log_offset = 0, event_seq = 0;
  bool cancel_sent = false;
  LiveProgress out(follow && LiveProgress::Terminal());
  // Prints the merged output relayed since the last call; true if any.
  auto print_logs = [&]() -> bool {
    control::Request lr;
    lr.mutable_logs()->set_job_id(job_id);
    lr.mutable_logs()->set_rank(-1);
    lr.mutable_logs()->set_offset(log_offset);
    auto rep = client.TryCall(lr, 2000);
    if (!rep.ok()) return false;
    const auto& data = rep->logs().data();
    out.Output(data);
    log_offset = rep->logs().next_offset();
    return !data.empty();
  };
  int64_t last_ok = clock.SteadyNowMs();
  while (true) {
    bool progressed = false;
    if (follow) {
      progressed = print_logs();
      control::Request ev;
      ev.mutable_events()->set_job_id(job_id);
      ev.mutable_events()->set_after_seq(event_seq);
      auto er = client.TryCall(ev, 2000);
      if (er.ok()) {
        for (const auto& e : er->events().events()) {
          out.Event(absl::StrCat("[strata] ", e.job_id(), " attempt ",
                                 e.attempt(), ": ", e.kind(), ": ",
                                 e.message()));
          if (on_event) on_event(e);
          event_seq = e.seq();
        }
      }
    }
    if (interrupted != nullptr && *interrupted && !cancel_sent) {
      out.Event(absl::StrCat("[strata] interrupted: cancelling ", job_id));
      control::Request cancel;
      cancel.mutable_cancel_job()->set_job_id(job_id);
      (void)client.TryCall(cancel, 2000);
      cancel_sent = true;
    }
    control::Request st;
    st.mutable_job_status()->set_job_id(job_id);
    auto rep = client.TryCall(st, 2000);
    const int64_t now = clock.SteadyNowMs();
    if (rep.ok()) {
      last_ok = now;
      const control::JobInfo& job = rep->jobs().jobs(0);
      if (on_status) on_status(job);
      if (follow) out.Status(job);
      const bool ended = job.state() == control::SUCCEEDED ||
                         job.state() == control::FAILED ||
                         job.state() == control::CANCELLED;
      if (ended && !progressed) {
        if (follow) print_logs();  // output relayed after the last read
        out.Finish();
        std::fprintf(stderr, "[strata] %s %s after %d restart(s)%s%s\n",
                     job_id.c_str(), JobStateName(job.state()),
                     job.restart_count(), job.message().empty() ? "" : ": ",
                     job.message().c_str());
        return job.state() == control::SUCCEEDED ? 0 : 1;
      }
    } else if (absl::IsNotFound(rep.status())) {
      Fail("wait", kExitBadInput, std::string(rep.status().message()));
    } else if (now - last_ok > lost_ms) {
      Fail("wait", kExitFailed,
           absl::StrCat("lost the coordinator at ", client.endpoint(), " for ",
                        lost_ms, " ms: ", rep.status().message()));
    }
    if (!progressed)
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

std::pair<int64_t, int64_t> ParseStepRange(const char* what,
                                           const std::string& text) {
  const size_t colon = text.find(':');
  int64_t a = 0, b = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(0, colon), &a) ||
      !absl::SimpleAtoi(text.substr(colon + 1), &b) || a < 0 || b < a) {
    Fail(what, kExitBadInput,
         absl::StrCat("--steps '", text, "' is not A:B with 0 <= A <= B"));
  }
  return {a, b};
}

}  // namespace strata::cli
