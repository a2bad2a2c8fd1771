// `strata plan`: ranked parallelisation plans for a model on a cluster.
//   strata plan --model FILE|PRESET --cluster FILE|PRESET --gpus N
//     --global-batch B [--seq S] [--top K] [--fix tp=8,pp=16,...]
//     [--format table|json] [--emit megatron|torchrun] [--explain]
//     [--time-budget SECONDS] [--nodes N] [--node-speed 3=0.5,...]
//     [--no-calibration]
//   strata plan --calibrate MEASUREMENTS.json... [--cluster C]
//   strata plan --calibrate PROBE.json --cluster C
#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/plan_format.h"
#include "cli/plan_json.h"
#include "common/config.h"
#include "common/field_range.h"
#include "planner/calibrate.h"
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
  std::string node_speed;
  // --calibrate MEASUREMENTS.json...: fit, store.
  std::vector<std::string> calibrate;
  bool no_calibration = false;  // --no-calibration: ignore a stored fit
  int64_t gpus = 0, global_batch = 0;
  int seq = 0, top = 5;
  int nodes = 0;  // --nodes: overrides the cluster's num_nodes
  double time_budget_s = planner::kDefaultTimeBudgetS;
  bool explain = false;
  CLI::Option* seq_option = nullptr;    // seq applies only when given
  CLI::Option* nodes_option = nullptr;  // likewise --nodes
  // Required unless --calibrate.
  std::vector<CLI::Option*> required;
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

// layout= takes the rest of --fix: Megatron's layout strings may hold
// commas ("Et|(tt|)*30,m|L"). Sets it and returns the text before it.
StatusOr<std::string> TakeLayoutFix(const std::string& full,
                                    PlanConstraints* fix) {
  std::string text = full;
  const size_t at = text.find("layout=");
  if (at == std::string::npos || (at != 0 && text[at - 1] != ',')) {
    return text;
  }
  const std::string layout = text.substr(at + 7);
  if (layout.empty()) {
    return absl::InvalidArgumentError(
        "--fix layout expects a Megatron pipeline layout string, e.g. "
        "layout='Et|(tt|)*30,m|L' (it takes the rest of --fix)");
  }
  fix->set_pipeline_layout(layout);
  text.resize(at);
  return text;
}

// The --fix keys with a word for a value (layers, offload, recompute,
// precision); nullopt for any other key.
std::optional<Status> SetWordFix(const std::string& key,
                                 const std::string& value,
                                 PlanConstraints* fix) {
  auto bad = [&](const char* allowed) {
    return absl::InvalidArgumentError("--fix " + key + " must be " + allowed +
                                      ", got '" + value + "'");
  };
  if (key == "layers") {
    if (value != "even" && value != "balanced") return bad("even or balanced");
    fix->set_even_layers(value == "even");
  } else if (key == "offload") {
    Offload::Kind kind;
    if (!Offload::Kind_Parse(value, &kind)) return bad("none, cpu or nvme");
    fix->set_offload(kind);
  } else if (key == "recompute") {
    Recompute::Mode mode;
    if (!Recompute::Mode_Parse(value, &mode)) {
      return bad("none, selective, full or selective_op");
    }
    fix->set_recompute(mode);
  } else if (key == "precision") {
    Precision::Kind kind;
    if (!Precision::Kind_Parse(value, &kind)) return bad("bf16, fp16 or fp8");
    fix->set_precision(kind);
  } else {
    return std::nullopt;
  }
  return absl::OkStatus();
}

