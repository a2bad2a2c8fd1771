// strata-train: the reference trainer. Trains the GPT of
// train/model.h with the parallelism from the flags or the environment
// (Runtime::FromEnv), prints `step=N loss=X tokens_per_s=Y step_s=S` once per
// step from the rank of the last stage with tp and dp rank 0, checkpoints every
// --ckpt-every steps and resumes (--resume) under any parallelism.
// Everything that can be checked is checked before the rendezvous: flags,
// the data file, that the checkpoint location is writable; a rank that
// fails there tells the others through the store (ReportStartFailure).
// Exit codes: 2 bad flags, environment or an impossible split (also a
// rendezvous mismatch), 1 runtime failure (a rank that failed to start, a
// non-finite step, too many failed saves).
#include <cblas.h>

#include <cmath>
#include <chrono>
#include <cstdio>
#include <new>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "checkpoint/location.h"
#include "common/config.h"
#include "common/logging.h"
#include "planner/pipeline_layout.h"
#include "proto/plan.pb.h"
#include "runtime/runtime.h"
#include "train/in_place.h"
#include "train/threads.h"
#include "train/trainer.h"

extern "C" void openblas_set_num_threads(int);

namespace {

struct Flags {
  std::string model = "tiny", ckpt, data, on_nonfinite = "stop";
  // The memory tier (docs/checkpoint.md "Memory tier").
  std::string mem_ckpt = "mem://";
  int mem_ckpt_every = 0, mem_ckpt_keep = 2;
  int steps = 20, tp = 0, pp = 0, dp = 0, micro = 1, batch = 8, zero = 0,
      ckpt_every = 0, warmup = 10, ckpt_keep = 3, ckpt_max_failures = 3,
      max_rollbacks = 3;
  // Megatron-core's uneven pipeline split: the first and last stage's
  // layers, the middle stages share the rest evenly (0: not set).
  int first_stage_layers = 0, last_stage_layers = 0;
  // Megatron-core's --pipeline-model-parallel-layout (one part per stage).
  std::string layout;
  uint64_t seed = 1234;
  float lr = 1e-3f;
  bool resume = false;
  bool in_place = false;  // --in-place-restart
};

int Fail(int code, const std::string& message) {
  std::fprintf(stderr, "strata-train: %s\n", message.c_str());
  return code;
}

// A failure before the rendezvous: the other ranks of the job are told
// (when the environment names a store) so they stop within seconds.
int FailStart(int code, const std::string& message) {
  auto info = strata::ReadRankEnv();
  if (info.ok()) strata::ReportStartFailure(*info, message);
  return Fail(code, message);
}

// Layers per pipeline stage (train::Parallel::stage_layers): Megatron's
// --decoder-first/last-pipeline-num-layers when given, else the plan's
// layers_per_stage (STRATA_PLAN, written by the coordinator: the planner
// balances stage times, e.g. fewer layers on a slow node), else empty
// (layers / pp each). InvalidArgument naming the flag or file that does
// not describe pp stages.
strata::StatusOr<std::vector<int>> StageLayers(const Flags& f,
                                               const strata::RankInfo& info,
                                               int layers) {
  const int pp = info.pp;
  if (!f.layout.empty()) {
    // Parsed and checked by the planner's reading of Megatron-core's rules
    // (planner/pipeline_layout.h); strata-train runs no virtual stages.
    const std::string flag = "--pipeline-model-parallel-layout '" + f.layout;
    if (f.first_stage_layers > 0 || f.last_stage_layers > 0) {
      return absl::InvalidArgumentError(
          flag +
          "': give it or --decoder-first/last-pipeline-num-layers, "
          "not both");
    }
    // The planner's messages name its own flag (--fix layout).
    auto refuse = [&](const absl::Status& s) {
      return absl::InvalidArgumentError(
          flag + "': " +
          std::string(absl::StripPrefix(s.message(), "--fix layout: ")));
    };
    auto v = strata::planner::LayoutVpp(f.layout, pp);
    if (!v.ok()) return refuse(v.status());
    if (*v != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, "' has ", *v,
          " virtual stages per pipeline rank; "
          "strata-train runs one: give one '|'-separated part per stage (pp ",
          pp, ")"));
    }
    strata::ModelSpec model;
    model.set_name(f.model);
    model.set_num_layers(layers);
    strata::PlanConstraints fix;
    fix.set_pp(pp);
    fix.set_pipeline_layout(f.layout);
    auto split = strata::planner::PinnedStageLayers(fix, model, pp, 1);
    if (!split.ok()) return refuse(split.status());
    return *split;
  }
  if (f.first_stage_layers > 0 || f.last_stage_layers > 0) {
    if (pp < 2) {
      return absl::InvalidArgumentError(
          "--decoder-first/last-pipeline-num-layers need pp >= 2");
    }
    const int first = f.first_stage_layers, last = f.last_stage_layers;
    const int known = (first > 0) + (last > 0);
    const int rest = layers - first - last, middle = pp - known;
    if (middle == 0 ? rest != 0 : rest <= 0 || rest % middle != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--decoder-first-pipeline-num-layers ", first,
          " and --decoder-last-pipeline-num-layers ", last, " leave ", rest,
          " of ", layers, " layers, which do not split evenly over the other ",
          middle, " stage(s)"));
    }
    std::vector<int> out(pp, middle > 0 ? rest / middle : 0);
    if (first > 0) out.front() = first;
    if (last > 0) out.back() = last;
    return out;
  }
  if (info.plan_path.empty() || pp < 2) return std::vector<int>{};
  strata::Plan plan;
  if (auto s = strata::LoadConfigFile(info.plan_path, &plan); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("STRATA_PLAN: ", s.message()));
  }
  if (plan.layers_per_stage_size() == 0) return std::vector<int>{};
  return std::vector<int>(plan.layers_per_stage().begin(),
                          plan.layers_per_stage().end());
}

