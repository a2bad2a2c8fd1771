#include "coordinator/jobs/job_limits.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "control/codec.h"

namespace strata::coordinator {
namespace {

// What the coordinator adds to each rank's launch order besides the job's
// argv, environment and plan: the rank environment of docs/placement.md and
// the protobuf framing. Generous, so the check errs on the safe side.
constexpr size_t kPerRankOverheadBytes = 1024;
constexpr size_t kMaxTextFieldBytes = 4096;  // name, model, cluster, URI
constexpr int kMaxWorkerWaitS = 7 * 24 * 3600;
constexpr int kMaxStopGraceMs = 600000;

Status TooLarge(const char* field, int64_t value, int64_t limit,
                const char* flag) {
  return absl::InvalidArgumentError(absl::StrCat(
      "job spec: ", field, " is ", value, "; this coordinator allows at most ",
      limit,
      flag[0] != '\0' ? absl::StrCat(" (strata-coordinator ", flag, ")")
                      : std::string()));
}

}  // namespace

size_t CommandBytes(const JobLaunch& launch) {
  size_t n = 0;
  for (const auto& arg : launch.command()) n += arg.size() + 1;
  return n;
}

size_t EnvBytes(const JobLaunch& launch) {
  size_t n = 0;
  for (const auto& [key, value] : launch.env()) n += key.size() + value.size();
  return n;
}

Status CheckJobLimits(const JobSpec& spec, const JobLimits& limits) {
  const JobLaunch& l = spec.launch();
  if (l.nodes() < 0 || l.ranks_per_node() < 0 || l.max_restarts() < 0 ||
      l.min_nodes() < 0 || l.worker_wait_s() < 0 || l.stop_grace_ms() < 0 ||
      l.spares() < 0) {
    return absl::InvalidArgumentError(
        "job spec: launch.nodes, ranks_per_node, min_nodes, max_restarts, "
        "worker_wait_s, stop_grace_ms and spares must be >= 0");
  }
  if (l.spares() > limits.max_nodes) {
    return TooLarge("launch.spares", l.spares(), limits.max_nodes,
                    "--max-nodes");
  }
  if (l.nodes() > limits.max_nodes) {
    return TooLarge("launch.nodes", l.nodes(), limits.max_nodes, "--max-nodes");
  }
  if (l.min_nodes() > limits.max_nodes) {
    return TooLarge("launch.min_nodes", l.min_nodes(), limits.max_nodes,
                    "--max-nodes");
  }
  if (l.ranks_per_node() > limits.max_ranks_per_node) {
    return TooLarge("launch.ranks_per_node", l.ranks_per_node(),
                    limits.max_ranks_per_node, "--max-ranks-per-node");
  }
  const int64_t world = static_cast<int64_t>(l.nodes()) * l.ranks_per_node();
  if (world > limits.max_ranks) {
    return absl::InvalidArgumentError(
        absl::StrCat("job spec: launch.nodes x launch.ranks_per_node is ",
                     l.nodes(), " x ", l.ranks_per_node(), " = ", world,
                     " ranks; this coordinator allows at most ",
                     limits.max_ranks, " (strata-coordinator --max-ranks)"));
  }
  if (l.max_restarts() > limits.max_restarts) {
    return TooLarge("launch.max_restarts", l.max_restarts(),
                    limits.max_restarts, "");
  }
  if (l.worker_wait_s() > kMaxWorkerWaitS) {
    return TooLarge("launch.worker_wait_s", l.worker_wait_s(), kMaxWorkerWaitS,
                    "");
  }
  if (l.stop_grace_ms() > kMaxStopGraceMs) {
    return TooLarge("launch.stop_grace_ms", l.stop_grace_ms(), kMaxStopGraceMs,
                    "");
  }
  const PlanConstraints& k = spec.constraints();
  for (auto [name, value] : {std::pair{"constraints.tp", k.tp()},
                             {"constraints.pp", k.pp()},
                             {"constraints.cp", k.cp()},
                             {"constraints.dp", k.dp()}}) {
    if (value < 0 || value > limits.max_ranks) {
      return absl::InvalidArgumentError(
          absl::StrCat("job spec: ", name, " is ", value, "; it must be 0..",
                       limits.max_ranks, " (strata-coordinator --max-ranks)"));
    }
  }
  if (CommandBytes(l) > limits.max_command_bytes) {
    return TooLarge("launch.command (bytes)", CommandBytes(l),
                    limits.max_command_bytes, "--max-command-bytes");
  }
  if (EnvBytes(l) > limits.max_env_bytes) {
    return TooLarge("launch.env (bytes of keys and values)", EnvBytes(l),
                    limits.max_env_bytes, "--max-env-bytes");
  }
  for (auto [name, value] : {std::pair{"name", &spec.name()},
                             {"launch.model", &l.model()},
                             {"launch.cluster", &l.cluster()},
                             {"launch.checkpoint_uri", &l.checkpoint_uri()}}) {
    if (value->size() > kMaxTextFieldBytes) {
      return TooLarge(absl::StrCat(name, " (bytes)").c_str(), value->size(),
                      kMaxTextFieldBytes, "");
    }
  }
  return absl::OkStatus();
}

void ActiveTotals::Add(const JobSpec& spec) {
  ++jobs;
  launch_bytes += CommandBytes(spec.launch()) + EnvBytes(spec.launch());
  ranks += RanksOf(spec);
}

int64_t RanksOf(const JobSpec& spec) {
  return std::max<int64_t>(1, spec.launch().nodes()) *
         std::max<int64_t>(1, spec.launch().ranks_per_node());
}

Status CheckActiveLimits(const JobSpec& spec, const ActiveTotals& active,
                         const JobLimits& limits) {
  const int64_t bytes =
      CommandBytes(spec.launch()) + EnvBytes(spec.launch());
  if (active.launch_bytes + bytes > limits.max_active_launch_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job refused: its launch.command and launch.env hold ", bytes,
        " bytes and the ", active.jobs, " pending or running jobs already ",
        active.launch_bytes, "; this coordinator allows at most ",
        limits.max_active_launch_bytes,
        " bytes across them (strata-coordinator --max-active-launch-bytes): "
        "wait for jobs to end or cancel some"));
  }
  const int64_t ranks = RanksOf(spec);
  if (active.ranks + ranks > limits.max_active_ranks) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "job refused: it asks for ", ranks, " ranks and the ", active.jobs,
        " pending or running jobs already hold ", active.ranks,
        "; this coordinator allows at most ", limits.max_active_ranks,
        " ranks across them (strata-coordinator --max-active-ranks): wait "
        "for jobs to end or cancel some"));
  }
  return absl::OkStatus();
}