// The integer --fix keys: the setter, and the JobRanges() field that bounds
// the value (empty: a 0/1 switch).
struct IntFix {
  const char* range_field;
  void (*set)(PlanConstraints*, int);
};
const std::map<std::string, IntFix>& IntFixes() {
  using C = PlanConstraints;
  static const auto* fixes = new std::map<std::string, IntFix>{
      {"tp", {"tp", [](C* f, int v) { f->set_tp(v); }}},
      {"pp", {"pp", [](C* f, int v) { f->set_pp(v); }}},
      {"dp", {"dp", [](C* f, int v) { f->set_dp(v); }}},
      {"cp", {"cp", [](C* f, int v) { f->set_cp(v); }}},
      {"vpp", {"vpp", [](C* f, int v) { f->set_vpp(v); }}},
      {"mbs", {"micro_batch", [](C* f, int v) { f->set_micro_batch(v); }}},
      {"zero", {"zero_stage", [](C* f, int v) { f->set_zero_stage(v); }}},
      {"ep", {"ep", [](C* f, int v) { f->set_ep(v); }}},
      {"etp", {"etp", [](C* f, int v) { f->set_etp(v); }}},
      {"first", {"first_stage_layers",
                 [](C* f, int v) { f->set_first_stage_layers(v); }}},
      {"last", {"last_stage_layers",
                [](C* f, int v) { f->set_last_stage_layers(v); }}},
      {"distopt",
       {"", [](C* f, int v) { f->set_distributed_optimizer(v != 0); }}},
      {"sp", {"", [](C* f, int v) { f->set_sequence_parallel(v != 0); }}},
      {"embedding_stage",
       {"", [](C* f, int v) { f->set_account_for_embedding(v != 0); }}},
      {"loss_stage", {"", [](C* f, int v) { f->set_account_for_loss(v != 0); }}},
      {"dualpipe", {"", [](C* f, int v) { f->set_dualpipe(v != 0); }}},
      {"eager", {"", [](C* f, int v) { f->set_eager(v != 0); }}},
      {"sdpa", {"", [](C* f, int v) { f->set_sdpa(v != 0); }}}};
  return *fixes;
}

Status SetIntFix(const std::string& key, const std::string& value,
                 PlanConstraints* fix) {
  int v = 0;
  if (!absl::SimpleAtoi(value, &v)) {
    return absl::InvalidArgumentError(
        "--fix " + key + " expects an integer, got '" + value + "'");
  }
  auto it = IntFixes().find(key);
  if (it == IntFixes().end()) {
    return absl::InvalidArgumentError(
        "--fix: unknown key '" + key +
        "' (known: tp, pp, dp, cp, ep, etp, vpp, mbs, zero, distopt, sp, "
        "recompute, precision, offload, layers, first, last, "
        "embedding_stage, loss_stage, dualpipe, eager, sdpa, layout)");
  }
  const std::string field = it->second.range_field;
  if (!field.empty()) {
    RETURN_IF_ERROR(CheckFlag(v, planner::JobRanges(), "constraints." + field,
                              "--fix " + key));
  } else if (v != 0 && v != 1) {
    return absl::InvalidArgumentError("--fix " + key +
                                      " must be 0 or 1, got " + value);
  }
  it->second.set(fix, v);
  return absl::OkStatus();
}

// Parses "tp=8,pp=16,recompute=full" into constraints; values must lie in
// JobRanges' constraints.* ranges.
Status ParseFix(const std::string& full, PlanConstraints* fix) {
  if (full.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string text, TakeLayoutFix(full, fix));
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(item, '=');
    if (kv.size() != 2 || kv[1].empty()) {
      return absl::InvalidArgumentError(
          "--fix expects key=value pairs separated by commas, got '" +
          std::string(item) + "'");
    }
    if (auto word = SetWordFix(kv[0], kv[1], fix)) {
      RETURN_IF_ERROR(*word);
      continue;
    }
    RETURN_IF_ERROR(SetIntFix(kv[0], kv[1], fix));
  }
  return absl::OkStatus();
}