// The checks of flags against each other and the environment that need no
// other rank. `uri` is the checkpoint location (--ckpt or STRATA_CKPT_URI).
strata::Status CheckFlags(const Flags& f, const std::string& uri,
                          const strata::RankInfo& info,
                          const strata::train::ModelConfig& cfg,
                          const std::vector<int>& stage_layers) {
  auto bad = [](auto... parts) {
    return absl::InvalidArgumentError(absl::StrCat(parts...));
  };
  if (!std::isfinite(f.lr) || f.lr <= 0) {
    return bad("--lr ", f.lr, " must be a finite number > 0");
  }
  const bool rollback = f.on_nonfinite == "rollback";
  const char* where = f.ckpt.empty() ? "STRATA_CKPT_URI" : "--ckpt";
  const char* none =
      "no checkpoint location: give --ckpt URI or set "
      "STRATA_CKPT_URI";
  if (f.ckpt_every > 0 && uri.empty()) {
    return bad("--ckpt-every ", f.ckpt_every, " but ", none);
  }
  if (f.resume && uri.empty() && f.mem_ckpt_every == 0) {
    return bad("--resume but ", none);
  }
  if (f.mem_ckpt_every > 0) {
    if (auto s = strata::checkpoint::CheckWritable(f.mem_ckpt, info.rank);
        !s.ok()) {
      return bad("--mem-ckpt ", f.mem_ckpt, ": ", s.message());
    }
  }
  if (f.ckpt_every > f.steps) {
    return bad("--ckpt-every ", f.ckpt_every, " is more than --steps ", f.steps,
               ": no checkpoint would be written");
  }
  if (rollback && (uri.empty() || f.ckpt_every == 0)) {
    return bad(
        "--on-nonfinite=rollback needs checkpoints to roll back to: "
        "--ckpt-every K and a checkpoint location");
  }
  if (!f.ckpt.empty() && f.ckpt_every == 0 && !f.resume) {
    return bad("--ckpt ", f.ckpt,
               " is not used: add --ckpt-every K to save or --resume to load");
  }
  if (!uri.empty()) {
    if (auto dir = strata::checkpoint::CheckpointDir(uri); !dir.ok()) {
      return bad(where, ": ", dir.status().message());
    }
  }
  if (f.ckpt_every > 0) {
    if (auto s = strata::checkpoint::CheckWritable(uri, info.rank); !s.ok()) {
      return bad(where, " ", uri, ": ", s.message());
    }
  }
  if (f.dp > 0 && f.dp != info.dp) {
    return bad("--dp ", f.dp, " but world size ", info.world_size, " / (tp ",
               info.tp, " x pp ", info.pp, ") = ", info.dp);
  }
  if (info.cp != 1) return bad("strata-train does not implement cp > 1");
  RETURN_IF_ERROR(
      strata::train::ValidateSplit(cfg,
                                   {info.tp, info.pp, info.dp, info.tp_rank,
                                    info.pp_rank, info.dp_rank, stage_layers},
                                   f.batch, f.micro));
  return strata::train::DataSource::Check(f.data, cfg.vocab, cfg.seq);
}