Status CheckNodeCapacity(int ranks, const control::WorkerInfo& worker,
                         const JobLimits& limits) {
  if (ranks > limits.max_ranks_per_node) {
    return absl::InvalidArgumentError(absl::StrCat(
        ranks, " ranks per node on ", worker.worker_id(),
        " exceed the coordinator's limit of ", limits.max_ranks_per_node,
        " (strata-coordinator --max-ranks-per-node)"));
  }
  const int units = std::max(worker.probe().cpu_cores(), worker.probe().gpus());
  if (units > 0 &&
      ranks > static_cast<int64_t>(units) * limits.max_ranks_per_core) {
    return absl::InvalidArgumentError(absl::StrCat(
        ranks, " ranks per node do not fit on ", worker.worker_id(), " (",
        worker.probe().cpu_cores(), " cores, ", worker.probe().gpus(),
        " GPUs): at most ",
        static_cast<int64_t>(units) * limits.max_ranks_per_core, " (",
        limits.max_ranks_per_core,
        " per core or GPU, strata-coordinator --max-ranks-per-core)"));
  }
  return absl::OkStatus();
}

Status CheckLaunchOrderSize(const JobSpec& spec, int ranks,
                            size_t plan_json_bytes) {
  const size_t per_rank = CommandBytes(spec.launch()) +
                          EnvBytes(spec.launch()) + plan_json_bytes +
                          kPerRankOverheadBytes;
  const size_t total = per_rank * static_cast<size_t>(std::max(ranks, 0));
  if (total > control::kMaxFrameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the launch orders of one node (", ranks, " ranks x ~", per_rank,
        " bytes of command, environment and plan) would be ", total,
        " bytes, more than one control frame (", control::kMaxFrameBytes,
        " bytes): use fewer ranks per node or a smaller command/environment"));
  }
  return absl::OkStatus();
}

}  // namespace strata::coordinator
