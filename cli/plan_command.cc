// `strata plan`: ranked parallelisation plans for a model on a cluster.
//   strata plan --model FILE|PRESET --cluster FILE|PRESET --gpus N
//     --global-batch B [--seq S] [--top K] [--fix tp=8,pp=16,...]
//     [--format table|json] [--emit megatron|torchrun] [--explain]
//     [--time-budget SECONDS] [--nodes N]
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/plan_format.h"
#include "common/config.h"
#include "common/field_range.h"
#include "planner/emit.h"
#include "planner/job.h"
#include "planner/launch_plan.h"
#include "planner/model.h"
#include "planner/search.h"
#include "topology/cluster.h"

namespace strata::cli {
namespace {

struct PlanArgs {
  std::string model, cluster, fix, format = "table", emit, attention;
  int64_t gpus = 0, global_batch = 0;
  int seq = 0, top = 5;
  int nodes = 0;  // --nodes: overrides the cluster's num_nodes
  double time_budget_s = planner::kDefaultTimeBudgetS;
  bool explain = false;
  CLI::Option* seq_option = nullptr;    // seq applies only when given
  CLI::Option* nodes_option = nullptr;  // likewise --nodes
};

[[noreturn]] void Fail(int code, const std::string& message) {
  std::fprintf(stderr, "strata plan: %s\n", message.c_str());
  throw CLI::RuntimeError(code);
}

// Checks a flag's value against the range table entry `path`.
Status CheckFlag(double value, absl::Span<const FieldRange> table,
                 absl::string_view path, absl::string_view flag) {
  return CheckValue(value, *FindRange(table, path), flag);
}

// Parses "tp=8,pp=16,recompute=full" into constraints; values must lie in
// JobRanges' constraints.* ranges.
Status ParseFix(const std::string& text, PlanConstraints* fix) {
  if (text.empty()) return absl::OkStatus();
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(item, '=');
    if (kv.size() != 2 || kv[1].empty()) {
      return absl::InvalidArgumentError(
          "--fix expects key=value pairs separated by commas, got '" +
          std::string(item) + "'");
    }
    const std::string& key = kv[0];
    const std::string& value = kv[1];
    if (key == "recompute") {
      Recompute::Mode mode;
      if (!Recompute::Mode_Parse(value, &mode)) {
        return absl::InvalidArgumentError(
            "--fix recompute must be none, selective or full, got '" + value +
            "'");
      }
      fix->set_recompute(mode);
      continue;
    }
    if (key == "precision") {
      Precision::Kind kind;
      if (!Precision::Kind_Parse(value, &kind)) {
        return absl::InvalidArgumentError(
            "--fix precision must be bf16, fp16 or fp8, got '" + value + "'");
      }
      fix->set_precision(kind);
      continue;
    }
    int v = 0;
    if (!absl::SimpleAtoi(value, &v)) {
      return absl::InvalidArgumentError(
          "--fix " + key + " expects an integer, got '" + value + "'");
    }
    static const std::map<std::string, std::string> kField = {
        {"tp", "tp"},           {"pp", "pp"},   {"dp", "dp"},
        {"cp", "cp"},           {"vpp", "vpp"}, {"mbs", "micro_batch"},
        {"zero", "zero_stage"}, {"ep", "ep"},   {"etp", "etp"}};
    if (auto it = kField.find(key); it != kField.end()) {
      RETURN_IF_ERROR(CheckFlag(v, planner::JobRanges(),
                                "constraints." + it->second, "--fix " + key));
    } else if (key == "distopt" || key == "sp") {
      if (v != 0 && v != 1) {
        return absl::InvalidArgumentError("--fix " + key +
                                          " must be 0 or 1, got " + value);
      }
    }
    if (key == "tp")
      fix->set_tp(v);
    else if (key == "pp")
      fix->set_pp(v);
    else if (key == "dp")
      fix->set_dp(v);
    else if (key == "cp")
      fix->set_cp(v);
    else if (key == "vpp")
      fix->set_vpp(v);
    else if (key == "mbs")
      fix->set_micro_batch(v);
    else if (key == "zero")
      fix->set_zero_stage(v);
    else if (key == "ep")
      fix->set_ep(v);
    else if (key == "etp")
      fix->set_etp(v);
    else if (key == "distopt")
      fix->set_distributed_optimizer(v != 0);
    else if (key == "sp")
      fix->set_sequence_parallel(v != 0);
    else {
      return absl::InvalidArgumentError(
          "--fix: unknown key '" + key +
          "' (known: tp, pp, dp, cp, ep, etp, vpp, mbs, zero, distopt, sp, "
          "recompute, precision)");
    }
  }
  return absl::OkStatus();
}

// The numeric flags, checked before any file is read.
Status CheckFlags(const PlanArgs& args) {
  RETURN_IF_ERROR(CheckFlag(static_cast<double>(args.gpus),
                            planner::PlanRanges(), "--gpus", "--gpus"));
  RETURN_IF_ERROR(CheckFlag(static_cast<double>(args.global_batch),
                            planner::JobRanges(), "global_batch",
                            "--global-batch"));
  if (args.seq_option->count() > 0) {
    RETURN_IF_ERROR(
        CheckFlag(args.seq, planner::JobRanges(), "seq_length", "--seq"));
  }
  RETURN_IF_ERROR(CheckFlag(args.top, planner::PlanRanges(), "--top", "--top"));
  if (args.nodes_option->count() > 0) {
    RETURN_IF_ERROR(
        CheckFlag(args.nodes, planner::PlanRanges(), "--nodes", "--nodes"));
  }
  return CheckFlag(args.time_budget_s, planner::PlanRanges(), "--time-budget",
                   "--time-budget");
}

void RunPlan(const PlanArgs& args) {
  if (Status st = CheckFlags(args); !st.ok()) {
    Fail(kExitBadInput, std::string(st.message()));
  }
  auto model = planner::LoadModel(args.model);
  if (!model.ok()) Fail(kExitBadInput, std::string(model.status().message()));
  auto cluster = topology::LoadCluster(args.cluster);
  if (!cluster.ok())
    Fail(kExitBadInput, std::string(cluster.status().message()));
  if (args.nodes_option->count() > 0) {
    // A preset describes one machine (dgx-a100: Selene's 560 nodes); --nodes
    // plans the same node type at another size.
    cluster->set_num_nodes(args.nodes);
    if (Status v = topology::ValidateCluster(*cluster); !v.ok()) {
      Fail(kExitBadInput,
           absl::StrCat("--nodes ", args.nodes, ": ", v.message()));
    }
  }
  if (!args.attention.empty()) {
    AttentionKernel::Kind kind;
    AttentionKernel::Kind_Parse(args.attention, &kind);  // checked by CLI11
    model->set_attention(kind);
  }
  planner::PlanRequest req;
  req.model = *model;
  req.cluster = *cluster;
  req.gpus = args.gpus;
  req.top_k = args.top;
  req.time_budget_s = args.time_budget_s;
  req.job.set_global_batch(args.global_batch);
  if (args.seq_option->count() > 0) req.job.set_seq_length(args.seq);
  Status st = ParseFix(args.fix, req.job.mutable_constraints());
  if (!st.ok()) Fail(kExitBadInput, std::string(st.message()));
  if (!args.emit.empty()) {
    // One plan for every emitter (PlanForLaunch), with a note when the
    // launcher's constraints made it differ from the table's best.
    auto launch = planner::PlanForLaunch(req);
    if (!launch.ok()) {
      Fail(kExitBadInput, std::string(launch.status().message()));
    }
    if (!launch->note.empty()) {
      std::fputs(launch->note.c_str(), stderr);
    }
    const std::string text =
        args.emit == "megatron"
            ? planner::EmitMegatron(launch->plan, req.model, launch->note)
            : planner::EmitTorchrun(launch->plan, req.model, *cluster,
                                    args.gpus, launch->note);
    std::fputs(text.c_str(), stdout);
    return;
  }
  auto report = planner::PlanJob(req);
  if (!report.ok()) Fail(kExitBadInput, std::string(report.status().message()));

  if (args.format == "json") {
    std::fputs((MessageToJson(*report, /*pretty=*/false) + "\n").c_str(),
               stdout);
    return;
  }
  std::fputs(FormatPlanTable(*report, *cluster, args.explain).c_str(), stdout);
}

}  // namespace