strata::train::TrainOptions MakeTrainOptions(
    const Flags& f, const strata::train::ModelConfig& cfg,
    const strata::RankInfo& info, const std::vector<int>& stage_layers,
    const std::string& uri) {
  strata::train::TrainOptions o;
  o.model = cfg;
  o.par = {info.tp,      info.pp,      info.dp,     info.tp_rank,
           info.pp_rank, info.dp_rank, stage_layers};
  o.global_batch = f.batch;
  o.micro_batch = f.micro;
  o.zero1 = f.zero == 1;
  o.seed = f.seed;
  o.lr = f.lr;
  o.warmup_steps = f.warmup;
  o.data_file = f.data;
  o.ckpt_uri = uri;
  o.ckpt_every = f.ckpt_every;
  o.keep_last = f.ckpt_keep;
  o.max_save_failures = f.ckpt_max_failures;
  o.mem_uri = f.mem_ckpt;
  o.mem_every = f.mem_ckpt_every;
  o.mem_keep = f.mem_ckpt_keep;
  o.on_nonfinite = f.on_nonfinite == "rollback"
                       ? strata::train::TrainOptions::OnNonFinite::kRollback
                       : strata::train::TrainOptions::OnNonFinite::kStop;
  o.max_rollbacks = f.max_rollbacks;
  return o;
}

// --resume: loads the newest committed checkpoint; the printer rank says
// where training continues.
strata::Status Resume(strata::train::Trainer& trainer, const Flags& f,
                      const strata::RankInfo& info, const std::string& uri,
                      bool printer) {
  auto from = trainer.Resume();
  if (!from.ok()) return from.status();
  if (printer && *from > 0) {
    std::printf("resumed step=%lld tp=%d pp=%d dp=%d\n",
                static_cast<long long>(*from), info.tp, info.pp, info.dp);
    if (f.mem_ckpt_every > 0) {
      std::printf("resume: step %lld from the %s tier\n",
                  static_cast<long long>(*from),
                  trainer.resumed_tier().c_str());
    }
  } else if (printer) {
    std::printf("resume: no checkpoint at %s yet, starting at step 0\n",
                uri.c_str());
  }
  if (printer && *from >= f.steps) {
    std::printf("resume: step %lld >= --steps %d, nothing to train\n",
                static_cast<long long>(*from), f.steps);
  }
  return absl::OkStatus();
}

void PrintHeader(const Flags& f, const strata::train::ModelConfig& cfg,
                 const strata::RankInfo& info,
                 const std::vector<int>& stage_layers, int threads) {
  std::printf(
      "model=%s params=%lld tp=%d pp=%d dp=%d zero=%d global_batch=%d%s "
      "threads_per_rank=%d\n",
      f.model.c_str(),
      static_cast<long long>(strata::train::ParameterCount(cfg)), info.tp,
      info.pp, info.dp, f.zero, f.batch,
      stage_layers.empty()
          ? ""
          : absl::StrCat(" layers_per_stage=", absl::StrJoin(stage_layers, ","))
                .c_str(),
      threads);
  std::fflush(stdout);
}

