#include "planner/job.h"

#include "common/config.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::planner {

absl::Span<const FieldRange> JobRanges() {
  using topology::kMaxClusterNodes;
  using topology::kMaxGpusPerNode;
  static constexpr FieldRange kRanges[] = {
      {"global_batch", 1, kMaxGlobalBatch, false,
       "sequences per optimizer step; absent: one per rank"},
      {"seq_length", 1, kMaxSeqLength, false,
       "tokens; absent: the model's seq_length"},
      {"constraints.tp", 1, kMaxGpusPerNode, false, "pinned tensor parallel"},
      {"constraints.pp", 1, kMaxLayers, false, "pinned pipeline stages"},
      {"constraints.dp", 1, kMaxGpus, false, "pinned data parallel"},
      {"constraints.cp", 1, kMaxGpus, false, "pinned context parallel"},
      {"constraints.vpp", 1, kMaxLayers, false, "pinned virtual stages"},
      {"constraints.micro_batch", 1, kMaxGlobalBatch, false,
       "pinned micro-batch, sequences"},
      {"constraints.zero_stage", 0, 3, false, "pinned ZeRO stage"},
      {"constraints.memory_reserve_gib", 0, 100000, false,
       "GiB kept free per GPU; absent: 4"},
      {"constraints.ep", 1, 65536, false,
       "pinned expert parallel; must divide num_experts"},
      {"constraints.etp", 1, kMaxGpusPerNode, false,
       "pinned expert tensor parallel"},
      {"constraints.first_stage_layers", 0, kMaxLayers, false,
       "layers on the first pipeline stage (pinned pp)"},
      {"constraints.last_stage_layers", 0, kMaxLayers, false,
       "layers on the last pipeline stage (pinned pp)"},
      {"launch.command", 0, 4096, false, "argv entries"},
      {"launch.env", 0, 4096, false, "environment entries"},
      {"launch.nodes", 1, kMaxClusterNodes, false,
       "workers; absent: all registered"},
      {"launch.ranks_per_node", 1, kMaxGpusPerNode, false,
       "absent: one per GPU, or 1 without GPUs"},
      {"launch.max_restarts", 0, 1000, false, "attempts after the first"},
      {"launch.min_nodes", 1, kMaxClusterNodes, false,
       "absent: launch.nodes (never shrink)"},
      {"launch.worker_wait_s", 1, 86400, false, "seconds; absent: 60"},
      {"launch.stop_grace_ms", 1, 3600000, false, "ms; absent: 5000"},
      {"launch.spares", 0, kMaxClusterNodes, false,
       "idle workers reserved as hot spares; absent: 0"},
      {"fault.straggler_threshold", 1, 10, true,
       "long-window slowdown that flags a straggler; absent: 1.10"},
      {"fault.straggler_fast_threshold", 1, 10, true,
       "short-window slowdown that flags a straggler; absent: 1.20"},
      {"fault.straggler_confirm", 1, 1000, false,
       "steps above the threshold before flagging; absent: 8"},
      {"fault.straggler_confirm_s", 0, 3600, false,
       "step time those steps must span, seconds; absent: 3"},
      {"fault.hang_k", 1, 1000, false,
       "hang deadline in median steps; absent: 3"},
      {"fault.hang_floor_s", 1, 86400, false,
       "shortest hang deadline, seconds; absent: 3"},
      {"fault.hang_first_step_s", 1, 86400, false,
       "hang deadline before the first step, seconds; absent: 300"},
      {"fault.hang_phase_s", 1, 86400, false,
       "hang deadline of a phase that names none, seconds; absent: 600"},
      {"fault.restart_cost_s", 0, 86400, false,
       "restart cost until one is measured, seconds; absent: 30"},
      {"fault.slow_link_threshold", 1, 1000, true,
       "reference / measured bandwidth of a slow link; absent: 2"},
      {"node_speed", 0, kMaxClusterNodes, false, "per-node speed factors"},
      {"node_speed.node", 0, kMaxClusterNodes - 1, false,
       "node index in the cluster"},
      {"node_speed.speed", 0, 4, true,
       "GPU FLOP rate and memory bandwidth x this factor"},
  };
  return kRanges;
}

Status ValidateJob(const JobSpec& job, absl::string_view where) {
  return CheckRanges(job, JobRanges(), where);
}

StatusOr<JobSpec> LoadJob(const std::string& path, size_t max_bytes) {
  JobSpec job;
  RETURN_IF_ERROR(LoadConfigFile(path, &job, JobRanges(), max_bytes));
  RETURN_IF_ERROR(ValidateJob(job, path));
  return job;
}

}  // namespace strata::planner