// Parses "3=0.5,7=0.8" (node index = speed factor) into job.node_speed;
// the ranges are JobRanges' node_speed.* (checked by PlanJob).
Status ParseNodeSpeed(const std::string& text, JobSpec* job) {
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<std::string> kv = absl::StrSplit(item, '=');
    int node = 0;
    double speed = 0;
    if (kv.size() != 2 || !absl::SimpleAtoi(kv[0], &node) ||
        !absl::SimpleAtod(kv[1], &speed)) {
      return absl::InvalidArgumentError(
          "--node-speed expects node=speed pairs separated by commas (e.g. "
          "3=0.5), got '" +
          std::string(item) + "'");
    }
    NodeSpeed* s = job->add_node_speed();
    s->set_node(node);
    s->set_speed(speed);
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

// `strata plan --calibrate FILE`: fits the cost model to measured runs
// (strata-bench train --measurements FILE), stores the fit for the cluster
// (--cluster, else the measured cluster's name) and prints every
// measurement's prediction before and after.
// `strata plan --calibrate PROBE.json --cluster C`: a worker probe's
// measured rates (planner::CalibrationFromProbe), stored for C.
bool CalibrateFromProbe(const PlanArgs& args) {
  if (args.calibrate.size() != 1) return false;
  control::NodeProbe probe;
  if (!LoadConfigFile(args.calibrate[0], &probe).ok()) return false;
  if (probe.cpu_cores() == 0 && probe.hostname().empty()) return false;
  if (args.cluster.empty()) {
    Fail(kExitBadInput, args.calibrate[0] +
                            " is a worker probe: give --cluster, whose "
                            "figures it calibrates");
  }
  auto cluster = topology::LoadCluster(args.cluster);
  if (!cluster.ok()) {
    Fail(kExitBadInput, std::string(cluster.status().message()));
  }
  auto cal = planner::CalibrationFromProbe(probe, *cluster);
  if (!cal.ok()) Fail(kExitBadInput, std::string(cal.status().message()));
  const std::string path =
      planner::CalibrationPath(args.cluster, cluster->name());
  if (Status st = planner::SaveCalibration(path, *cal); !st.ok()) {
    Fail(kExitFailed, std::string(st.message()));
  }
  std::printf(
      "strata plan --calibrate: probe of %s: NIC rate x%.3f, node memory "
      "%.2f GB/s (0: unchanged); stored in %s (the next `strata plan "
      "--cluster %s` applies it)\n",
      probe.hostname().c_str(), cal->inter_node_scale(),
      cal->node_memory_gbps(), path.c_str(), args.cluster.c_str());
  return true;
}

void RunCalibrate(const PlanArgs& args) {
  if (CalibrateFromProbe(args)) return;
  // Several files (repeated bench runs) are fitted together, at the median
  // of their device peaks (each run's probe; the first run's clusters).
  MeasuredRuns runs;
  std::vector<double> peaks;
  for (const std::string& file : args.calibrate) {
    MeasuredRuns one;
    if (Status st = LoadConfigFile(file, &one, {}, 16 << 20); !st.ok()) {
      Fail(kExitBadInput, std::string(st.message()));
    }
    if (one.clusters_size() == 0) {
      Fail(kExitBadInput, file + ": field 'clusters' is empty");
    }
    if (runs.clusters_size() == 0) runs.set_source(one.source());
    if (one.gemm_peak_tflops() > 0) peaks.push_back(one.gemm_peak_tflops());
    for (int i = 0; i < one.clusters_size(); ++i) {
      const int ranks = i < one.cluster_ranks_size() ? one.cluster_ranks(i) : 0;
      if (std::find(runs.cluster_ranks().begin(), runs.cluster_ranks().end(),
                    ranks) == runs.cluster_ranks().end()) {
        *runs.add_clusters() = one.clusters(i);
        runs.add_cluster_ranks(ranks);
      }
    }
    for (int i = 0; i < one.steps_size(); ++i) {
      *runs.add_steps() = one.steps(i);
      runs.add_step_ranks(i < one.step_ranks_size() ? one.step_ranks(i) : 0);
    }
    for (const GemmMeasurement& g : one.gemms()) *runs.add_gemms() = g;
  }
  if (!peaks.empty()) {
    std::sort(peaks.begin(), peaks.end());
    runs.set_gemm_peak_tflops(peaks[peaks.size() / 2]);
  }
  if (args.calibrate.size() > 1) {
    runs.set_source(
        absl::StrCat(runs.source(), ", ", args.calibrate.size(), " runs"));
  }
  std::vector<planner::FitError> errors;
  auto cal = planner::FitCalibration(runs, &errors);
  if (!cal.ok()) Fail(kExitBadInput, std::string(cal.status().message()));
  const std::string name = runs.clusters(0).name();
  const std::string path = planner::CalibrationPath(
      args.cluster.empty() ? name : args.cluster, name);
  if (Status st = planner::SaveCalibration(path, *cal); !st.ok()) {
    Fail(kExitFailed, std::string(st.message()));
  }
  std::printf(
      "strata plan --calibrate: %d step measurements, %d GEMM shapes\n"
      "fit: gemm_efficiency %.3f, gemm_half_dim %.1f, memory %.2f GB/s per "
      "node, "
      "layer overhead %.1f us, intra-node %.2f GB/s and %.1f us, node load "
      "%.2f devices\n",
      runs.steps_size(), runs.gemms_size(), cal->gemm_efficiency(),
      cal->gemm_half_dim(), cal->node_memory_gbps(),
      1e6 * cal->layer_overhead_s(), cal->intra_node_gbps(),
      1e6 * cal->intra_node_latency_s(), cal->node_load());
  std::printf("%-28s %11s %11s %8s %11s %8s\n", "run", "measured s", "before s",
              "error", "after s", "error");
  for (const planner::FitError& e : errors) {
    std::printf("%-28s %11.4f %11.4f %+7.1f%% %11.4f %+7.1f%%\n",
                e.what.c_str(), e.measured_s, e.before_s,
                100 * (e.before_s / e.measured_s - 1), e.after_s,
                100 * (e.after_s / e.measured_s - 1));
  }
  std::printf("rms error %.1f%% before, %.1f%% after; stored in %s",
              100 * cal->rms_error_before(), 100 * cal->rms_error_after(),
              path.c_str());
  if (!args.cluster.empty()) {
    std::printf(" (the next `strata plan --cluster %s` applies it)\n",
                args.cluster.c_str());
  } else {
    std::printf(
        " (strata-bench train --calibration %s applies it; so does a "
        "cluster file's calibration block)\n",
        path.c_str());
  }
}

// --cluster, resized by --nodes, with its stored calibration (strata plan
// --calibrate) unless --no-calibration or the file carries one.
ClusterSpec LoadClusterArg(const PlanArgs& args) {
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
  if (!args.no_calibration && !cluster->has_calibration()) {
    const std::string path =
        planner::CalibrationPath(args.cluster, cluster->name());
    auto cal = planner::LoadCalibration(path);
    if (cal.ok()) {
      *cluster->mutable_calibration() = *cal;
      cluster->mutable_calibration()->set_source(
          absl::StrCat(path, cal->source().empty() ? "" : ": ", cal->source()));
    } else if (cal.status().code() != absl::StatusCode::kNotFound) {
      Fail(kExitBadInput, std::string(cal.status().message()));
    }
  }
  return *std::move(cluster);
}

// The planner's request from the flags.
planner::PlanRequest MakePlanRequest(const PlanArgs& args) {
  auto model = planner::LoadModel(args.model);
  if (!model.ok()) Fail(kExitBadInput, std::string(model.status().message()));
  ClusterSpec cluster = LoadClusterArg(args);
  if (!args.attention.empty()) {
    AttentionKernel::Kind kind{};
    AttentionKernel::Kind_Parse(args.attention, &kind);  // checked by CLI11
    model->set_attention(kind);
  }
  planner::PlanRequest req;
  req.model = *model;
  req.cluster = std::move(cluster);
  req.gpus = args.gpus;
  req.top_k = args.top;
  req.time_budget_s = args.time_budget_s;
  req.job.set_global_batch(args.global_batch);
  if (args.seq_option->count() > 0) req.job.set_seq_length(args.seq);
  Status st = ParseFix(args.fix, req.job.mutable_constraints());
  if (st.ok()) st = ParseNodeSpeed(args.node_speed, &req.job);
  if (!st.ok()) Fail(kExitBadInput, std::string(st.message()));
  return req;
}

// --emit: one plan for every emitter (PlanForLaunch), with a note when the
// launcher's constraints made it differ from the table's best; the note is
// part of the emitted text ('#' lines), printed once.
void EmitLaunch(const PlanArgs& args, planner::PlanRequest req) {
  req.with_placement = false;  // the emitters print sizes, not ranks
  auto launch = planner::PlanForLaunch(req);
  if (!launch.ok()) {
    Fail(kExitBadInput, std::string(launch.status().message()));
  }
  const std::string text =
      args.emit == "megatron"
          ? planner::EmitMegatron(launch->plan, req.model, launch->note)
          : planner::EmitTorchrun(launch->plan, req.model, req.cluster,
                                  args.gpus, launch->note);
  std::fputs(text.c_str(), stdout);
}

void RunPlan(const PlanArgs& args) {
  if (!args.calibrate.empty()) return RunCalibrate(args);
  if (std::any_of(args.required.begin(), args.required.end(),
                  [](CLI::Option* o) { return o->count() == 0; })) {
    Fail(kExitBadInput,
         "--model, --cluster, --gpus and --global-batch are required (or "
         "--calibrate FILE)");
  }
  if (Status st = CheckFlags(args); !st.ok()) {
    Fail(kExitBadInput, std::string(st.message()));
  }
  planner::PlanRequest req = MakePlanRequest(args);
  if (!args.emit.empty()) return EmitLaunch(args, std::move(req));
  // Every rank's placement is printed only by --format json and --explain;
  // the table alone does not build it (131,072 ranks and their groups take
  // hundreds of MB).
  req.with_placement = args.format == "json" || args.explain;
  auto report = planner::PlanJob(req);
  if (!report.ok()) Fail(kExitBadInput, std::string(report.status().message()));

  if (args.format == "json") {
    WritePlanJson(&*report, stdout);
    return;
  }
  std::fputs(FormatPlanTable(*report, req.cluster, args.explain).c_str(),
             stdout);
  if (req.job.constraints().dualpipe()) {
    std::fputs(
        "schedule: DeepSeek's DualPipe (--fix dualpipe=1; docs/planner.md "
        "\"DualPipe\"): all-to-all and p2p hidden behind compute, bubble "
        "2(pp/2-1)/3 micro-batches, 2x weights and gradients; costed only, "
        "no --emit launcher runs it\n",
        stdout);
  }
}

}  // namespace