// The step's telemetry (docs/runtime.md): sections named *_total are
// running totals; the loss is known on the last stage only.
void RecordStep(strata::Runtime& rt, const strata::train::Trainer& trainer,
                const strata::train::StepResult& r,
                const strata::RankInfo& info, int steps) {
  strata::StepTimer& timer = rt.timer();
  timer.SetTotalSteps(steps);
  timer.SetCheckpointStep(trainer.committed_step());
  timer.Add("checkpoint_stall_total", trainer.checkpoint_stall_s());
  timer.Add("forward", r.forward_s);
  timer.Add("backward", r.backward_s);
  timer.Add("grad_reduce", r.grad_reduce_s);
  timer.Add("optimizer", r.optimizer_s);
  timer.Add("checkpoint", r.checkpoint_s);
  timer.EndStep(r.step, r.tokens, info.pp_rank == info.pp - 1 ? r.loss : NAN);
}

void PrintRejoined(const strata::train::Rejoined& r, bool printer, int rank) {
  const std::string what = absl::StrCat(
      "in-place restart: generation ", r.generation, ", continuing from step ",
      r.step, r.loaded ? " (loaded)" : " (kept in memory)", " after ",
      absl::StrFormat("%.3f", r.seconds), " s");
  std::fprintf(stderr, "strata-train: rank %d: %s\n", rank, what.c_str());
  if (printer) {
    std::printf("%s\n", what.c_str());
    std::fflush(stdout);
  }
}

// Steps until --steps; the printer rank prints each step (and rollbacks).
// With STRATA_FLIGHT_RECORDER_AB the step line says whether the flight
// recorder ran (strata-bench observe splits the steps by it).
strata::Status TrainSteps(strata::Runtime& rt, strata::train::Trainer& trainer,
                          const Flags& f, const strata::RankInfo& info,
                          const std::string& uri, bool printer) {
  const bool ab = info.flight_recorder_ab > 0;
  while (trainer.step() < f.steps) {
    const bool recording = rt.BeginStep(trainer.step());
    auto r = trainer.Step();
    if (!r.ok() && strata::train::Recoverable(rt, r.status())) {
      // --in-place-restart: this rank survives a peer's death or hang.
      std::fprintf(stderr, "strata-train: rank %d: step %lld failed (%s); "
                   "waiting to re-form in place\n", info.rank,
                   static_cast<long long>(trainer.step() + 1),
                   r.status().ToString().c_str());
      auto back = strata::train::RejoinInPlace(rt, trainer);
      if (!back.ok()) {
        return absl::Status(back.status().code(),
                            absl::StrCat(r.status().message(),
                                         "; no in-place restart: ",
                                         back.status().message()));
      }
      PrintRejoined(*back, printer, info.rank);
      continue;
    }
    if (!r.ok()) return r.status();
    if (r->rolled_back_from > 0) {
      if (printer) {
        std::printf(
            "rollback: step %lld loss=%g grad_norm=%g not finite, "
            "rolled back to step %lld\n",
            static_cast<long long>(r->rolled_back_from), r->loss, r->grad_norm,
            static_cast<long long>(r->step));
        std::fflush(stdout);
      }
      continue;
    }
    RecordStep(rt, trainer, *r, info, f.steps);
    if (printer) {
      std::printf("step=%lld loss=%.8f tokens_per_s=%.1f step_s=%.4f%s\n",
                  static_cast<long long>(r->step), r->loss,
                  r->tokens / r->seconds, r->seconds,
                  !ab         ? ""
                  : recording ? " recorder=on"
                              : " recorder=off");
      std::fflush(stdout);
    }
  }
  return absl::OkStatus();
}

// When this process started (steady), for a replacement's timeline.
const auto kProcessStart = std::chrono::steady_clock::now();
double SinceStart() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       kProcessStart)
      .count();
}