void AddPlanCommand(CLI::App* app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app->add_subcommand(
      "plan",
      "Rank parallelisation plans (TP/PP/DP/CP, ZeRO, recompute) by "
      "predicted step time");
  cmd->add_option("--model", args->model, "model preset or YAML/JSON file")
      ->required();
  cmd->add_option("--cluster", args->cluster,
                  "cluster preset or YAML/JSON file")
      ->required();
  cmd->add_option("--gpus", args->gpus, "GPUs the job uses (all of them)")
      ->required();
  cmd->add_option("--global-batch", args->global_batch,
                  "sequences per optimizer step")
      ->required();
  args->seq_option = cmd->add_option("--seq", args->seq,
                                     "sequence length (default: the model's)");
  cmd->add_option("--top", args->top, "plans to show")->capture_default_str();
  args->nodes_option = cmd->add_option(
      "--nodes", args->nodes,
      "nodes in the cluster (overrides its num_nodes, e.g. to plan beyond a "
      "preset's fixed size)");
  cmd->add_option("--fix", args->fix,
                  "pin dimensions: tp=8,pp=16,dp=..,cp=..,ep=..,etp=..,vpp=..,"
                  "mbs=..,zero=..,distopt=0|1,sp=0|1,"
                  "recompute=none|selective|full,precision=bf16|fp8");
  cmd->add_option("--format", args->format, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->add_option("--emit", args->emit,
                  "print launch arguments of the best plan instead")
      ->check(CLI::IsMember({"megatron", "torchrun"}));
  cmd->add_option("--attention", args->attention,
                  "attention kernel: flash or unfused (default: the model's)")
      ->check(CLI::IsMember({"flash", "unfused"}));
  cmd->add_option("--time-budget", args->time_budget_s,
                  "seconds the search may take; when they run out, the best "
                  "plans found so far (with a warning)")
      ->capture_default_str();
  cmd->add_flag("--explain", args->explain,
                "time and memory breakdown of each plan, and the placement");
  cmd->callback([args] { RunPlan(*args); });
}

}  // namespace strata::cli