void AddPlanCommand(CLI::App* app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app->add_subcommand(
      "plan",
      "Rank parallelisation plans (TP/PP/DP/CP, ZeRO, recompute) by "
      "predicted step time");
  args->required = {
      cmd->add_option("--model", args->model,
                      "model preset or YAML/JSON file (required)"),
      cmd->add_option("--cluster", args->cluster,
                      "cluster preset or YAML/JSON file (required)"),
      cmd->add_option("--gpus", args->gpus,
                      "GPUs the job uses, all of them (required)"),
      cmd->add_option("--global-batch", args->global_batch,
                      "sequences per optimizer step (required)")};
  cmd->add_option("--calibrate", args->calibrate,
                  "fit the cost model to measured runs (strata-bench train "
                  "--measurements FILE) and store the fit for the cluster");
  cmd->add_flag("--no-calibration", args->no_calibration,
                "ignore the cluster's stored calibration");
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
                  "recompute=none|selective|full,precision=bf16|fp8,"
                  "offload=none|cpu|nvme,layers=even|balanced,first=N,last=N,"
                  "embedding_stage=0|1,loss_stage=0|1,dualpipe=0|1,eager=0|1,sdpa=0|1,layout=STRING (last)");
  cmd->add_option("--node-speed", args->node_speed,
                  "per-node speed factors, node=speed,... (e.g. 3=0.5: node "
                  "3 runs at half its GPU's rate)");
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