int Run(const Flags& f) {
  auto cfg = strata::train::ModelPreset(f.model);
  if (!cfg.ok()) return FailStart(2, std::string(cfg.status().message()));
  strata::RuntimeOptions env;
  env.tp = f.tp;
  env.pp = f.pp;
  auto info = strata::ReadRankEnv(env);
  if (!info.ok()) return FailStart(2, std::string(info.status().message()));
  const std::string uri = f.ckpt.empty() ? info->ckpt_uri : f.ckpt;
  auto stage_layers = StageLayers(f, *info, cfg->layers);
  if (!stage_layers.ok()) {
    return FailStart(2, std::string(stage_layers.status().message()));
  }
  if (auto s = CheckFlags(f, uri, *info, *cfg, *stage_layers); !s.ok()) {
    return FailStart(2, std::string(s.message()));
  }
  // BLAS threads from the CPUs this node's ranks share (train/threads.h).
  const int threads = strata::train::ThreadsPerRank(info->local_world_size);
  openblas_set_num_threads(threads);
  strata::RuntimeOptions ro;
  ro.tp = info->tp;
  ro.pp = info->pp;
  auto rt = strata::Runtime::FromEnv(ro);
  const double formed_s = SinceStart();  // rendezvous and groups
  if (!rt.ok()) {
    return Fail(absl::IsInvalidArgument(rt.status()) ? 2 : 1,
                rt.status().ToString());
  }
  if (f.in_place) {
    // A backend that cannot abort (mpi, nccl) or a store without a
    // coordinator: said once, and the job restarts fully as without the flag.
    if (auto s = (*rt)->EnableInPlace(); !s.ok()) {
      std::fprintf(stderr, "strata-train: --in-place-restart: %s\n",
                   std::string(s.message()).c_str());
    }
  }
  strata::train::TrainGroups g{(*rt)->tp(),    (*rt)->pp(), (*rt)->dp(),
                               (*rt)->store(), info->rank,  info->world_size};
  auto trainer = strata::train::Trainer::Create(
      MakeTrainOptions(f, *cfg, *info, *stage_layers, uri), g);
  if (!trainer.ok()) return Fail(2, std::string(trainer.status().message()));
  const bool printer =
      info->pp_rank == info->pp - 1 && info->tp_rank == 0 && info->dp_rank == 0;
  if ((*rt)->in_place() && info->generation > 0) {
    // This rank replaces one that died or hung: the survivors wait for it.
    const double trainer_s = SinceStart();
    auto joined = strata::train::JoinAsReplacement(**rt, **trainer);
    if (!joined.ok()) return Fail(1, joined.status().ToString());
    PrintRejoined(*joined, printer, info->rank);
    // Where a replacement's start goes (docs/results.md "Node loss in
    // place"): from exec to the groups, the trainer, the agreed step loaded.
    std::fprintf(stderr,
                 "strata-train: rank %d: replacement ready %.3f s after its "
                 "start at %s: groups %.3f s, trainer %.3f s, agree and "
                 "load %.3f s\n",
                 info->rank, SinceStart(),
                 absl::FormatTime("%H:%M:%E3S",
                                  absl::Now() - absl::Seconds(SinceStart()),
                                  absl::LocalTimeZone())
                     .c_str(),
                 formed_s, trainer_s - formed_s, SinceStart() - trainer_s);
  } else if (f.resume) {
    if (auto s = Resume(**trainer, f, *info, uri, printer); !s.ok()) {
      return Fail(1, "resume: " + s.ToString());
    }
  }
  if (printer && info->generation == 0) {
    PrintHeader(f, *cfg, *info, *stage_layers, threads);
  }
  if (auto s = TrainSteps(**rt, **trainer, f, *info, uri, printer); !s.ok()) {
    (void)(*trainer)->Finish();  // the saves in flight are good states
    return Fail(1, s.ToString());
  }
  if (auto s = (*trainer)->Finish(/*completed=*/true); !s.ok()) {
    return Fail(1, "checkpoint: " + s.ToString());
  }
  if (printer) {
    std::printf("done steps=%lld ckpt_stall_s=%.4f mem_skipped=%lld\n",
                static_cast<long long>((*trainer)->step()),
                (*trainer)->checkpoint_stall_s(),
                static_cast<long long>((*trainer)->mem_skipped()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"strata-train: GPT on CPU with TP/PP/DP/ZeRO-1 over strata"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  Flags f;
  app.add_option("--model", f.model, "tiny | small")->capture_default_str();
  app.add_option("--steps", f.steps, "train until this step")
      ->check(CLI::Range(1, 10000000));
  app.add_option("--tp", f.tp, "tensor-parallel size (default: STRATA_TP or 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--pp", f.pp, "pipeline stages (default: STRATA_PP or 1)")
      ->check(CLI::Range(1, 1024));
  app.add_option("--dp", f.dp, "data-parallel size (checked: world / (tp pp))")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--micro-batch", f.micro, "sequences per micro-batch")
      ->check(CLI::Range(1, 4096));
  app.add_option("--global-batch", f.batch, "sequences per step")
      ->check(CLI::Range(1, 1 << 20));
  app.add_option("--zero", f.zero, "1: ZeRO-1 (sharded Adam states)")
      ->check(CLI::IsMember({0, 1}));
  app.add_option("--seed", f.seed, "initialisation and data seed");
  app.add_option("--lr", f.lr, "peak learning rate (finite, > 0)");
  app.add_option("--warmup", f.warmup, "linear warm-up steps")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--data", f.data, "train on the bytes of this text file");
  app.add_option("--ckpt", f.ckpt, "checkpoint URI (default: STRATA_CKPT_URI)");
  app.add_option("--ckpt-every", f.ckpt_every, "checkpoint every K steps")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--decoder-first-pipeline-num-layers", f.first_stage_layers,
                 "layers on the first pipeline stage (uneven split; default: "
                 "STRATA_PLAN's layers_per_stage, else layers / pp)")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--decoder-last-pipeline-num-layers", f.last_stage_layers,
                 "layers on the last pipeline stage")
      ->check(CLI::Range(1, 1 << 16));
  app.add_option("--pipeline-model-parallel-layout", f.layout,
                 "Megatron-core layout string, one '|'-separated part per "
                 "stage, e.g. \"Et*3|t*4|t*4|t*3L\" (E: embedding, t: layer, "
                 "L: loss)");
  app.add_option("--mem-ckpt-every", f.mem_ckpt_every,
                 "memory tier: checkpoint every N steps into the worker's "
                 "memory, replicated to the next node's worker (0: off)")
      ->check(CLI::Range(0, 1 << 20));
  app.add_option("--mem-ckpt", f.mem_ckpt,
                 "memory tier URI (mem:// uses STRATA_MEM_DIR, set by "
                 "strata-worker; mem:///DIR names a directory)")
      ->capture_default_str();
  app.add_option("--mem-ckpt-keep", f.mem_ckpt_keep,
                 "memory tier: committed steps kept")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--ckpt-keep", f.ckpt_keep, "committed checkpoints kept")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--ckpt-max-failures", f.ckpt_max_failures,
                 "stop after this many failed saves in a row")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--on-nonfinite", f.on_nonfinite,
                 "a step with a NaN/Inf loss, gradient norm or parameter: "
                 "stop | rollback (to the newest checkpoint)")
      ->check(CLI::IsMember({"stop", "rollback"}))
      ->capture_default_str();
  app.add_option("--max-rollbacks", f.max_rollbacks,
                 "rollbacks per run before stopping")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_flag("--resume", f.resume,
               "continue from the latest committed checkpoint");
  app.add_flag("--in-place-restart", f.in_place,
               "when a rank dies or hangs, the others keep running: they "
               "re-form their groups with its replacement (which loads the "
               "newest checkpoint) instead of restarting (docs/fault.md)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    return FailStart(2, e.what());
  }
  try {
    return Run(f);
  } catch (const std::bad_alloc&) {
    return Fail(1, "out of memory (try a smaller --micro-batch or model)");
  } catch (const std::exception& e) {
    return Fail(1, std::string("internal error: ") + e.what());
  }
}
